from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="NewKey")


@_attrs_define
class NewKey:
    """A key just created: the only time the key itself is shown.

    Attributes:
        key (str): The key: send it as `Authorization: Bearer <key>`. It is stored only as a hash and
            cannot be shown again.
        id (UUID): An API key's id (not the key: that is shown once and stored only as a hash).
        tenant_id (UUID): A tenant's id.
        name (str): Its name.
        prefix (str): Its first characters.
        created_at (datetime.datetime): When it was created.
    """

    key: str
    id: UUID
    tenant_id: UUID
    name: str
    prefix: str
    created_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        key = self.key

        id = str(self.id)

        tenant_id = str(self.tenant_id)

        name = self.name

        prefix = self.prefix

        created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "key": key,
                "id": id,
                "tenant_id": tenant_id,
                "name": name,
                "prefix": prefix,
                "created_at": created_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        key = d.pop("key")

        id = UUID(d.pop("id"))

        tenant_id = UUID(d.pop("tenant_id"))

        name = d.pop("name")

        prefix = d.pop("prefix")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        new_key = cls(
            key=key,
            id=id,
            tenant_id=tenant_id,
            name=name,
            prefix=prefix,
            created_at=created_at,
        )

        new_key.additional_properties = d
        return new_key

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
