from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="BlockView")


@_attrs_define
class BlockView:
    """A memory block of working context.

    Attributes:
        label (str): Its label (`persona`, `human`, ...).
        value (str): Its text.
        chars (int): Characters used.
        limit (int): Characters allowed.
        read_only (bool): Whether the agent may edit it.
        description (None | str | Unset): What the block is for, if said.
        block_id (None | str | Unset): The shared block it is a copy of (`/v1/blocks/{block_id}`), if it is shared.
    """

    label: str
    value: str
    chars: int
    limit: int
    read_only: bool
    description: None | str | Unset = UNSET
    block_id: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        label = self.label

        value = self.value

        chars = self.chars

        limit = self.limit

        read_only = self.read_only

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

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "label": label,
                "value": value,
                "chars": chars,
                "limit": limit,
                "read_only": read_only,
            }
        )
        if description is not UNSET:
            field_dict["description"] = description
        if block_id is not UNSET:
            field_dict["block_id"] = block_id

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        label = d.pop("label")

        value = d.pop("value")

        chars = d.pop("chars")

        limit = d.pop("limit")

        read_only = d.pop("read_only")

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

        block_view = cls(
            label=label,
            value=value,
            chars=chars,
            limit=limit,
            read_only=read_only,
            description=description,
            block_id=block_id,
        )

        block_view.additional_properties = d
        return block_view

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
