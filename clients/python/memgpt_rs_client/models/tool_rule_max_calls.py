from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar, cast

from attrs import define as _attrs_define

T = TypeVar("T", bound="ToolRuleMaxCalls")


@_attrs_define
class ToolRuleMaxCalls:
    """`tool` may be called at most `max` times in one step.

    Attributes:
        type_ (Literal['max_calls']):
        tool (str): The function.
        max_ (int): The most calls per step.
    """

    type_: Literal["max_calls"]
    tool: str
    max_: int

    def to_dict(self) -> dict[str, Any]:
        type_ = self.type_

        tool = self.tool

        max_ = self.max_

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "type": type_,
                "tool": tool,
                "max": max_,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        type_ = cast(Literal["max_calls"], d.pop("type"))
        if type_ != "max_calls":
            raise ValueError(f"type must match const 'max_calls', got '{type_}'")

        tool = d.pop("tool")

        max_ = d.pop("max")

        tool_rule_max_calls = cls(
            type_=type_,
            tool=tool,
            max_=max_,
        )

        return tool_rule_max_calls
