from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.scored_view_2 import ScoredView2


T = TypeVar("T", bound="PageView2")


@_attrs_define
class PageView2:
    """One page of results.

    Attributes:
        items (list[ScoredView2]): The results on this page, best first (oldest first for listings).
        page (int): The page number, from 0.
        size (int): Results per page.
        total (int): Results on all pages together.
    """

    items: list[ScoredView2]
    page: int
    size: int
    total: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        items = []
        for items_item_data in self.items:
            items_item = items_item_data.to_dict()
            items.append(items_item)

        page = self.page

        size = self.size

        total = self.total

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "items": items,
                "page": page,
                "size": size,
                "total": total,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.scored_view_2 import ScoredView2  # noqa: PLC0415

        d = dict(src_dict)
        items = []
        _items = d.pop("items")
        for items_item_data in _items:
            items_item = ScoredView2.from_dict(items_item_data)

            items.append(items_item)

        page = d.pop("page")

        size = d.pop("size")

        total = d.pop("total")

        page_view_2 = cls(
            items=items,
            page=page,
            size=size,
            total=total,
        )

        page_view_2.additional_properties = d
        return page_view_2

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
