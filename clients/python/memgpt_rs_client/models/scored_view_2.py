from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

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
        valid_from (datetime.datetime | None | Unset): When the fact became true, where known (a newer version holds
            from when it replaced the
            old one); absent: for as long as memory can tell.
        valid_to (datetime.datetime | None | Unset): When it stopped (or stops) being a current fact: superseded,
            forgotten, or the end of its
            time to live; absent: current until retired.
        superseded_by (None | str | Unset): The passage that replaced it.
        retired_reason (None | str | Unset): Why it was retired.
    """

    score: float
    id: str
    text: str
    tags: list[str]
    metadata: ScoredView2Metadata
    created_at: datetime.datetime
    valid_from: datetime.datetime | None | Unset = UNSET
    valid_to: datetime.datetime | None | Unset = UNSET
    superseded_by: None | str | Unset = UNSET
    retired_reason: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        score = self.score

        id = self.id

        text = self.text

        tags = self.tags

        metadata = self.metadata.to_dict()

        created_at = self.created_at.isoformat()

        valid_from: None | str | Unset
        if isinstance(self.valid_from, Unset):
            valid_from = UNSET
        elif isinstance(self.valid_from, datetime.datetime):
            valid_from = self.valid_from.isoformat()
        else:
            valid_from = self.valid_from

        valid_to: None | str | Unset
        if isinstance(self.valid_to, Unset):
            valid_to = UNSET
        elif isinstance(self.valid_to, datetime.datetime):
            valid_to = self.valid_to.isoformat()
        else:
            valid_to = self.valid_to

        superseded_by: None | str | Unset
        if isinstance(self.superseded_by, Unset):
            superseded_by = UNSET
        else:
            superseded_by = self.superseded_by

        retired_reason: None | str | Unset
        if isinstance(self.retired_reason, Unset):
            retired_reason = UNSET
        else:
            retired_reason = self.retired_reason

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
        if valid_from is not UNSET:
            field_dict["valid_from"] = valid_from
        if valid_to is not UNSET:
            field_dict["valid_to"] = valid_to
        if superseded_by is not UNSET:
            field_dict["superseded_by"] = superseded_by
        if retired_reason is not UNSET:
            field_dict["retired_reason"] = retired_reason

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

        def _parse_valid_from(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                valid_from_type_0 = datetime.datetime.fromisoformat(data)

                return valid_from_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        valid_from = _parse_valid_from(d.pop("valid_from", UNSET))

        def _parse_valid_to(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                valid_to_type_0 = datetime.datetime.fromisoformat(data)

                return valid_to_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        valid_to = _parse_valid_to(d.pop("valid_to", UNSET))

        def _parse_superseded_by(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        superseded_by = _parse_superseded_by(d.pop("superseded_by", UNSET))

        def _parse_retired_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        retired_reason = _parse_retired_reason(d.pop("retired_reason", UNSET))

        scored_view_2 = cls(
            score=score,
            id=id,
            text=text,
            tags=tags,
            metadata=metadata,
            created_at=created_at,
            valid_from=valid_from,
            valid_to=valid_to,
            superseded_by=superseded_by,
            retired_reason=retired_reason,
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
