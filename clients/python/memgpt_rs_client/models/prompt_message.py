from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.call_view import CallView
    from ..models.queued_view import QueuedView


T = TypeVar("T", bound="PromptMessage")


@_attrs_define
class PromptMessage:
    """One message of the prompt.

    Attributes:
        section (str): Which part of main context it is: `system` (instructions, memory blocks and header),
            `summary` (the recursive summary, after the first flush) or `queue` (the FIFO queue).
        role (str): `system`, `user`, `assistant` or `tool`.
        content (str): Its text.
        function_calls (list[CallView]): Function calls (assistant messages).
        tokens (int): Its tokens.
        queued (None | QueuedView | Unset): For the FIFO queue's messages: what the eviction policy knows of it.
    """

    section: str
    role: str
    content: str
    function_calls: list[CallView]
    tokens: int
    queued: None | QueuedView | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.queued_view import QueuedView  # noqa: PLC0415

        section = self.section

        role = self.role

        content = self.content

        function_calls = []
        for function_calls_item_data in self.function_calls:
            function_calls_item = function_calls_item_data.to_dict()
            function_calls.append(function_calls_item)

        tokens = self.tokens

        queued: dict[str, Any] | None | Unset
        if isinstance(self.queued, Unset):
            queued = UNSET
        elif isinstance(self.queued, QueuedView):
            queued = self.queued.to_dict()
        else:
            queued = self.queued

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "section": section,
                "role": role,
                "content": content,
                "function_calls": function_calls,
                "tokens": tokens,
            }
        )
        if queued is not UNSET:
            field_dict["queued"] = queued

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.call_view import CallView  # noqa: PLC0415
        from ..models.queued_view import QueuedView  # noqa: PLC0415

        d = dict(src_dict)
        section = d.pop("section")

        role = d.pop("role")

        content = d.pop("content")

        function_calls = []
        _function_calls = d.pop("function_calls")
        for function_calls_item_data in _function_calls:
            function_calls_item = CallView.from_dict(function_calls_item_data)

            function_calls.append(function_calls_item)

        tokens = d.pop("tokens")

        def _parse_queued(data: object) -> None | QueuedView | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                queued_type_0 = QueuedView.from_dict(data)

                return queued_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | QueuedView | Unset, data)

        queued = _parse_queued(d.pop("queued", UNSET))

        prompt_message = cls(
            section=section,
            role=role,
            content=content,
            function_calls=function_calls,
            tokens=tokens,
            queued=queued,
        )

        prompt_message.additional_properties = d
        return prompt_message

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
