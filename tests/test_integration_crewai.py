"""toolseam.integrations.crewai against real CrewAI crews, with a scripted model.

The model is `ScriptLLM`, a subclass of CrewAI's own ``BaseLLM`` that answers each request
from a script (native tool calls, then a final answer) and checks that every request's
history answers each tool call exactly once: no network. CrewAI's telemetry and tracing are
switched off by their environment variables before CrewAI is imported.

Backends: CrewAI itself runs in threads (``Crew.kickoff`` is synchronous; its parallel tool
calls go to a ``ThreadPoolExecutor``), and the adapter's `ToolLoop` owns the event loop the
registry runs on, so every test runs with the loop on asyncio and on trio (the ``loop``
fixture). CrewAI needs ``mcp<2`` while toolseam's test group needs ``mcp>=2``: these tests
run in ``nox -s crewai`` (``TOOLSEAM_CREWAI=1``, where a missing CrewAI fails them) and are
skipped, saying so, in an environment without CrewAI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import pytest

for _name in ("CREWAI_DISABLE_TELEMETRY", "CREWAI_DISABLE_TRACKING"):
    os.environ.setdefault(_name, "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

with warnings.catch_warnings():  # importing CrewAI warns (ImportWarning, crewai.rag)
    warnings.simplefilter("ignore", ImportWarning)
    if os.environ.get("TOOLSEAM_CREWAI") != "1":
        pytest.importorskip("crewai", reason="CrewAI's tests run in `nox -s crewai`")
    import crewai  # noqa: F401

import anyio  # noqa: E402
from crewai import Agent, Crew, CrewOutput, Task  # noqa: E402
from crewai.events.base_events import BaseEvent  # noqa: E402
from crewai.events.event_bus import crewai_event_bus  # noqa: E402
from crewai.events.types.tool_usage_events import ToolUsageFinishedEvent  # noqa: E402
from crewai.llms.base_llm import BaseLLM  # noqa: E402
from crewai.tools import BaseTool  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402
from typing_extensions import TypedDict, override  # noqa: E402

from toolseam import (  # noqa: E402
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    TOOL_TIMEOUT,
    UNKNOWN_TOOL,
    LogEvent,
    ProgressEvent,
    ToolError,
    ToolExecution,
    ToolFailure,
    ToolHost,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
)
from toolseam.integrations.crewai import (  # noqa: E402
    DETAILS_KEY,
    ToolLogEvent,
    ToolLoop,
    ToolProgressEvent,
    registry_tools,
)

# CrewAI's Agent reads its own deprecated fields on construction, which warns.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:crewai.*")


class Args(TypedDict):
    key: str


Turn = list[dict[str, Any]] | str | Callable[[], list[dict[str, Any]] | str]


class ScriptLLM(BaseLLM):
    """CrewAI's model interface, answering from a script; it checks every history."""

    _turns: deque[Turn] = PrivateAttr(default_factory=deque[Turn])
    _requests: list[list[dict[str, Any]]] = PrivateAttr(default_factory=list[list[dict[str, Any]]])
    _tools: list[Any] = PrivateAttr(default_factory=list[Any])

    def script(self, turns: Sequence[Turn]) -> ScriptLLM:
        self._turns.extend(turns)
        return self

    @property
    def requests(self) -> list[list[dict[str, Any]]]:
        """Every request's messages, as plain JSON."""
        return self._requests

    @property
    def tools(self) -> list[Any]:
        """The tool schemas of the first request."""
        return self._tools

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
        history: list[dict[str, Any]] = json.loads(json.dumps(messages, default=str))
        check_history(history)  # what a provider refuses: a tool call without one answer
        self._requests.append(history)
        if not self._tools and tools:
            self._tools = list(tools)
        turn = self._turns.popleft()
        return turn() if callable(turn) else turn

    def supports_function_calling(self) -> bool:  # what CrewAI asks before native calls
        return True

    @override
    def get_context_window_size(self) -> int:
        return 1_000_000


def check_history(history: list[dict[str, Any]]) -> None:
    """Every tool call answered by exactly one tool message after it, and no stray answer."""
    open_calls: set[str] = set()
    answered: set[str] = set()
    for message in history:
        if message.get("role") == "assistant":
            assert not open_calls, f"unanswered tool calls before a new turn: {open_calls}"
            open_calls = {call["id"] for call in message.get("tool_calls") or []}
        elif message.get("role") == "tool":
            call_id = message["tool_call_id"]
            assert call_id in open_calls, f"a tool message answers no open call: {call_id}"
            assert call_id not in answered
            open_calls.discard(call_id)
            answered.add(call_id)
    assert not open_calls, f"unanswered tool calls: {open_calls}"


def tool_call(call_id: str, name: str, key: str = "k") -> dict[str, Any]:
    arguments = json.dumps({"key": key})
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def answers(llm: ScriptLLM, turn: int = 1) -> dict[str, str]:
    """The tool messages of request ``turn`` (0-based), by tool call id."""
    return {m["tool_call_id"]: m["content"] for m in llm.requests[turn] if m.get("role") == "tool"}


def kickoff(tools: list[BaseTool], turns: Sequence[Turn]) -> tuple[CrewOutput, ScriptLLM]:
    llm = ScriptLLM(model="script").script(turns)
    agent = Agent(role="tester", goal="use the tools", backstory="a test", llm=llm, tools=tools)
    task = Task(description="use the tools", expected_output="done", agent=agent)
    return Crew(agents=[agent], tasks=[task]).kickoff(), llm


@pytest.fixture(params=["asyncio", "trio"])
def loop(request: pytest.FixtureRequest) -> Iterator[ToolLoop]:
    """A running `ToolLoop` on each backend."""
    with ToolLoop(backend=request.param) as running:
        yield running


class Recorder:
    """A registry whose result observer keeps every result, and some tools."""

    def __init__(self) -> None:
        self.registry = ToolRegistry()
        self.results: list[ToolResult] = []
        self.registry.on_result(lambda exec, result: self.results.append(result))

    def codes(self) -> list[str | None]:
        return [r.code if isinstance(r, ToolFailure) else None for r in self.results]


def safe(args: Args) -> bool:
    return True


# -- the tools and what CrewAI sees ------------------------------------------------------


def test_import_toolseam_does_not_import_crewai() -> None:
    probe = "import sys, toolseam; assert 'crewai' not in sys.modules"
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)


def test_one_crewai_tool_per_registered_tool_with_the_registrys_schema(loop: ToolLoop) -> None:
    rec = Recorder()

    @define_tool(name="echo", description="Echo a key.")
    async def echo(args: Args, exec: ToolRunContext) -> str:
        return args["key"]

    rec.registry.register(echo)
    [tool] = registry_tools(rec.registry, loop)
    assert (tool.name, tool.description) == ("echo", "Echo a key.")
    _, llm = kickoff([tool], ["done"])
    [sent] = llm.tools
    assert sent["function"]["name"] == "echo"
    # CrewAI sends every tool strict, closing its objects, and drops the top-level title.
    expected = {k: v for k, v in rec.registry.schemas()[0].parameters.items() if k != "title"}
    assert sent["function"]["parameters"] == {**expected, "additionalProperties": False}


def test_arguments_are_checked(loop: ToolLoop) -> None:
    with pytest.raises(TypeError, match=r"^registry must be a ToolRegistry, got dict$"):
        registry_tools({}, loop)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^loop must be a ToolLoop, got NoneType$"):
        registry_tools(ToolRegistry(), None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r'^backend must be "asyncio" or "trio", got \'x\'$'):
        ToolLoop(backend="x")  # type: ignore[arg-type]


# -- one result per call -----------------------------------------------------------------


def test_a_success_reaches_the_model_as_its_text(loop: ToolLoop) -> None:
    rec = Recorder()

    @define_tool(name="echo", description="Echo a key.")
    async def echo(args: Args, exec: ToolRunContext) -> str:
        return f"got {args['key']}"

    rec.registry.register(echo)
    out, llm = kickoff(registry_tools(rec.registry, loop), [[tool_call("c1", "echo")], "done"])
    assert out.raw == "done"
    assert answers(llm) == {"c1": "got k"}
    assert rec.codes() == [None]


def test_a_failure_reaches_the_model_as_its_text_and_the_host_as_its_code(
    loop: ToolLoop,
) -> None:
    rec = Recorder()

    @define_tool(name="pay", description="Pay.")
    def pay(args: Args, exec: ToolRunContext) -> str:
        raise ToolError("card declined", code="DECLINED")

    rec.registry.register(pay)
    out, llm = kickoff(registry_tools(rec.registry, loop), [[tool_call("c1", "pay")], "done"])
    assert answers(llm) == {"c1": "Error: card declined (code: DECLINED)"}
    [record] = out.tasks_output[0].tool_failures
    assert (record.tool_name, record.failure.code) == ("pay", "DECLINED")
    assert record.failure.message == "Error: card declined"
    assert record.failure.details[DETAILS_KEY] == json.loads(json.dumps(rec.results[0].to_json()))


def test_unknown_tools_answer_once_each(loop: ToolLoop) -> None:
    """Removed since: the registry's UNKNOWN_TOOL; never listed: CrewAI's own answer."""
    rec = Recorder()

    @define_tool(name="gone", description="Removed later.")
    async def gone(args: Args, exec: ToolRunContext) -> str:
        return "never"

    registration = rec.registry.register(gone)
    tools = registry_tools(rec.registry, loop)
    registration.remove()
    turns: list[Turn] = [[tool_call("c1", "gone"), tool_call("c2", "invented")], "done"]
    out, llm = kickoff(tools, turns)
    got = answers(llm)
    assert got["c1"] == f'Error: unknown tool "gone" (code: {UNKNOWN_TOOL})'
    assert got["c2"] == "Tool not found"  # CrewAI's: the registry never sees the call
    assert rec.codes() == [UNKNOWN_TOOL]
    codes = {r.tool_name: r.failure.code for r in out.tasks_output[0].tool_failures}
    assert codes["gone"] == UNKNOWN_TOOL


def test_a_registry_timeout_asks_the_body_and_the_model_reads_it(loop: ToolLoop) -> None:
    rec = Recorder()
    finished = threading.Event()

    @define_tool(name="slow", description="Too slow.", timeout=0.05)
    async def slow(args: Args, exec: ToolRunContext) -> str:
        try:
            await exec.signal.wait()  # the deadline aborts the signal: it asks
            exec.signal.raise_if_aborted()
            return "never"
        finally:
            finished.set()

    rec.registry.register(slow)
    _, llm = kickoff(registry_tools(rec.registry, loop), [[tool_call("c1", "slow")], "done"])
    assert finished.is_set()
    assert rec.codes() == [TOOL_TIMEOUT]
    assert answers(llm)["c1"].endswith(f"(code: {TOOL_TIMEOUT})")


def test_crewai_never_answers_a_call_from_its_cache(loop: ToolLoop) -> None:
    """Two identical calls both reach the registry (CrewAI caches tool results by default)."""
    rec = Recorder()

    @define_tool(name="echo", description="Echo.")
    async def echo(args: Args, exec: ToolRunContext) -> str:
        return "same"

    rec.registry.register(echo)
    turns: list[Turn] = [[tool_call("c1", "echo")], [tool_call("c2", "echo")], "done"]
    kickoff(registry_tools(rec.registry, loop), turns)
    assert rec.codes() == [None, None]


# -- stop ----------------------------------------------------------------------------------


@pytest.mark.parametrize("body", ["thread", "async"])
def test_stop_aborts_a_running_call_waits_for_its_body_and_the_history_stays_valid(
    loop: ToolLoop, body: str
) -> None:
    rec = Recorder()
    started, finished = threading.Event(), threading.Event()
    seen_by_stop: list[bool] = []

    if body == "thread":

        @define_tool(name="wait", description="Waits to be stopped.")
        def wait(args: Args, exec: ToolRunContext) -> str:
            started.set()
            try:
                exec.signal.wait_sync(None)
                exec.signal.raise_if_aborted()
                return "never"
            finally:
                finished.set()

    else:

        @define_tool(name="wait", description="Waits to be stopped.")
        async def wait(args: Args, exec: ToolRunContext) -> str:
            started.set()
            try:
                await exec.signal.wait()
                exec.signal.raise_if_aborted()
                return "never"
            finally:
                finished.set()

    rec.registry.register(wait)

    def stopper() -> None:
        assert started.wait(30)
        loop.stop("user pressed stop")
        seen_by_stop.append(finished.is_set())  # stop returned once the body had

    thread = threading.Thread(target=stopper)
    thread.start()
    turns: list[Turn] = [
        [tool_call("c1", "wait")],
        [tool_call("c2", "wait")],  # after the stop: answered, never run
        "done",
    ]
    out, llm = kickoff(registry_tools(rec.registry, loop), turns)
    thread.join(30)
    assert seen_by_stop == [True]
    assert out.raw == "done"
    assert rec.codes() == [TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH]
    assert answers(llm, 1) == {"c1": f"Error: tool call aborted (code: {TOOL_ABORTED})"}
    assert answers(llm, 2)["c2"].endswith(f"(code: {TOOL_ABORTED_BEFORE_DISPATCH})")
    assert loop.stopped
    loop.reset()
    assert not loop.stopped


def test_stop_with_parallel_calls_answers_every_one(loop: ToolLoop) -> None:
    """CrewAI's thread pool runs the calls; a stop aborts them all and each answers once."""
    rec = Recorder()
    entered = threading.Semaphore(0)

    @define_tool(name="wait", description="Waits.", is_concurrency_safe=safe)
    def wait(args: Args, exec: ToolRunContext) -> str:
        entered.release()
        exec.signal.wait_sync(None)
        exec.signal.raise_if_aborted()
        return "never"

    rec.registry.register(wait)

    def stopper() -> None:
        for _ in range(3):
            assert entered.acquire(timeout=30)
        loop.stop()

    thread = threading.Thread(target=stopper)
    thread.start()
    calls = [tool_call(f"c{i}", "wait", f"k{i}") for i in range(3)]
    _, llm = kickoff(registry_tools(rec.registry, loop), [calls, "done"])
    thread.join(30)
    assert rec.codes() == [TOOL_ABORTED] * 3
    assert set(answers(llm)) == {"c0", "c1", "c2"}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_stop_is_idempotent_and_close_stops_running_calls(
    backend: Literal["asyncio", "trio"],
) -> None:
    rec = Recorder()
    started = threading.Semaphore(0)
    finished: list[str] = []

    @define_tool(name="wait", description="Waits.")
    def wait(args: Args, exec: ToolRunContext) -> str:
        started.release()
        exec.signal.wait_sync(None)
        finished.append(args["key"])
        exec.signal.raise_if_aborted()
        return "never"

    rec.registry.register(wait)
    loop = ToolLoop(backend=backend).start()
    [tool] = registry_tools(rec.registry, loop)
    results: list[Any] = []

    def call(key: str) -> threading.Thread:
        caller = threading.Thread(target=lambda: results.append(tool.run(key=key)))
        caller.start()
        assert started.acquire(timeout=30)
        return caller

    first = call("first")
    loop.stop()
    loop.stop()  # idempotent
    assert finished == ["first"]
    first.join(30)
    loop.reset()  # a fresh signal for the next run
    second = call("second")
    loop.close()  # stops the running call, waits for its body, ends the loop
    assert finished == ["first", "second"]
    second.join(30)
    assert [r.code for r in results] == [TOOL_ABORTED, TOOL_ABORTED]  # CrewAI ToolFailures
    loop.close()  # idempotent
    with pytest.raises(RuntimeError, match=r"^the tool loop is not running"):
        loop.stop()


# -- parallel and exclusive ----------------------------------------------------------------


def test_parallel_calls_overlap(loop: ToolLoop) -> None:
    rec = Recorder()
    both = threading.Barrier(2, timeout=30)

    @define_tool(name="meet", description="Meets the other.", is_concurrency_safe=safe)
    def meet(args: Args, exec: ToolRunContext) -> str:
        both.wait()  # only two calls running at once get past this
        return args["key"]

    rec.registry.register(meet)
    calls = [tool_call("c1", "meet", "a"), tool_call("c2", "meet", "b")]
    _, llm = kickoff(registry_tools(rec.registry, loop), [calls, "done"])
    assert answers(llm) == {"c1": "a", "c2": "b"}


def test_an_exclusive_call_runs_alone(loop: ToolLoop) -> None:
    rec = Recorder()
    lock = threading.Lock()
    running: list[str] = []
    alone: list[bool] = []

    @define_tool(name="read", description="Parallel.", is_concurrency_safe=safe)
    async def read(args: Args, exec: ToolRunContext) -> str:
        with lock:
            running.append(args["key"])
        await anyio.lowlevel.checkpoint()
        with lock:
            running.remove(args["key"])
        return "read"

    @define_tool(name="write", description="Exclusive (not concurrency-safe).")
    async def write(args: Args, exec: ToolRunContext) -> str:
        with lock:
            alone.append(not running)
        await anyio.lowlevel.checkpoint()
        with lock:
            alone.append(not running)
        return "written"

    rec.registry.register(read)
    rec.registry.register(write)
    calls = [
        tool_call("c1", "read", "a"),
        tool_call("c2", "write", "w"),
        tool_call("c3", "read", "b"),
    ]
    _, llm = kickoff(registry_tools(rec.registry, loop), [calls, "done"])
    assert answers(llm) == {"c1": "read", "c2": "written", "c3": "read"}
    assert alone == [True, True]


# -- progress and logs ---------------------------------------------------------------------


def test_progress_and_logs_reach_crewais_bus_in_order_before_the_result(loop: ToolLoop) -> None:
    rec = Recorder()
    seen: list[str] = []
    host_seen: list[str] = []

    @define_tool(name="work", description="Reports.")
    async def work(args: Args, exec: ToolRunContext) -> str:
        exec.progress(1, 2, "half")
        exec.log("info", {"step": 1})
        exec.progress(2, 2, "all")
        return "worked"

    def on_progress(exec: ToolExecution, event: ProgressEvent) -> None:
        host_seen.append(f"progress {event.progress:g}")

    def on_log(exec: ToolExecution, event: LogEvent) -> None:
        host_seen.append(f"log {event.level}")

    rec.registry.register(work)
    host = ToolHost(on_progress=on_progress, on_log=on_log)
    with crewai_event_bus.scoped_handlers():

        @crewai_event_bus.on(ToolProgressEvent)
        def progress(source: Any, event: ToolProgressEvent) -> None:
            seen.append(f"progress {event.progress:g} {event.message} {event.tool}")

        @crewai_event_bus.on(ToolLogEvent)
        def log(source: Any, event: ToolLogEvent) -> None:
            seen.append(f"log {event.level} {json.dumps(event.data)}")

        @crewai_event_bus.on(ToolUsageFinishedEvent)
        def finished(source: Any, event: BaseEvent) -> None:
            seen.append("finished")

        tools = registry_tools(rec.registry, loop, host=host)
        kickoff(tools, [[tool_call("c1", "work")], "done"])
        crewai_event_bus.flush()
    assert seen == [
        "progress 1 half work",
        'log info {"step": 1}',
        "progress 2 all work",
        "finished",
    ]
    assert host_seen == ["progress 1", "log info", "progress 2"]


# -- CrewAI's async path -------------------------------------------------------------------


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_arun_waits_for_the_call_without_blocking_the_callers_loop(
    anyio_backend: str,
) -> None:
    rec = Recorder()

    @define_tool(name="echo", description="Echo.")
    async def echo(args: Args, exec: ToolRunContext) -> str:
        return args["key"]

    rec.registry.register(echo)
    with ToolLoop(backend="trio" if anyio_backend == "asyncio" else "asyncio") as own:
        [tool] = registry_tools(rec.registry, own)
        assert await tool.arun(key="x") == "x"
