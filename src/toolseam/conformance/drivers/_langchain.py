r"""The driver of langchain-core's tool seam: ``BaseTool.ainvoke`` with a tool call.

Tools are `StructuredTool`\s (``coroutine=`` for async bodies, ``func=`` for sync ones,
which langchain-core runs in an executor), with ``handle_tool_error=True`` so a
`ToolException` becomes an error `ToolMessage`. Each call is ``await tool.ainvoke({"type":
"tool_call", ...})``, in a task the kit's stop button cancels: task cancellation is how
LangChain stops a tool. The body has nothing else to listen to. Nested calls are
``ainvoke`` from inside the body. langchain-core has no executor for a turn's tool calls
(that is LangGraph's), no tool timeout, no approval and no wrapper: those are skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from typing import final

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel

from .._driver import Call, Capability, Outcome, Scenario, Stop
from .._scripts import ScriptedTool
from ._common import TaskListen, host_cancelled, no_result, versions

__all__ = ["LangChainDriver"]


class _Args(BaseModel):
    key: str


def _outcome(call_id: str, message: object) -> Outcome:
    if not isinstance(message, ToolMessage):
        return Outcome(call_id, "none", f"ainvoke returned {type(message).__name__}")
    text = message.content if isinstance(message.content, str) else str(message.content)
    if message.status == "error":
        return Outcome(call_id, "error", text)
    return Outcome(call_id, "ok", value=text)


async def _invoke(tools: Mapping[str, BaseTool], call: Call, stop: Stop | None) -> Outcome:
    tool = tools.get(call.tool)
    if tool is None:
        # langchain-core looks nothing up: a caller holding no such tool has no result.
        return no_result(
            call.call_id, f"langchain-core has no registry to look {call.tool!r} up in"
        )
    tool_call = {
        "type": "tool_call",
        "name": call.tool,
        "args": dict(call.arguments),
        "id": call.call_id,
    }
    task = asyncio.ensure_future(tool.ainvoke(tool_call))
    if stop is not None:
        stop.connect(task.cancel)
    try:
        message = await task
    except asyncio.CancelledError:
        if host_cancelled():
            raise
        return no_result(call.call_id, "ainvoke was cancelled (CancelledError)")
    return _outcome(call.call_id, message)


def _structured(tool: ScriptedTool, tools: Mapping[str, BaseTool]) -> StructuredTool:
    def listen() -> TaskListen:
        return TaskListen(ToolException, lambda call: _invoke(tools, call, None))

    if tool.sync:

        def sync_body(key: str) -> str:
            return tool.run_sync({"key": key}, listen())

        return StructuredTool.from_function(
            func=sync_body,
            name=tool.name,
            description=tool.description,
            args_schema=_Args,
            handle_tool_error=True,
        )

    async def body(key: str) -> str:
        return await tool.run({"key": key}, listen())

    return StructuredTool.from_function(
        coroutine=body,
        name=tool.name,
        description=tool.description,
        args_schema=_Args,
        handle_tool_error=True,
    )


@final
class LangChainDriver:
    """Drives langchain-core's `StructuredTool.ainvoke`, stopped by task cancellation."""

    @property
    def subject(self) -> str:
        """``"langchain-core"``."""
        return "langchain-core"

    @property
    def capabilities(self) -> Collection[Capability]:
        """Host cancellation, thread bodies, nested calls."""
        return ("host_cancel", "sync_bodies", "nested")

    @property
    def backends(self) -> Sequence[str]:
        """Asyncio only."""
        return ("asyncio",)

    def versions(self) -> Mapping[str, str]:
        """langchain-core."""
        return versions("langchain-core")

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        """One call, in a task the stop button cancels."""
        tools: dict[str, BaseTool] = {}
        for tool in scenario.tools:
            tools[tool.name] = _structured(tool, tools)
        (call,) = scenario.calls
        return [await _invoke(tools, call, scenario.stop)]
