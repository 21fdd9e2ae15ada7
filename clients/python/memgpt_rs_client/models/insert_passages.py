from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="InsertPassages")


@_attrs_define
class InsertPassages:
    """Text to store.

    Attributes:
        text (str): The text; long text is split into passages as `archival_memory_insert` splits it.
        tags (list[str] | Unset): Tags for filtering searches.
    """

    text: str
    tags: list[str] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        text = self.text

        tags: list[str] | Unset = UNSET
        if not isinstance(self.tags, Unset):
            tags = self.tags

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "text": text,
            }
        )
        if tags is not UNSET:
            field_dict["tags"] = tags

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        text = d.pop("text")

        tags = cast(list[str], d.pop("tags", UNSET))

        insert_passages = cls(
            text=text,
            tags=tags,
        )

        return insert_passages
