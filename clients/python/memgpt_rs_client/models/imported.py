from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.agent_view import AgentView


T = TypeVar("T", bound="Imported")


@_attrs_define
class Imported:
    """What an import did.

    Attributes:
        agent (AgentView): An agent: configuration, memory and where its main context stands.
        messages (int): Messages written to recall storage.
        passages (int): Passages written to archival storage.
        unmapped (list[str]): What could not be carried over, one line each.
        adjusted (list[str]): What was changed to fit (a raised block limit, a shared block copied), one line each.
        related (list[AgentView]): The file's other agents, imported with this one (a sleep-time companion...).
    """

    agent: AgentView
    messages: int
    passages: int
    unmapped: list[str]
    adjusted: list[str]
    related: list[AgentView]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        agent = self.agent.to_dict()

        messages = self.messages

        passages = self.passages

        unmapped = self.unmapped

        adjusted = self.adjusted

        related = []
        for related_item_data in self.related:
            related_item = related_item_data.to_dict()
            related.append(related_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "agent": agent,
                "messages": messages,
                "passages": passages,
                "unmapped": unmapped,
                "adjusted": adjusted,
                "related": related,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.agent_view import AgentView  # noqa: PLC0415

        d = dict(src_dict)
        agent = AgentView.from_dict(d.pop("agent"))

        messages = d.pop("messages")

        passages = d.pop("passages")

        unmapped = cast(list[str], d.pop("unmapped"))

        adjusted = cast(list[str], d.pop("adjusted"))

        related = []
        _related = d.pop("related")
        for related_item_data in _related:
            related_item = AgentView.from_dict(related_item_data)

            related.append(related_item)

        imported = cls(
            agent=agent,
            messages=messages,
            passages=passages,
            unmapped=unmapped,
            adjusted=adjusted,
            related=related,
        )

        imported.additional_properties = d
        return imported

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
