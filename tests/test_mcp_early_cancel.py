"""A request the SDK cancels before the registry call started still publishes one result.

In process: `create_server` and the SDK's own client over its in-memory transport (the
2025-era dispatcher on both ends, which applies ``notifications/cancelled`` by cancelling
the request's task). A middleware placed after toolseam's own holds the request where the
cancellation must land; each test names that window. Both backends.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from typing_extensions import TypedDict

from mcp_fixtures.support import GUARD
from toolseam import ToolExecution, ToolRegistry, ToolResult, ToolRunContext, define_tool
from toolseam.mcp import create_server


class TagArgs(TypedDict):
    tag: str


class Served:
    """A registry whose body and observer report what happened."""

    def __init__(self) -> None:
        self.registry = ToolRegistry()
        self.events: list[str] = []
        self.published = anyio.Event()

        @define_tool(name="hold", description="Hold until aborted.")
        async def hold(args: TagArgs, exec: ToolRunContext) -> str:
            self.events.append("body started")
            await exec.signal.wait()
            exec.signal.raise_if_aborted()
            return "never"

        def observe(exec: ToolExecution, result: ToolResult) -> None:
            info = result.error.info if result.is_error is True else None
            self.events.append(f"published {info.code if info else 'OK'} for {exec.call_id}")
            self.published.set()

        self.registry.register(hold)
        self.registry.on_result(observe)


async def _cancel_once_entered(served: Served, middleware: Any, entered: anyio.Event) -> None:
    server = create_server(served.registry)
    server.middleware.append(middleware)
    with anyio.fail_after(GUARD):
        async with Client(server, mode="legacy") as client:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "hold", {"tag": "t"})
                await entered.wait()
                tg.cancel_scope.cancel()  # the client sends notifications/cancelled
            await served.published.wait()
            # The connection is fine afterwards.
            assert (await client.list_tools()).tools[0].name == "hold"


async def test_cancelled_while_a_later_middleware_awaits_publishes_aborted_before_dispatch() -> (
    None
):
    served = Served()
    entered = anyio.Event()

    async def stall(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call":
            entered.set()
            await anyio.sleep_forever()  # the cancellation lands here: no handler ever runs
        return await call_next(ctx)

    await _cancel_once_entered(served, stall, entered)
    assert served.events == ["published ABORTED_BEFORE_DISPATCH for 2"]


async def test_cancelled_before_the_handler_ran_never_starts_the_body() -> None:
    served = Served()
    entered = anyio.Event()
    cancel_applied = anyio.Event()

    async def finish_first(
        ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "notifications/cancelled":
            # The dispatcher cancelled the request's scope before passing this on.
            cancel_applied.set()
        elif ctx.method == "tools/call":
            entered.set()
            with anyio.CancelScope(shield=True):  # work of its own, finished first
                await cancel_applied.wait()
        # The handler is reached with its scope already cancelled.
        return await call_next(ctx)

    await _cancel_once_entered(served, finish_first, entered)
    assert served.events == ["published ABORTED_BEFORE_DISPATCH for 2"]


@pytest.mark.parametrize("method", ["tools/list", "ping"])
async def test_other_requests_pass_the_toolseam_middleware_untouched(method: str) -> None:
    served = Served()
    server = create_server(served.registry)
    seen: list[str] = []

    async def observe(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        seen.append(ctx.method)
        return await call_next(ctx)

    server.middleware.append(observe)
    with anyio.fail_after(GUARD):
        async with Client(server, mode="legacy") as client:
            if method == "ping":
                await client.session.send_ping()
            else:
                await client.list_tools()
    assert method in seen
    assert served.events == []
