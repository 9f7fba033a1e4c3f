r"""The driver of autogen-core's tool seam: ``StaticWorkbench.call_tool`` with a token.

Tools are `FunctionTool`\s whose function takes ``cancellation_token``; each call runs
``workbench.call_tool(name, args, cancellation_token=token, call_id=...)`` — what
autogen-agentchat's agents call — and the kit's stop button is ``token.cancel()``. A body
listens to that token (``is_cancelled()``, ``add_callback``). Nested calls go through the
same workbench with the parent's token. autogen-core has no batch executor, no tool
timeout, no approval step, no wrapper around dispatch, no listener before or after a tool
and no result observer (its intervention handlers see agent messages, not workbench calls):
those clauses are skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from typing import NoReturn, final

from autogen_core import CancellationToken
from autogen_core.tools import FunctionTool, StaticWorkbench, TextResultContent, ToolResult

from .._driver import Call, Capability, Outcome, Scenario
from .._scripts import ScriptedTool
from ._common import host_cancelled, no_result, versions

__all__ = ["AutogenDriver"]


@final
class _TokenListen:
    """A body's view of its `CancellationToken`."""

    def __init__(self, workbench: StaticWorkbench, token: CancellationToken) -> None:
        self._workbench = workbench
        self._token = token

    def is_told(self) -> bool:
        return self._token.is_cancelled()

    async def wait(self) -> None:
        loop = asyncio.get_running_loop()
        told = asyncio.Event()

        def on_cancel() -> None:
            loop.call_soon_threadsafe(told.set)

        self._token.add_callback(on_cancel)
        await told.wait()

    def stop(self) -> NoReturn:
        raise asyncio.CancelledError()

    def fail(self, message: str) -> NoReturn:
        raise RuntimeError(message)

    async def call(self, call: Call) -> Outcome:
        return await _call(self._workbench, call, self._token)


def _outcome(call_id: str, result: ToolResult) -> Outcome:
    text = "".join(p.content for p in result.result if isinstance(p, TextResultContent))
    if result.is_error:
        return Outcome(call_id, "error", text)
    return Outcome(call_id, "ok", value=text)


async def _call(workbench: StaticWorkbench, call: Call, token: CancellationToken) -> Outcome:
    try:
        result = await workbench.call_tool(
            call.tool, dict(call.arguments), cancellation_token=token, call_id=call.call_id
        )
    except asyncio.CancelledError:
        if host_cancelled():
            raise
        return no_result(call.call_id, "call_tool raised CancelledError")
    return _outcome(call.call_id, result)


def _function_tool(tool: ScriptedTool, box: list[StaticWorkbench]) -> FunctionTool:
    if tool.sync:

        def sync_body(key: str, cancellation_token: CancellationToken) -> str:
            return tool.run_sync({"key": key}, _TokenListen(box[0], cancellation_token))

        return FunctionTool(sync_body, tool.description, name=tool.name)

    async def body(key: str, cancellation_token: CancellationToken) -> str:
        return await tool.run({"key": key}, _TokenListen(box[0], cancellation_token))

    return FunctionTool(body, tool.description, name=tool.name)


@final
class AutogenDriver:
    """Drives autogen-core's `StaticWorkbench` and `FunctionTool`, cancelled by a token."""

    @property
    def subject(self) -> str:
        """``"autogen-core"``."""
        return "autogen-core"

    @property
    def capabilities(self) -> Collection[Capability]:
        """Host cancellation, thread bodies, nested calls."""
        return ("host_cancel", "sync_bodies", "nested")

    @property
    def backends(self) -> Sequence[str]:
        """Asyncio only."""
        return ("asyncio",)

    def versions(self) -> Mapping[str, str]:
        """autogen-core."""
        return versions("autogen-core")

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        """One workbench per scenario; one call (autogen-core has no batch executor)."""
        box: list[StaticWorkbench] = []
        workbench = StaticWorkbench([_function_tool(t, box) for t in scenario.tools])
        box.append(workbench)
        token = CancellationToken()
        scenario.stop.connect(token.cancel)
        (call,) = scenario.calls
        return [await _call(workbench, call, token)]
