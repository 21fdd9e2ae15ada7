from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar, cast

from attrs import define as _attrs_define

T = TypeVar("T", bound="ToolRuleTerminal")


@_attrs_define
class ToolRuleTerminal:
    """Calling `tool` ends the step: nothing runs after it, whatever heartbeat it asked for.

    Attributes:
        type_ (Literal['terminal']):
        tool (str): The function.
    """

    type_: Literal["terminal"]
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
        type_ = cast(Literal["terminal"], d.pop("type"))
        if type_ != "terminal":
            raise ValueError(f"type must match const 'terminal', got '{type_}'")

        tool = d.pop("tool")

        tool_rule_terminal = cls(
            type_=type_,
            tool=tool,
        )

        return tool_rule_terminal
