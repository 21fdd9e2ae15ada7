from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar, cast

from attrs import define as _attrs_define

T = TypeVar("T", bound="ToolRuleRequiresApproval")


@_attrs_define
class ToolRuleRequiresApproval:
    """A call of `tool` waits for a person: the step pauses with the call pending
    ([`StopReason::AwaitingApproval`](crate::StopReason::AwaitingApproval)) and goes on with
    an [`Event::approve`](crate::Event::approve) or [`Event::deny`](crate::Event::deny) of
    that call; a denial reaches the model as the call's (failed) result.

        Attributes:
            type_ (Literal['requires_approval']):
            tool (str): The function.
    """

    type_: Literal["requires_approval"]
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
        type_ = cast(Literal["requires_approval"], d.pop("type"))
        if type_ != "requires_approval":
            raise ValueError(f"type must match const 'requires_approval', got '{type_}'")

        tool = d.pop("tool")

        tool_rule_requires_approval = cls(
            type_=type_,
            tool=tool,
        )

        return tool_rule_requires_approval
