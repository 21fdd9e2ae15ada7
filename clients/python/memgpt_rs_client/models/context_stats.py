from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ContextStats")


@_attrs_define
class ContextStats:
    """How main context's tokens are spent.

    Attributes:
        window (int): The context window.
        system_tokens (int): System instructions.
        tools_tokens (int): Function schemas.
        memory_tokens (int): Memory header and working-context blocks.
        summary_tokens (int): The recursive summary.
        queue_tokens (int): The FIFO queue's messages.
        queue_messages (int): How many messages are queued.
        total_tokens (int): Everything together.
        fraction (float): `total_tokens / window`.
    """

    window: int
    system_tokens: int
    tools_tokens: int
    memory_tokens: int
    summary_tokens: int
    queue_tokens: int
    queue_messages: int
    total_tokens: int
    fraction: float
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        window = self.window

        system_tokens = self.system_tokens

        tools_tokens = self.tools_tokens

        memory_tokens = self.memory_tokens

        summary_tokens = self.summary_tokens

        queue_tokens = self.queue_tokens

        queue_messages = self.queue_messages

        total_tokens = self.total_tokens

        fraction = self.fraction

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "window": window,
                "system_tokens": system_tokens,
                "tools_tokens": tools_tokens,
                "memory_tokens": memory_tokens,
                "summary_tokens": summary_tokens,
                "queue_tokens": queue_tokens,
                "queue_messages": queue_messages,
                "total_tokens": total_tokens,
                "fraction": fraction,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        window = d.pop("window")

        system_tokens = d.pop("system_tokens")

        tools_tokens = d.pop("tools_tokens")

        memory_tokens = d.pop("memory_tokens")

        summary_tokens = d.pop("summary_tokens")

        queue_tokens = d.pop("queue_tokens")

        queue_messages = d.pop("queue_messages")

        total_tokens = d.pop("total_tokens")

        fraction = d.pop("fraction")

        context_stats = cls(
            window=window,
            system_tokens=system_tokens,
            tools_tokens=tools_tokens,
            memory_tokens=memory_tokens,
            summary_tokens=summary_tokens,
            queue_tokens=queue_tokens,
            queue_messages=queue_messages,
            total_tokens=total_tokens,
            fraction=fraction,
        )

        context_stats.additional_properties = d
        return context_stats

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
