from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar, cast

from attrs import define as _attrs_define

T = TypeVar("T", bound="ToolRuleRunFirst")


@_attrs_define
class ToolRuleRunFirst:
    """The first call of every step must be `tool` (with several, one of them).

    Attributes:
        type_ (Literal['run_first']):
        tool (str): The function.
    """

    type_: Literal["run_first"]
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
        type_ = cast(Literal["run_first"], d.pop("type"))
        if type_ != "run_first":
            raise ValueError(f"type must match const 'run_first', got '{type_}'")

        tool = d.pop("tool")

        tool_rule_run_first = cls(
            type_=type_,
            tool=tool,
        )

        return tool_rule_run_first
