from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.summary_revision_view import SummaryRevisionView


T = TypeVar("T", bound="SummaryView")


@_attrs_define
class SummaryView:
    """The recursive summary.

    Attributes:
        text (str): Its text (empty before the first flush).
        evicted_messages (int): How many messages it covers.
        history (list[SummaryRevisionView]): The latest flushes, oldest first: what each evicted (list the messages
            created from
            `evicted_from` until `evicted_until` to see them) and the summary it left.
        updated_at (datetime.datetime | None | Unset): When it was last rewritten.
    """

    text: str
    evicted_messages: int
    history: list[SummaryRevisionView]
    updated_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        text = self.text

        evicted_messages = self.evicted_messages

        history = []
        for history_item_data in self.history:
            history_item = history_item_data.to_dict()
            history.append(history_item)

        updated_at: None | str | Unset
        if isinstance(self.updated_at, Unset):
            updated_at = UNSET
        elif isinstance(self.updated_at, datetime.datetime):
            updated_at = self.updated_at.isoformat()
        else:
            updated_at = self.updated_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "text": text,
                "evicted_messages": evicted_messages,
                "history": history,
            }
        )
        if updated_at is not UNSET:
            field_dict["updated_at"] = updated_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.summary_revision_view import SummaryRevisionView  # noqa: PLC0415

        d = dict(src_dict)
        text = d.pop("text")

        evicted_messages = d.pop("evicted_messages")

        history = []
        _history = d.pop("history")
        for history_item_data in _history:
            history_item = SummaryRevisionView.from_dict(history_item_data)

            history.append(history_item)

        def _parse_updated_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                updated_at_type_0 = datetime.datetime.fromisoformat(data)

                return updated_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        updated_at = _parse_updated_at(d.pop("updated_at", UNSET))

        summary_view = cls(
            text=text,
            evicted_messages=evicted_messages,
            history=history,
            updated_at=updated_at,
        )

        summary_view.additional_properties = d
        return summary_view

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
