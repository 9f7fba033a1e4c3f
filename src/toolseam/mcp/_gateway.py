"""The gateway: the tools of several MCP servers in one registry, `mount_upstreams`.

``python -m toolseam.mcp gateway`` mounts every upstream in one `ToolRegistry` and serves
that registry (over stdio or streamable HTTP), so its guards, listeners, wrappers and
observers apply to every upstream's calls in one place. A call crosses two hops::

    client --(MCP: hop 1)--> gateway server --> registry --> McpToolDefinition body
                                                                 |
    upstream body <-- upstream registry <-- upstream server <-(MCP: hop 2)

and a cancellation travels the same way: the client cancels (hop 1), the gateway's server
aborts the call's signal, the remote tool's body sees it and cancels its request (hop 2),
the upstream server aborts its body's signal (see ``_server`` and ``_client``).

So do the capabilities, the other way: the upstream body's progress and logs become the
gateway call's ``exec.progress``/``exec.log`` (``_relay``), which the gateway's server
sends to its client (``_host``); an upstream's elicitation or sampling request becomes the
gateway call's ``exec.elicit``/``exec.sample``, which asks the gateway's client. A
withdrawal crosses both hops: the upstream's ``notifications/cancelled`` cancels the relay
callback, whose pending hop-1 request the SDK then withdraws; an abort at the gateway
withdraws its hop-1 request and cancels hop 2, where the upstream withdraws its own.

Connections. Each upstream is held by a task of its own (`_Upstream.run`) through the
SDK's ``Client``, which negotiates the revision (its ``mode="auto"``): ``server/discover``
first, MCP 2026-07-28 with a server that answers it, else the ``initialize`` handshake,
MCP 2025-11-25. On a 2025-11-25 connection an upstream asks for input during a call (the
relay's callbacks answer it) and a cancellation of hop 2 travels as a
``notifications/cancelled`` (over HTTP a POST of its own; see ``docs/mcp.md`` for its one
limit); on a 2026-07-28 one it asks by answering ``InputRequiredResult``, which the remote
tool answers and retries (``_client``), and hop 2 is cancelled by closing its request's
stream (stdio: the notification). A stdio upstream is started once: when its process
exits, its calls fail at once with ``REMOTE_TOOL_ERROR`` (the SDK closes the session) and it is not
restarted. On 2026-07-28 connections the remote tools' calls take a leaner way than
``ClientSession.call_tool``, with the same wire and semantics (``_lean``). An HTTP
upstream reconnects on demand (`_Upstream.session`): when its
connection is lost (the transport failed, or the server forgot the session), the next
call opens a new one; if that fails, calls fail at once until a backoff delay has passed
(1 s, doubling to 30 s, reset by a success). A call in flight when its connection is
lost fails with ``REMOTE_TOOL_ERROR`` and is never re-sent: tool calls are not idempotent.
"""

from __future__ import annotations

import base64
import os
import re
import shlex
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import Any, ClassVar, Final, cast, final

import anyio
import anyio.lowlevel
import httpx2
from anyio.abc import TaskStatus
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client, types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import INVALID_REQUEST

from .._registration import Registration
from .._registry import ToolRegistry
from ._auth import ClientCredentials
from ._client import McpToolDefinition, list_tools
from ._client_tasks import TasksExtension
from ._lean import attach, attach_session, coalesce_writes, detach
from ._relay import SessionCallbacks

__all__ = ["check_name", "mount_upstreams", "redact_userinfo", "upstream_target"]

_FIRST_DELAY: Final = 1.0
_MAX_DELAY: Final = 30.0
# A 404 for a session: the SDK client's own message, or the SDK server's JSON-RPC error.
_SESSION_GONE: Final = frozenset({"Session terminated", "Session not found"})
# Up to the last `@` before the path, as URL parsers split it (a password may hold an `@`).
_USERINFO: Final = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s]*@")
# As the SDK's own HTTP client: 30 s to connect and write, 5 minutes to read a stream.
_TIMEOUT: Final = httpx2.Timeout(30.0, read=300.0)


def redact_userinfo(text: str) -> str:
    """``text`` with the userinfo of every URL in it (``user:password@``) as ``***@``."""
    return _USERINFO.sub(r"\1***@", text)


@asynccontextmanager
async def _with_headers(
    url: str,
    headers: Mapping[str, str],
    auth: httpx2.Auth | None = None,
    keep: Callable[[httpx2.AsyncClient | None], None] | None = None,
) -> AsyncGenerator[Any]:
    """The SDK's streamable HTTP transport, sending ``headers`` (and ``auth``'s) each request.

    ``keep`` is given the ``httpx2`` client while the transport is open (then ``None``):
    the gateway's lean calls (``_lean``) go through it too. Its connections send each
    request in one write (``_lean.coalesce_writes``).
    """
    http = httpx2.AsyncClient(headers=dict(headers), auth=auth, timeout=_TIMEOUT)
    coalesce_writes(http)
    async with http, streamable_http_client(url, http_client=http) as streams:
        if keep is not None:
            keep(http)
        try:
            yield streams
        finally:
            if keep is not None:
                keep(None)


def _userinfo_as_basic(url: str, headers: Mapping[str, str]) -> tuple[str, Mapping[str, str]]:
    """A URL's ``user:password@`` as an HTTP Basic header (the upstream's own headers win).

    The URL itself then carries no password: HTTP clients log the URLs they request.
    """
    parsed = httpx2.URL(url)
    if not parsed.userinfo:
        return url, headers
    basic = base64.b64encode(f"{parsed.username}:{parsed.password}".encode()).decode()
    merged = httpx2.Headers({"Authorization": f"Basic {basic}"})
    merged.update(headers)
    return str(parsed.copy_with(userinfo=b"")), dict(merged)


def upstream_target(target: str | StdioServerParameters) -> str | StdioServerParameters:
    """An HTTP URL as is; a command line as stdio parameters (run like a shell would).

    The command runs with the gateway's environment and working directory.

    Raises:
        ValueError: The command line is empty or cannot be split.
    """
    if isinstance(target, StdioServerParameters) or target.startswith(("http://", "https://")):
        return target
    argv = shlex.split(target)
    if not argv:
        raise ValueError(f"empty upstream command: {target!r}")
    return StdioServerParameters(
        command=argv[0], args=argv[1:], env=dict(os.environ), cwd=os.getcwd()
    )


def _describe(error: BaseException) -> str:
    """The first leaf of an exception (group), as ``Type: message``."""
    while isinstance(error, BaseExceptionGroup):
        leaves: tuple[BaseException, ...] = cast("Any", error).exceptions
        error = leaves[0]
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


@final
class _Upstream:
    """One upstream server: the task that holds its connection, and the link its tools use.

    Implements ``_client.SessionLink``. States: connected (``_session`` set), down (no
    session; ``_wanted`` is set by the first call that wants one once ``_next_attempt``
    has passed, and ``_attempt`` is set when that reconnect is over), closed. Used from
    the event loop's thread only; each transition happens without a checkpoint.
    """

    # How the SDK's client picks the revision: negotiated. Tests that exercise what only one
    # revision has (a server asking during a call: 2025-11-25) set it on the class.
    mode: ClassVar[str] = "auto"

    __slots__ = (
        "_attempt",
        "_closing",
        "_credentials",
        "_delay",
        "_headers",
        "_http",
        "_lost",
        "_next_attempt",
        "_reason",
        "_session",
        "_shown",
        "_target",
        "_wanted",
        "callbacks",
        "name",
    )

    def __init__(
        self,
        name: str,
        target: str | StdioServerParameters,
        headers: Mapping[str, str] | None = None,
        credentials: ClientCredentials | None = None,
    ) -> None:
        self.name = name
        self._headers = headers
        self._credentials = credentials
        # Every level: the gateway's own server filters by what each of its clients asked.
        self.callbacks = SessionCallbacks(log_level="debug")
        self._target = target
        shown = target if isinstance(target, str) else shlex.join([target.command, *target.args])
        self._shown = redact_userinfo(shown)
        self._session: ClientSession | None = None
        self._http: httpx2.AsyncClient | None = None
        self._closing = anyio.Event()  # made in the event loop: `mount_upstreams` builds these
        self._reason = "not connected"
        self._delay = 0.0
        self._next_attempt = 0.0
        # Events are made inside the event loop (by `run` and the transitions):
        self._lost: anyio.Event | None = None  # set to end the current connection
        self._wanted: anyio.Event | None = None  # set by a call that needs a connection
        self._attempt: anyio.Event | None = None  # set when a reconnect attempt is over

    async def run(self, *, task_status: TaskStatus[list[types.Tool]]) -> None:
        """Connect, report the tools, and hold the connection until `close`.

        An HTTP upstream whose connection is lost waits for a call to want it back, then
        reconnects. Failing to connect the first time raises; later failures only set
        the reason the upstream's calls fail with.

        Raises:
            ConnectionError: The first connection failed.
        """
        tools: list[types.Tool] | None = None
        while not self._closing.is_set():
            self._lost = lost = anyio.Event()
            session: ClientSession | None = None
            try:
                client = Client(
                    self._transport(),
                    cache=None,
                    mode=self.mode,
                    # The tasks extension (2026-07-28): an upstream may answer with a task,
                    # which the remote tool follows under the call's signal.
                    extensions=[TasksExtension()],
                    **self.callbacks.session_kwargs(),
                )
                async with client:
                    session = client.session
                    await self.callbacks._attach(session)
                    if tools is None:
                        tools = await list_tools(session)
                        task_status.started(tools)
                    self._connected(session)
                    http = self._http
                    if not isinstance(self._target, str):
                        # 2026-07-28 over stdio: the remote tools' calls skip the SDK's
                        # per-call request machinery, on its own dispatcher (`_lean`).
                        attach_session(session)
                    elif http is not None:
                        # 2026-07-28 over HTTP: the remote tools' calls skip the SDK's
                        # dispatcher (`_lean`); anything else goes through the session.
                        attach(
                            session,
                            http,
                            _userinfo_as_basic(self._target, {})[0],  # its password: a header
                            self.callbacks.logging_callback,
                            partial(self._lean_lost, session),
                        )
                    try:
                        await lost.wait()
                    finally:
                        detach(session)
            except Exception as error:
                if tools is None:
                    raise ConnectionError(
                        redact_userinfo(
                            f'upstream "{self.name}" ({self._shown}): {_describe(error)}'
                        )
                    ) from error
                if self._session is session:  # not yet marked down by `failed`
                    self._down(
                        redact_userinfo(f"connection lost: {_describe(error)}"), backoff=True
                    )
            if self._closing.is_set() or not isinstance(self._target, str):
                return  # a stdio upstream is never restarted
            if self._session is session:
                self._down("connection closed", backoff=False)
            assert self._wanted is not None  # made by `_down`
            await self._wanted.wait()

    def _transport(self) -> str | AbstractAsyncContextManager[Any]:
        # A URL through an httpx2 client of the gateway's own (the upstream's headers and
        # credentials; the lean calls share it); stdio parameters as the SDK's transport
        # (mcp 2.0's `Client` does not take them directly).
        if not isinstance(self._target, str):
            return stdio_client(self._target)
        url, headers = _userinfo_as_basic(self._target, self._headers or {})
        if self._credentials is not None:
            # One provider a connection: its token is fetched (again) as the upstream asks.
            auth = self._credentials.provider(url)
            return _with_headers(url, headers, auth, self._keep_http)
        return _with_headers(url, headers, None, self._keep_http)

    def _keep_http(self, http: httpx2.AsyncClient | None) -> None:
        self._http = http

    def _lean_lost(self, session: ClientSession, error: BaseException) -> None:
        # What the SDK's transport does when a POST fails: the connection is lost.
        if self._session is session:
            self._down(redact_userinfo(f"connection lost: {_describe(error)}"), backoff=True)
            if self._lost is not None:
                self._lost.set()

    def _connected(self, session: ClientSession) -> None:
        self._session = session
        self._delay = 0.0
        self._settle_attempt()

    def _down(self, reason: str, *, backoff: bool) -> None:
        self._session = None
        self._reason = reason
        self._wanted = anyio.Event()
        if backoff:
            self._delay = min(_MAX_DELAY, self._delay * 2) if self._delay else _FIRST_DELAY
            self._next_attempt = anyio.current_time() + self._delay
        else:
            self._next_attempt = 0.0
        self._settle_attempt()

    def _settle_attempt(self) -> None:
        attempt, self._attempt = self._attempt, None
        if attempt is not None:
            attempt.set()

    def close(self) -> None:
        """End the connection; `run` returns once the SDK has closed it. Idempotent."""
        self._closing.set()
        self._session = None
        self._reason = "the gateway is shutting down"
        self._settle_attempt()
        for event in (self._lost, self._wanted):
            if event is not None:
                event.set()

    async def session(self) -> ClientSession:
        """The session to call through, reconnecting an HTTP upstream if it was lost.

        Raises:
            ConnectionError: The upstream is unavailable; the message says why.
        """
        await anyio.lowlevel.checkpoint()
        if self._session is None and not self._closing.is_set() and isinstance(self._target, str):
            if self._attempt is None:
                wait = self._next_attempt - anyio.current_time()
                if wait > 0:
                    raise ConnectionError(
                        f'upstream "{self.name}" is unavailable ({self._reason}); '
                        f"next reconnect in {wait:.1f}s"
                    )
                self._attempt = anyio.Event()
                if self._wanted is not None:
                    self._wanted.set()
            await self._attempt.wait()
        if self._session is None:
            raise ConnectionError(f'upstream "{self.name}" is unavailable ({self._reason})')
        return self._session

    def failed(self, session: ClientSession, error: MCPError) -> None:
        """Drop the connection if the server no longer knows its session (it restarted)."""
        gone = error.error.code == INVALID_REQUEST and error.error.message in _SESSION_GONE
        if session is self._session and gone:
            # The server answered, so it is up: the next call reconnects without delay.
            self._down("the server ended the session", backoff=False)
            if self._lost is not None:
                self._lost.set()


def check_name(name: str) -> None:
    """Check an upstream's name makes a usable tool-name prefix.

    Raises:
        ValueError: The name is empty or has a character other than letters, digits,
            ``_``, ``-`` and ``.``.
    """
    if not name or not all(c.isalnum() or c in "_-." for c in name):
        raise ValueError(f"upstream name must be letters, digits, '_', '-' or '.': {name!r}")


@asynccontextmanager
async def mount_upstreams(
    registry: ToolRegistry,
    upstreams: Mapping[str, str | StdioServerParameters],
    *,
    headers: Mapping[str, Mapping[str, str]] | None = None,
    oauth: Mapping[str, ClientCredentials] | None = None,
) -> AsyncGenerator[dict[str, list[str]]]:
    """Connect to MCP servers and register their tools, each under the prefix ``NAME_``.

    Every upstream is connected (in order) and its tools are listed once; each becomes an
    `McpToolDefinition` named ``NAME_`` + remote name, so a call through ``registry``
    reaches that upstream, and aborting its signal cancels the remote call. The upstream's
    progress, log messages, elicitation and sampling requests reach the call's
    ``exec.progress``/``log``/``elicit``/``sample``, whichever revision the connection
    negotiated (2026-07-28 with a server that speaks it, else 2025-11-25). The
    connections are held until the context exits; then the tools are unregistered and
    the connections closed (a stdio upstream's process is stopped). An upstream that
    goes away fails only its own calls (``REMOTE_TOOL_ERROR``); an HTTP upstream
    reconnects on the next call (see ``docs/mcp.md``, "Reconnecting").

    Args:
        registry: Where to register the tools.
        upstreams: Upstream name to server: an ``http(s)://`` URL (streamable HTTP), a
            command line (a stdio server, started with this process's environment and
            working directory), or ``mcp.StdioServerParameters``.
        headers: Upstream name to the HTTP headers the gateway sends that upstream on
            every request (its own credentials, e.g. ``Authorization: Bearer ...``). A
            client's token is never forwarded upstream. Never printed.
        oauth: Upstream name to the gateway's OAuth client credentials for that (HTTP)
            upstream: its access token comes from the upstream's authorization server by
            the ``client_credentials`` grant (see `ClientCredentials`). Never printed.

    Yields:
        Each upstream's name and its tools' local names, in order.

    Raises:
        ValueError: An upstream name is not letters, digits, ``_``, ``-`` or ``.``; a
            command line is empty; or a local tool name is already registered.
        ConnectionError: An upstream cannot be reached at startup; nothing stays mounted.
    """
    links = [(name, upstream_target(target)) for name, target in upstreams.items()]
    for name, _ in links:
        check_name(name)
    extra = dict(headers or {})
    for name in extra:
        if name not in upstreams:
            raise ValueError(f"headers for an unknown upstream: {name!r}")
    credentials = dict(oauth or {})
    for name in credentials:
        if not isinstance(upstreams.get(name), str) or not str(upstreams[name]).startswith(
            ("http://", "https://")
        ):
            raise ValueError(f"OAuth credentials for an unknown or non-HTTP upstream: {name!r}")
    mounted: dict[str, list[str]] = {}
    registrations: list[Registration] = []
    connected: list[_Upstream] = []
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:
        try:
            for name, target in links:
                upstream = _Upstream(name, target, extra.get(name), credentials.get(name))
                try:
                    tools = await tg.start(upstream.run)
                    connected.append(upstream)
                    local: list[str] = []
                    for tool in tools:
                        local_name = f"{name}_{tool.name}"
                        definition = McpToolDefinition._linked(
                            upstream, tool, local_name, upstream.callbacks
                        )
                        registrations.append(registry.register(definition))
                        local.append(local_name)
                except (ConnectionError, ValueError) as error:
                    # Raised below, outside the task group, which would wrap it in a group.
                    failure = error
                    break
                mounted[name] = local
            else:
                yield mounted
        finally:
            for registration in registrations:
                registration.remove()
            for upstream in connected:
                upstream.close()
    if failure is not None:
        raise failure
