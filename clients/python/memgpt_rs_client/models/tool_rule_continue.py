from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar, cast

from attrs import define as _attrs_define

T = TypeVar("T", bound="ToolRuleContinue")


@_attrs_define
class ToolRuleContinue:
    """After `tool` the step always continues (as if it had asked for a heartbeat).

    Attributes:
        type_ (Literal['continue']):
        tool (str): The function.
    """

    type_: Literal["continue"]
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
        type_ = cast(Literal["continue"], d.pop("type"))
        if type_ != "continue":
            raise ValueError(f"type must match const 'continue', got '{type_}'")

        tool = d.pop("tool")

        tool_rule_continue = cls(
            type_=type_,
            tool=tool,
        )

        return tool_rule_continue
