from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.found_by import FoundBy
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.call_view import CallView


T = TypeVar("T", bound="ScoredView3")


@_attrs_define
class ScoredView3:
    """A result and its score.

    Attributes:
        score (float): Relevance (higher is better; 0 in listings).
        id (str): Its id.
        kind (str): `user`, `system_alert`, `heartbeat`, `login`, `timer`, `document_upload`, `assistant`,
            `function_return` or `function_error`.
        text (str): The text (the assistant's inner monologue, a function's result...).
        function_calls (list[CallView]): The assistant's function calls.
        created_at (datetime.datetime): When it was appended.
        call_id (None | str | Unset): For a function's result: the call it answers.
        name (None | str | Unset): The user's or function's name, if any.
        found_by (FoundBy | None | Unset): Why it was found (not in listings): `words` (its own words hold a query
            term),
            `context` (only the turns just before it do: it is the context around a match, shown
            so the match reads in its conversation; its score is low) or `meaning` (its embedding is
            near the query's).
    """

    score: float
    id: str
    kind: str
    text: str
    function_calls: list[CallView]
    created_at: datetime.datetime
    call_id: None | str | Unset = UNSET
    name: None | str | Unset = UNSET
    found_by: FoundBy | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        score = self.score

        id = self.id

        kind = self.kind

        text = self.text

        function_calls = []
        for function_calls_item_data in self.function_calls:
            function_calls_item = function_calls_item_data.to_dict()
            function_calls.append(function_calls_item)

        created_at = self.created_at.isoformat()

        call_id: None | str | Unset
        if isinstance(self.call_id, Unset):
            call_id = UNSET
        else:
            call_id = self.call_id

        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        found_by: None | str | Unset
        if isinstance(self.found_by, Unset):
            found_by = UNSET
        elif isinstance(self.found_by, FoundBy):
            found_by = self.found_by.value
        else:
            found_by = self.found_by

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "score": score,
                "id": id,
                "kind": kind,
                "text": text,
                "function_calls": function_calls,
                "created_at": created_at,
            }
        )
        if call_id is not UNSET:
            field_dict["call_id"] = call_id
        if name is not UNSET:
            field_dict["name"] = name
        if found_by is not UNSET:
            field_dict["found_by"] = found_by

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.call_view import CallView  # noqa: PLC0415

        d = dict(src_dict)
        score = d.pop("score")

        id = d.pop("id")

        kind = d.pop("kind")

        text = d.pop("text")

        function_calls = []
        _function_calls = d.pop("function_calls")
        for function_calls_item_data in _function_calls:
            function_calls_item = CallView.from_dict(function_calls_item_data)

            function_calls.append(function_calls_item)

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_call_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        call_id = _parse_call_id(d.pop("call_id", UNSET))

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        def _parse_found_by(data: object) -> FoundBy | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                found_by_type_0 = FoundBy(data)

                return found_by_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(FoundBy | None | Unset, data)

        found_by = _parse_found_by(d.pop("found_by", UNSET))

        scored_view_3 = cls(
            score=score,
            id=id,
            kind=kind,
            text=text,
            function_calls=function_calls,
            created_at=created_at,
            call_id=call_id,
            name=name,
            found_by=found_by,
        )

        scored_view_3.additional_properties = d
        return scored_view_3

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
