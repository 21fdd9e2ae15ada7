from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.agent_file import AgentFile
from ...models.error_body import ErrorBody
from ...models.imported import Imported
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: AgentFile,
    name: str | Unset = UNSET,
    agent: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    params: dict[str, Any] = {}

    params["name"] = name

    params["agent"] = agent

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/agents/import",
        "params": params,
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ErrorBody | Imported | None:
    if response.status_code == 201:
        response_201 = Imported.from_dict(response.json())

        return response_201

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
) -> Response[ErrorBody | Imported]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: AgentFile,
    name: str | Unset = UNSET,
    agent: str | Unset = UNSET,
) -> Response[ErrorBody | Imported]:
    """
    Args:
        name (str | Unset): The new agent's name (default: the file's). With several agents it
            names the first;
            the others are called `NAME-THEIR_NAME`.
        agent (str | Unset): Import only this agent of a file with several (its file id,
            `agent-1`, or its name).
        body (AgentFile): A Letta agent file (schema v2; see Letta's `AgentFileSchema`). Its ids
            must resolve: each agent's `block_ids`, `tool_ids` and `in_context_message_ids` name
            entries of the file. (A JSON string holding the document, as some published files are, is
            read too.)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | Imported]
    """

    kwargs = _get_kwargs(
        body=body,
        name=name,
        agent=agent,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    body: AgentFile,
    name: str | Unset = UNSET,
    agent: str | Unset = UNSET,
) -> ErrorBody | Imported | None:
    """
    Args:
        name (str | Unset): The new agent's name (default: the file's). With several agents it
            names the first;
            the others are called `NAME-THEIR_NAME`.
        agent (str | Unset): Import only this agent of a file with several (its file id,
            `agent-1`, or its name).
        body (AgentFile): A Letta agent file (schema v2; see Letta's `AgentFileSchema`). Its ids
            must resolve: each agent's `block_ids`, `tool_ids` and `in_context_message_ids` name
            entries of the file. (A JSON string holding the document, as some published files are, is
            read too.)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | Imported
    """

    return sync_detailed(
        client=client,
        body=body,
        name=name,
        agent=agent,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: AgentFile,
    name: str | Unset = UNSET,
    agent: str | Unset = UNSET,
) -> Response[ErrorBody | Imported]:
    """
    Args:
        name (str | Unset): The new agent's name (default: the file's). With several agents it
            names the first;
            the others are called `NAME-THEIR_NAME`.
        agent (str | Unset): Import only this agent of a file with several (its file id,
            `agent-1`, or its name).
        body (AgentFile): A Letta agent file (schema v2; see Letta's `AgentFileSchema`). Its ids
            must resolve: each agent's `block_ids`, `tool_ids` and `in_context_message_ids` name
            entries of the file. (A JSON string holding the document, as some published files are, is
            read too.)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | Imported]
    """

    kwargs = _get_kwargs(
        body=body,
        name=name,
        agent=agent,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: AgentFile,
    name: str | Unset = UNSET,
    agent: str | Unset = UNSET,
) -> ErrorBody | Imported | None:
    """
    Args:
        name (str | Unset): The new agent's name (default: the file's). With several agents it
            names the first;
            the others are called `NAME-THEIR_NAME`.
        agent (str | Unset): Import only this agent of a file with several (its file id,
            `agent-1`, or its name).
        body (AgentFile): A Letta agent file (schema v2; see Letta's `AgentFileSchema`). Its ids
            must resolve: each agent's `block_ids`, `tool_ids` and `in_context_message_ids` name
            entries of the file. (A JSON string holding the document, as some published files are, is
            read too.)

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | Imported
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            name=name,
            agent=agent,
        )
    ).parsed
