"""Every connection `serve_http` accepts has ``TCP_NODELAY`` set (issue 36: the 44 ms stall).

Without it, Nagle's algorithm holds a small response back until the client's delayed ACK,
on every call of a kept-alive connection. The tests look at the server's side of each
accepted connection itself: the server runs in this process, so its accepted sockets are
file descriptors of this process, found by their local address (the server's port) and read
with ``getsockopt``. The gateway is served by the same `serve_http`; its test also reads the
upstream's side of the gateway's own connection to it (hop 2).

asyncio only: `serve_http` runs on uvicorn, which is asyncio code (a test of
``tests/test_mcp_http.py`` checks it refuses trio).
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import stat
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import anyio
import anyio.abc
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from mcp_fixtures.support import GUARD, echo_registry
from toolseam import ToolRegistry
from toolseam.mcp import mount_upstreams, serve_http
from toolseam.mcp._http import _listen  # pyright: ignore[reportPrivateUsage]

pytestmark = [
    pytest.mark.parametrize("anyio_backend", ["asyncio"]),  # uvicorn is asyncio code
    pytest.mark.skipif(not hasattr(socket, "TCP_NODELAY"), reason="no TCP_NODELAY here"),
]


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


def accepted_nodelay(port: int) -> list[bool]:
    """``TCP_NODELAY`` of every connection accepted on 127.0.0.1:``port`` by this process.

    Walks this process's file descriptors; a socket whose local address is the server's and
    that has a peer is a connection the server accepted (the listener has no peer; a client
    socket of this process has another local port).
    """
    found: list[bool] = []
    for fd in _descriptors():
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        with sock:
            if sock.family != socket.AF_INET or sock.type != socket.SOCK_STREAM:
                continue
            try:
                local, _peer = sock.getsockname(), sock.getpeername()
            except OSError:  # a listener, or a connection already shut down
                continue
            if local[1] == port:
                found.append(bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)))
    return found


def _descriptors() -> list[int]:
    with contextlib.suppress(OSError):
        return [int(name) for name in os.listdir("/proc/self/fd")]
    return list(range(3, 1024))


@asynccontextmanager
async def serving(registry: ToolRegistry) -> AsyncGenerator[str]:
    async with anyio.create_task_group() as tg:
        url: str = await tg.start(
            functools.partial(serve_http, registry, port=0, handle_signals=False)
        )
        yield url
        tg.cancel_scope.cancel()


@asynccontextmanager
async def session(url: str) -> AsyncGenerator[ClientSession]:
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s


async def test_the_listening_socket_says_tcp() -> None:
    """asyncio sets TCP_NODELAY on accepted sockets only when the listener's proto is TCP."""
    with _listen("127.0.0.1", 0) as sock:
        assert sock.proto == socket.IPPROTO_TCP
        assert sock.type == socket.SOCK_STREAM


async def test_every_accepted_connection_has_tcp_nodelay() -> None:
    with anyio.fail_after(GUARD):
        async with serving(echo_registry()) as url, session(url) as s, session(url) as t:
            assert (await s.call_tool("echo", {"text": "a"})).is_error is False
            assert (await t.call_tool("echo", {"text": "b"})).is_error is False
            # Both clients' kept-alive connections, each seen from the server's side.
            seen = accepted_nodelay(_port(url))
    assert len(seen) >= 2
    assert all(seen), seen


async def test_the_gateway_and_its_upstream_accept_with_tcp_nodelay() -> None:
    with anyio.fail_after(GUARD):
        async with serving(echo_registry()) as upstream_url:
            gateway = ToolRegistry()
            async with mount_upstreams(gateway, {"up": upstream_url}) as mounted:
                assert mounted == {"up": ["up_echo"]}
                async with serving(gateway) as url, session(url) as s:
                    answer = await s.call_tool("up_echo", {"text": "through"})
                    at_gateway = accepted_nodelay(_port(url))
                    at_upstream = accepted_nodelay(_port(upstream_url))  # hop 2
    assert answer.is_error is False
    assert at_gateway
    assert all(at_gateway), at_gateway
    assert at_upstream
    assert all(at_upstream), at_upstream
