from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="SharedBlockView")


@_attrs_define
class SharedBlockView:
    """A shared block as the API shows it.

    Attributes:
        id (str): Its id.
        label (str): Its label (`persona`, `human`, ...).
        value (str): Its text.
        chars (int): Characters used.
        limit (int): Characters allowed.
        read_only (bool): Whether the agent may edit it.
        version (int): Bumped by every edit (1 when created).
        created_at (datetime.datetime): When it was created.
        updated_at (datetime.datetime): When it was last edited.
        agents (list[str]): The agents holding it, oldest first.
        description (None | str | Unset): What the block is for, if said.
        block_id (None | str | Unset): The shared block it is a copy of (`/v1/blocks/{block_id}`), if it is shared.
        updated_by (None | str | Unset): The agent that made the last edit; absent for a person (the API, the CLI).
    """

    id: str
    label: str
    value: str
    chars: int
    limit: int
    read_only: bool
    version: int
    created_at: datetime.datetime
    updated_at: datetime.datetime
    agents: list[str]
    description: None | str | Unset = UNSET
    block_id: None | str | Unset = UNSET
    updated_by: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        label = self.label

        value = self.value

        chars = self.chars

        limit = self.limit

        read_only = self.read_only

        version = self.version

        created_at = self.created_at.isoformat()

        updated_at = self.updated_at.isoformat()

        agents = self.agents

        description: None | str | Unset
        if isinstance(self.description, Unset):
            description = UNSET
        else:
            description = self.description

        block_id: None | str | Unset
        if isinstance(self.block_id, Unset):
            block_id = UNSET
        else:
            block_id = self.block_id

        updated_by: None | str | Unset
        if isinstance(self.updated_by, Unset):
            updated_by = UNSET
        else:
            updated_by = self.updated_by

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "label": label,
                "value": value,
                "chars": chars,
                "limit": limit,
                "read_only": read_only,
                "version": version,
                "created_at": created_at,
                "updated_at": updated_at,
                "agents": agents,
            }
        )
        if description is not UNSET:
            field_dict["description"] = description
        if block_id is not UNSET:
            field_dict["block_id"] = block_id
        if updated_by is not UNSET:
            field_dict["updated_by"] = updated_by

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = d.pop("id")

        label = d.pop("label")

        value = d.pop("value")

        chars = d.pop("chars")

        limit = d.pop("limit")

        read_only = d.pop("read_only")

        version = d.pop("version")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        agents = cast(list[str], d.pop("agents"))

        def _parse_description(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        description = _parse_description(d.pop("description", UNSET))

        def _parse_block_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        block_id = _parse_block_id(d.pop("block_id", UNSET))

        def _parse_updated_by(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        updated_by = _parse_updated_by(d.pop("updated_by", UNSET))

        shared_block_view = cls(
            id=id,
            label=label,
            value=value,
            chars=chars,
            limit=limit,
            read_only=read_only,
            version=version,
            created_at=created_at,
            updated_at=updated_at,
            agents=agents,
            description=description,
            block_id=block_id,
            updated_by=updated_by,
        )

        shared_block_view.additional_properties = d
        return shared_block_view

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
