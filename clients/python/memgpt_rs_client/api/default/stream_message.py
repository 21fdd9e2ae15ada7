from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.send_message import SendMessage
from ...models.stream_message_response_200_type_1 import StreamMessageResponse200Type1
from ...types import UNSET, Response, Unset


def _get_kwargs(
    agent_id: str,
    *,
    body: SendMessage,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/agents/{agent_id}/messages/stream".format(
            agent_id=quote(str(agent_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | str | StreamMessageResponse200Type1 | None:
    if response.status_code == 200:

        def _parse_response_200(data: object) -> str | StreamMessageResponse200Type1:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                response_200_type_1 = StreamMessageResponse200Type1.from_dict(data)

                return response_200_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(str | StreamMessageResponse200Type1, data)

        response_200 = _parse_response_200(response.text)

        return response_200

    if 400 <= response.status_code <= 499:
        response_4xx = ErrorBody.from_dict(response.json())

        return response_4xx

    if 500 <= response.status_code <= 599:
        response_5xx = ErrorBody.from_dict(response.json())

        return response_5xx

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | str | StreamMessageResponse200Type1]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    agent_id: str,
    *,
    client: AuthenticatedClient | Client,
    body: SendMessage,
    idempotency_key: str | Unset = UNSET,
) -> Response[ErrorBody | str | StreamMessageResponse200Type1]:
    """
    Args:
        agent_id (str): The agent's id.
        idempotency_key (str | Unset):
        body (SendMessage): An event to step the agent with.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | str | StreamMessageResponse200Type1]
    """

    kwargs = _get_kwargs(
        agent_id=agent_id,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    agent_id: str,
    *,
    client: AuthenticatedClient | Client,
    body: SendMessage,
    idempotency_key: str | Unset = UNSET,
) -> ErrorBody | str | StreamMessageResponse200Type1 | None:
    """
    Args:
        agent_id (str): The agent's id.
        idempotency_key (str | Unset):
        body (SendMessage): An event to step the agent with.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | str | StreamMessageResponse200Type1
    """

    return sync_detailed(
        agent_id=agent_id,
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    agent_id: str,
    *,
    client: AuthenticatedClient | Client,
    body: SendMessage,
    idempotency_key: str | Unset = UNSET,
) -> Response[ErrorBody | str | StreamMessageResponse200Type1]:
    """
    Args:
        agent_id (str): The agent's id.
        idempotency_key (str | Unset):
        body (SendMessage): An event to step the agent with.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | str | StreamMessageResponse200Type1]
    """

    kwargs = _get_kwargs(
        agent_id=agent_id,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    agent_id: str,
    *,
    client: AuthenticatedClient | Client,
    body: SendMessage,
    idempotency_key: str | Unset = UNSET,
) -> ErrorBody | str | StreamMessageResponse200Type1 | None:
    """
    Args:
        agent_id (str): The agent's id.
        idempotency_key (str | Unset):
        body (SendMessage): An event to step the agent with.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | str | StreamMessageResponse200Type1
    """

    return (
        await asyncio_detailed(
            agent_id=agent_id,
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
