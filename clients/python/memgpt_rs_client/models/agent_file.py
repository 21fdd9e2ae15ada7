from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.agent_file_agents_item import AgentFileAgentsItem


T = TypeVar("T", bound="AgentFile")


@_attrs_define
class AgentFile:
    """A Letta agent file (schema v2; see Letta's `AgentFileSchema`). Its ids must resolve: each agent's `block_ids`,
    `tool_ids` and `in_context_message_ids` name entries of the file. (A JSON string holding the document, as some
    published files are, is read too.)

        Attributes:
            agents (list[AgentFileAgentsItem]):
    """

    agents: list[AgentFileAgentsItem]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        agents = []
        for agents_item_data in self.agents:
            agents_item = agents_item_data.to_dict()
            agents.append(agents_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "agents": agents,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.agent_file_agents_item import AgentFileAgentsItem  # noqa: PLC0415

        d = dict(src_dict)
        agents = []
        _agents = d.pop("agents")
        for agents_item_data in _agents:
            agents_item = AgentFileAgentsItem.from_dict(agents_item_data)

            agents.append(agents_item)

        agent_file = cls(
            agents=agents,
        )

        agent_file.additional_properties = d
        return agent_file

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
