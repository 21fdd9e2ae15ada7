from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.event_type import EventType
from ..types import UNSET, Unset

T = TypeVar("T", bound="SendMessage")


@_attrs_define
class SendMessage:
    """An event to step the agent with.

    Attributes:
        text (str | Unset): The message (for `user` and `system_alert`), or the timer's reason. Default: ''.
        type_ (EventType | Unset): What happened, for the agent to react to.

            - `user`: A user's message (the default).
            - `system_alert`: A system alert (an event the agent should know about).
            - `login`: The user logged in.
            - `timer`: A timer went off (`text` says why).
            - `approval`: Approves or denies the function call the agent waits on (`call_id`, `approve`;
            `text` says why, with a denial): the paused step goes on.
        name (None | str | Unset): The user's name, for a `user` message.
        call_id (None | str | Unset): For `approval`: the id of the pending call (`pending_approval.call_id` of the step
            that paused).
        approve (bool | None | Unset): For `approval`: whether the call may run.
    """

    text: str | Unset = ""
    type_: EventType | Unset = UNSET
    name: None | str | Unset = UNSET
    call_id: None | str | Unset = UNSET
    approve: bool | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        text = self.text

        type_: str | Unset = UNSET
        if not isinstance(self.type_, Unset):
            type_ = self.type_.value

        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        call_id: None | str | Unset
        if isinstance(self.call_id, Unset):
            call_id = UNSET
        else:
            call_id = self.call_id

        approve: bool | None | Unset
        if isinstance(self.approve, Unset):
            approve = UNSET
        else:
            approve = self.approve

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if text is not UNSET:
            field_dict["text"] = text
        if type_ is not UNSET:
            field_dict["type"] = type_
        if name is not UNSET:
            field_dict["name"] = name
        if call_id is not UNSET:
            field_dict["call_id"] = call_id
        if approve is not UNSET:
            field_dict["approve"] = approve

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        text = d.pop("text", UNSET)

        _type_ = d.pop("type", UNSET)
        type_: EventType | Unset
        if isinstance(_type_, Unset):
            type_ = UNSET
        else:
            type_ = EventType(_type_)

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        def _parse_call_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        call_id = _parse_call_id(d.pop("call_id", UNSET))

        def _parse_approve(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        approve = _parse_approve(d.pop("approve", UNSET))

        send_message = cls(
            text=text,
            type_=type_,
            name=name,
            call_id=call_id,
            approve=approve,
        )

        return send_message
