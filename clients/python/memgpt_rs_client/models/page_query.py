from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="PageQuery")


@_attrs_define
class PageQuery:
    """`?page=N&size=M` of a listing.

    Attributes:
        page (int | Unset): The page, from 0 (default 0). Default: 0.
        size (int | None | Unset): Results per page, 1-1000 (default 50).
    """

    page: int | Unset = 0
    size: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        page = self.page

        size: int | None | Unset
        if isinstance(self.size, Unset):
            size = UNSET
        else:
            size = self.size

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if page is not UNSET:
            field_dict["page"] = page
        if size is not UNSET:
            field_dict["size"] = size

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        page = d.pop("page", UNSET)

        def _parse_size(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        size = _parse_size(d.pop("size", UNSET))

        page_query = cls(
            page=page,
            size=size,
        )

        return page_query
