"""Mutants of the MCP drivers (the ``mcp.*`` clauses): toolseam's MCP server, one rule broken.

`AbandonsOnCancel` is a server whose request pipeline ignores the client's cancel (and a
disconnect's): it runs each ``tools/call`` detached, and when the request is cancelled it
drops the call and lets the cancellation go on, the body neither told nor awaited.
`NoInputDeadline` never aborts a body whose 2026-07-28 retry never comes (its input deadline
is an hour): the clause waits for the kit's watchdog (10 s) and fails.
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
from toolseam.mcp import create_server

from ._base import Mutant

_CANCEL = frozenset(
    {"mcp.cancel-told", "mcp.cancel-awaited", "mcp.disconnect-told", "mcp.disconnect-awaited"}
)


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


def _toolseam_server(tools: Sequence[ScriptedTool], deadline: float) -> Server[Any]:
    registry = ToolRegistry()
    for tool in tools:

        def define(tool: ScriptedTool) -> None:
            @define_tool(name=tool.name, description=tool.description)
            async def body(args: KeyArgs, exec: ToolRunContext) -> str:
                reach = ExecReach(exec) if tool.reaches else None
                return await tool.run(args, SignalListen(exec), reach)

            registry.register(body)

        define(tool)
    return create_server(registry, input_deadline=deadline)


class AbandonsOnCancel(ToolseamMcpDriver):
    """toolseam's server, 2025-11-25, dropping a cancelled call: body untold, unawaited."""

    def build(self, tools: Sequence[ScriptedTool]) -> Server[Any]:
        server = super().build(tools)
        server.middleware.insert(0, _detached)
        return server


class AbandonsOnCancel2026(ToolseamMcpDriver2026):
    """The same defect on 2026-07-28."""

    def build(self, tools: Sequence[ScriptedTool]) -> Server[Any]:
        server = super().build(tools)
        server.middleware.insert(0, _detached)
        return server


class NoInputDeadline(ToolseamMcpDriver2026):
    """toolseam's server on 2026-07-28 whose suspended bodies wait an hour for the retry."""

    def build(self, tools: Sequence[ScriptedTool]) -> Server[Any]:
        return _toolseam_server(tools, 3600.0)


MUTANTS: tuple[Mutant, ...] = (
    Mutant("mcp-abandons-on-cancel", AbandonsOnCancel, _CANCEL),
    # On 2026-07-28 toolseam's server aborts and awaits every call it still runs when it
    # stops: the disconnect clauses pass there even with the defect.
    Mutant(
        "mcp-abandons-on-cancel-2026",
        AbandonsOnCancel2026,
        frozenset({"mcp.cancel-told", "mcp.cancel-awaited"}),
    ),
    Mutant("mcp-no-input-deadline", NoInputDeadline, frozenset({"mcp.no-retry-aborts"})),
)
