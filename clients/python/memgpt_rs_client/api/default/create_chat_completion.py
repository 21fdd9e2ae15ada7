from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.completion import Completion
from ...models.completion_request import CompletionRequest
from ...models.error_body import ErrorBody
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: CompletionRequest,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/chat/completions",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Completion | ErrorBody | None:
    if response.status_code == 200:
        response_200 = Completion.from_dict(response.json())

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
) -> Response[Completion | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: CompletionRequest,
    idempotency_key: str | Unset = UNSET,
) -> Response[Completion | ErrorBody]:
    """
    Args:
        idempotency_key (str | Unset):
        body (CompletionRequest): A chat completion request as OpenAI clients send it (fields
            memgpt does not use, such as
            `temperature`, are accepted and ignored).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Completion | ErrorBody]
    """

    kwargs = _get_kwargs(
        body=body,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    body: CompletionRequest,
    idempotency_key: str | Unset = UNSET,
) -> Completion | ErrorBody | None:
    """
    Args:
        idempotency_key (str | Unset):
        body (CompletionRequest): A chat completion request as OpenAI clients send it (fields
            memgpt does not use, such as
            `temperature`, are accepted and ignored).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Completion | ErrorBody
    """

    return sync_detailed(
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: CompletionRequest,
    idempotency_key: str | Unset = UNSET,
) -> Response[Completion | ErrorBody]:
    """
    Args:
        idempotency_key (str | Unset):
        body (CompletionRequest): A chat completion request as OpenAI clients send it (fields
            memgpt does not use, such as
            `temperature`, are accepted and ignored).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Completion | ErrorBody]
    """

    kwargs = _get_kwargs(
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: CompletionRequest,
    idempotency_key: str | Unset = UNSET,
) -> Completion | ErrorBody | None:
    """
    Args:
        idempotency_key (str | Unset):
        body (CompletionRequest): A chat completion request as OpenAI clients send it (fields
            memgpt does not use, such as
            `temperature`, are accepted and ignored).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Completion | ErrorBody
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
