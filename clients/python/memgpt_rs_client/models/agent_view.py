from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.loop_style import LoopStyle

if TYPE_CHECKING:
    from ..models.block_view import BlockView
    from ..models.skill_view import SkillView
    from ..models.tool_rule_children import ToolRuleChildren
    from ..models.tool_rule_continue import ToolRuleContinue
    from ..models.tool_rule_max_calls import ToolRuleMaxCalls
    from ..models.tool_rule_required_before_exit import ToolRuleRequiredBeforeExit
    from ..models.tool_rule_requires_approval import ToolRuleRequiresApproval
    from ..models.tool_rule_run_first import ToolRuleRunFirst
    from ..models.tool_rule_terminal import ToolRuleTerminal


T = TypeVar("T", bound="AgentView")


@_attrs_define
class AgentView:
    """An agent: configuration, memory and where its main context stands.

    Attributes:
        id (str): Its id.
        name (str): Its name.
        version (int): Commits so far (every step, memory edit and archival insert is one).
        model (str): The chat model ("" = the provider's default).
        context_window (int): The context window in tokens.
        policy (str): The page-replacement policy.
        tools (list[str]): The functions (tools) the agent may call.
        tool_rules (list[ToolRuleChildren | ToolRuleContinue | ToolRuleMaxCalls | ToolRuleRequiredBeforeExit |
            ToolRuleRequiresApproval | ToolRuleRunFirst | ToolRuleTerminal]): Which of them the model may call when.
        loop_style (LoopStyle): How the agent loop decides whether a step goes on after a function call.

            Both styles share the same guarantees: at most [`AgentConfig::max_chain_length`] LLM calls
            per step, failed calls always give control back to the model, tool rules apply, and the
            step commits whole or not at all.

            - `heartbeat`: The paper's loop (the default): every non-terminal function takes a required
            `request_heartbeat` flag, and the step goes on only when a call sets it (or fails, or a
            [`Continue`](crate::rules::ToolRule::Continue) rule applies). Each continuation adds a
            heartbeat message to the queue.
            - `until_reply`: A Letta-v1-style loop: no `request_heartbeat` flag in any schema; the step goes on
            after every function call until the model calls a terminal function (`send_message`)
            or a [`Terminal`](crate::rules::ToolRule::Terminal) rule's function, and no heartbeat
            messages are added: each function result is the model's next input. Shorter schemas,
            and no flag for small models to forget.
        memory (list[BlockView]): Working context: the memory blocks.
        skills (list[SkillView]): Skills: procedural memory, listed in context and loaded by the agent when a task needs
            one.
        summary (str): The recursive summary of evicted messages.
        queued_messages (int): Messages in the FIFO queue of main context.
        created_at (datetime.datetime): When it was created.
        updated_at (datetime.datetime): When it last committed.
    """

    id: str
    name: str
    version: int
    model: str
    context_window: int
    policy: str
    tools: list[str]
    tool_rules: list[
        ToolRuleChildren
        | ToolRuleContinue
        | ToolRuleMaxCalls
        | ToolRuleRequiredBeforeExit
        | ToolRuleRequiresApproval
        | ToolRuleRunFirst
        | ToolRuleTerminal
    ]
    loop_style: LoopStyle
    memory: list[BlockView]
    skills: list[SkillView]
    summary: str
    queued_messages: int
    created_at: datetime.datetime
    updated_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.tool_rule_children import ToolRuleChildren  # noqa: PLC0415
        from ..models.tool_rule_continue import ToolRuleContinue  # noqa: PLC0415
        from ..models.tool_rule_max_calls import ToolRuleMaxCalls  # noqa: PLC0415
        from ..models.tool_rule_required_before_exit import ToolRuleRequiredBeforeExit  # noqa: PLC0415
        from ..models.tool_rule_run_first import ToolRuleRunFirst  # noqa: PLC0415
        from ..models.tool_rule_terminal import ToolRuleTerminal  # noqa: PLC0415

        id = self.id

        name = self.name

        version = self.version

        model = self.model

        context_window = self.context_window

        policy = self.policy

        tools = self.tools

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

        loop_style = self.loop_style.value

        memory = []
        for memory_item_data in self.memory:
            memory_item = memory_item_data.to_dict()
            memory.append(memory_item)

        skills = []
        for skills_item_data in self.skills:
            skills_item = skills_item_data.to_dict()
            skills.append(skills_item)

        summary = self.summary

        queued_messages = self.queued_messages

        created_at = self.created_at.isoformat()

        updated_at = self.updated_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "name": name,
                "version": version,
                "model": model,
                "context_window": context_window,
                "policy": policy,
                "tools": tools,
                "tool_rules": tool_rules,
                "loop_style": loop_style,
                "memory": memory,
                "skills": skills,
                "summary": summary,
                "queued_messages": queued_messages,
                "created_at": created_at,
                "updated_at": updated_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.block_view import BlockView  # noqa: PLC0415
        from ..models.skill_view import SkillView  # noqa: PLC0415
        from ..models.tool_rule_children import ToolRuleChildren  # noqa: PLC0415
        from ..models.tool_rule_continue import ToolRuleContinue  # noqa: PLC0415
        from ..models.tool_rule_max_calls import ToolRuleMaxCalls  # noqa: PLC0415
        from ..models.tool_rule_required_before_exit import ToolRuleRequiredBeforeExit  # noqa: PLC0415
        from ..models.tool_rule_requires_approval import ToolRuleRequiresApproval  # noqa: PLC0415
        from ..models.tool_rule_run_first import ToolRuleRunFirst  # noqa: PLC0415
        from ..models.tool_rule_terminal import ToolRuleTerminal  # noqa: PLC0415

        d = dict(src_dict)
        id = d.pop("id")

        name = d.pop("name")

        version = d.pop("version")

        model = d.pop("model")

        context_window = d.pop("context_window")

        policy = d.pop("policy")

        tools = cast(list[str], d.pop("tools"))

        tool_rules = []
        _tool_rules = d.pop("tool_rules")
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

        loop_style = LoopStyle(d.pop("loop_style"))

        memory = []
        _memory = d.pop("memory")
        for memory_item_data in _memory:
            memory_item = BlockView.from_dict(memory_item_data)

            memory.append(memory_item)

        skills = []
        _skills = d.pop("skills")
        for skills_item_data in _skills:
            skills_item = SkillView.from_dict(skills_item_data)

            skills.append(skills_item)

        summary = d.pop("summary")

        queued_messages = d.pop("queued_messages")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        agent_view = cls(
            id=id,
            name=name,
            version=version,
            model=model,
            context_window=context_window,
            policy=policy,
            tools=tools,
            tool_rules=tool_rules,
            loop_style=loop_style,
            memory=memory,
            skills=skills,
            summary=summary,
            queued_messages=queued_messages,
            created_at=created_at,
            updated_at=updated_at,
        )

        agent_view.additional_properties = d
        return agent_view

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
