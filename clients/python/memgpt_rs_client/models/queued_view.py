from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

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
        attention (float): Attention the model paid to it, where the provider reports attention (0 otherwise).
        salience (float): How much it states (content words, names and numbers of its statements): what the
            `salience` policy keeps.
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
    attention: float
    salience: float
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

        attention = self.attention

        salience = self.salience

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
                "attention": attention,
                "salience": salience,
                "pinned": pinned,
                "evict_next": evict_next,
            }
        )
        if relevance is not UNSET:
            field_dict["relevance"] = relevance

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = d.pop("id")

        kind = d.pop("kind")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        last_used = d.pop("last_used")

        uses = d.pop("uses")

        attention = d.pop("attention")

        salience = d.pop("salience")

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
            attention=attention,
            salience=salience,
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
