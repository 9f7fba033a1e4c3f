"""`http_request` and `http_stream`: httpx requests that a signal stops at the network layer.

The one module that imports httpx (the ``http`` extra); ``toolseam.capabilities`` imports it
only when one of these names is first used.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, final

import anyio
import httpx

from .._signals import AbortSignal
from ._abort import raise_abort, run_unless_aborted

if TYPE_CHECKING:
    from httpx._client import UseClientDefault
    from httpx._types import (
        AuthTypes,
        CookieTypes,
        HeaderTypes,
        QueryParamTypes,
        RequestContent,
        RequestData,
        RequestExtensions,
        RequestFiles,
        TimeoutTypes,
    )

__all__ = ["http_request", "http_stream"]


async def http_request(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL | str,
    *,
    signal: AbortSignal,
    content: RequestContent | None = None,
    data: RequestData | None = None,
    files: RequestFiles | None = None,
    json: Any | None = None,
    params: QueryParamTypes | None = None,
    headers: HeaderTypes | None = None,
    cookies: CookieTypes | None = None,
    auth: AuthTypes | UseClientDefault | None = httpx.USE_CLIENT_DEFAULT,
    follow_redirects: bool | UseClientDefault = httpx.USE_CLIENT_DEFAULT,
    # httpx's network timeouts, passed through; the call's deadline is the signal's.
    timeout: TimeoutTypes | UseClientDefault = httpx.USE_CLIENT_DEFAULT,  # noqa: ASYNC109
    extensions: RequestExtensions | None = None,
) -> httpx.Response:
    """Send a request and read its whole response body; an abort of ``signal`` stops it.

    ``client.request(method, url, ...)`` with a required signal: every option is httpx's
    own. When ``signal`` aborts while the request is sent, or while the response is read,
    the operation in flight is cancelled at the network layer — httpx closes the
    connection, so the server sees the disconnect — and, once the connection is released,
    this raises the signal's abort (as ``signal.raise_if_aborted()`` does), so a tool body
    that lets it propagate ends ``ABORTED``. A signal that has already aborted sends
    nothing. Host cancellation of the awaiting task closes the connection the same way and
    propagates unchanged.

    That the server sees the abort holds for HTTP/1.1, httpx's default. Over HTTP/2
    (``httpx.AsyncClient(http2=True)``) httpcore drops the cancelled stream and keeps the
    shared connection, without telling the server.

    Args:
        client: The client to send with (its pool, timeouts and settings apply).
        method: The HTTP method.
        url: The URL, or a path relative to the client's ``base_url``.
        signal: The call's signal, usually ``exec.signal``: required, there is no default.
        content: As for ``httpx.AsyncClient.request``.
        data: As for ``httpx.AsyncClient.request``.
        files: As for ``httpx.AsyncClient.request``.
        json: As for ``httpx.AsyncClient.request``.
        params: As for ``httpx.AsyncClient.request``.
        headers: As for ``httpx.AsyncClient.request``.
        cookies: As for ``httpx.AsyncClient.request``.
        auth: As for ``httpx.AsyncClient.request``.
        follow_redirects: As for ``httpx.AsyncClient.request``.
        timeout: As for ``httpx.AsyncClient.request``: the network timeouts, not the call's
            deadline (that aborts the signal, contract §7).
        extensions: As for ``httpx.AsyncClient.request``.

    Returns:
        The response, its body read (``response.content``), its connection released.

    Raises:
        Exception: The signal's abort (its reason, or `toolseam.AbortError`).
        httpx.HTTPError: What httpx raises (a timeout, a connection error, ...). A status
            of 4xx or 5xx is a response, not an error: see ``response.raise_for_status()``.
    """
    async with http_stream(
        client,
        method,
        url,
        signal=signal,
        content=content,
        data=data,
        files=files,
        json=json,
        params=params,
        headers=headers,
        cookies=cookies,
        auth=auth,
        follow_redirects=follow_redirects,
        timeout=timeout,
        extensions=extensions,
    ) as response:
        await response.aread()
    return response


@asynccontextmanager
async def http_stream(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL | str,
    *,
    signal: AbortSignal,
    content: RequestContent | None = None,
    data: RequestData | None = None,
    files: RequestFiles | None = None,
    json: Any | None = None,
    params: QueryParamTypes | None = None,
    headers: HeaderTypes | None = None,
    cookies: CookieTypes | None = None,
    auth: AuthTypes | UseClientDefault | None = httpx.USE_CLIENT_DEFAULT,
    follow_redirects: bool | UseClientDefault = httpx.USE_CLIENT_DEFAULT,
    # httpx's network timeouts, passed through; the call's deadline is the signal's.
    timeout: TimeoutTypes | UseClientDefault = httpx.USE_CLIENT_DEFAULT,  # noqa: ASYNC109
    extensions: RequestExtensions | None = None,
) -> AsyncGenerator[httpx.Response]:
    """Send a request and stream its response: ``client.stream(...)`` with a required signal.

    ``async with http_stream(client, "GET", url, signal=exec.signal) as response:`` gives
    the response once its headers have arrived; read the body with httpx's own methods
    (``response.aiter_bytes()``, ``aiter_lines()``, ``aread()``, ...). An abort of
    ``signal`` cancels the network operation in flight — sending the request, or reading
    one chunk of the body — closes the connection and raises the signal's abort from that
    ``await``. Only the network reads are cancelled, never the code of the block between
    them: what the block does with each chunk runs to its end, and the next read raises.
    Leaving the block closes the response (shielded), so its connection is released when
    the block has been left, however it was left. HTTP/2: see `http_request`.

    Args:
        client: The client to send with (its pool, timeouts and settings apply).
        method: The HTTP method.
        url: The URL, or a path relative to the client's ``base_url``.
        signal: The call's signal, usually ``exec.signal``: required, there is no default.
        content: As for ``httpx.AsyncClient.stream``.
        data: As for ``httpx.AsyncClient.stream``.
        files: As for ``httpx.AsyncClient.stream``.
        json: As for ``httpx.AsyncClient.stream``.
        params: As for ``httpx.AsyncClient.stream``.
        headers: As for ``httpx.AsyncClient.stream``.
        cookies: As for ``httpx.AsyncClient.stream``.
        auth: As for ``httpx.AsyncClient.stream``.
        follow_redirects: As for ``httpx.AsyncClient.stream``.
        timeout: As for ``httpx.AsyncClient.stream``.
        extensions: As for ``httpx.AsyncClient.stream``.

    Yields:
        The response, with its body not yet read.

    Raises:
        Exception: The signal's abort (its reason, or `toolseam.AbortError`), from entering
            the block or from a read of the body.
        httpx.HTTPError: What httpx raises.
    """
    request = client.build_request(
        method,
        url,
        content=content,
        data=data,
        files=files,
        json=json,
        params=params,
        headers=headers,
        cookies=cookies,
        timeout=timeout,
        extensions=extensions,
    )
    sent = await run_unless_aborted(
        signal,
        partial(client.send, request, stream=True, auth=auth, follow_redirects=follow_redirects),
    )
    if sent is None:
        raise_abort(signal)
    [response] = sent
    try:
        body = response.stream
        assert isinstance(body, httpx.AsyncByteStream)  # an AsyncClient's response
        response.stream = _AbortableStream(body, signal)
        yield response
    finally:
        with anyio.CancelScope(shield=True):
            await response.aclose()


@final
class _AbortableStream(httpx.AsyncByteStream):
    """A response body whose every network read an abort of the signal cancels."""

    def __init__(self, body: httpx.AsyncByteStream, signal: AbortSignal) -> None:
        self._body = body
        self._signal = signal

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = aiter(self._body)
        while True:
            read = await run_unless_aborted(self._signal, partial(_next_chunk, chunks))
            if read is None:
                # The cancelled read has closed its connection on its way out (httpcore,
                # shielded); closing the body as well releases it from the pool.
                with anyio.CancelScope(shield=True):
                    await self._body.aclose()
                raise_abort(self._signal)
            [chunk] = read
            if chunk is None:
                return
            yield chunk

    async def aclose(self) -> None:
        await self._body.aclose()


async def _next_chunk(chunks: AsyncIterator[bytes]) -> bytes | None:
    try:
        return await anext(chunks)
    except StopAsyncIteration:
        return None
