from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.chat_message import ChatMessage
    from ..models.stream_options import StreamOptions


T = TypeVar("T", bound="CompletionRequest")


@_attrs_define
class CompletionRequest:
    """A chat completion request as OpenAI clients send it (fields memgpt does not use, such as
    `temperature`, are accepted and ignored).

        Attributes:
            model (str): The agent: its id, or its name among the caller's agents.
            messages (list[ChatMessage]): The conversation as the client has it; only the newest `user` message with text is
                used (so there must be one).
            stream (bool | Unset): Stream the answer as `chat.completion.chunk` events. Default: False.
            user (None | str | Unset): The user's name, passed on with the message.
            stream_options (None | StreamOptions | Unset): Streaming options: `include_usage` adds a last chunk with the
                step's token usage.
    """

    model: str
    messages: list[ChatMessage]
    stream: bool | Unset = False
    user: None | str | Unset = UNSET
    stream_options: None | StreamOptions | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.stream_options import StreamOptions  # noqa: PLC0415

        model = self.model

        messages = []
        for messages_item_data in self.messages:
            messages_item = messages_item_data.to_dict()
            messages.append(messages_item)

        stream = self.stream

        user: None | str | Unset
        if isinstance(self.user, Unset):
            user = UNSET
        else:
            user = self.user

        stream_options: dict[str, Any] | None | Unset
        if isinstance(self.stream_options, Unset):
            stream_options = UNSET
        elif isinstance(self.stream_options, StreamOptions):
            stream_options = self.stream_options.to_dict()
        else:
            stream_options = self.stream_options

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "model": model,
                "messages": messages,
            }
        )
        if stream is not UNSET:
            field_dict["stream"] = stream
        if user is not UNSET:
            field_dict["user"] = user
        if stream_options is not UNSET:
            field_dict["stream_options"] = stream_options

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.chat_message import ChatMessage  # noqa: PLC0415
        from ..models.stream_options import StreamOptions  # noqa: PLC0415

        d = dict(src_dict)
        model = d.pop("model")

        messages = []
        _messages = d.pop("messages")
        for messages_item_data in _messages:
            messages_item = ChatMessage.from_dict(messages_item_data)

            messages.append(messages_item)

        stream = d.pop("stream", UNSET)

        def _parse_user(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        user = _parse_user(d.pop("user", UNSET))

        def _parse_stream_options(data: object) -> None | StreamOptions | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                stream_options_type_0 = StreamOptions.from_dict(data)

                return stream_options_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | StreamOptions | Unset, data)

        stream_options = _parse_stream_options(d.pop("stream_options", UNSET))

        completion_request = cls(
            model=model,
            messages=messages,
            stream=stream,
            user=user,
            stream_options=stream_options,
        )

        completion_request.additional_properties = d
        return completion_request

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
