from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateCompanion")


@_attrs_define
class CreateCompanion:
    """A consolidation companion for an agent.

    Attributes:
        name (None | str | Unset): Its name (default: the agent's name with `-companion`).
        every_steps (int | None | Unset): It runs after this many user messages of the agent (default 5, Letta's
            default).
        idle_minutes (int | None | Unset): It also runs this many minutes after the agent's last step, if anything is
            left to
            consolidate (default: only every `every_steps`).
        model (None | str | Unset): Its chat model (default: the server's).
    """

    name: None | str | Unset = UNSET
    every_steps: int | None | Unset = UNSET
    idle_minutes: int | None | Unset = UNSET
    model: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        every_steps: int | None | Unset
        if isinstance(self.every_steps, Unset):
            every_steps = UNSET
        else:
            every_steps = self.every_steps

        idle_minutes: int | None | Unset
        if isinstance(self.idle_minutes, Unset):
            idle_minutes = UNSET
        else:
            idle_minutes = self.idle_minutes

        model: None | str | Unset
        if isinstance(self.model, Unset):
            model = UNSET
        else:
            model = self.model

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if name is not UNSET:
            field_dict["name"] = name
        if every_steps is not UNSET:
            field_dict["every_steps"] = every_steps
        if idle_minutes is not UNSET:
            field_dict["idle_minutes"] = idle_minutes
        if model is not UNSET:
            field_dict["model"] = model

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        def _parse_every_steps(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        every_steps = _parse_every_steps(d.pop("every_steps", UNSET))

        def _parse_idle_minutes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        idle_minutes = _parse_idle_minutes(d.pop("idle_minutes", UNSET))

        def _parse_model(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        model = _parse_model(d.pop("model", UNSET))

        create_companion = cls(
            name=name,
            every_steps=every_steps,
            idle_minutes=idle_minutes,
            model=model,
        )

        return create_companion
