from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="CallRecordView")


@_attrs_define
class CallRecordView:
    """A function call and how it went.

    Attributes:
        name (str): The function.
        arguments (str): The arguments (JSON text).
        ok (bool): Whether it succeeded.
        output (str): Its result or error, as the model read it.
        request_heartbeat (bool): Whether it asked to continue (a heartbeat).
    """

    name: str
    arguments: str
    ok: bool
    output: str
    request_heartbeat: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        arguments = self.arguments

        ok = self.ok

        output = self.output

        request_heartbeat = self.request_heartbeat

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
                "arguments": arguments,
                "ok": ok,
                "output": output,
                "request_heartbeat": request_heartbeat,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        name = d.pop("name")

        arguments = d.pop("arguments")

        ok = d.pop("ok")

        output = d.pop("output")

        request_heartbeat = d.pop("request_heartbeat")

        call_record_view = cls(
            name=name,
            arguments=arguments,
            ok=ok,
            output=output,
            request_heartbeat=request_heartbeat,
        )

        call_record_view.additional_properties = d
        return call_record_view

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
