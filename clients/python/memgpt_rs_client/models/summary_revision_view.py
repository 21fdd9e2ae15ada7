from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="SummaryRevisionView")


@_attrs_define
class SummaryRevisionView:
    """One flush in the summary's history.

    Attributes:
        at (datetime.datetime): When it happened.
        evicted_messages (int): Messages evicted.
        evicted_tokens (int): Their prompt tokens.
        evicted_from (datetime.datetime): Creation time of the oldest evicted message.
        evicted_until (datetime.datetime): Just after the creation time of the newest evicted message (exclusive, as the
            messages listing's `end`).
        forced (bool): Whether a provider's context-overflow error forced it.
        summary_updated (bool): Whether the summarizer rewrote the summary (false: it failed and the text was kept).
        text (str): The summary after the flush.
    """

    at: datetime.datetime
    evicted_messages: int
    evicted_tokens: int
    evicted_from: datetime.datetime
    evicted_until: datetime.datetime
    forced: bool
    summary_updated: bool
    text: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        evicted_messages = self.evicted_messages

        evicted_tokens = self.evicted_tokens

        evicted_from = self.evicted_from.isoformat()

        evicted_until = self.evicted_until.isoformat()

        forced = self.forced

        summary_updated = self.summary_updated

        text = self.text

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "at": at,
                "evicted_messages": evicted_messages,
                "evicted_tokens": evicted_tokens,
                "evicted_from": evicted_from,
                "evicted_until": evicted_until,
                "forced": forced,
                "summary_updated": summary_updated,
                "text": text,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        at = datetime.datetime.fromisoformat(d.pop("at"))

        evicted_messages = d.pop("evicted_messages")

        evicted_tokens = d.pop("evicted_tokens")

        evicted_from = datetime.datetime.fromisoformat(d.pop("evicted_from"))

        evicted_until = datetime.datetime.fromisoformat(d.pop("evicted_until"))

        forced = d.pop("forced")

        summary_updated = d.pop("summary_updated")

        text = d.pop("text")

        summary_revision_view = cls(
            at=at,
            evicted_messages=evicted_messages,
            evicted_tokens=evicted_tokens,
            evicted_from=evicted_from,
            evicted_until=evicted_until,
            forced=forced,
            summary_updated=summary_updated,
            text=text,
        )

        summary_revision_view.additional_properties = d
        return summary_revision_view

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
