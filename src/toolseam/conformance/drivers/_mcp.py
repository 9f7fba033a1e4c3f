"""MCP servers over the wire: toolseam's and the MCP SDK's ``MCPServer``, each on both revisions.

The kit's scripted tools are served by the server under test and called with the MCP SDK's
own ``Client`` over a stream transport (the SDK's memory streams: the JSON-RPC framing and
dispatcher of stdio). The client speaks 2025-11-25 (``mode="legacy"``, the handshake) or
2026-07-28 (``server/discover``). The kit's stop is what `Scenario.mcp` says the client does:
cancel the request (the SDK sends ``notifications/cancelled``) or disconnect mid-call (its
streams closed: the server reads end of file).

"The server considers the call done" is measured in the server's own request pipeline: an
outermost ``Server.middleware`` around ``tools/call`` marks the moment the handling of the
call ended (answered or not: a cancelled request is never answered on the wire). `run`
returns at that moment — after a disconnect, once the server's run has ended too — so a
server that drops the call while its body still runs returns before the body finished, and
the kit's sequence numbers say so.

A toolseam body hears of a stop through ``exec.signal``; an ``MCPServer`` tool has no
signal (the SDK cancels the handler's task), so its `Listen` is never told and the kit sees
its bodies torn down by task cancellation.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any, ClassVar, Final, Literal, NoReturn, final

import anyio
from mcp import MCPError, types
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.memory import create_client_server_memory_streams
from pydantic import BaseModel

from toolseam import AbortError, ToolError, ToolRegistry, ToolRunContext, define_tool
from toolseam.mcp import create_server

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


def _toolseam_server(tools: Sequence[ScriptedTool]) -> Server[Any]:
    registry = ToolRegistry()
    for tool in tools:

        def define(tool: ScriptedTool) -> None:
            @define_tool(name=tool.name, description=tool.description)
            async def body(args: KeyArgs, exec: ToolRunContext) -> str:
                reach = ExecReach(exec) if tool.reaches else None
                return await tool.run(args, _SignalListen(exec), reach)

            registry.register(body)

        define(tool)
    return create_server(registry, input_deadline=INPUT_DEADLINE)


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
        return {"toolseam": version("toolseam"), "mcp": version("mcp"), "anyio": version("anyio")}

    def build(self, tools: Sequence[ScriptedTool]) -> Server[Any]:
        """The server under test, serving ``tools``."""
        return _toolseam_server(tools) if self.server == "toolseam" else _mcpserver(tools)

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        """Serve the scenario's tools, make its one call over the wire, stop as it says."""
        [call] = scenario.calls
        server = self.build(scenario.tools)
        handled = anyio.Event()
        served = anyio.Event()
        asked = anyio.Event()
        stop = scenario.mcp or "cancel"

        async def mark(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
            if ctx.method != "tools/call":
                return await call_next(ctx)
            try:
                return await call_next(ctx)
            finally:
                handled.set()
                if stop == "cancel" and scenario.handled is not None and not asked.is_set():
                    scenario.handled()

        server.middleware.insert(0, mark)  # outermost: nothing of the server's is outside it
        outcome = Outcome(call.call_id, "none", "no answer on the wire")
        async with create_client_server_memory_streams() as (client_streams, server_streams):

            @asynccontextmanager
            async def transport() -> AsyncGenerator[Any]:
                yield client_streams

            async def serve() -> None:
                try:
                    await server.run(*server_streams, server.create_initialization_options())
                finally:
                    served.set()
                    if stop != "cancel" and scenario.handled is not None:
                        scenario.handled()

            async with anyio.create_task_group() as group:
                group.start_soon(serve)
                mode = "legacy" if self.revision == "2025-11-25" else self.revision
                async with Client(
                    transport(), mode=mode, cache=None, elicitation_callback=_never_asked
                ) as client:  # pyright: ignore[reportArgumentType]
                    spoken = client.session.protocol_version
                    if spoken != self.revision:
                        raise RuntimeError(f"the client speaks {spoken}, not {self.revision}")
                    calling = anyio.CancelScope()

                    async def make_call() -> None:
                        nonlocal outcome
                        with calling:
                            try:
                                result = await client.session.call_tool(
                                    call.tool, dict(call.arguments), allow_input_required=True
                                )
                            except MCPError as error:
                                outcome = Outcome(call.call_id, "error", str(error))
                                return
                            if isinstance(result, types.InputRequiredResult):
                                asked.set()
                                outcome = Outcome(call.call_id, "none", "input required, no retry")
                                return
                            text = " ".join(
                                b.text for b in result.content if isinstance(b, types.TextContent)
                            )
                            if result.is_error:
                                outcome = Outcome(call.call_id, "error", text)
                            else:
                                outcome = Outcome(call.call_id, "ok", text, text)

                    async with anyio.create_task_group() as calls:
                        calls.start_soon(make_call)
                        if stop == "cancel":
                            scenario.stop.connect(calling.cancel)
                        else:
                            scenario.stop.connect(lambda: _disconnect(client_streams))
                        await handled.wait()
                        if stop != "cancel":
                            await served.wait()
                        calling.cancel()
                    return [outcome]
        return [outcome]  # pragma: no cover - the Client's exit never returns here


async def _never_asked(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    """The client's elicitation: declared, so a server may ask; it never answers."""
    return types.ElicitResult(action="cancel")


def _disconnect(streams: Any) -> None:
    read, write = streams
    write.close()
    read.close()


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
