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
from collections.abc import Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, cast, final

import anyio
import anyio.lowlevel
import uvicorn
from anyio.abc import TaskStatus
from mcp import MCPError
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    AuthorizationContext,
    BearerAuthBackend,
    RequireAuthMiddleware,
    authorization_context,
)
from mcp.server.auth.provider import principal_components
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from .._registry import ToolRegistry
from ._auth import HttpAuth, HttpLimits
from ._rounds import INPUT_DEADLINE
from ._server import DISCONNECTED_SCOPE_KEY, ClientGone, RunningCalls, serve_registry
from ._tasks import MAX_TASKS, TASK_TTL, TaskSupport

if TYPE_CHECKING:
    from ..durable import DurableTools

__all__ = ["MCP_PATH", "serve_http", "serve_server_http"]

logger = logging.getLogger("toolseam")

MCP_PATH: Final = "/mcp"
"""The path the streamable HTTP endpoint is served at."""

_LOOPBACK: Final = ("127.0.0.1", "localhost", "::1")
_SHUTDOWN: Final = "the MCP server is shutting down"
_DEFAULT_LIMITS: Final = HttpLimits()

NO_AUTH_MESSAGE: Final = (
    "refusing to serve on {host} without authentication: anyone who can reach it could "
    "call every tool. Pass --auth-tokens FILE, or --auth-jwks PATH_OR_URL --auth-issuer ISS "
    "(serve_http(auth=HttpAuth(...))); or --insecure-no-auth (insecure_no_auth=True) to "
    "accept the risk"
)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names a loopback interface only."""
    return host in _LOOPBACK


@final
class _Gate:
    """The checks in front of the endpoint: ``Origin`` on every request, ``Host`` if asked.

    A request whose ``Origin`` is not allowed is refused (403) on every interface (the
    transport spec: servers MUST validate it); one without ``Origin`` (a non-browser
    client) is accepted. ``Host`` is checked against ``allow_hosts`` when given, and
    against the loopback names when serving on loopback (DNS-rebinding protection, as the
    SDK's own app does); a wrong one is refused (421).
    """

    __slots__ = ("_app", "_hosts", "_loopback", "_origins")

    def __init__(
        self, app: ASGIApp, *, loopback: bool, origins: Sequence[str], hosts: Sequence[str] | None
    ) -> None:
        self._app = app
        self._loopback = loopback
        self._origins = frozenset(origin.lower().rstrip("/") for origin in origins)
        self._hosts = None if hosts is None else frozenset(host.lower() for host in hosts)

    def _origin_ok(self, origin: str) -> bool:
        origin = origin.lower().rstrip("/")
        if origin in self._origins:
            return True
        if not self._loopback:
            return False
        scheme, sep, rest = origin.partition("://")
        return bool(sep) and scheme in ("http", "https") and _loopback_authority(rest)

    def _host_ok(self, host: str) -> bool:
        host = host.lower()
        if self._hosts is not None:
            return host in self._hosts or _strip_port(host) in self._hosts
        return not self._loopback or _loopback_authority(host)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin: str | None = None
        host: str | None = None
        for key, value in scope.get("headers", ()):
            if key == b"origin":
                origin = value.decode("latin-1")
            elif key == b"host":
                host = value.decode("latin-1")
        if origin is not None and not self._origin_ok(origin):
            await Response("Invalid Origin header", status_code=403)(scope, receive, send)
            return
        if not self._host_ok(host or ""):
            await Response("Invalid Host header", status_code=421)(scope, receive, send)
            return
        await self._app(scope, receive, send)


def _strip_port(authority: str) -> str:
    if authority.startswith("["):
        return authority[: authority.find("]") + 1]
    return authority.rpartition(":")[0] if ":" in authority else authority


def _loopback_authority(authority: str) -> bool:
    return _strip_port(authority) in ("127.0.0.1", "localhost", "[::1]")


async def _refuse(
    scope: Scope, receive: Receive, send: Send, status: int, message: str, code: int = -32600
) -> None:
    """Answer a JSON-RPC error body (no request id) with an HTTP status."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    await JSONResponse(body, status_code=status)(scope, receive, send)


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


_RESPONSE_HEAD: Final = b"HTTP/"


@final
class _Coalescing(asyncio.Transport):
    """An accepted connection's transport that sends a response's head with its body.

    uvicorn writes a response's status line and headers, then its body, each with its own
    ``write``; with ``TCP_NODELAY`` each is a send of its own: two segments, and two
    wake-ups and reads for the client (the gateway's upstream client among them), for
    every small response. Here a write that starts a response (``HTTP/``) is held until
    the next write, which is joined to it and sent at once (a small response's body
    follows in the same turn of the event loop), or until the next turn of the loop
    (``call_soon``: a streamed response's head does not wait for its first event). Every
    other write goes straight through; the bytes and their order are unchanged. What is
    held (one head at most) is sent before ``close`` and ``write_eof``, dropped by
    ``abort`` (as the transport drops its buffer) and once the connection is lost (as the
    transport drops later writes). The rest is the wrapped transport's.
    """

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + data)
        elif data[:5] == _RESPONSE_HEAD:
            self._held = bytes(data)  # the caller may reuse its buffer once `write` returns
            self._loop.call_soon(self._send)
        else:
            self._transport.write(data)

    def _send(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():
                self._transport.write(held)

    def close(self) -> None:
        self._send()
        self._transport.close()

    def write_eof(self) -> None:
        self._send()
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def get_write_buffer_size(self) -> int:
        held = 0 if self._held is None else len(self._held)
        return held + self._transport.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)


def _no_delay(base: type[asyncio.Protocol]) -> type[asyncio.Protocol]:
    """A uvicorn HTTP protocol class that sets ``TCP_NODELAY`` on every connection it accepts.

    It hands uvicorn the connection's transport wrapped in `_Coalescing`, so that a small
    response leaves in one send.
    """

    def connection_made(self: asyncio.Protocol, transport: asyncio.BaseTransport) -> None:
        _set_nodelay(transport)
        if isinstance(transport, asyncio.Transport):
            transport = _Coalescing(transport, asyncio.get_running_loop())
        base.connection_made(self, transport)

    return cast(
        "type[asyncio.Protocol]",
        type(f"NoDelay{base.__name__}", (base,), {"connection_made": connection_made}),
    )


def _url(sock: socket.socket, *, https: bool = False) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if https else 'http'}://{shown}:{port}{MCP_PATH}"


@final
class _Endpoint:
    """The ASGI app at `MCP_PATH`: the SDK's session manager, with disconnects watched.

    It also counts the POSTs in progress: a POST ends once its response is sent (for a
    ``tools/call``, once its SSE stream carried the result), so at shutdown `wait_answered`
    lets the aborted calls' answers reach their clients before the sessions close. And it
    caps the sessions one authenticated principal may open (``sessions_per_principal``).
    """

    __slots__ = ("_answered", "_manager", "_opening", "_posts", "_sessions_cap", "closing")

    def __init__(self, manager: StreamableHTTPSessionManager, sessions_per_principal: int) -> None:
        self._manager = manager
        self._posts = 0
        self._answered: anyio.Event | None = None
        self._opening: dict[tuple[str, str | None, str | None], int] = {}
        self._sessions_cap = sessions_per_principal
        self.closing = False

    def _sessions_of(self, owner: AuthorizationContext) -> int:
        # The SDK keeps who opened each live session (to refuse another principal's token
        # on it) in a private table; it has no public count.
        owners: Mapping[str, AuthorizationContext] = getattr(self._manager, "_session_owners", {})
        return sum(1 for other in owners.values() if other == owner)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.closing:
            await _refuse(scope, receive, send, 503, _SHUTDOWN, -32000)
            return
        post = scope.get("method") == "POST"
        opening: tuple[str, str | None, str | None] | None = None
        user: object = scope.get("user")
        if post and isinstance(user, AuthenticatedUser) and _opens_session(scope):
            owner = authorization_context(user)
            opening = (owner["client_id"], owner["issuer"], owner["subject"])
            held = self._sessions_of(owner) + self._opening.get(opening, 0)
            if held >= self._sessions_cap:
                message = (
                    f"too many open sessions for this principal (at most {self._sessions_cap})"
                )
                await _refuse(scope, receive, send, 429, message, -32000)
                return
            self._opening[opening] = self._opening.get(opening, 0) + 1
        disconnected = ClientGone()

        async def watched() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected.set()
            return message

        def opened() -> None:
            # The session, if one opened, is in the SDK's table once the answer starts.
            nonlocal opening
            if opening is not None:
                left = self._opening[opening] - 1
                if left:
                    self._opening[opening] = left
                else:
                    del self._opening[opening]
                opening = None

        async def answering(message: Message) -> None:
            if message["type"] == "http.response.start":
                opened()
            await send(message)

        scope = {**scope, DISCONNECTED_SCOPE_KEY: disconnected}
        self._posts += post
        try:
            await self._manager.handle_request(
                scope, watched, send if opening is None else answering
            )
        finally:
            opened()
            self._posts -= post
            if not self._posts and self._answered is not None:
                self._answered.set()

    async def wait_answered(self) -> None:
        """Return once no POST is in progress."""
        await anyio.lowlevel.checkpoint()
        while self._posts:
            self._answered = anyio.Event()
            await self._answered.wait()


def _opens_session(scope: Scope) -> bool:
    """Whether a POST would open a 2025-era session: no session id, a handshake revision.

    The revision is the *first* ``MCP-Protocol-Version`` header, as the SDK's session
    manager reads it: a later one must not hide a request that opens a session.
    """
    version: str | None = None
    for key, value in scope.get("headers", ()):
        if key == b"mcp-session-id":
            return False
        if key == b"mcp-protocol-version" and version is None:
            version = value.decode("latin-1")
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


def _calls_cap(limit: int) -> ServerMiddleware[Any]:
    """A server middleware capping the ``tools/call`` requests one principal has running.

    Over the cap, the call is refused with a JSON-RPC error before it reaches the
    registry (its body never runs). Unauthenticated requests are not counted.
    """
    running: dict[tuple[str, str | None, str | None], int] = {}

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        scope: object = getattr(ctx.request, "scope", None)
        user: object = (
            cast("Mapping[str, object]", scope).get("user") if isinstance(scope, Mapping) else None
        )
        if not isinstance(user, AuthenticatedUser):
            return await call_next(ctx)
        key = principal_components(user.access_token)
        count = running.get(key, 0)
        if count >= limit:
            raise MCPError(-32000, f"too many calls running for this principal (at most {limit})")
        running[key] = count + 1
        try:
            return await call_next(ctx)
        finally:
            left = running[key] - 1
            if left:
                running[key] = left
            else:
                del running[key]

    return middleware


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
    auth: HttpAuth | None = None,
    insecure_no_auth: bool = False,
    allow_origins: Sequence[str] = (),
    allow_hosts: Sequence[str] | None = None,
    certfile: str | os.PathLike[str] | None = None,
    keyfile: str | os.PathLike[str] | None = None,
    limits: HttpLimits = _DEFAULT_LIMITS,
    input_deadline: float = INPUT_DEADLINE,
    tasks: Mapping[str, TaskSupport] | None = None,
    max_tasks: int = MAX_TASKS,
    task_ttl: float = TASK_TTL,
    durable: DurableTools | None = None,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve a registry over MCP's streamable HTTP transport at ``http://HOST:PORT/mcp``.

    Served by uvicorn, on asyncio only (uvicorn is asyncio code). Sessions are stateful
    and responses stream as SSE, the mode in which every way a client stops a call works:
    ``notifications/cancelled``, closing the request's stream (2026-era clients), or going
    away mid-call. Each aborts that call's signal; the body is awaited before the request
    settles.

    Who may call: with ``auth`` it is an OAuth 2.1 resource server (the SDK's bearer
    middleware and RFC 9728 metadata at ``/.well-known/oauth-protected-resource/mcp``):
    a request without a valid ``Authorization: Bearer`` token gets 401 with
    ``WWW-Authenticate: Bearer ... resource_metadata=...``, one without the required
    scopes 403 ``insufficient_scope``; a token anywhere else (a query string) is ignored.
    A 2025-11-25 session serves only the principal that opened it. Every call carries the
    token's `toolseam.Principal` (``exec.principal``; never the token), and a principal
    sees and calls only the tools whose scopes it holds (contract §14). Off loopback,
    ``auth`` is required unless ``insecure_no_auth`` accepts the risk. ``Origin`` is
    checked on every request (loopback origins on loopback, plus ``allow_origins``; a
    request without one is accepted), ``Host`` against ``allow_hosts`` (or the loopback
    names on loopback).

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
        version: The server version reported to clients (empty: toolseam's version).
        handle_signals: Shut down on SIGINT and SIGTERM.
        auth: How clients authenticate (see `HttpAuth`); None: they do not.
        insecure_no_auth: Serve a non-loopback ``host`` without ``auth`` (logs a warning).
        allow_origins: ``Origin`` values allowed besides loopback ones (exact, e.g.
            ``https://app.example``).
        allow_hosts: ``Host`` values allowed (``name`` or ``name:port``); None: any, or
            the loopback names on loopback.
        certfile: TLS certificate chain (PEM); with ``keyfile``, serves ``https``.
        keyfile: TLS private key (PEM).
        limits: Body size, session and per-principal limits (see `HttpLimits`).
        input_deadline: Seconds a call suspended at a question waits for its 2026-07-28
            client's retry before it is aborted (see `create_server`).
        tasks: The tools whose calls run as tasks (see `create_server`).
        max_tasks: How many unfinished tasks at once (see `create_server`).
        task_ttl: Seconds a finished task stays readable (see `create_server`).
        durable: Tasks as DBOS workflows that outlive the server (see `create_server`):
            call ``DBOS.launch()`` once the server has started (``task_status``), so that
            the tasks it recovers find their server.
        task_status: With ``await task_group.start(serve_http, ...)``, receives the
            endpoint's URL once the server accepts connections.

    Raises:
        RuntimeError: Not running on asyncio.
        ValueError: A non-loopback ``host`` without ``auth`` or ``insecure_no_auth``, or
            only one of ``certfile`` and ``keyfile``.
        OSError: ``host:port`` cannot be listened on.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("serve_http runs on asyncio only (uvicorn serves it)") from None
    loopback = is_loopback(host)
    if auth is None and not loopback:
        if not insecure_no_auth:
            raise ValueError(NO_AUTH_MESSAGE.format(host=host))
        logger.warning(
            "MCP HTTP server: serving %s WITHOUT AUTHENTICATION (--insecure-no-auth): "
            "anyone who can reach it may call every tool",
            host,
        )
    if (certfile is None) != (keyfile is None):
        raise ValueError("TLS needs both a certificate file and a key file")
    calls = RunningCalls()
    server = serve_registry(
        registry,
        calls,
        name=name,
        version=version,
        instructions=None,
        input_deadline=input_deadline,
        tasks=tasks,
        max_tasks=max_tasks,
        task_ttl=task_ttl,
        durable=durable,
    )
    server.middleware.append(_calls_cap(limits.max_calls_per_principal))
    await serve_server_http(
        server,
        calls,
        host=host,
        port=port,
        handle_signals=handle_signals,
        auth=auth,
        allow_origins=allow_origins,
        allow_hosts=allow_hosts,
        certfile=certfile,
        keyfile=keyfile,
        limits=limits,
        task_status=task_status,
    )


async def serve_server_http(
    server: Server[Any],
    calls: RunningCalls,
    *,
    host: str,
    port: int,
    handle_signals: bool = False,
    auth: HttpAuth | None = None,
    allow_origins: Sequence[str] = (),
    allow_hosts: Sequence[str] | None = None,
    certfile: str | os.PathLike[str] | None = None,
    keyfile: str | os.PathLike[str] | None = None,
    limits: HttpLimits = _DEFAULT_LIMITS,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """`serve_http`'s transport around a server `serve_registry` built with ``calls``.

    For whoever needs the server before it serves (the behavioural kit's MCP drivers add
    a middleware to it); `serve_http` checks its arguments, which this does not.
    """
    loopback = is_loopback(host)
    manager = StreamableHTTPSessionManager(
        app=server,
        json_response=False,
        stateless=False,
        security_settings=None,  # `_Gate` checks Origin and Host, on every interface
        max_request_body_size=limits.max_body_bytes,
        max_sessions=limits.max_sessions,
        session_idle_timeout=limits.session_idle_timeout,
    )
    endpoint = _Endpoint(manager, limits.max_sessions_per_principal)
    stop = anyio.Event()

    def application(url: str) -> Starlette:
        gated = _Gate(endpoint, loopback=loopback, origins=allow_origins, hosts=allow_hosts)
        if auth is None:
            return Starlette(routes=[Route(MCP_PATH, endpoint=gated)])
        resource = AnyHttpUrl(auth.resource_url or url)
        # As strings: the metadata model keeps an issuer's empty path as written (RFC 8414
        # compares issuers exactly), where a parsed AnyHttpUrl would gain a trailing slash.
        servers = cast("list[AnyHttpUrl]", list(auth.authorization_servers))
        metadata = build_resource_metadata_url(resource) if servers else None
        required = RequireAuthMiddleware(endpoint, list(auth.required_scopes), metadata)
        routes = [
            Route(
                MCP_PATH,
                endpoint=_Gate(
                    required, loopback=loopback, origins=allow_origins, hosts=allow_hosts
                ),
            )
        ]
        if servers:
            routes += create_protected_resource_routes(
                resource_url=resource,
                authorization_servers=servers,
                scopes_supported=list(auth.required_scopes) or None,
                resource_name=auth.resource_name,
            )
        return Starlette(
            routes=routes,
            middleware=[
                Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(auth.verifier)),
                Middleware(AuthContextMiddleware),
            ],
        )

    async def run(
        web: uvicorn.Server, sock: socket.socket, *, task_status: TaskStatus[None]
    ) -> None:
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
        url = _url(sock, https=certfile is not None)
        web = _Uvicorn(
            uvicorn.Config(
                application(url),
                http=_no_delay(AutoHTTPProtocol),
                lifespan="off",
                ws="none",
                log_config=None,
                access_log=False,
                ssl_certfile=certfile,
                ssl_keyfile=keyfile,
            )
        )
        async with anyio.create_task_group() as tg:
            await tg.start(run, web, sock)
            task_status.started(url)
            logger.info("MCP HTTP server: serving %s", url)
            try:
                await _stop_requested(handle_signals)
            finally:
                stop.set()
