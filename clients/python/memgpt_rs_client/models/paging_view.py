from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="PagingView")


@_attrs_define
class PagingView:
    """The eviction policy's view of the context.

    Attributes:
        policy (str): The policy's name.
        evict_messages (int): Queued messages a flush would evict now (their prompt messages carry
            `queued.evict_next`).
        evict_tokens (int): Tokens they hold.
        warn_tokens (int | None | Unset): The fewest prompt tokens at which it warns the model of memory pressure
            (absent: it
            does not warn before flushing).
        flush_tokens (int | None | Unset): The fewest prompt tokens at which it flushes.
    """

    policy: str
    evict_messages: int
    evict_tokens: int
    warn_tokens: int | None | Unset = UNSET
    flush_tokens: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        policy = self.policy

        evict_messages = self.evict_messages

        evict_tokens = self.evict_tokens

        warn_tokens: int | None | Unset
        if isinstance(self.warn_tokens, Unset):
            warn_tokens = UNSET
        else:
            warn_tokens = self.warn_tokens

        flush_tokens: int | None | Unset
        if isinstance(self.flush_tokens, Unset):
            flush_tokens = UNSET
        else:
            flush_tokens = self.flush_tokens

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "policy": policy,
                "evict_messages": evict_messages,
                "evict_tokens": evict_tokens,
            }
        )
        if warn_tokens is not UNSET:
            field_dict["warn_tokens"] = warn_tokens
        if flush_tokens is not UNSET:
            field_dict["flush_tokens"] = flush_tokens

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        policy = d.pop("policy")

        evict_messages = d.pop("evict_messages")

        evict_tokens = d.pop("evict_tokens")

        def _parse_warn_tokens(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        warn_tokens = _parse_warn_tokens(d.pop("warn_tokens", UNSET))

        def _parse_flush_tokens(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        flush_tokens = _parse_flush_tokens(d.pop("flush_tokens", UNSET))

        paging_view = cls(
            policy=policy,
            evict_messages=evict_messages,
            evict_tokens=evict_tokens,
            warn_tokens=warn_tokens,
            flush_tokens=flush_tokens,
        )

        paging_view.additional_properties = d
        return paging_view

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
