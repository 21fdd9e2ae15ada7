from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.tool_rule_children_by_output import ToolRuleChildrenByOutput


T = TypeVar("T", bound="ToolRuleChildren")


@_attrs_define
class ToolRuleChildren:
    """After `tool`, only `children` may be called next. With `by_output`, `tool`'s result
    chooses: a result equal to a key (trimmed) allows that key's functions instead.

        Attributes:
            type_ (Literal['children']):
            tool (str): The function.
            children (list[str]): What may follow it.
            by_output (ToolRuleChildrenByOutput | Unset): What may follow it, by its result.
    """

    type_: Literal["children"]
    tool: str
    children: list[str]
    by_output: ToolRuleChildrenByOutput | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        type_ = self.type_

        tool = self.tool

        children = self.children

        by_output: dict[str, Any] | Unset = UNSET
        if not isinstance(self.by_output, Unset):
            by_output = self.by_output.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "type": type_,
                "tool": tool,
                "children": children,
            }
        )
        if by_output is not UNSET:
            field_dict["by_output"] = by_output

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.tool_rule_children_by_output import ToolRuleChildrenByOutput  # noqa: PLC0415

        d = dict(src_dict)
        type_ = cast(Literal["children"], d.pop("type"))
        if type_ != "children":
            raise ValueError(f"type must match const 'children', got '{type_}'")

        tool = d.pop("tool")

        children = cast(list[str], d.pop("children"))

        _by_output = d.pop("by_output", UNSET)
        by_output: ToolRuleChildrenByOutput | Unset
        if isinstance(_by_output, Unset):
            by_output = UNSET
        else:
            by_output = ToolRuleChildrenByOutput.from_dict(_by_output)

        tool_rule_children = cls(
            type_=type_,
            tool=tool,
            children=children,
            by_output=by_output,
        )

        return tool_rule_children
