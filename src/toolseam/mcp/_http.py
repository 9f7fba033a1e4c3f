"""Serve a `ToolRegistry` over MCP's streamable HTTP transport: `serve_http`.

The mode is chosen for cancellation (contract §13). The SDK's session manager runs
*stateful* (a ``notifications/cancelled`` arrives as its own POST; only a session routes it
to the running request, where stateless mode would hand it to a fresh, empty server) and
answers with *SSE streams* (in JSON-response mode nothing listens to a request's stream
while its handler runs, so a client that closes it is never noticed). Then:

- a 2025-era client's ``notifications/cancelled`` cancels the handler (see ``_server``);
- a 2026-era client cancels by closing the request's stream: the SDK cancels the handler;
- a client that goes away mid-call: every request's ASGI ``receive`` is watched for
  ``http.disconnect``, which sets the `ClientGone` the handler finds in the request's
  scope (``DISCONNECTED_SCOPE_KEY``) and aborts the call. The 2025-era SDK keeps a session's
  calls running when their stream drops (a client may resume it), but without an event
  store nothing can resume it, so the result could never be delivered.

Each of them aborts the call's signal; the body is awaited before the request settles.

Shutdown (SIGINT, SIGTERM, or cancelling the task that serves): new requests are refused
(503), running calls are aborted and awaited, their answers (the ``ABORTED`` results) are
sent, then uvicorn stops listening, the sessions are closed (which ends their GET
streams), and uvicorn finishes once its connections have closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import socket
import threading
from collections.abc import Generator
from typing import Final, cast, final

import anyio
import anyio.lowlevel
import uvicorn
from anyio.abc import TaskStatus
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from .._registry import ToolRegistry
from ._server import DISCONNECTED_SCOPE_KEY, ClientGone, RunningCalls, serve_registry

__all__ = ["MCP_PATH", "serve_http"]

logger = logging.getLogger("toolseam")

MCP_PATH: Final = "/mcp"
"""The path the streamable HTTP endpoint is served at."""

_LOOPBACK: Final = ("127.0.0.1", "localhost", "::1")
_SHUTDOWN: Final = "the MCP server is shutting down"


def _security(host: str) -> TransportSecuritySettings | None:
    """DNS-rebinding protection on loopback, as the SDK's own ``streamable_http_app`` does."""
    if host not in _LOOPBACK:
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port`` 0 picks a free one).

    Made with ``proto=IPPROTO_TCP``: asyncio sets ``TCP_NODELAY`` only on the accepted
    sockets of a listener whose ``proto`` says TCP, and ``socket.create_server`` leaves it 0.
    Without it, Nagle's algorithm holds each small response back until the client's delayed
    ACK (about 40 ms on Linux), on every call of a kept-alive connection. `_no_delay` sets the
    option on each accepted connection as well, whoever made the listener.
    """
    family, _, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, socket.SOCK_STREAM, proto or socket.IPPROTO_TCP)
    try:
        # As socket.create_server does: reuse a TIME_WAIT address (POSIX), IPv6 only on v6.
        if os.name == "posix":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            sock.bind(address)
        except OSError as error:
            message = f"{error.strerror} (while attempting to bind on address {address!r})"
            raise OSError(error.errno, message) from None
        sock.listen()
    except BaseException:
        sock.close()
        raise
    return sock


def _set_nodelay(transport: asyncio.BaseTransport) -> None:
    """Turn Nagle's algorithm off on an accepted TCP connection (best effort)."""
    sock: socket.socket | None = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _no_delay(base: type[asyncio.Protocol]) -> type[asyncio.Protocol]:
    """A uvicorn HTTP protocol class that sets ``TCP_NODELAY`` on every connection it accepts."""

    def connection_made(self: asyncio.Protocol, transport: asyncio.BaseTransport) -> None:
        _set_nodelay(transport)
        base.connection_made(self, transport)

    return cast(
        "type[asyncio.Protocol]",
        type(f"NoDelay{base.__name__}", (base,), {"connection_made": connection_made}),
    )


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{MCP_PATH}"


@final
class _Endpoint:
    """The ASGI app at `MCP_PATH`: the SDK's session manager, with disconnects watched.

    It also counts the POSTs in progress: a POST ends once its response is sent (for a
    ``tools/call``, once its SSE stream carried the result), so at shutdown `wait_answered`
    lets the aborted calls' answers reach their clients before the sessions close.
    """

    __slots__ = ("_answered", "_manager", "_posts", "closing")

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self._manager = manager
        self._posts = 0
        self._answered: anyio.Event | None = None
        self.closing = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.closing:
            error = {"code": -32000, "message": "the MCP server is shutting down"}
            body = {"jsonrpc": "2.0", "id": None, "error": error}
            await JSONResponse(body, status_code=503)(scope, receive, send)
            return
        disconnected = ClientGone()

        async def watched() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected.set()
            return message

        scope = {**scope, DISCONNECTED_SCOPE_KEY: disconnected}
        post = scope.get("method") == "POST"
        self._posts += post
        try:
            await self._manager.handle_request(scope, watched, send)
        finally:
            self._posts -= post
            if not self._posts and self._answered is not None:
                self._answered.set()

    async def wait_answered(self) -> None:
        """Return once no POST is in progress."""
        await anyio.lowlevel.checkpoint()
        while self._posts:
            self._answered = anyio.Event()
            await self._answered.wait()


class _Uvicorn(uvicorn.Server):
    """uvicorn's server without its signal handling: `serve_http` handles the signals.

    uvicorn re-raises a captured signal once it has shut down, which would end the process
    by SIGTERM (or KeyboardInterrupt) instead of letting it exit normally.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None]:
        yield


async def _stop_requested(handle_signals: bool) -> None:
    """Return on the first SIGINT or SIGTERM (main thread only); otherwise wait forever."""
    if handle_signals and threading.current_thread() is threading.main_thread():
        try:
            receiver = anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)
        except NotImplementedError:  # pragma: no cover - asyncio on Windows
            pass
        else:
            with receiver as signals:
                async for signum in signals:
                    logger.info("MCP HTTP server: %s, shutting down", signal.Signals(signum).name)
                    return
    await anyio.sleep_forever()


async def serve_http(
    registry: ToolRegistry,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    name: str = "toolseam",
    version: str = "",
    handle_signals: bool = True,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve a registry over MCP's streamable HTTP transport at ``http://HOST:PORT/mcp``.

    Served by uvicorn, on asyncio only (uvicorn is asyncio code). Sessions are stateful
    and responses stream as SSE, the mode in which every way a client stops a call works:
    ``notifications/cancelled``, closing the request's stream (2026-era clients), or going
    away mid-call. Each aborts that call's signal; the body is awaited before the request
    settles. On a loopback host, Host and Origin headers are checked against DNS
    rebinding, as the SDK does.

    It serves until SIGINT or SIGTERM arrives (when ``handle_signals`` and running in the
    main thread) or until the task running it is cancelled. Then it shuts down cleanly:
    calls still running are aborted and awaited (their clients get ``ABORTED``), the
    sessions are closed and uvicorn stops; a signal makes it return normally, so a
    process can exit 0. A second signal during shutdown is not intercepted.

    Args:
        registry: The registry to serve (see `create_server`).
        host: The interface to listen on; loopback by default.
        port: The port to listen on; 0 picks a free one (see ``task_status``).
        name: The server name reported to clients.
        version: The server version reported to clients.
        handle_signals: Shut down on SIGINT and SIGTERM.
        task_status: With ``await task_group.start(serve_http, ...)``, receives the
            endpoint's URL once the server accepts connections.

    Raises:
        RuntimeError: Not running on asyncio.
        OSError: ``host:port`` cannot be listened on.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("serve_http runs on asyncio only (uvicorn serves it)") from None
    calls = RunningCalls()
    server = serve_registry(registry, calls, name=name, version=version, instructions=None)
    manager = StreamableHTTPSessionManager(
        app=server, json_response=False, stateless=False, security_settings=_security(host)
    )
    endpoint = _Endpoint(manager)
    app = Starlette(routes=[Route(MCP_PATH, endpoint=endpoint)])
    web = _Uvicorn(
        uvicorn.Config(
            app,
            http=_no_delay(AutoHTTPProtocol),
            lifespan="off",
            ws="none",
            log_config=None,
            access_log=False,
        )
    )
    stop = anyio.Event()

    async def run(sock: socket.socket, *, task_status: TaskStatus[None]) -> None:
        # Shielded as a whole, and stopped by `stop` only: cancelled from outside, the
        # sessions would drop their calls' answers, and uvicorn would leave its connection
        # tasks (which are not ours) running against a closed manager.
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as web_task:
                try:
                    async with manager.run():
                        web_task.start_soon(functools.partial(web.serve, sockets=[sock]))
                        task_status.started()
                        await stop.wait()
                        endpoint.closing = True
                        calls.close(_SHUTDOWN)
                        await calls.wait_idle()
                        await endpoint.wait_answered()
                    # Leaving the manager cancelled every session and closed its streams, so
                    # their GET streams ended and uvicorn's connections can close.
                finally:
                    web.should_exit = True

    with _listen(host, port) as sock:
        url = _url(sock)
        async with anyio.create_task_group() as tg:
            await tg.start(run, sock)
            task_status.started(url)
            logger.info("MCP HTTP server: serving %s", url)
            try:
                await _stop_requested(handle_signals)
            finally:
                stop.set()
