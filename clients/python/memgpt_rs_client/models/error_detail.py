from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.error_code import ErrorCode

T = TypeVar("T", bound="ErrorDetail")


@_attrs_define
class ErrorDetail:
    """The error inside [`ErrorBody`].

    Attributes:
        code (ErrorCode): The stable machine-readable reason of an error response.

            - `bad_json`: The body is not JSON, or not the JSON the route takes (missing or mistyped field).
            - `unknown_field`: The body has a field the route does not know.
            - `invalid_input`: A value is out of range or malformed (an id, a date, a page size, an empty text).
            - `body_too_large`: The body is larger than the server accepts.
            - `unauthorized`: No API key, or one that is unknown or revoked.
            - `admin_only`: The admin key is missing or wrong, or the server has none.
            - `not_found`: No such agent, passage, block, tenant or key (or it belongs to another tenant), or no
            such route.
            - `method_not_allowed`: The route does not take this HTTP method.
            - `already_exists`: The name is taken.
            - `block_over_limit`: A memory block edit would exceed the block's character limit.
            - `block_edit_rejected`: The block is read-only, or the text to replace is not in it.
            - `unknown_tool`: A function (tool) name is not registered.
            - `unknown_policy`: A page-replacement policy name is not registered.
            - `too_large`: A message or document is larger than the agent accepts.
            - `conflict`: Another step of the agent committed first (retry), or an approval names a call the
            agent is not waiting on.
            - `approval_pending`: The agent waits for a function call's approval: approve or deny it first (a message of
            `type` `approval`).
            - `idempotency_key_reused`: An `Idempotency-Key` was sent again with another request.
            - `invalid_config`: The agent cannot be configured that way (window too small, model unknown...).
            - `llm_error`: The LLM provider failed (after its retries).
            - `unavailable`: A dependency is unavailable for now (database, embedder); retry later.
            - `timeout`: The request took longer than the server allows.
            - `internal`: A bug or a broken store; the server log has details.
        message (str): A description for people.
    """

    code: ErrorCode
    message: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        code = self.code.value

        message = self.message

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "code": code,
                "message": message,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        code = ErrorCode(d.pop("code"))

        message = d.pop("message")

        error_detail = cls(
            code=code,
            message=message,
        )

        error_detail.additional_properties = d
        return error_detail

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
