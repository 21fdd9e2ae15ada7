from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.scored_view_3 import ScoredView3


T = TypeVar("T", bound="RecallResults")


@_attrs_define
class RecallResults:
    """Search results.

    Attributes:
        items (list[ScoredView3]): The results on this page, best first (oldest first for listings).
        page (int): The page number, from 0.
        size (int): Results per page.
        total (int): Results on all pages together.
        semantic (bool): Whether meaning ranked along with words.
        note (None | str | Unset): How the results were found, when it matters (words only, and why).
    """

    items: list[ScoredView3]
    page: int
    size: int
    total: int
    semantic: bool
    note: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        items = []
        for items_item_data in self.items:
            items_item = items_item_data.to_dict()
            items.append(items_item)

        page = self.page

        size = self.size

        total = self.total

        semantic = self.semantic

        note: None | str | Unset
        if isinstance(self.note, Unset):
            note = UNSET
        else:
            note = self.note

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "items": items,
                "page": page,
                "size": size,
                "total": total,
                "semantic": semantic,
            }
        )
        if note is not UNSET:
            field_dict["note"] = note

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.scored_view_3 import ScoredView3  # noqa: PLC0415

        d = dict(src_dict)
        items = []
        _items = d.pop("items")
        for items_item_data in _items:
            items_item = ScoredView3.from_dict(items_item_data)

            items.append(items_item)

        page = d.pop("page")

        size = d.pop("size")

        total = d.pop("total")

        semantic = d.pop("semantic")

        def _parse_note(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        note = _parse_note(d.pop("note", UNSET))

        recall_results = cls(
            items=items,
            page=page,
            size=size,
            total=total,
            semantic=semantic,
            note=note,
        )

        recall_results.additional_properties = d
        return recall_results

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
