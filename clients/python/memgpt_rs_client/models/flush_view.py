from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="FlushView")


@_attrs_define
class FlushView:
    """A flush: messages evicted from main context into recall, folded into the summary.

    Attributes:
        evicted_messages (int): Messages evicted.
        evicted_tokens (int): Their tokens.
        summary_updated (bool): Whether the summary was rewritten.
        tokens_before (int): Main-context tokens before.
        tokens_after (int): And after.
    """

    evicted_messages: int
    evicted_tokens: int
    summary_updated: bool
    tokens_before: int
    tokens_after: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        evicted_messages = self.evicted_messages

        evicted_tokens = self.evicted_tokens

        summary_updated = self.summary_updated

        tokens_before = self.tokens_before

        tokens_after = self.tokens_after

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "evicted_messages": evicted_messages,
                "evicted_tokens": evicted_tokens,
                "summary_updated": summary_updated,
                "tokens_before": tokens_before,
                "tokens_after": tokens_after,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        evicted_messages = d.pop("evicted_messages")

        evicted_tokens = d.pop("evicted_tokens")

        summary_updated = d.pop("summary_updated")

        tokens_before = d.pop("tokens_before")

        tokens_after = d.pop("tokens_after")

        flush_view = cls(
            evicted_messages=evicted_messages,
            evicted_tokens=evicted_tokens,
            summary_updated=summary_updated,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
        )

        flush_view.additional_properties = d
        return flush_view

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
