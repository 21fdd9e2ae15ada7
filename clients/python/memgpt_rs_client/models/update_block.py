from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="UpdateBlock")


@_attrs_define
class UpdateBlock:
    """Changes to a shared block; fields left out stay as they are.

    Attributes:
        value (None | str | Unset): The whole new text (at most the limit; refused while read-only).
        limit (int | None | Unset): The new character limit (at least the current text's length).
        description (None | str | Unset): The new description (an empty one removes it).
        read_only (bool | None | Unset): Makes the block read-only for every writer, or writable again.
        based_on_version (int | None | Unset): Apply only if the block is still at this version (`409` with its current
            text if
            another writer changed it): a rewrite of what you read never erases another's edit.
    """

    value: None | str | Unset = UNSET
    limit: int | None | Unset = UNSET
    description: None | str | Unset = UNSET
    read_only: bool | None | Unset = UNSET
    based_on_version: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        value: None | str | Unset
        if isinstance(self.value, Unset):
            value = UNSET
        else:
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

        read_only: bool | None | Unset
        if isinstance(self.read_only, Unset):
            read_only = UNSET
        else:
            read_only = self.read_only

        based_on_version: int | None | Unset
        if isinstance(self.based_on_version, Unset):
            based_on_version = UNSET
        else:
            based_on_version = self.based_on_version

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if value is not UNSET:
            field_dict["value"] = value
        if limit is not UNSET:
            field_dict["limit"] = limit
        if description is not UNSET:
            field_dict["description"] = description
        if read_only is not UNSET:
            field_dict["read_only"] = read_only
        if based_on_version is not UNSET:
            field_dict["based_on_version"] = based_on_version

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_value(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        value = _parse_value(d.pop("value", UNSET))

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

        def _parse_read_only(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        read_only = _parse_read_only(d.pop("read_only", UNSET))

        def _parse_based_on_version(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        based_on_version = _parse_based_on_version(d.pop("based_on_version", UNSET))

        update_block = cls(
            value=value,
            limit=limit,
            description=description,
            read_only=read_only,
            based_on_version=based_on_version,
        )

        return update_block
