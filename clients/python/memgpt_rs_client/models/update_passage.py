from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="UpdatePassage")


@_attrs_define
class UpdatePassage:
    """The new version of a fact.

    Attributes:
        text (str): The new, complete text (split like an insert; the old passage's tags are kept).
    """

    text: str

    def to_dict(self) -> dict[str, Any]:
        text = self.text

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "text": text,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        text = d.pop("text")

        update_passage = cls(
            text=text,
        )

        return update_passage
