from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.agent_blocks import AgentBlocks
from ...models.error_body import ErrorBody
from ...types import Response


def _get_kwargs(
    agent_id: str,
    block_id: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "delete",
        "url": "/v1/agents/{agent_id}/blocks/{block_id}".format(
            agent_id=quote(str(agent_id), safe=""),
            block_id=quote(str(block_id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> AgentBlocks | ErrorBody | None:
    if response.status_code == 200:
        response_200 = AgentBlocks.from_dict(response.json())

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
) -> Response[AgentBlocks | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    agent_id: str,
    block_id: str,
    *,
    client: AuthenticatedClient | Client,
) -> Response[AgentBlocks | ErrorBody]:
    """
    Args:
        agent_id (str): The agent.
        block_id (str): The shared block.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AgentBlocks | ErrorBody]
    """

    kwargs = _get_kwargs(
        agent_id=agent_id,
        block_id=block_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    agent_id: str,
    block_id: str,
    *,
    client: AuthenticatedClient | Client,
) -> AgentBlocks | ErrorBody | None:
    """
    Args:
        agent_id (str): The agent.
        block_id (str): The shared block.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AgentBlocks | ErrorBody
    """

    return sync_detailed(
        agent_id=agent_id,
        block_id=block_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    agent_id: str,
    block_id: str,
    *,
    client: AuthenticatedClient | Client,
) -> Response[AgentBlocks | ErrorBody]:
    """
    Args:
        agent_id (str): The agent.
        block_id (str): The shared block.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AgentBlocks | ErrorBody]
    """

    kwargs = _get_kwargs(
        agent_id=agent_id,
        block_id=block_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    agent_id: str,
    block_id: str,
    *,
    client: AuthenticatedClient | Client,
) -> AgentBlocks | ErrorBody | None:
    """
    Args:
        agent_id (str): The agent.
        block_id (str): The shared block.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AgentBlocks | ErrorBody
    """

    return (
        await asyncio_detailed(
            agent_id=agent_id,
            block_id=block_id,
            client=client,
        )
    ).parsed
