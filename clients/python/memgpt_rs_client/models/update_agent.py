from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.loop_style import LoopStyle
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.tool_rule_children import ToolRuleChildren
    from ..models.tool_rule_continue import ToolRuleContinue
    from ..models.tool_rule_max_calls import ToolRuleMaxCalls
    from ..models.tool_rule_required_before_exit import ToolRuleRequiredBeforeExit
    from ..models.tool_rule_requires_approval import ToolRuleRequiresApproval
    from ..models.tool_rule_run_first import ToolRuleRunFirst
    from ..models.tool_rule_terminal import ToolRuleTerminal


T = TypeVar("T", bound="UpdateAgent")


@_attrs_define
class UpdateAgent:
    """Changes to an agent; what is left out stays as it is.

    Attributes:
        name (None | str | Unset): A new name (1-200 characters, unique among the tenant's agents).
        model (None | str | Unset): A new chat model.
        context_window (int | None | Unset): A new context window in tokens (512 to 100,000,000).
        policy (None | str | Unset): A new page-replacement policy by name.
        tools (list[str] | None | Unset): The functions (tools) offered, replacing the current list (base functions
            included).
        max_chain_length (int | None | Unset): The longest chain of LLM calls in one step.
        tool_rules (list[ToolRuleChildren | ToolRuleContinue | ToolRuleMaxCalls | ToolRuleRequiredBeforeExit |
            ToolRuleRequiresApproval | ToolRuleRunFirst | ToolRuleTerminal] | None | Unset): The tool rules, replacing the
            current ones.
        loop_style (LoopStyle | None | Unset): A new loop style (`heartbeat` or `until_reply`); an agent on the default
            system
            instructions gets the new style's.
    """

    name: None | str | Unset = UNSET
    model: None | str | Unset = UNSET
    context_window: int | None | Unset = UNSET
    policy: None | str | Unset = UNSET
    tools: list[str] | None | Unset = UNSET
    max_chain_length: int | None | Unset = UNSET
    tool_rules: (
        list[
            ToolRuleChildren
            | ToolRuleContinue
            | ToolRuleMaxCalls
            | ToolRuleRequiredBeforeExit
            | ToolRuleRequiresApproval
            | ToolRuleRunFirst
            | ToolRuleTerminal
        ]
        | None
        | Unset
    ) = UNSET
    loop_style: LoopStyle | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.tool_rule_children import ToolRuleChildren  # noqa: PLC0415
        from ..models.tool_rule_continue import ToolRuleContinue  # noqa: PLC0415
        from ..models.tool_rule_max_calls import ToolRuleMaxCalls  # noqa: PLC0415
        from ..models.tool_rule_required_before_exit import ToolRuleRequiredBeforeExit  # noqa: PLC0415
        from ..models.tool_rule_run_first import ToolRuleRunFirst  # noqa: PLC0415
        from ..models.tool_rule_terminal import ToolRuleTerminal  # noqa: PLC0415

        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        model: None | str | Unset
        if isinstance(self.model, Unset):
            model = UNSET
        else:
            model = self.model

        context_window: int | None | Unset
        if isinstance(self.context_window, Unset):
            context_window = UNSET
        else:
            context_window = self.context_window

        policy: None | str | Unset
        if isinstance(self.policy, Unset):
            policy = UNSET
        else:
            policy = self.policy

        tools: list[str] | None | Unset
        if isinstance(self.tools, Unset):
            tools = UNSET
        elif isinstance(self.tools, list):
            tools = self.tools

        else:
            tools = self.tools

        max_chain_length: int | None | Unset
        if isinstance(self.max_chain_length, Unset):
            max_chain_length = UNSET
        else:
            max_chain_length = self.max_chain_length

        tool_rules: list[dict[str, Any]] | None | Unset
        if isinstance(self.tool_rules, Unset):
            tool_rules = UNSET
        elif isinstance(self.tool_rules, list):
            tool_rules = []
            for tool_rules_type_0_item_data in self.tool_rules:
                tool_rules_type_0_item: dict[str, Any]
                if isinstance(tool_rules_type_0_item_data, ToolRuleRunFirst):
                    tool_rules_type_0_item = tool_rules_type_0_item_data.to_dict()
                elif isinstance(tool_rules_type_0_item_data, ToolRuleTerminal):
                    tool_rules_type_0_item = tool_rules_type_0_item_data.to_dict()
                elif isinstance(tool_rules_type_0_item_data, ToolRuleContinue):
                    tool_rules_type_0_item = tool_rules_type_0_item_data.to_dict()
                elif isinstance(tool_rules_type_0_item_data, ToolRuleChildren):
                    tool_rules_type_0_item = tool_rules_type_0_item_data.to_dict()
                elif isinstance(tool_rules_type_0_item_data, ToolRuleMaxCalls):
                    tool_rules_type_0_item = tool_rules_type_0_item_data.to_dict()
                elif isinstance(tool_rules_type_0_item_data, ToolRuleRequiredBeforeExit):
                    tool_rules_type_0_item = tool_rules_type_0_item_data.to_dict()
                else:
                    tool_rules_type_0_item = tool_rules_type_0_item_data.to_dict()

                tool_rules.append(tool_rules_type_0_item)

        else:
            tool_rules = self.tool_rules

        loop_style: None | str | Unset
        if isinstance(self.loop_style, Unset):
            loop_style = UNSET
        elif isinstance(self.loop_style, LoopStyle):
            loop_style = self.loop_style.value
        else:
            loop_style = self.loop_style

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if name is not UNSET:
            field_dict["name"] = name
        if model is not UNSET:
            field_dict["model"] = model
        if context_window is not UNSET:
            field_dict["context_window"] = context_window
        if policy is not UNSET:
            field_dict["policy"] = policy
        if tools is not UNSET:
            field_dict["tools"] = tools
        if max_chain_length is not UNSET:
            field_dict["max_chain_length"] = max_chain_length
        if tool_rules is not UNSET:
            field_dict["tool_rules"] = tool_rules
        if loop_style is not UNSET:
            field_dict["loop_style"] = loop_style

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.tool_rule_children import ToolRuleChildren  # noqa: PLC0415
        from ..models.tool_rule_continue import ToolRuleContinue  # noqa: PLC0415
        from ..models.tool_rule_max_calls import ToolRuleMaxCalls  # noqa: PLC0415
        from ..models.tool_rule_required_before_exit import ToolRuleRequiredBeforeExit  # noqa: PLC0415
        from ..models.tool_rule_requires_approval import ToolRuleRequiresApproval  # noqa: PLC0415
        from ..models.tool_rule_run_first import ToolRuleRunFirst  # noqa: PLC0415
        from ..models.tool_rule_terminal import ToolRuleTerminal  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        def _parse_model(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        model = _parse_model(d.pop("model", UNSET))

        def _parse_context_window(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        context_window = _parse_context_window(d.pop("context_window", UNSET))

        def _parse_policy(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        policy = _parse_policy(d.pop("policy", UNSET))

        def _parse_tools(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                tools_type_0 = cast(list[str], data)

                return tools_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        tools = _parse_tools(d.pop("tools", UNSET))

        def _parse_max_chain_length(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_chain_length = _parse_max_chain_length(d.pop("max_chain_length", UNSET))

        def _parse_tool_rules(
            data: object,
        ) -> (
            list[
                ToolRuleChildren
                | ToolRuleContinue
                | ToolRuleMaxCalls
                | ToolRuleRequiredBeforeExit
                | ToolRuleRequiresApproval
                | ToolRuleRunFirst
                | ToolRuleTerminal
            ]
            | None
            | Unset
        ):
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                tool_rules_type_0 = []
                _tool_rules_type_0 = data
                for tool_rules_type_0_item_data in _tool_rules_type_0:

                    def _parse_tool_rules_type_0_item(
                        data: object,
                    ) -> (
                        ToolRuleChildren
                        | ToolRuleContinue
                        | ToolRuleMaxCalls
                        | ToolRuleRequiredBeforeExit
                        | ToolRuleRequiresApproval
                        | ToolRuleRunFirst
                        | ToolRuleTerminal
                    ):
                        try:
                            if not isinstance(data, dict):
                                raise TypeError()
                            componentsschemas_tool_rule_type_0 = ToolRuleRunFirst.from_dict(data)

                            return componentsschemas_tool_rule_type_0
                        except (TypeError, ValueError, AttributeError, KeyError):
                            pass
                        try:
                            if not isinstance(data, dict):
                                raise TypeError()
                            componentsschemas_tool_rule_type_1 = ToolRuleTerminal.from_dict(data)

                            return componentsschemas_tool_rule_type_1
                        except (TypeError, ValueError, AttributeError, KeyError):
                            pass
                        try:
                            if not isinstance(data, dict):
                                raise TypeError()
                            componentsschemas_tool_rule_type_2 = ToolRuleContinue.from_dict(data)

                            return componentsschemas_tool_rule_type_2
                        except (TypeError, ValueError, AttributeError, KeyError):
                            pass
                        try:
                            if not isinstance(data, dict):
                                raise TypeError()
                            componentsschemas_tool_rule_type_3 = ToolRuleChildren.from_dict(data)

                            return componentsschemas_tool_rule_type_3
                        except (TypeError, ValueError, AttributeError, KeyError):
                            pass
                        try:
                            if not isinstance(data, dict):
                                raise TypeError()
                            componentsschemas_tool_rule_type_4 = ToolRuleMaxCalls.from_dict(data)

                            return componentsschemas_tool_rule_type_4
                        except (TypeError, ValueError, AttributeError, KeyError):
                            pass
                        try:
                            if not isinstance(data, dict):
                                raise TypeError()
                            componentsschemas_tool_rule_type_5 = ToolRuleRequiredBeforeExit.from_dict(data)

                            return componentsschemas_tool_rule_type_5
                        except (TypeError, ValueError, AttributeError, KeyError):
                            pass
                        if not isinstance(data, dict):
                            raise TypeError()
                        componentsschemas_tool_rule_type_6 = ToolRuleRequiresApproval.from_dict(data)

                        return componentsschemas_tool_rule_type_6

                    tool_rules_type_0_item = _parse_tool_rules_type_0_item(tool_rules_type_0_item_data)

                    tool_rules_type_0.append(tool_rules_type_0_item)

                return tool_rules_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(
                list[
                    ToolRuleChildren
                    | ToolRuleContinue
                    | ToolRuleMaxCalls
                    | ToolRuleRequiredBeforeExit
                    | ToolRuleRequiresApproval
                    | ToolRuleRunFirst
                    | ToolRuleTerminal
                ]
                | None
                | Unset,
                data,
            )

        tool_rules = _parse_tool_rules(d.pop("tool_rules", UNSET))

        def _parse_loop_style(data: object) -> LoopStyle | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                loop_style_type_0 = LoopStyle(data)

                return loop_style_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(LoopStyle | None | Unset, data)

        loop_style = _parse_loop_style(d.pop("loop_style", UNSET))

        update_agent = cls(
            name=name,
            model=model,
            context_window=context_window,
            policy=policy,
            tools=tools,
            max_chain_length=max_chain_length,
            tool_rules=tool_rules,
            loop_style=loop_style,
        )

        return update_agent
