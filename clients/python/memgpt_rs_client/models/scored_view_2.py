from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.scored_view_2_metadata import ScoredView2Metadata


T = TypeVar("T", bound="ScoredView2")


@_attrs_define
class ScoredView2:
    """A result and its score.

    Attributes:
        score (float): Relevance (higher is better; 0 in listings).
        id (str): Its id.
        text (str): Its text.
        tags (list[str]): Its tags.
        metadata (ScoredView2Metadata): Its metadata (source, chunk position, tags...).
        created_at (datetime.datetime): When it was stored.
    """

    score: float
    id: str
    text: str
    tags: list[str]
    metadata: ScoredView2Metadata
    created_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        score = self.score

        id = self.id

        text = self.text

        tags = self.tags

        metadata = self.metadata.to_dict()

        created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "score": score,
                "id": id,
                "text": text,
                "tags": tags,
                "metadata": metadata,
                "created_at": created_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.scored_view_2_metadata import ScoredView2Metadata  # noqa: PLC0415

        d = dict(src_dict)
        score = d.pop("score")

        id = d.pop("id")

        text = d.pop("text")

        tags = cast(list[str], d.pop("tags"))

        metadata = ScoredView2Metadata.from_dict(d.pop("metadata"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        scored_view_2 = cls(
            score=score,
            id=id,
            text=text,
            tags=tags,
            metadata=metadata,
            created_at=created_at,
        )

        scored_view_2.additional_properties = d
        return scored_view_2

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
