r"""The driver of langchain-core's tool seam: ``BaseTool.ainvoke`` with a tool call.

Tools are `StructuredTool`\s (``coroutine=`` for async bodies, ``func=`` for sync ones,
which langchain-core runs in an executor), with ``handle_tool_error=True`` so a
`ToolException` becomes an error `ToolMessage`. Each call is ``await tool.ainvoke({"type":
"tool_call", ...})``, in a task the kit's stop button cancels: task cancellation is how
LangChain stops a tool. The body has nothing else to listen to. Nested calls are
``ainvoke`` from inside the body. The kit's pre- and post-execute listeners are an async
callback handler's ``on_tool_start`` and ``on_tool_end`` (langchain-core awaits both, before
and after the body), and its result observer another handler's ``on_tool_end`` and
``on_tool_error``; they too hear of nothing but task cancellation. langchain-core has no
executor for a turn's tool calls (that is LangGraph's), no tool timeout, no approval and no
wrapper: those are skipped.

A body reports progress as LangChain streams its users anything a tool does while it runs:
a custom event, ``adispatch_custom_event`` (``dispatch_custom_event`` from a synchronous
body's thread), which reaches a callback handler's ``on_custom_event`` — the kit's progress
sink. It finds its run in its context (langchain-core's config context variable), so what
a body keeps to report later is that context. langchain-core has no way for a tool to ask
the user a question and wait for the answer (LangGraph's ``interrupt`` ends the run) and no
process helper: those clauses are skipped.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Collection, Mapping, Sequence
from typing import Any, NoReturn, cast, final
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.callbacks.manager import adispatch_custom_event, dispatch_custom_event
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel

from .._body_reach import ProgressSink
from .._driver import Call, Capability, ObserverScript, Outcome, Scenario, Stop
from .._scripts import ScriptedTool
from ._common import TaskListen, host_cancelled, no_result, versions

__all__ = ["LangChainDriver"]


class _Args(BaseModel):
    key: str


_PROGRESS = "toolseam.conformance.progress"


@final
class _Reach:
    """A body's `toolseam.conformance.Reach` in LangChain: custom events, from its context."""

    def __init__(self, key: str) -> None:
        self._key = key
        # The tool's run: langchain-core finds the parent of a custom event here.
        self._context = contextvars.copy_context()

    def _data(self, progress: float, message: str) -> dict[str, object]:
        return {"call_id": self._key, "progress": progress, "message": message}

    async def progress(self, progress: float, message: str) -> None:
        event = adispatch_custom_event(_PROGRESS, self._data(progress, message))
        await asyncio.create_task(event, context=self._context)

    def progress_sync(self, progress: float, message: str) -> None:
        dispatch_custom_event(_PROGRESS, self._data(progress, message))

    async def elicit(self, question: str) -> NoReturn:
        raise NotImplementedError("langchain-core: a tool cannot ask its user and wait")

    async def run_process(self, argv: Sequence[str]) -> NoReturn:
        raise NotImplementedError("langchain-core has no process helper")


@final
class _Sink(AsyncCallbackHandler):
    """The kit's progress sink as ``on_custom_event``."""

    def __init__(self, sink: ProgressSink) -> None:
        self._sink = sink

    async def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if name == _PROGRESS and isinstance(data, dict):
            event = cast("dict[str, Any]", data)
            self._sink(str(event["call_id"]), float(event["progress"]), str(event["message"]))


def _outcome(call_id: str, message: object) -> Outcome:
    if not isinstance(message, ToolMessage):
        return Outcome(call_id, "none", f"ainvoke returned {type(message).__name__}")
    text = message.content if isinstance(message.content, str) else str(message.content)
    if message.status == "error":
        return Outcome(call_id, "error", text)
    return Outcome(call_id, "ok", value=text)


@final
class _Stages(AsyncCallbackHandler):
    """The kit's listeners as ``on_tool_start`` and ``on_tool_end``, which ainvoke awaits."""

    def __init__(self, scenario: Scenario) -> None:
        self._scenario = scenario
        self._calls: dict[UUID, Call] = {}

    async def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        key = (inputs or {}).get("key")
        name = str(serialized.get("name"))
        call = self._calls[run_id] = Call(str(kwargs.get("tool_call_id")), name, {"key": str(key)})
        script = self._scenario.pre_execute
        if script is not None:
            await script(call, TaskListen(ToolException))

    async def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        script = self._scenario.post_execute
        call = self._calls.get(run_id)
        if script is not None and call is not None:
            await script(call, TaskListen(ToolException))


@final
class _Observer(AsyncCallbackHandler):
    """The kit's result observer as ``on_tool_end`` and ``on_tool_error``."""

    def __init__(self, observer: ObserverScript) -> None:
        self._observer = observer

    async def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if isinstance(output, ToolMessage):
            self._observer(_outcome(output.tool_call_id, output))

    async def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        call_id = str(kwargs.get("tool_call_id"))
        self._observer(no_result(call_id, f"ainvoke raised {error!r}"))


async def _invoke(
    tools: Mapping[str, BaseTool],
    call: Call,
    stop: Stop | None,
    callbacks: Sequence[BaseCallbackHandler] = (),
) -> Outcome:
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
    task = asyncio.ensure_future(tool.ainvoke(tool_call, {"callbacks": list(callbacks)}))
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
            return tool.run_sync({"key": key}, listen(), _Reach(key) if tool.reaches else None)

        return StructuredTool.from_function(
            func=sync_body,
            name=tool.name,
            description=tool.description,
            args_schema=_Args,
            handle_tool_error=True,
        )

    async def body(key: str) -> str:
        return await tool.run({"key": key}, listen(), _Reach(key) if tool.reaches else None)

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
        """Host cancellation, thread bodies, nested calls, callbacks, custom events."""
        return (
            "host_cancel",
            "sync_bodies",
            "nested",
            "pre_execute",
            "post_execute",
            "result_observer",
            "progress",
        )

    @property
    def lacking(self) -> Mapping[Capability, str]:
        """Why langchain-core lacks the capabilities of a body it does not offer."""
        return {
            "elicitation": "a tool cannot ask its user and wait for the answer (LangGraph's "
            "interrupt ends the run)",
            "process": "langchain-core has no process helper",
        }

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
        callbacks: list[BaseCallbackHandler] = [_Stages(scenario)]
        if scenario.observer is not None:
            callbacks.append(_Observer(scenario.observer))
        if scenario.progress is not None:
            callbacks.append(_Sink(scenario.progress))
        (call,) = scenario.calls
        return [await _invoke(tools, call, scenario.stop, callbacks)]
