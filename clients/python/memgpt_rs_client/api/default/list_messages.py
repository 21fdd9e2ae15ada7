import datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.page_view import PageView
from ...types import UNSET, Response, Unset


def _get_kwargs(
    agent_id: str,
    *,
    page: int | Unset = 0,
    size: int | Unset = UNSET,
    start: datetime.datetime | Unset = UNSET,
    end: datetime.datetime | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["page"] = page

    params["size"] = size

    json_start: str | Unset = UNSET
    if not isinstance(start, Unset):
        json_start = start.isoformat()
    params["start"] = json_start

    json_end: str | Unset = UNSET
    if not isinstance(end, Unset):
        json_end = end.isoformat()
    params["end"] = json_end

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/agents/{agent_id}/messages".format(
            agent_id=quote(str(agent_id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ErrorBody | PageView | None:
    if response.status_code == 200:
        response_200 = PageView.from_dict(response.json())

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
) -> Response[ErrorBody | PageView]:
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
    page: int | Unset = 0,
    size: int | Unset = UNSET,
    start: datetime.datetime | Unset = UNSET,
    end: datetime.datetime | Unset = UNSET,
) -> Response[ErrorBody | PageView]:
    """
    Args:
        agent_id (str): The agent's id.
        page (int | Unset): The page, from 0 (default 0). Default: 0.
        size (int | Unset): Results per page, 1-1000 (default 50).
        start (datetime.datetime | Unset): Only messages created at or after this time (RFC 3339).
        end (datetime.datetime | Unset): Only messages created before this time (RFC 3339).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | PageView]
    """

    kwargs = _get_kwargs(
        agent_id=agent_id,
        page=page,
        size=size,
        start=start,
        end=end,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    agent_id: str,
    *,
    client: AuthenticatedClient | Client,
    page: int | Unset = 0,
    size: int | Unset = UNSET,
    start: datetime.datetime | Unset = UNSET,
    end: datetime.datetime | Unset = UNSET,
) -> ErrorBody | PageView | None:
    """
    Args:
        agent_id (str): The agent's id.
        page (int | Unset): The page, from 0 (default 0). Default: 0.
        size (int | Unset): Results per page, 1-1000 (default 50).
        start (datetime.datetime | Unset): Only messages created at or after this time (RFC 3339).
        end (datetime.datetime | Unset): Only messages created before this time (RFC 3339).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | PageView
    """

    return sync_detailed(
        agent_id=agent_id,
        client=client,
        page=page,
        size=size,
        start=start,
        end=end,
    ).parsed


async def asyncio_detailed(
    agent_id: str,
    *,
    client: AuthenticatedClient | Client,
    page: int | Unset = 0,
    size: int | Unset = UNSET,
    start: datetime.datetime | Unset = UNSET,
    end: datetime.datetime | Unset = UNSET,
) -> Response[ErrorBody | PageView]:
    """
    Args:
        agent_id (str): The agent's id.
        page (int | Unset): The page, from 0 (default 0). Default: 0.
        size (int | Unset): Results per page, 1-1000 (default 50).
        start (datetime.datetime | Unset): Only messages created at or after this time (RFC 3339).
        end (datetime.datetime | Unset): Only messages created before this time (RFC 3339).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | PageView]
    """

    kwargs = _get_kwargs(
        agent_id=agent_id,
        page=page,
        size=size,
        start=start,
        end=end,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    agent_id: str,
    *,
    client: AuthenticatedClient | Client,
    page: int | Unset = 0,
    size: int | Unset = UNSET,
    start: datetime.datetime | Unset = UNSET,
    end: datetime.datetime | Unset = UNSET,
) -> ErrorBody | PageView | None:
    """
    Args:
        agent_id (str): The agent's id.
        page (int | Unset): The page, from 0 (default 0). Default: 0.
        size (int | Unset): Results per page, 1-1000 (default 50).
        start (datetime.datetime | Unset): Only messages created at or after this time (RFC 3339).
        end (datetime.datetime | Unset): Only messages created before this time (RFC 3339).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | PageView
    """

    return (
        await asyncio_detailed(
            agent_id=agent_id,
            client=client,
            page=page,
            size=size,
            start=start,
            end=end,
        )
    ).parsed
