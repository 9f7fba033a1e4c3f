"""The gateway's HTTP connections send a request's head and body in one write.

``httpcore2`` writes an HTTP/1.1 request in two writes (head, then body); the gateway's
``httpx2`` client (``_lean.coalesce_writes``) holds the head back and sends it with the
body: the same bytes in the same order, in one write. These tests record what reaches the
network stream under the coalescing one (`_CoalescingStream`), alone and under a real
``httpx2`` client talking to a small HTTP server in this process.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from functools import partial
from typing import Any

import anyio
import httpcore2
import httpx2
import pytest
from anyio.abc import SocketStream

from mcp_fixtures.support import GUARD
from toolseam.mcp._gateway import _with_headers  # pyright: ignore[reportPrivateUsage]
from toolseam.mcp._lean import (
    _CoalescingBackend,  # pyright: ignore[reportPrivateUsage]
    _CoalescingStream,  # pyright: ignore[reportPrivateUsage]
    coalesce_writes,
)


class _Recorded(httpcore2.AsyncNetworkStream):
    """A network stream that records its writes and answers reads from a script."""

    def __init__(self, answers: Iterable[bytes] = (), *, fail_writes: bool = False) -> None:
        self.writes: list[bytes] = []
        self.events: list[str] = []
        self._answers = list(answers)
        self._fail_writes = fail_writes

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        self.events.append("read")
        return self._answers.pop(0) if self._answers else b""

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        self.events.append("write")
        if self._fail_writes:
            raise httpcore2.WriteError("the server stopped reading")
        self.writes.append(buffer)

    async def aclose(self) -> None:
        self.events.append("close")

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> httpcore2.AsyncNetworkStream:
        self.events.append("tls")
        return _Recorded()

    def get_extra_info(self, info: str) -> Any:
        return f"info:{info}"


async def test_a_short_write_goes_out_with_the_next_one_or_before_a_read(
    anyio_backend: str,
) -> None:
    inner = _Recorded([b"HTTP/1.1 200 OK\r\n"])
    stream = _CoalescingStream(inner)
    await stream.write(b"POST / HTTP/1.1\r\n\r\n")
    await stream.write(b"")  # h11's end of a sized body: nothing to send
    assert inner.writes == []
    await stream.write(b'{"id":1}')
    assert inner.writes == [b'POST / HTTP/1.1\r\n\r\n{"id":1}']
    await stream.write(b"GET / HTTP/1.1\r\n\r\n")  # a request without a body
    assert await stream.read(100) == b"HTTP/1.1 200 OK\r\n"
    assert inner.writes[1:] == [b"GET / HTTP/1.1\r\n\r\n"]
    assert inner.events == ["write", "write", "read"]
    assert stream.get_extra_info("is_readable") == "info:is_readable"


async def test_a_long_write_is_not_held_and_a_close_drops_a_held_one(anyio_backend: str) -> None:
    inner = _Recorded()
    stream = _CoalescingStream(inner)
    long = b"x" * (64 * 1024)
    await stream.write(long)
    assert inner.writes == [long]
    await stream.write(b"POST / HTTP/1.1\r\n\r\n")  # abandoned before its body
    await stream.aclose()
    assert inner.writes == [long]
    assert inner.events == ["write", "close"]


async def test_a_held_write_that_fails_is_ignored_by_the_read(anyio_backend: str) -> None:
    # As httpcore2 does when a request write fails: it reads the server's answer anyway.
    inner = _Recorded([b"HTTP/1.1 413 Too Large\r\n"], fail_writes=True)
    stream = _CoalescingStream(inner)
    await stream.write(b"POST / HTTP/1.1\r\n\r\n")
    assert await stream.read(100) == b"HTTP/1.1 413 Too Large\r\n"
    assert inner.events == ["write", "read"]


async def test_tls_starts_after_a_held_write_and_coalesces_too(anyio_backend: str) -> None:
    inner = _Recorded()
    stream = _CoalescingStream(inner)
    await stream.write(b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")
    secure = await stream.start_tls(ssl.create_default_context(), "example.com")
    assert inner.writes == [b"CONNECT example.com:443 HTTP/1.1\r\n\r\n"]
    assert inner.events == ["write", "tls"]
    assert isinstance(secure, _CoalescingStream)


class _RecordingBackend(httpcore2.AsyncNetworkBackend):
    """The default backend, recording every write of its connections."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self._backend = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        stream = await self._backend.connect_tcp(
            host, port, timeout, local_address, socket_options=socket_options
        )
        return _Tap(stream, self.writes)

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


class _Tap(httpcore2.AsyncNetworkStream):
    def __init__(self, stream: httpcore2.AsyncNetworkStream, writes: list[bytes]) -> None:
        self._stream = stream
        self._writes = writes

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        return await self._stream.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        self._writes.append(buffer)
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


async def _answer_each(bodies: list[bytes], stream: SocketStream) -> None:
    """Answer HTTP/1.1 POSTs (sized bodies) with 200 ``ok``, recording each body."""
    buffer = b""
    async with stream:
        while True:
            while b"\r\n\r\n" not in buffer:
                try:
                    buffer += await stream.receive()
                except anyio.EndOfStream:
                    return
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            while len(buffer) < length:
                buffer += await stream.receive()
            bodies.append(buffer[:length])
            buffer = buffer[length:]
            await stream.send(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")


def _pool(http: httpx2.AsyncClient) -> Any:
    pool: Any = getattr(getattr(http, "_transport", None), "_pool", None)
    assert isinstance(pool, httpcore2.AsyncConnectionPool)
    return pool


async def test_an_httpx2_post_is_one_write_on_the_wire(anyio_backend: str) -> None:
    bodies: list[bytes] = []
    recording = _RecordingBackend()
    with anyio.fail_after(GUARD):
        async with (
            await anyio.create_tcp_listener(local_host="127.0.0.1") as listener,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(listener.serve, partial(_answer_each, bodies))
            port = listener.extra(anyio.abc.SocketAttribute.local_port)
            async with httpx2.AsyncClient() as http:
                _pool(http)._network_backend = recording
                assert coalesce_writes(http)
                assert not coalesce_writes(http)  # once is enough
                url = f"http://127.0.0.1:{port}/mcp"
                for text in (b'{"a":1}', b'{"b":2}'):
                    response = await http.post(url, content=text)
                    assert (response.status_code, response.content) == (200, b"ok")
            tg.cancel_scope.cancel()
    assert bodies == [b'{"a":1}', b'{"b":2}']
    assert len(recording.writes) == 2  # one a request, over one kept-alive connection
    for write, body in zip(recording.writes, bodies, strict=True):
        assert write.startswith(b"POST /mcp HTTP/1.1\r\n")
        assert write.endswith(b"\r\n\r\n" + body)


async def test_the_gateway_client_coalesces(anyio_backend: str) -> None:
    kept: list[httpx2.AsyncClient | None] = []
    with anyio.fail_after(GUARD):
        async with _with_headers("http://127.0.0.1:9/mcp", {}, keep=kept.append):
            pass
    http = kept[0]
    assert http is not None
    assert isinstance(_pool(http)._network_backend, _CoalescingBackend)


def test_an_unknown_transport_is_left_alone() -> None:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(lambda request: httpx2.Response(200)))
    assert not coalesce_writes(http)


pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(core)?x?2\.:ResourceWarning",
)
