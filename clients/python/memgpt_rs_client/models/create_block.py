from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateBlock")


@_attrs_define
class CreateBlock:
    """A new shared block.

    Attributes:
        label (str): Its label, as the agents' prompts show it (`organization`, `project`...).
        value (str | Unset): Its first text. Default: ''.
        limit (int | None | Unset): Characters allowed (default 2,000).
        description (None | str | Unset): What the block is for, shown to the agents.
        read_only (bool | Unset): Whether no writer may change its text (default false). Default: False.
    """

    label: str
    value: str | Unset = ""
    limit: int | None | Unset = UNSET
    description: None | str | Unset = UNSET
    read_only: bool | Unset = False

    def to_dict(self) -> dict[str, Any]:
        label = self.label

        value = self.value

        limit: int | None | Unset
        if isinstance(self.limit, Unset):
            limit = UNSET
        else:
            limit = self.limit

        description: None | str | Unset
        if isinstance(self.description, Unset):
            description = UNSET
        else:
            description = self.description

        read_only = self.read_only

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "label": label,
            }
        )
        if value is not UNSET:
            field_dict["value"] = value
        if limit is not UNSET:
            field_dict["limit"] = limit
        if description is not UNSET:
            field_dict["description"] = description
        if read_only is not UNSET:
            field_dict["read_only"] = read_only

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        label = d.pop("label")

        value = d.pop("value", UNSET)

        def _parse_limit(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        limit = _parse_limit(d.pop("limit", UNSET))

        def _parse_description(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        description = _parse_description(d.pop("description", UNSET))

        read_only = d.pop("read_only", UNSET)

        create_block = cls(
            label=label,
            value=value,
            limit=limit,
            description=description,
            read_only=read_only,
        )

        return create_block
