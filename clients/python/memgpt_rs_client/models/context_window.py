from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.context_stats import ContextStats
    from ..models.function_view import FunctionView
    from ..models.paging_view import PagingView
    from ..models.prompt_message import PromptMessage
    from ..models.summary_view import SummaryView


T = TypeVar("T", bound="ContextWindow")


@_attrs_define
class ContextWindow:
    """The context window exactly as the LLM receives it.

    Attributes:
        tokens (ContextStats): How main context's tokens are spent.
        messages (list[PromptMessage]): The messages of the prompt in order: the system message (instructions, memory
            blocks,
            the memory header and the recursive summary), then the FIFO queue.
        functions (list[FunctionView]): The functions offered, with their JSON schemas.
        paging (PagingView): The eviction policy's view of the context.
        summary (SummaryView): The recursive summary.
    """

    tokens: ContextStats
    messages: list[PromptMessage]
    functions: list[FunctionView]
    paging: PagingView
    summary: SummaryView
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        tokens = self.tokens.to_dict()

        messages = []
        for messages_item_data in self.messages:
            messages_item = messages_item_data.to_dict()
            messages.append(messages_item)

        functions = []
        for functions_item_data in self.functions:
            functions_item = functions_item_data.to_dict()
            functions.append(functions_item)

        paging = self.paging.to_dict()

        summary = self.summary.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "tokens": tokens,
                "messages": messages,
                "functions": functions,
                "paging": paging,
                "summary": summary,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.context_stats import ContextStats  # noqa: PLC0415
        from ..models.function_view import FunctionView  # noqa: PLC0415
        from ..models.paging_view import PagingView  # noqa: PLC0415
        from ..models.prompt_message import PromptMessage  # noqa: PLC0415
        from ..models.summary_view import SummaryView  # noqa: PLC0415

        d = dict(src_dict)
        tokens = ContextStats.from_dict(d.pop("tokens"))

        messages = []
        _messages = d.pop("messages")
        for messages_item_data in _messages:
            messages_item = PromptMessage.from_dict(messages_item_data)

            messages.append(messages_item)

        functions = []
        _functions = d.pop("functions")
        for functions_item_data in _functions:
            functions_item = FunctionView.from_dict(functions_item_data)

            functions.append(functions_item)

        paging = PagingView.from_dict(d.pop("paging"))

        summary = SummaryView.from_dict(d.pop("summary"))

        context_window = cls(
            tokens=tokens,
            messages=messages,
            functions=functions,
            paging=paging,
            summary=summary,
        )

        context_window.additional_properties = d
        return context_window

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
