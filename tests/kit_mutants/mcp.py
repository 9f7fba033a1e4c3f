"""Mutants of the MCP drivers (the ``mcp.*`` clauses): toolseam's MCP server, one rule broken.

The drivers serve over streamable HTTP on asyncio and over stdio (a socket pair) on trio
(toolseam.conformance.drivers._mcp).

`AbandonsOnCancel` is a server whose request pipeline ignores the client's cancel (and, over
stdio, a disconnect's, which ends the server's run by cancelling its requests): it
runs each ``tools/call`` detached, and when the request is cancelled it drops the call and
lets the cancellation go on, the body neither told nor awaited. Over HTTP toolseam hears a
client that went away through its own watch of the request's stream, which the defect leaves
in place: the disconnect clauses pass there. `DeafToDisconnect` removes that watch: at
2025-11-25 the SDK's session keeps a call running when its client's stream drops, so the
body is never told (the clauses wait for the kit's watchdog, 10 s each, and fail).
`NoInputDeadline` never aborts a body whose 2026-07-28 retry never comes (its input deadline
is an hour): the clause waits for the kit's watchdog and fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server

from toolseam import ToolRegistry, ToolRunContext, define_tool
from toolseam.conformance import ScriptedTool
from toolseam.conformance.drivers._mcp import ToolseamMcpDriver, ToolseamMcpDriver2026
from toolseam.conformance.drivers._mcp import _SignalListen as SignalListen
from toolseam.conformance.drivers._toolseam import ExecReach, KeyArgs
from toolseam.mcp._server import DISCONNECTED_SCOPE_KEY, RunningCalls, serve_registry

from ._base import Mutant

_CANCEL_ONLY = frozenset({"mcp.cancel-told", "mcp.cancel-awaited"})
_DISCONNECT = frozenset({"mcp.disconnect-told", "mcp.disconnect-awaited"})
_CANCEL = _CANCEL_ONLY | _DISCONNECT


async def _detached(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Run ``tools/call`` in a task of its own; on a cancel, drop it (the defect)."""
    if ctx.method == "notifications/cancelled":
        return None  # ignored: nothing of the server's hears of it
    if ctx.method != "tools/call":
        return await call_next(ctx)
    done = anyio.Event()
    result: list[HandlerResult] = []

    async def run() -> None:
        try:
            result.append(await call_next(ctx))
        except BaseException:
            pass
        finally:
            done.set()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        import trio

        trio.lowlevel.spawn_system_task(run)
    else:
        task = asyncio.ensure_future(run())
        _KEEP.add(task)
        task.add_done_callback(_KEEP.discard)
    await done.wait()  # a cancel lands here, and the detached call runs on
    if not result:
        raise RuntimeError("the detached call failed")
    return result[0]


_KEEP: set[asyncio.Future[None]] = set()


async def _deaf(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Take the HTTP request's disconnect watch away from the handler (the defect)."""
    scope: object = getattr(ctx.request, "scope", None)
    if isinstance(scope, dict):
        scope.pop(DISCONNECTED_SCOPE_KEY, None)  # pyright: ignore[reportUnknownMemberType]
    return await call_next(ctx)


def _toolseam_server(
    tools: Sequence[ScriptedTool], calls: RunningCalls, deadline: float
) -> Server[Any]:
    registry = ToolRegistry()
    for tool in tools:

        def define(tool: ScriptedTool) -> None:
            @define_tool(name=tool.name, description=tool.description)
            async def body(args: KeyArgs, exec: ToolRunContext) -> str:
                reach = ExecReach(exec) if tool.reaches else None
                return await tool.run(args, SignalListen(exec), reach)

            registry.register(body)

        define(tool)
    return serve_registry(
        registry, calls, name="toolseam", version="", instructions=None, input_deadline=deadline
    )


class AbandonsOnCancel(ToolseamMcpDriver):
    """toolseam's server, 2025-11-25, dropping a cancelled call: body untold, unawaited."""

    def build(self, tools: Sequence[ScriptedTool], calls: RunningCalls) -> Server[Any]:
        server = super().build(tools, calls)
        server.middleware.insert(0, _detached)
        return server


class AbandonsOnCancel2026(ToolseamMcpDriver2026):
    """The same defect on 2026-07-28."""

    def build(self, tools: Sequence[ScriptedTool], calls: RunningCalls) -> Server[Any]:
        server = super().build(tools, calls)
        server.middleware.insert(0, _detached)
        return server


class DeafToDisconnect(ToolseamMcpDriver):
    """toolseam's server, 2025-11-25 over HTTP, blind to a client whose stream dropped."""

    def build(self, tools: Sequence[ScriptedTool], calls: RunningCalls) -> Server[Any]:
        server = super().build(tools, calls)
        server.middleware.insert(0, _deaf)
        return server


class NoInputDeadline(ToolseamMcpDriver2026):
    """toolseam's server on 2026-07-28 whose suspended bodies wait an hour for the retry."""

    def build(self, tools: Sequence[ScriptedTool], calls: RunningCalls) -> Server[Any]:
        return _toolseam_server(tools, calls, 3600.0)


MUTANTS: tuple[Mutant, ...] = (
    # Over stdio (trio) a disconnect ends the server's run by cancelling its
    # requests, which the defect ignores; over HTTP (asyncio) toolseam's own watch of the
    # request's stream tells the body, and the disconnect clauses pass.
    Mutant("mcp-abandons-on-cancel", AbandonsOnCancel, _CANCEL_ONLY, backends=("asyncio",)),
    Mutant("mcp-abandons-on-cancel-stdio", AbandonsOnCancel, _CANCEL, backends=("trio",)),
    # On 2026-07-28 over HTTP (asyncio) a client that goes away closes the request's
    # stream, which the SDK answers by cancelling the handler: the defect drops the call.
    # Over stdio (trio) toolseam's server aborts and awaits every call it still
    # runs when its run ends, whatever the pipeline does: the disconnect clauses pass.
    Mutant("mcp-abandons-on-cancel-2026", AbandonsOnCancel2026, _CANCEL, backends=("asyncio",)),
    Mutant(
        "mcp-abandons-on-cancel-2026-stdio",
        AbandonsOnCancel2026,
        _CANCEL_ONLY,
        backends=("trio",),
    ),
    Mutant("mcp-deaf-to-disconnect", DeafToDisconnect, _DISCONNECT, backends=("asyncio",)),
    Mutant("mcp-no-input-deadline", NoInputDeadline, frozenset({"mcp.no-retry-aborts"})),
)
