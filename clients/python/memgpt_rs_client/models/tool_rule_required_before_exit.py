from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar, cast

from attrs import define as _attrs_define

T = TypeVar("T", bound="ToolRuleRequiredBeforeExit")


@_attrs_define
class ToolRuleRequiredBeforeExit:
    """The step may not end before `tool` has been called in it.

    Attributes:
        type_ (Literal['required_before_exit']):
        tool (str): The function.
    """

    type_: Literal["required_before_exit"]
    tool: str

    def to_dict(self) -> dict[str, Any]:
        type_ = self.type_

        tool = self.tool

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "type": type_,
                "tool": tool,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        type_ = cast(Literal["required_before_exit"], d.pop("type"))
        if type_ != "required_before_exit":
            raise ValueError(f"type must match const 'required_before_exit', got '{type_}'")

        tool = d.pop("tool")

        tool_rule_required_before_exit = cls(
            type_=type_,
            tool=tool,
        )

        return tool_rule_required_before_exit
