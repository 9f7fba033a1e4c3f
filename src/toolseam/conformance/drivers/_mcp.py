"""MCP servers over the wire: toolseam's and the MCP SDK's ``MCPServer``, each on both revisions.

The kit's scripted tools are served by the server under test and called with the MCP SDK's
own ``Client``. On asyncio over streamable HTTP on loopback: the server is served by uvicorn
on a TCP socket the driver opens on 127.0.0.1 (``IPPROTO_TCP``, a free port), toolseam's
with `serve_http`'s own transport (its session manager, its disconnect watch), the
``MCPServer`` with the SDK's own app (``streamable_http_app``, the mode `serve_http` uses:
stateful, SSE responses), and the client connects with the SDK's streamable HTTP client. On
trio, which uvicorn cannot serve, over stdio: the SDK's stdio transport (``stdio_server``:
newline-delimited JSON-RPC) at both ends of a socket pair, the server's end read and written
as toolseam's `serve_stdio` does stdin and stdout. One server per scenario, shut down
cleanly before `run` returns. The client speaks 2025-11-25 (``mode="legacy"``, the
handshake) or 2026-07-28 (``server/discover``). The kit's stop is what `Scenario.mcp` says
the client does: cancel the request (on 2025-11-25 the SDK sends
``notifications/cancelled``; on 2026-07-28 over HTTP it closes the request's stream) or
disconnect mid-call (HTTP: the client's connections are dropped, no session ``DELETE``;
stdio: the client's end shut down, the server reads end of file).

"The server considers the call done" is measured in the server's own request pipeline: an
outermost ``Server.middleware`` around ``tools/call`` marks the moment the handling of the
call ended (answered or not: a cancelled request is never answered on the wire). `run`
returns at that moment — over stdio after a disconnect, once the server's run has
ended too — so a server that drops the call while its body still runs returns before the
body finished, and the kit's sequence numbers say so.

A toolseam body hears of a stop through ``exec.signal``; an ``MCPServer`` tool has no
signal (the SDK cancels the handler's task), so its `Listen` is never told and the kit sees
its bodies torn down by task cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
from collections.abc import (
    AsyncGenerator,
    Callable,
    Collection,
    Coroutine,
    Generator,
    Mapping,
    Sequence,
)
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from importlib.metadata import version
from typing import Any, ClassVar, Final, Literal, NoReturn, TypeAlias, cast, final

import anyio
import anyio.abc
import uvicorn
from anyio.abc import TaskStatus
from mcp import MCPError, types
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.stdio import stdio_server
from pydantic import BaseModel

from toolseam import AbortError, ToolError, ToolRegistry, ToolRunContext, define_tool
from toolseam.mcp._http import serve_server_http
from toolseam.mcp._server import RunningCalls, serve_registry

from .._driver import Call, Capability, Outcome, Scenario
from .._scripts import ScriptedTool
from ._toolseam import ExecReach, KeyArgs

__all__ = [
    "MCPServerDriver",
    "MCPServerDriver2026",
    "McpDriver",
    "ToolseamMcpDriver",
    "ToolseamMcpDriver2026",
]

Revision = Literal["2025-11-25", "2026-07-28"]

# `stdio_server` carries no return annotation; its streams are what `Server.run` and the
# client's session take.
_StdioServer: TypeAlias = (
    "Callable[[anyio.AsyncFile[str], anyio.AsyncFile[str]], AbstractAsyncContextManager[Any]]"
)
_stdio_server = cast("_StdioServer", stdio_server)


@final
class _SignalListen:
    def __init__(self, exec: ToolRunContext) -> None:
        self._exec = exec

    def is_told(self) -> bool:
        return self._exec.signal.aborted

    async def wait(self) -> None:
        await self._exec.signal.wait()

    def stop(self) -> NoReturn:
        raise AbortError()

    def fail(self, message: str) -> NoReturn:
        raise ToolError(message, code="SCRIPTED_FAILURE")

    async def call(self, call: Call) -> Outcome:
        raise NotImplementedError("no nested calls over MCP")


@final
class _TaskListen:
    """An ``MCPServer`` tool's: no signal; the SDK cancels the handler's task."""

    def is_told(self) -> bool:
        return False

    async def wait(self) -> None:
        await anyio.sleep_forever()

    def stop(self) -> NoReturn:
        raise RuntimeError("an MCPServer tool has no signal to stop by")

    def fail(self, message: str) -> NoReturn:
        raise RuntimeError(message)

    async def call(self, call: Call) -> Outcome:
        raise NotImplementedError("no nested calls over MCP")


INPUT_DEADLINE: Final = 0.05
"""Seconds toolseam's server waits for the retry of an input-required round (``no-retry``)."""


class _Answer(BaseModel):
    answer: str


@final
class _ContextReach:
    """An ``MCPServer`` tool's `Reach`: only ``ctx.elicit``."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    async def progress(self, progress: float, message: str) -> None:
        raise NotImplementedError("not measured over MCP")

    def progress_sync(self, progress: float, message: str) -> None:
        raise NotImplementedError("not measured over MCP")

    async def elicit(self, question: str) -> str | None:
        answer = await self._ctx.elicit(question, _Answer)
        return answer.data.answer if answer.action == "accept" else None

    async def run_process(self, argv: Sequence[str]) -> None:
        raise NotImplementedError("not measured over MCP")


def _toolseam_server(tools: Sequence[ScriptedTool], calls: RunningCalls) -> Server[Any]:
    registry = ToolRegistry()
    for tool in tools:

        def define(tool: ScriptedTool) -> None:
            @define_tool(name=tool.name, description=tool.description)
            async def body(args: KeyArgs, exec: ToolRunContext) -> str:
                reach = ExecReach(exec) if tool.reaches else None
                return await tool.run(args, _SignalListen(exec), reach)

            registry.register(body)

        define(tool)
    return serve_registry(
        registry,
        calls,
        name="toolseam",
        version="",
        instructions=None,
        input_deadline=INPUT_DEADLINE,
    )


def _mcpserver(tools: Sequence[ScriptedTool]) -> Server[Any]:
    server = MCPServer("mcpserver")
    for tool in tools:

        def define(tool: ScriptedTool) -> None:
            async def body(key: str, ctx: Context) -> str:
                reach = _ContextReach(ctx) if tool.reaches else None
                return await tool.run({"key": key}, _TaskListen(), reach)

            server.add_tool(body, name=tool.name, description=tool.description)

        define(tool)
    lowlevel: Server[Any] = server._lowlevel_server  # pyright: ignore[reportPrivateUsage]
    return lowlevel


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False  # trio
    return True


def _loopback_socket() -> socket.socket:
    """A listening TCP socket on 127.0.0.1, a free port (``IPPROTO_TCP``: asyncio's nodelay)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
    except BaseException:
        sock.close()
        raise
    return sock


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal handling (the test runner's stay in place)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None]:
        yield


async def _serve_sdk_app(server: Server[Any], *, task_status: TaskStatus[str]) -> None:
    """Serve the SDK's own streamable HTTP app of ``server`` until cancelled; then shut down."""
    app = server.streamable_http_app(json_response=False, stateless_http=False)
    config = uvicorn.Config(
        app, lifespan="on", ws="none", log_config=None, access_log=False, log_level="warning"
    )
    web = _Uvicorn(config)
    stop = anyio.Event()

    async def run(sock: socket.socket, *, task_status: TaskStatus[None]) -> None:
        # Shielded, stopped by `stop` only: cancelled, uvicorn would leave its connection
        # tasks and the app's lifespan half-done.
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as group:
                # The socket listens already: a client's connection waits in its backlog
                # until uvicorn has started (its lifespan, the session manager, first).
                group.start_soon(functools.partial(web.serve, sockets=[sock]))
                task_status.started()
                await stop.wait()
                web.should_exit = True

    with _loopback_socket() as sock:
        port: int = sock.getsockname()[1]
        async with anyio.create_task_group() as group:
            await group.start(run, sock)
            task_status.started(f"http://127.0.0.1:{port}/mcp")
            try:
                await anyio.sleep_forever()
            finally:
                stop.set()


class McpDriver:
    """Drives an MCP server over the wire with the SDK's client (capability ``mcp``)."""

    server: ClassVar[Literal["toolseam", "mcpserver"]] = "toolseam"
    revision: ClassVar[Revision] = "2025-11-25"
    backends: Sequence[str] = ("asyncio", "trio")
    families: Collection[str] = ("mcp",)
    """Only the ``mcp.*`` clauses: the registry behind the server has its own driver."""

    @property
    def subject(self) -> str:
        """The server measured, and the revision its client speaks."""
        name = "toolseam-mcp" if self.server == "toolseam" else "mcp-sdk-mcpserver"
        return f"{name}@{self.revision}"

    @property
    def capabilities(self) -> Collection[Capability]:
        """Only the MCP clauses: every other one is the registry's own driver's business."""
        both: tuple[Capability, ...] = ("mcp", "mcp_input_required")
        return both if self.revision == "2026-07-28" else ("mcp",)

    @property
    def lacking(self) -> Mapping[Capability, str]:
        """Why a capability is missing."""
        if self.revision == "2026-07-28":
            return {}
        return {"mcp_input_required": "input-required results are MCP 2026-07-28's"}

    def versions(self) -> Mapping[str, str]:
        """The versions measured."""
        return {
            "toolseam": version("toolseam"),
            "mcp": version("mcp"),
            "anyio": version("anyio"),
            "uvicorn": version("uvicorn"),
        }

    def build(self, tools: Sequence[ScriptedTool], calls: RunningCalls) -> Server[Any]:
        """The server under test, serving ``tools`` (toolseam's stops ``calls`` at shutdown)."""
        return _toolseam_server(tools, calls) if self.server == "toolseam" else _mcpserver(tools)

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        """Serve the scenario's tools, make its one call over the wire, stop as it says."""
        calls = RunningCalls()
        server = self.build(scenario.tools, calls)
        http = _on_asyncio()
        witness = _Witness(scenario, http)
        server.middleware.insert(0, witness.mark)  # outermost: nothing of the server's outside
        if not http:
            return await self._over_stdio(scenario, server, witness)
        serve: Callable[..., Coroutine[Any, Any, None]] = (
            functools.partial(serve_server_http, server, calls, host="127.0.0.1", port=0)
            if self.server == "toolseam"
            else functools.partial(_serve_sdk_app, server)
        )
        async with anyio.create_task_group() as serving:
            url: str = await serving.start(serve)
            try:
                return await self._call(
                    scenario,
                    witness,
                    streamable_http_client(url, terminate_on_close=False),
                    disconnect=None,
                )
            finally:
                serving.cancel_scope.cancel()  # a clean shutdown: the servers shield it
        raise AssertionError("unreachable")  # pragma: no cover

    async def _over_stdio(
        self, scenario: Scenario, server: Server[Any], witness: _Witness
    ) -> Sequence[Outcome]:
        """The SDK's stdio transport at both ends of a socket pair (trio: no uvicorn)."""
        client_sock, server_sock = socket.socketpair()
        with client_sock, server_sock:  # closed here if a stream was not made of it
            client_end = await anyio.abc.SocketStream.from_socket(client_sock.detach())
            server_end = await anyio.abc.SocketStream.from_socket(server_sock.detach())
        async with client_end, server_end, anyio.create_task_group() as group:

            async def serve() -> None:
                try:
                    lines = _Lines(server_end)
                    async with _stdio(lines) as (read, write):
                        await server.run(read, write, server.create_initialization_options())
                finally:
                    witness.served()
                    await server_end.aclose()  # the client reads end of file

            @asynccontextmanager
            async def transport() -> AsyncGenerator[Any]:
                async with _stdio(_Lines(client_end)) as streams:
                    try:
                        yield streams
                    finally:
                        # The server reads end of file, its run ends, it closes its end:
                        # the transport's reader reads end of file too, and it closes.
                        _hang_up(client_end, socket.SHUT_WR)

            group.start_soon(serve)
            return await self._call(
                scenario,
                witness,
                transport(),
                disconnect=lambda: _hang_up(client_end, socket.SHUT_RDWR),
            )
        raise AssertionError("unreachable")  # pragma: no cover

    async def _call(
        self,
        scenario: Scenario,
        witness: _Witness,
        transport: AbstractAsyncContextManager[Any],
        *,
        disconnect: Callable[[], None] | None,
    ) -> Sequence[Outcome]:
        """Connect, make the call, stop it as the scenario says; the outcome on the wire.

        ``disconnect`` closes the connection's streams; ``None``: the client's whole
        connection is cancelled (its transport closes its HTTP connections on the way out).
        """
        [call] = scenario.calls
        stop = scenario.mcp or "cancel"
        outcome = Outcome(call.call_id, "none", "no answer on the wire")
        connection = anyio.CancelScope()
        mode = "legacy" if self.revision == "2025-11-25" else self.revision
        with connection:
            async with Client(
                transport, mode=mode, cache=None, elicitation_callback=_never_asked
            ) as client:  # pyright: ignore[reportArgumentType]
                spoken = client.session.protocol_version
                if spoken != self.revision:
                    raise RuntimeError(f"the client speaks {spoken}, not {self.revision}")
                calling = anyio.CancelScope()

                answered = anyio.Event()

                async def make_call() -> None:
                    nonlocal outcome
                    with calling:
                        try:
                            await ask()
                        finally:
                            answered.set()

                async def ask() -> None:
                    nonlocal outcome
                    try:
                        result = await client.session.call_tool(
                            call.tool, dict(call.arguments), allow_input_required=True
                        )
                    except MCPError as error:
                        outcome = Outcome(call.call_id, "error", str(error))
                        return
                    if isinstance(result, types.InputRequiredResult):
                        witness.asked.set()
                        outcome = Outcome(call.call_id, "none", "input required, no retry")
                        return
                    text = " ".join(
                        b.text for b in result.content if isinstance(b, types.TextContent)
                    )
                    if result.is_error:
                        outcome = Outcome(call.call_id, "error", text)
                    else:
                        outcome = Outcome(call.call_id, "ok", text, text)

                gone = anyio.Event()

                async with anyio.create_task_group() as calls:
                    calls.start_soon(make_call)
                    scenario.stop.connect(calling.cancel if stop == "cancel" else gone.set)
                    if stop == "cancel":
                        await witness.handled.wait()
                    else:
                        await gone.wait()
                        if stop == "no-retry":
                            await answered.wait()  # the client has what the server answered
                        if disconnect is None:
                            connection.cancel()  # HTTP: its connections dropped, no DELETE
                        else:
                            disconnect()
                        await witness.handled.wait()
                        await witness.ended.wait()
                    calling.cancel()
        await witness.handled.wait()  # HTTP: the server noticed the client went away
        return [outcome]


@final
class _Witness:
    """Marks the end of the server's handling of ``tools/call`` and reports it to the kit.

    Over HTTP the kit's witness (`Scenario.handled`) is that end whatever the stop; over
    stdio, after a disconnect, the end of the server's run.
    """

    def __init__(self, scenario: Scenario, http: bool) -> None:
        self._scenario = scenario
        self._per_call = http or (scenario.mcp or "cancel") == "cancel"
        self.handled = anyio.Event()
        self.ended = anyio.Event()
        self.asked = anyio.Event()

    async def mark(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """The outermost middleware."""
        if ctx.method != "tools/call":
            return await call_next(ctx)
        try:
            return await call_next(ctx)
        finally:
            self.handled.set()
            if self._per_call and not self.asked.is_set() and self._scenario.handled is not None:
                self._scenario.handled()

    def served(self) -> None:
        """The server's run ended (stdio)."""
        self.ended.set()
        if not self._per_call and self._scenario.handled is not None:
            self._scenario.handled()


async def _never_asked(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    """The client's elicitation: declared, so a server may ask; it never answers."""
    return types.ElicitResult(action="cancel")


def _hang_up(end: anyio.abc.SocketStream, how: int) -> None:
    """Shut the client's end of the socket pair down at once: the server reads end of file."""
    with contextlib.suppress(OSError):
        end.extra(anyio.abc.SocketAttribute.raw_socket).shutdown(how)


@final
class _Lines:
    """A byte stream as the text file the SDK's stdio transport reads lines from and writes."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self._stream = stream
        self._buffer = b""

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while b"\n" not in self._buffer:
            try:
                chunk = await self._stream.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                raise StopAsyncIteration from None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode() + "\n"

    async def write(self, text: str) -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._stream.send(text.encode())

    async def flush(self) -> None:
        """Nothing is buffered."""


def _stdio(lines: _Lines) -> AbstractAsyncContextManager[tuple[Any, Any]]:
    """The SDK's stdio transport (newline-delimited JSON-RPC) reading and writing ``lines``."""
    file = cast("anyio.AsyncFile[str]", lines)
    return _stdio_server(file, file)


class ToolseamMcpDriver(McpDriver):
    """toolseam's MCP server (``toolseam.mcp.create_server``), on 2025-11-25."""


class ToolseamMcpDriver2026(McpDriver):
    """toolseam's MCP server (``toolseam.mcp.create_server``), on 2026-07-28."""

    revision: ClassVar[Revision] = "2026-07-28"


class MCPServerDriver(McpDriver):
    """The MCP SDK's high-level server (``mcp.server.mcpserver.MCPServer``), on 2025-11-25."""

    server: ClassVar[Literal["toolseam", "mcpserver"]] = "mcpserver"


class MCPServerDriver2026(McpDriver):
    """The MCP SDK's high-level server (``mcp.server.mcpserver.MCPServer``), on 2026-07-28."""

    server: ClassVar[Literal["toolseam", "mcpserver"]] = "mcpserver"
    revision: ClassVar[Revision] = "2026-07-28"
