r"""The driver of CrewAI's tool execution: a crew whose agent makes native tool calls.

Each scenario is one ``Crew`` of one ``Agent`` with one ``Task``, started with CrewAI's own
async entry point, ``await crew.kickoff_async()`` (which runs ``crew.kickoff`` in a thread,
``asyncio.to_thread``). The agent's model is a scripted ``BaseLLM`` (CrewAI's own model
interface, no network): its first answer is the scenario's tool calls, all in one turn, and
its second the final answer. CrewAI runs a turn's native tool calls itself: one alone in
its executor's thread, several in a ``ThreadPoolExecutor`` of up to eight workers, each
through the tool's ``run``. The tools are ``BaseTool`` subclasses: a synchronous body is
``_run``; an async body is a ``_run`` returning a coroutine, which ``BaseTool.run`` runs with
an ``asyncio.run`` of its own, in that worker thread. (The scripted coroutine hands its
steps back to the kit's loop, where the probe lives: CrewAI's thread waits for it all the
same.) Each call's outcome is the tool message CrewAI put in the history it sends the
model next: a body's exception reaches the model as ``"Error executing tool: ..."`` and a
tool it does not have as ``"Tool not found"``.

CrewAI cancels nothing: no tool is told to stop, and the ``with ThreadPoolExecutor`` waits
for every call. The kit's stop button is what an asyncio host has, cancelling the task that
awaits ``kickoff_async``: the await ends, CrewAI's thread runs on, and no call has an
outcome. A body has nothing to listen to. A tool has no deadline of its own (an agent's
``max_execution_time`` is its task's, waited out by the same kind of ``with``), no approval,
no wrapper, no way to ask its user a question and no process helper: those clauses are
skipped. The kit's pre- and post-execute listeners are CrewAI's before- and after-tool-call
hooks (``register_before_tool_call_hook``: global, synchronous, run in the call's thread;
the driver's hooks run the scenario's listener on the kit's loop and wait for it, then
allow the call); they too hear of nothing.

A body reports progress the way CrewAI lets anything tell its user something: an event of
its own emitted on CrewAI's event bus (``crewai_event_bus.emit``, which hands it to the
handlers in the bus's thread pool and returns), and the kit's progress sink is a handler of
that event (``crewai_event_bus.on``). The body waits for the handlers (``emit`` returns a
future of them), so the measurement does not depend on when the bus's pool runs them.
"""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, NoReturn, final

# CrewAI reports to its servers unless told not to: the kit measures, it sends nothing.
for _name in ("CREWAI_DISABLE_TELEMETRY", "CREWAI_DISABLE_TRACKING"):
    os.environ.setdefault(_name, "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

with warnings.catch_warnings():  # importing CrewAI warns (ImportWarning, crewai.rag)
    warnings.simplefilter("ignore", ImportWarning)
    from crewai import Agent, Crew, Task  # after the telemetry switches
    from crewai.events.base_events import BaseEvent
    from crewai.events.event_bus import crewai_event_bus
    from crewai.hooks import (
        ToolCallHookContext,
        register_after_tool_call_hook,
        register_before_tool_call_hook,
    )
    from crewai.llms.base_llm import BaseLLM
    from crewai.tools import BaseTool
from pydantic import BaseModel, PrivateAttr  # noqa: E402
from typing_extensions import override  # noqa: E402

from .._body_reach import ProgressSink  # noqa: E402
from .._driver import Call, Capability, ListenerScript, Outcome, Scenario  # noqa: E402
from .._scripts import ScriptedTool  # noqa: E402
from ._common import TaskListen, host_cancelled, no_result, versions  # noqa: E402

__all__ = ["CrewAIDriver"]

_ERROR = "Error executing tool: "
_NOT_FOUND = "Tool not found"


class _ToolFailed(Exception):
    """A scripted body's failure, which CrewAI turns into ``"Error executing tool: ..."``."""


class _Args(BaseModel):
    key: str


class _Progress(BaseEvent):
    """A scripted body's progress, as a CrewAI event of a user's own."""

    type: str = "toolseam_conformance_progress"
    sink: int
    key: str
    progress: float
    message: str | None = None


_SINKS: dict[int, ProgressSink] = {}  # each scenario's progress sink, by a number of its own


def _deliver(source: Any, event: BaseEvent) -> None:
    sink = _SINKS.get(event.sink) if isinstance(event, _Progress) else None
    if sink is not None and isinstance(event, _Progress):
        sink(event.key, event.progress, event.message)


_handler: list[bool] = []  # the handler is registered once, at the first progress scenario


class _Listeners:
    """One scenario's listeners, for the global hooks: by the agent that makes its calls."""

    def __init__(self, scenario: Scenario, loop: asyncio.AbstractEventLoop) -> None:
        self.scenario = scenario
        self.loop = loop

    def call(self, context: ToolCallHookContext) -> Call:
        key = str(context.tool_input.get("key"))
        for call in self.scenario.calls:
            if call.tool == context.tool_name and call.arguments.get("key") == key:
                return call
        return Call(f"{context.tool_name}:{key}", context.tool_name, {"key": key})

    def run(self, script: ListenerScript | None, context: ToolCallHookContext) -> None:
        if script is None:
            return
        call = self.call(context)

        async def listening() -> None:
            await script(call, TaskListen(_ToolFailed))

        # The hook runs in the call's thread: the listener on the kit's loop, waited for.
        asyncio.run_coroutine_threadsafe(listening(), self.loop).result()


_LISTENERS: dict[int, _Listeners] = {}  # by id() of the scenario's agent
_hooks: list[bool] = []  # the hooks are registered once, at the first scenario


def _listeners(context: ToolCallHookContext) -> _Listeners | None:
    return _LISTENERS.get(id(context.agent))


def _before(context: ToolCallHookContext) -> None:
    found = _listeners(context)
    if found is not None:
        found.run(found.scenario.pre_execute, context)


def _after(context: ToolCallHookContext) -> None:
    found = _listeners(context)
    if found is not None:
        found.run(found.scenario.post_execute, context)


@final
class _Reach:
    """A body's `toolseam.conformance.Reach` in CrewAI: events on its bus."""

    def __init__(self, source: BaseTool, sink: int, key: str) -> None:
        self._source = source
        self._sink = sink
        self._key = key

    def _emit(self, progress: float, message: str) -> Future[None] | None:
        event = _Progress(sink=self._sink, key=self._key, progress=progress, message=message)
        return crewai_event_bus.emit(self._source, event)

    # Each waits for the bus's handlers (emit's future), so what the kit sees does not
    # depend on when the bus's pool gets round to an event: what CrewAI delivers, it sees.

    def progress_sync(self, progress: float, message: str) -> None:
        handled = self._emit(progress, message)
        if handled is not None:
            handled.result()

    async def progress(self, progress: float, message: str) -> None:
        handled = self._emit(progress, message)
        if handled is not None:
            await asyncio.wrap_future(handled)

    async def elicit(self, question: str) -> NoReturn:
        raise NotImplementedError("crewai: a tool cannot ask its user and wait for the answer")

    async def run_process(self, argv: Sequence[str]) -> NoReturn:
        raise NotImplementedError("crewai has no process helper")


@final
class _Tool(BaseTool):
    """One scripted tool as a CrewAI tool."""

    args_schema: type[BaseModel] = _Args
    _scripted: ScriptedTool = PrivateAttr()
    _loop: asyncio.AbstractEventLoop = PrivateAttr()
    _sink: int = PrivateAttr()

    def __init__(self, scripted: ScriptedTool, loop: asyncio.AbstractEventLoop, sink: int) -> None:
        super().__init__(name=scripted.name, description=scripted.description)
        self._scripted = scripted
        self._loop = loop
        self._sink = sink

    @override
    def _run(self, *args: Any, **kwargs: Any) -> Any:
        scripted = self._scripted
        arguments = {"key": str(kwargs.get("key"))}
        listen = TaskListen(_ToolFailed)
        reach = _Reach(self, self._sink, arguments["key"]) if scripted.reaches else None
        if scripted.sync:
            return scripted.run_sync(arguments, listen, reach)
        kit_loop = self._loop

        async def body() -> str:
            # In CrewAI's asyncio.run, in its worker thread: the scripted steps run on the
            # kit's loop (the probe's), and this coroutine waits for them.
            future = asyncio.run_coroutine_threadsafe(
                scripted.run(arguments, listen, reach), kit_loop
            )
            return await asyncio.wrap_future(future)

        return body()  # BaseTool.run runs a returned coroutine with asyncio.run


class _ScriptedLLM(BaseLLM):
    """CrewAI's model interface, answering from the scenario: its calls, then ``done``."""

    _calls: list[dict[str, Any]] = PrivateAttr(default_factory=list[dict[str, Any]])
    _turns: int = PrivateAttr(default=0)
    _history: list[Any] = PrivateAttr(default_factory=list[Any])

    def script(self, calls: Sequence[Call]) -> None:
        """Answer the first request with ``calls``, in one turn."""
        self._calls = [
            {
                "id": c.call_id,
                "type": "function",
                "function": {"name": c.tool, "arguments": json.dumps(dict(c.arguments))},
            }
            for c in calls
        ]

    @property
    def history(self) -> list[Any]:
        """The messages of the request after the tool calls (their answers among them)."""
        return self._history

    @override
    def call(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        self._turns += 1
        if self._turns == 1:
            return list(self._calls)
        if self._turns == 2 and isinstance(messages, list):
            self._history = list(messages)  # pyright: ignore[reportUnknownArgumentType]
        return "done"

    def supports_function_calling(self) -> bool:  # what CrewAI asks before native calls
        """Native tool calls: yes."""
        return True

    @override
    def get_context_window_size(self) -> int:
        return 1_000_000


def _outcomes(calls: Sequence[Call], history: Sequence[Any]) -> list[Outcome]:
    answers: dict[str, str] = {}
    for message in history:
        if isinstance(message, dict) and message.get("role") == "tool":  # pyright: ignore[reportUnknownMemberType]
            answers.setdefault(str(message.get("tool_call_id")), str(message.get("content")))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    outcomes: list[Outcome] = []
    for call in calls:
        text = answers.get(call.call_id)
        if text is None:
            outcomes.append(no_result(call.call_id, "no tool message answers the call"))
        elif text.startswith(_ERROR) or text == _NOT_FOUND:
            outcomes.append(Outcome(call.call_id, "error", text))
        else:
            outcomes.append(Outcome(call.call_id, "ok", value=text))
    return outcomes


@final
class CrewAIDriver:
    """Drives a CrewAI crew's native tool calls, stopped by cancelling ``kickoff_async``."""

    @property
    def subject(self) -> str:
        """``"crewai"``."""
        return "crewai"

    @property
    def capabilities(self) -> Collection[Capability]:
        """Host cancellation, thread bodies, parallel calls, tool-call hooks, bus events."""
        return ("host_cancel", "sync_bodies", "batch", "pre_execute", "post_execute", "progress")

    @property
    def lacking(self) -> Mapping[Capability, str]:
        """Why CrewAI lacks the capabilities of a body it does not offer."""
        return {
            "timeouts": "a CrewAI tool has no deadline (an agent's max_execution_time is its "
            "whole task's)",
            "elicitation": "a CrewAI tool cannot ask its user and wait for the answer",
            "process": "CrewAI has no process helper",
        }

    @property
    def backends(self) -> Sequence[str]:
        """Asyncio only (``kickoff_async`` is ``asyncio.to_thread``)."""
        return ("asyncio",)

    def versions(self) -> Mapping[str, str]:
        """Crewai."""
        return versions("crewai")

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        """One crew, one turn of every call; the stop button cancels ``kickoff_async``."""
        loop = asyncio.get_running_loop()
        sink = len(_SINKS) + 1
        if scenario.progress is not None:
            # Never unregistered: CrewAI's bus knows no calls, and hands on a late event too.
            _SINKS[sink] = scenario.progress
            if not _handler:
                crewai_event_bus.register_handler(_Progress, _deliver)
                _handler.append(True)
        llm = _ScriptedLLM(model="scripted")
        llm.script(scenario.calls)
        agent = Agent(
            role="conformance",
            goal="call the tools",
            backstory="the kit's scripted agent",
            llm=llm,
            tools=[_Tool(t, loop, sink) for t in scenario.tools],
            max_retry_limit=0,
            verbose=False,
        )
        if not _hooks:
            register_before_tool_call_hook(_before)
            register_after_tool_call_hook(_after)
            _hooks.append(True)
        _LISTENERS[id(agent)] = _Listeners(scenario, loop)
        task = Task(description="call the tools", expected_output="done", agent=agent)
        crew = Crew(agents=[agent], tasks=[task], verbose=False)
        kickoff = asyncio.ensure_future(crew.kickoff_async())  # pyright: ignore[reportUnknownMemberType]
        scenario.stop.connect(kickoff.cancel)
        try:
            return await self._outcomes(scenario, kickoff, llm)
        finally:
            _LISTENERS.pop(id(agent), None)

    @staticmethod
    async def _outcomes(
        scenario: Scenario, kickoff: asyncio.Future[Any], llm: _ScriptedLLM
    ) -> list[Outcome]:
        try:
            await kickoff
        except asyncio.CancelledError:
            if host_cancelled():
                raise
            why = "kickoff_async was cancelled: CrewAI's thread runs on and answers nobody"
            return [no_result(c.call_id, why) for c in scenario.calls]
        except Exception as error:
            return [no_result(c.call_id, f"the crew raised {error!r}") for c in scenario.calls]
        return _outcomes(scenario.calls, llm.history)
