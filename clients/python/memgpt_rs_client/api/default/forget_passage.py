from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.forget_passage import ForgetPassage
from ...types import Response


def _get_kwargs(
    agent_id: str,
    passage_id: str,
    *,
    body: ForgetPassage,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/agents/{agent_id}/archival/{passage_id}/forget".format(
            agent_id=quote(str(agent_id), safe=""),
            passage_id=quote(str(passage_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Any | ErrorBody | None:
    if response.status_code == 204:
        response_204 = cast(Any, None)
        return response_204

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Any | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    agent_id: str,
    passage_id: str,
    *,
    client: AuthenticatedClient | Client,
    body: ForgetPassage,
) -> Response[Any | ErrorBody]:
    """
    Args:
        agent_id (str): The agent.
        passage_id (str): The passage.
        body (ForgetPassage): Why a fact is retired.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody]
    """

    kwargs = _get_kwargs(
        agent_id=agent_id,
        passage_id=passage_id,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    agent_id: str,
    passage_id: str,
    *,
    client: AuthenticatedClient | Client,
    body: ForgetPassage,
) -> Any | ErrorBody | None:
    """
    Args:
        agent_id (str): The agent.
        passage_id (str): The passage.
        body (ForgetPassage): Why a fact is retired.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody
    """

    return sync_detailed(
        agent_id=agent_id,
        passage_id=passage_id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    agent_id: str,
    passage_id: str,
    *,
    client: AuthenticatedClient | Client,
    body: ForgetPassage,
) -> Response[Any | ErrorBody]:
    """
    Args:
        agent_id (str): The agent.
        passage_id (str): The passage.
        body (ForgetPassage): Why a fact is retired.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody]
    """

    kwargs = _get_kwargs(
        agent_id=agent_id,
        passage_id=passage_id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    agent_id: str,
    passage_id: str,
    *,
    client: AuthenticatedClient | Client,
    body: ForgetPassage,
) -> Any | ErrorBody | None:
    """
    Args:
        agent_id (str): The agent.
        passage_id (str): The passage.
        body (ForgetPassage): Why a fact is retired.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody
    """

    return (
        await asyncio_detailed(
            agent_id=agent_id,
            passage_id=passage_id,
            client=client,
            body=body,
        )
    ).parsed
