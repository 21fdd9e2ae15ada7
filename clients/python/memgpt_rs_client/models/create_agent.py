from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.loop_style import LoopStyle
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.new_block import NewBlock
    from ..models.tool_rule_children import ToolRuleChildren
    from ..models.tool_rule_continue import ToolRuleContinue
    from ..models.tool_rule_max_calls import ToolRuleMaxCalls
    from ..models.tool_rule_required_before_exit import ToolRuleRequiredBeforeExit
    from ..models.tool_rule_requires_approval import ToolRuleRequiresApproval
    from ..models.tool_rule_run_first import ToolRuleRunFirst
    from ..models.tool_rule_terminal import ToolRuleTerminal


T = TypeVar("T", bound="CreateAgent")


@_attrs_define
class CreateAgent:
    """A new agent.

    Attributes:
        name (str): Its name (1-200 characters, unique among the tenant's agents).
        persona (None | str | Unset): The `persona` block: who the agent is.
        human (None | str | Unset): The `human` block: what it knows about the user.
        system (None | str | Unset): Replaces the system instructions (default: MemGPT's).
        model (None | str | Unset): The chat model (default: the server's).
        context_window (int | None | Unset): The context window in tokens (default: the model's; 512 to 100,000,000).
        policy (None | str | Unset): The page-replacement policy by name (default `paper`).
        tools (list[str] | Unset): Functions (tools) offered besides the base ones, by registered name.
        include_base_tools (bool | None | Unset): Whether the base functions (`send_message`, memory editing and search)
            are offered
            (default `true`).
        block_limit (int | None | Unset): The character limit of each memory block (default 2,000).
        blocks (list[NewBlock] | Unset): More memory blocks besides `persona` and `human`.
        tool_rules (list[ToolRuleChildren | ToolRuleContinue | ToolRuleMaxCalls | ToolRuleRequiredBeforeExit |
            ToolRuleRequiresApproval | ToolRuleRunFirst | ToolRuleTerminal] | Unset): Which functions the model may call
            when (run first, terminal, children, call limits...).
        loop_style (LoopStyle | None | Unset): How a step goes on after a function call: `heartbeat` (the paper's
            `request_heartbeat`
            flag, the default) or `until_reply` (Letta-v1-style: no flag; the step goes on until
            `send_message`).
    """

    name: str
    persona: None | str | Unset = UNSET
    human: None | str | Unset = UNSET
    system: None | str | Unset = UNSET
    model: None | str | Unset = UNSET
    context_window: int | None | Unset = UNSET
    policy: None | str | Unset = UNSET
    tools: list[str] | Unset = UNSET
    include_base_tools: bool | None | Unset = UNSET
    block_limit: int | None | Unset = UNSET
    blocks: list[NewBlock] | Unset = UNSET
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

        name = self.name

        persona: None | str | Unset
        if isinstance(self.persona, Unset):
            persona = UNSET
        else:
            persona = self.persona

        human: None | str | Unset
        if isinstance(self.human, Unset):
            human = UNSET
        else:
            human = self.human

        system: None | str | Unset
        if isinstance(self.system, Unset):
            system = UNSET
        else:
            system = self.system

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

        tools: list[str] | Unset = UNSET
        if not isinstance(self.tools, Unset):
            tools = self.tools

        include_base_tools: bool | None | Unset
        if isinstance(self.include_base_tools, Unset):
            include_base_tools = UNSET
        else:
            include_base_tools = self.include_base_tools

        block_limit: int | None | Unset
        if isinstance(self.block_limit, Unset):
            block_limit = UNSET
        else:
            block_limit = self.block_limit

        blocks: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.blocks, Unset):
            blocks = []
            for blocks_item_data in self.blocks:
                blocks_item = blocks_item_data.to_dict()
                blocks.append(blocks_item)

        tool_rules: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.tool_rules, Unset):
            tool_rules = []
            for tool_rules_item_data in self.tool_rules:
                tool_rules_item: dict[str, Any]
                if isinstance(tool_rules_item_data, ToolRuleRunFirst):
                    tool_rules_item = tool_rules_item_data.to_dict()
                elif isinstance(tool_rules_item_data, ToolRuleTerminal):
                    tool_rules_item = tool_rules_item_data.to_dict()
                elif isinstance(tool_rules_item_data, ToolRuleContinue):
                    tool_rules_item = tool_rules_item_data.to_dict()
                elif isinstance(tool_rules_item_data, ToolRuleChildren):
                    tool_rules_item = tool_rules_item_data.to_dict()
                elif isinstance(tool_rules_item_data, ToolRuleMaxCalls):
                    tool_rules_item = tool_rules_item_data.to_dict()
                elif isinstance(tool_rules_item_data, ToolRuleRequiredBeforeExit):
                    tool_rules_item = tool_rules_item_data.to_dict()
                else:
                    tool_rules_item = tool_rules_item_data.to_dict()

                tool_rules.append(tool_rules_item)

        loop_style: None | str | Unset
        if isinstance(self.loop_style, Unset):
            loop_style = UNSET
        elif isinstance(self.loop_style, LoopStyle):
            loop_style = self.loop_style.value
        else:
            loop_style = self.loop_style

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
            }
        )
        if persona is not UNSET:
            field_dict["persona"] = persona
        if human is not UNSET:
            field_dict["human"] = human
        if system is not UNSET:
            field_dict["system"] = system
        if model is not UNSET:
            field_dict["model"] = model
        if context_window is not UNSET:
            field_dict["context_window"] = context_window
        if policy is not UNSET:
            field_dict["policy"] = policy
        if tools is not UNSET:
            field_dict["tools"] = tools
        if include_base_tools is not UNSET:
            field_dict["include_base_tools"] = include_base_tools
        if block_limit is not UNSET:
            field_dict["block_limit"] = block_limit
        if blocks is not UNSET:
            field_dict["blocks"] = blocks
        if tool_rules is not UNSET:
            field_dict["tool_rules"] = tool_rules
        if loop_style is not UNSET:
            field_dict["loop_style"] = loop_style

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.new_block import NewBlock  # noqa: PLC0415
        from ..models.tool_rule_children import ToolRuleChildren  # noqa: PLC0415
        from ..models.tool_rule_continue import ToolRuleContinue  # noqa: PLC0415
        from ..models.tool_rule_max_calls import ToolRuleMaxCalls  # noqa: PLC0415
        from ..models.tool_rule_required_before_exit import ToolRuleRequiredBeforeExit  # noqa: PLC0415
        from ..models.tool_rule_requires_approval import ToolRuleRequiresApproval  # noqa: PLC0415
        from ..models.tool_rule_run_first import ToolRuleRunFirst  # noqa: PLC0415
        from ..models.tool_rule_terminal import ToolRuleTerminal  # noqa: PLC0415

        d = dict(src_dict)
        name = d.pop("name")

        def _parse_persona(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        persona = _parse_persona(d.pop("persona", UNSET))

        def _parse_human(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        human = _parse_human(d.pop("human", UNSET))

        def _parse_system(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        system = _parse_system(d.pop("system", UNSET))

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

        tools = cast(list[str], d.pop("tools", UNSET))

        def _parse_include_base_tools(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        include_base_tools = _parse_include_base_tools(d.pop("include_base_tools", UNSET))

        def _parse_block_limit(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        block_limit = _parse_block_limit(d.pop("block_limit", UNSET))

        _blocks = d.pop("blocks", UNSET)
        blocks: list[NewBlock] | Unset = UNSET
        if _blocks is not UNSET:
            blocks = []
            for blocks_item_data in _blocks:
                blocks_item = NewBlock.from_dict(blocks_item_data)

                blocks.append(blocks_item)

        _tool_rules = d.pop("tool_rules", UNSET)
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
            | Unset
        ) = UNSET
        if _tool_rules is not UNSET:
            tool_rules = []
            for tool_rules_item_data in _tool_rules:

                def _parse_tool_rules_item(
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

                tool_rules_item = _parse_tool_rules_item(tool_rules_item_data)

                tool_rules.append(tool_rules_item)

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

        create_agent = cls(
            name=name,
            persona=persona,
            human=human,
            system=system,
            model=model,
            context_window=context_window,
            policy=policy,
            tools=tools,
            include_base_tools=include_base_tools,
            block_limit=block_limit,
            blocks=blocks,
            tool_rules=tool_rules,
            loop_style=loop_style,
        )

        return create_agent
