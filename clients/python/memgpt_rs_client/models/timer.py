from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Timer")


@_attrs_define
class Timer:
    """A scheduled timer event of one agent.

    Attributes:
        id (UUID): A timer's id.
        agent_id (str): The agent it wakes.
        reason (str): Why: the text of the timer event the agent receives.
        next_at (datetime.datetime): When it fires next.
        created_at (datetime.datetime): When it was created.
        every_seconds (int | None | Unset): For a repeating timer, seconds between firings.
    """

    id: UUID
    agent_id: str
    reason: str
    next_at: datetime.datetime
    created_at: datetime.datetime
    every_seconds: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        agent_id = self.agent_id

        reason = self.reason

        next_at = self.next_at.isoformat()

        created_at = self.created_at.isoformat()

        every_seconds: int | None | Unset
        if isinstance(self.every_seconds, Unset):
            every_seconds = UNSET
        else:
            every_seconds = self.every_seconds

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "agent_id": agent_id,
                "reason": reason,
                "next_at": next_at,
                "created_at": created_at,
            }
        )
        if every_seconds is not UNSET:
            field_dict["every_seconds"] = every_seconds

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = UUID(d.pop("id"))

        agent_id = d.pop("agent_id")

        reason = d.pop("reason")

        next_at = datetime.datetime.fromisoformat(d.pop("next_at"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_every_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        every_seconds = _parse_every_seconds(d.pop("every_seconds", UNSET))

        timer = cls(
            id=id,
            agent_id=agent_id,
            reason=reason,
            next_at=next_at,
            created_at=created_at,
            every_seconds=every_seconds,
        )

        timer.additional_properties = d
        return timer

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
