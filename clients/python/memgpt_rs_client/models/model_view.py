from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ModelView")


@_attrs_define
class ModelView:
    """An agent as an OpenAI model.

    Attributes:
        id (str): The agent's name (what `model` takes).
        object_ (str): `model`.
        created (int): When the agent was created (Unix seconds).
        owned_by (str): `memgpt`.
        agent_id (str): The agent's id (also accepted as `model`).
    """

    id: str
    object_: str
    created: int
    owned_by: str
    agent_id: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        object_ = self.object_

        created = self.created

        owned_by = self.owned_by

        agent_id = self.agent_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "object": object_,
                "created": created,
                "owned_by": owned_by,
                "agent_id": agent_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = d.pop("id")

        object_ = d.pop("object")

        created = d.pop("created")

        owned_by = d.pop("owned_by")

        agent_id = d.pop("agent_id")

        model_view = cls(
            id=id,
            object_=object_,
            created=created,
            owned_by=owned_by,
            agent_id=agent_id,
        )

        model_view.additional_properties = d
        return model_view

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
