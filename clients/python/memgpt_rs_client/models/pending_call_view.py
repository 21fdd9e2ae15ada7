from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="PendingCallView")


@_attrs_define
class PendingCallView:
    """A function call waiting for a person's approval: send a message of `type` `approval` with
    its `call_id` and `approve` (`text` says why, with a denial).

        Attributes:
            call_id (str): The call's id.
            function (str): The function it calls.
            arguments (str): Its JSON arguments as the model wrote them.
    """

    call_id: str
    function: str
    arguments: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        call_id = self.call_id

        function = self.function

        arguments = self.arguments

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "call_id": call_id,
                "function": function,
                "arguments": arguments,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        call_id = d.pop("call_id")

        function = d.pop("function")

        arguments = d.pop("arguments")

        pending_call_view = cls(
            call_id=call_id,
            function=function,
            arguments=arguments,
        )

        pending_call_view.additional_properties = d
        return pending_call_view

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
