r"""The driver of autogen-core's tool seam: ``StaticWorkbench.call_tool`` with a token.

Tools are `FunctionTool`\s whose function takes ``cancellation_token``; each call runs
``workbench.call_tool(name, args, cancellation_token=token, call_id=...)`` — what
autogen-agentchat's agents call — and the kit's stop button is ``token.cancel()``. A body
listens to that token (``is_cancelled()``, ``add_callback``). Nested calls go through the
same workbench with the parent's token. autogen-core has no batch executor, no tool
timeout, no approval step, no wrapper around dispatch, no listener before or after a tool
and no result observer (its intervention handlers see agent messages, not workbench calls):
those clauses are skipped.

A tool reports as it goes by being a stream tool: a `BaseStreamTool` whose ``run_stream``
yields items before its return value, which ``StaticStreamWorkbench.call_tool_stream`` hands
its caller (the kit's progress sink). The scripted body runs in a task of the generator and
its progress is yielded as it comes. A synchronous function cannot stream (a
`FunctionTool` has no intermediate results), so a thread body's progress fails. A tool has
no way to ask its user a question and there is no process helper in autogen-core (code
executors live in autogen-ext): those clauses are skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Collection, Mapping, Sequence
from typing import Any, NoReturn, final

from autogen_core import CancellationToken
from autogen_core.tools import (
    BaseStreamTool,
    BaseTool,
    FunctionTool,
    StaticStreamWorkbench,
    StaticWorkbench,
    TextResultContent,
    ToolResult,
)
from pydantic import BaseModel

from .._body_reach import ProgressSink
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


class _Args(BaseModel):
    key: str


class _Step(BaseModel):
    """A stream tool's intermediate item: one progress report."""

    progress: float
    message: str


class _Value(BaseModel):
    """A stream tool's return value."""

    value: str


@final
class _Reach:
    """A body's `toolseam.conformance.Reach` in autogen-core: its stream tool's items."""

    def __init__(self, steps: asyncio.Queue[_Step | None] | None) -> None:
        self._steps = steps

    async def progress(self, progress: float, message: str) -> None:
        if self._steps is None:
            raise NotImplementedError("autogen-core: only a stream tool reports as it goes")
        self._steps.put_nowait(_Step(progress=progress, message=message))

    def progress_sync(self, progress: float, message: str) -> NoReturn:
        raise NotImplementedError(
            "autogen-core: a stream tool's run_stream is an async generator; a FunctionTool "
            "of a synchronous function has no intermediate results"
        )

    async def elicit(self, question: str) -> NoReturn:
        raise NotImplementedError("autogen-core: a tool cannot ask its user")

    async def run_process(self, argv: Sequence[str]) -> NoReturn:
        raise NotImplementedError("autogen-core has no process helper")


@final
class _StreamTool(BaseStreamTool[_Args, _Step, _Value]):
    """A scripted body as a stream tool: its progress is yielded as it comes."""

    def __init__(self, tool: ScriptedTool, box: list[StaticWorkbench]) -> None:
        super().__init__(_Args, _Value, tool.name, tool.description)
        self._tool = tool
        self._box = box

    async def run_stream(
        self, args: _Args, cancellation_token: CancellationToken
    ) -> AsyncGenerator[_Step | _Value]:
        steps: asyncio.Queue[_Step | None] = asyncio.Queue()
        listen = _TokenListen(self._box[0], cancellation_token)
        body = asyncio.ensure_future(self._tool.run({"key": args.key}, listen, _Reach(steps)))
        body.add_done_callback(lambda _: steps.put_nowait(None))
        try:
            while (step := await steps.get()) is not None:
                yield step
            yield _Value(value=await body)
        finally:
            body.cancel()  # a no-op once it is done: only a stream closed early stops it

    async def run(self, args: _Args, cancellation_token: CancellationToken) -> _Value:
        last: _Step | _Value | None = None
        async for item in self.run_stream(args, cancellation_token):
            last = item
        assert isinstance(last, _Value)
        return last


def _function_tool(tool: ScriptedTool, box: list[StaticWorkbench]) -> BaseTool[Any, Any]:
    reach = _Reach(None) if tool.reaches else None
    if tool.sync:

        def sync_body(key: str, cancellation_token: CancellationToken) -> str:
            return tool.run_sync({"key": key}, _TokenListen(box[0], cancellation_token), reach)

        return FunctionTool(sync_body, tool.description, name=tool.name)
    if "progress" in tool.reaches:
        return _StreamTool(tool, box)

    async def body(key: str, cancellation_token: CancellationToken) -> str:
        return await tool.run({"key": key}, _TokenListen(box[0], cancellation_token), reach)

    return FunctionTool(body, tool.description, name=tool.name)


async def _stream(
    workbench: StaticStreamWorkbench, call: Call, token: CancellationToken, sink: ProgressSink
) -> Outcome:
    """``call_tool_stream``: its intermediate items to the sink, its last the result."""
    result: ToolResult | None = None
    try:
        async for item in workbench.call_tool_stream(
            call.tool, dict(call.arguments), cancellation_token=token, call_id=call.call_id
        ):
            if isinstance(item, ToolResult):
                result = item
            elif isinstance(item, _Step):
                sink(call.call_id, item.progress, item.message)
    except asyncio.CancelledError:
        if host_cancelled():
            raise
        return no_result(call.call_id, "call_tool_stream raised CancelledError")
    if result is None:
        return no_result(call.call_id, "call_tool_stream ended without a ToolResult")
    return _outcome(call.call_id, result)


@final
class AutogenDriver:
    """Drives autogen-core's `StaticWorkbench` and `FunctionTool`, cancelled by a token."""

    @property
    def subject(self) -> str:
        """``"autogen-core"``."""
        return "autogen-core"

    @property
    def capabilities(self) -> Collection[Capability]:
        """Host cancellation, thread bodies, nested calls, stream tools."""
        return ("host_cancel", "sync_bodies", "nested", "progress")

    @property
    def lacking(self) -> Mapping[Capability, str]:
        """Why autogen-core lacks the capabilities of a body it does not offer."""
        return {
            "elicitation": "a tool cannot ask its user a question and wait for the answer",
            "process": "autogen-core has no process helper; code executors live in autogen-ext",
        }

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
        tools = [_function_tool(t, box) for t in scenario.tools]
        sink = scenario.progress
        token = CancellationToken()
        scenario.stop.connect(token.cancel)
        (call,) = scenario.calls
        if sink is not None:
            streaming = StaticStreamWorkbench(tools)
            box.append(streaming)
            return [await _stream(streaming, call, token, sink)]
        workbench = StaticWorkbench(tools)
        box.append(workbench)
        return [await _call(workbench, call, token)]
