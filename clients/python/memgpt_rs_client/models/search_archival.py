from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.mode import Mode
from ..types import UNSET, Unset

T = TypeVar("T", bound="SearchArchival")


@_attrs_define
class SearchArchival:
    """An archival search.

    Attributes:
        query (str): What to look for.
        mode (Mode | None | Unset): How to rank (default: the agent's configured mode; words alone without an embedder).
        tags (list[str] | Unset): Only passages with one of these tags.
        start (datetime.datetime | None | Unset): Only passages stored at or after this time.
        end (datetime.datetime | None | Unset): Only passages stored before this time.
        as_of (datetime.datetime | None | Unset): The facts valid at this time (default: the current facts; superseded,
            forgotten and
            expired passages are left out).
        include_retired (bool | Unset): Every passage, superseded, forgotten and expired ones included (overrides
            `as_of`). Default: False.
        page (int | Unset): The page, from 0. Default: 0.
        size (int | None | Unset): Results per page (default 10).
    """

    query: str
    mode: Mode | None | Unset = UNSET
    tags: list[str] | Unset = UNSET
    start: datetime.datetime | None | Unset = UNSET
    end: datetime.datetime | None | Unset = UNSET
    as_of: datetime.datetime | None | Unset = UNSET
    include_retired: bool | Unset = False
    page: int | Unset = 0
    size: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        query = self.query

        mode: None | str | Unset
        if isinstance(self.mode, Unset):
            mode = UNSET
        elif isinstance(self.mode, Mode):
            mode = self.mode.value
        else:
            mode = self.mode

        tags: list[str] | Unset = UNSET
        if not isinstance(self.tags, Unset):
            tags = self.tags

        start: None | str | Unset
        if isinstance(self.start, Unset):
            start = UNSET
        elif isinstance(self.start, datetime.datetime):
            start = self.start.isoformat()
        else:
            start = self.start

        end: None | str | Unset
        if isinstance(self.end, Unset):
            end = UNSET
        elif isinstance(self.end, datetime.datetime):
            end = self.end.isoformat()
        else:
            end = self.end

        as_of: None | str | Unset
        if isinstance(self.as_of, Unset):
            as_of = UNSET
        elif isinstance(self.as_of, datetime.datetime):
            as_of = self.as_of.isoformat()
        else:
            as_of = self.as_of

        include_retired = self.include_retired

        page = self.page

        size: int | None | Unset
        if isinstance(self.size, Unset):
            size = UNSET
        else:
            size = self.size

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "query": query,
            }
        )
        if mode is not UNSET:
            field_dict["mode"] = mode
        if tags is not UNSET:
            field_dict["tags"] = tags
        if start is not UNSET:
            field_dict["start"] = start
        if end is not UNSET:
            field_dict["end"] = end
        if as_of is not UNSET:
            field_dict["as_of"] = as_of
        if include_retired is not UNSET:
            field_dict["include_retired"] = include_retired
        if page is not UNSET:
            field_dict["page"] = page
        if size is not UNSET:
            field_dict["size"] = size

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        query = d.pop("query")

        def _parse_mode(data: object) -> Mode | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                mode_type_0 = Mode(data)

                return mode_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Mode | None | Unset, data)

        mode = _parse_mode(d.pop("mode", UNSET))

        tags = cast(list[str], d.pop("tags", UNSET))

        def _parse_start(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                start_type_0 = datetime.datetime.fromisoformat(data)

                return start_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        start = _parse_start(d.pop("start", UNSET))

        def _parse_end(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                end_type_0 = datetime.datetime.fromisoformat(data)

                return end_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        end = _parse_end(d.pop("end", UNSET))

        def _parse_as_of(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                as_of_type_0 = datetime.datetime.fromisoformat(data)

                return as_of_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        as_of = _parse_as_of(d.pop("as_of", UNSET))

        include_retired = d.pop("include_retired", UNSET)

        page = d.pop("page", UNSET)

        def _parse_size(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        size = _parse_size(d.pop("size", UNSET))

        search_archival = cls(
            query=query,
            mode=mode,
            tags=tags,
            start=start,
            end=end,
            as_of=as_of,
            include_retired=include_retired,
            page=page,
            size=size,
        )

        return search_archival
