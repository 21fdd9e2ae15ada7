from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.queued_view_signals import QueuedViewSignals


T = TypeVar("T", bound="QueuedView")


@_attrs_define
class QueuedView:
    """What the policy knows of one queued message.

    Attributes:
        id (str): The message's id (in recall storage too).
        kind (str): Its kind (`user`, `assistant`, `function_return`, ...).
        created_at (datetime.datetime): When it was created.
        last_used (int): Logical time of its last use (appended, retrieved or referenced); larger is more recent.
        uses (int): How many times it was used.
        signals (QueuedViewSignals): The policy's own signals of it, by name: `attention` (what the model attended to,
            under
            the `attention` policy), `salience` (how much it states, under the `salience` policy),
            or whatever a custom policy keeps; empty for a policy that keeps none.
        pinned (bool): Whether it may not be evicted.
        evict_next (bool): Whether a flush now would evict it.
        relevance (float | None | Unset): Similarity to the latest turns, as measured before the last flush (policies
            that ask
            for it, agents with an embedder).
    """

    id: str
    kind: str
    created_at: datetime.datetime
    last_used: int
    uses: int
    signals: QueuedViewSignals
    pinned: bool
    evict_next: bool
    relevance: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        kind = self.kind

        created_at = self.created_at.isoformat()

        last_used = self.last_used

        uses = self.uses

        signals = self.signals.to_dict()

        pinned = self.pinned

        evict_next = self.evict_next

        relevance: float | None | Unset
        if isinstance(self.relevance, Unset):
            relevance = UNSET
        else:
            relevance = self.relevance

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "kind": kind,
                "created_at": created_at,
                "last_used": last_used,
                "uses": uses,
                "signals": signals,
                "pinned": pinned,
                "evict_next": evict_next,
            }
        )
        if relevance is not UNSET:
            field_dict["relevance"] = relevance

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.queued_view_signals import QueuedViewSignals  # noqa: PLC0415

        d = dict(src_dict)
        id = d.pop("id")

        kind = d.pop("kind")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        last_used = d.pop("last_used")

        uses = d.pop("uses")

        signals = QueuedViewSignals.from_dict(d.pop("signals"))

        pinned = d.pop("pinned")

        evict_next = d.pop("evict_next")

        def _parse_relevance(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        relevance = _parse_relevance(d.pop("relevance", UNSET))

        queued_view = cls(
            id=id,
            kind=kind,
            created_at=created_at,
            last_used=last_used,
            uses=uses,
            signals=signals,
            pinned=pinned,
            evict_next=evict_next,
            relevance=relevance,
        )

        queued_view.additional_properties = d
        return queued_view

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
