from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="SkillView")


@_attrs_define
class SkillView:
    """A skill of the agent's (its files are in the agent file export).

    Attributes:
        name (str): Its name.
        description (str): What it is for (from its `SKILL.md`).
        files (list[str]): Its files' paths; empty for a skill known only by its source.
        loaded (list[str]): The files the agent has loaded into its context.
        source_url (None | str | Unset): Where it comes from, if known.
    """

    name: str
    description: str
    files: list[str]
    loaded: list[str]
    source_url: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        description = self.description

        files = self.files

        loaded = self.loaded

        source_url: None | str | Unset
        if isinstance(self.source_url, Unset):
            source_url = UNSET
        else:
            source_url = self.source_url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
                "description": description,
                "files": files,
                "loaded": loaded,
            }
        )
        if source_url is not UNSET:
            field_dict["source_url"] = source_url

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        name = d.pop("name")

        description = d.pop("description")

        files = cast(list[str], d.pop("files"))

        loaded = cast(list[str], d.pop("loaded"))

        def _parse_source_url(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        source_url = _parse_source_url(d.pop("source_url", UNSET))

        skill_view = cls(
            name=name,
            description=description,
            files=files,
            loaded=loaded,
            source_url=source_url,
        )

        skill_view.additional_properties = d
        return skill_view

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
