from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.call_record_view import CallRecordView
    from ..models.context_stats import ContextStats
    from ..models.flush_view import FlushView
    from ..models.message_view import MessageView
    from ..models.pending_call_view import PendingCallView


T = TypeVar("T", bound="StepView")


@_attrs_define
class StepView:
    """What one step did: the committed record.

    Attributes:
        event (str): The event's kind (`user_message`, `system_alert`, `login`, `timer`).
        messages (list[MessageView]): Every message the step appended, in order.
        replies (list[str]): What the agent said to the user (`send_message`), in order.
        function_calls (list[CallRecordView]): Every function call.
        llm_calls (int): LLM calls.
        prompt_tokens (int): Prompt tokens over those calls.
        completion_tokens (int): Completion tokens over those calls.
        cached_prompt_tokens (int): Of the prompt tokens, those the provider read from its prompt cache.
        pressure_warning (bool): Whether the memory-pressure warning was given.
        flushes (list[FlushView]): Flushes.
        stop_reason (str): Why the step ended: `end_turn`, `no_function_call`, `chain_limit`, `timers_paused`,
            `provider_error` or `awaiting_approval` (a call waits for a person: see
            `pending_approval`).
        context (ContextStats): How main context's tokens are spent.
        version (int): The agent's version after the step.
        shared_blocks_changed (list[str]): Labels of the shared blocks other writers had changed since the agent's last
            step:
            the step started from their new text.
        stop_detail (None | str | Unset): For `provider_error`, what kind of failure it was; for `chain_limit`, the
            limit; for
            `awaiting_approval`, the id of the call to approve or deny.
        pending_approval (None | PendingCallView | Unset): With `awaiting_approval`: the call to approve or deny.
    """

    event: str
    messages: list[MessageView]
    replies: list[str]
    function_calls: list[CallRecordView]
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    pressure_warning: bool
    flushes: list[FlushView]
    stop_reason: str
    context: ContextStats
    version: int
    shared_blocks_changed: list[str]
    stop_detail: None | str | Unset = UNSET
    pending_approval: None | PendingCallView | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.pending_call_view import PendingCallView  # noqa: PLC0415

        event = self.event

        messages = []
        for messages_item_data in self.messages:
            messages_item = messages_item_data.to_dict()
            messages.append(messages_item)

        replies = self.replies

        function_calls = []
        for function_calls_item_data in self.function_calls:
            function_calls_item = function_calls_item_data.to_dict()
            function_calls.append(function_calls_item)

        llm_calls = self.llm_calls

        prompt_tokens = self.prompt_tokens

        completion_tokens = self.completion_tokens

        cached_prompt_tokens = self.cached_prompt_tokens

        pressure_warning = self.pressure_warning

        flushes = []
        for flushes_item_data in self.flushes:
            flushes_item = flushes_item_data.to_dict()
            flushes.append(flushes_item)

        stop_reason = self.stop_reason

        context = self.context.to_dict()

        version = self.version

        shared_blocks_changed = self.shared_blocks_changed

        stop_detail: None | str | Unset
        if isinstance(self.stop_detail, Unset):
            stop_detail = UNSET
        else:
            stop_detail = self.stop_detail

        pending_approval: dict[str, Any] | None | Unset
        if isinstance(self.pending_approval, Unset):
            pending_approval = UNSET
        elif isinstance(self.pending_approval, PendingCallView):
            pending_approval = self.pending_approval.to_dict()
        else:
            pending_approval = self.pending_approval

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "event": event,
                "messages": messages,
                "replies": replies,
                "function_calls": function_calls,
                "llm_calls": llm_calls,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "cached_prompt_tokens": cached_prompt_tokens,
                "pressure_warning": pressure_warning,
                "flushes": flushes,
                "stop_reason": stop_reason,
                "context": context,
                "version": version,
                "shared_blocks_changed": shared_blocks_changed,
            }
        )
        if stop_detail is not UNSET:
            field_dict["stop_detail"] = stop_detail
        if pending_approval is not UNSET:
            field_dict["pending_approval"] = pending_approval

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.call_record_view import CallRecordView  # noqa: PLC0415
        from ..models.context_stats import ContextStats  # noqa: PLC0415
        from ..models.flush_view import FlushView  # noqa: PLC0415
        from ..models.message_view import MessageView  # noqa: PLC0415
        from ..models.pending_call_view import PendingCallView  # noqa: PLC0415

        d = dict(src_dict)
        event = d.pop("event")

        messages = []
        _messages = d.pop("messages")
        for messages_item_data in _messages:
            messages_item = MessageView.from_dict(messages_item_data)

            messages.append(messages_item)

        replies = cast(list[str], d.pop("replies"))

        function_calls = []
        _function_calls = d.pop("function_calls")
        for function_calls_item_data in _function_calls:
            function_calls_item = CallRecordView.from_dict(function_calls_item_data)

            function_calls.append(function_calls_item)

        llm_calls = d.pop("llm_calls")

        prompt_tokens = d.pop("prompt_tokens")

        completion_tokens = d.pop("completion_tokens")

        cached_prompt_tokens = d.pop("cached_prompt_tokens")

        pressure_warning = d.pop("pressure_warning")

        flushes = []
        _flushes = d.pop("flushes")
        for flushes_item_data in _flushes:
            flushes_item = FlushView.from_dict(flushes_item_data)

            flushes.append(flushes_item)

        stop_reason = d.pop("stop_reason")

        context = ContextStats.from_dict(d.pop("context"))

        version = d.pop("version")

        shared_blocks_changed = cast(list[str], d.pop("shared_blocks_changed"))

        def _parse_stop_detail(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        stop_detail = _parse_stop_detail(d.pop("stop_detail", UNSET))

        def _parse_pending_approval(data: object) -> None | PendingCallView | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                pending_approval_type_0 = PendingCallView.from_dict(data)

                return pending_approval_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PendingCallView | Unset, data)

        pending_approval = _parse_pending_approval(d.pop("pending_approval", UNSET))

        step_view = cls(
            event=event,
            messages=messages,
            replies=replies,
            function_calls=function_calls,
            llm_calls=llm_calls,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cached_prompt_tokens=cached_prompt_tokens,
            pressure_warning=pressure_warning,
            flushes=flushes,
            stop_reason=stop_reason,
            context=context,
            version=version,
            shared_blocks_changed=shared_blocks_changed,
            stop_detail=stop_detail,
            pending_approval=pending_approval,
        )

        step_view.additional_properties = d
        return step_view

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
