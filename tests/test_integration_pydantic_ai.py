"""`toolseam.integrations.pydantic_ai`: a registry as a pydantic-ai toolset, driven by real agents.

Every test runs a real `pydantic_ai.Agent` with pydantic-ai's own test models (`FunctionModel`
scripts each model turn, `TestModel` calls every tool), no mock of pydantic-ai.

asyncio only: pydantic-ai cannot run an agent on trio (its run and its tool calls are asyncio
tasks: `Agent.run` under trio fails with "no running event loop", pydantic/pydantic-ai#7112).
`test_pydantic_ai_still_cannot_run_on_trio` checks that this is still so; when it fails,
pydantic-ai has gained trio support and this module's `anyio_backend` should cover trio too.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.from_thread
import pytest
from pydantic_ai import (
    Agent,
    CancellationToken,
    RunCancelled,
    RunContext,
    UnexpectedModelBehavior,
    capture_run_messages,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.external_events import resolve_external_event, wait_for_external_event
from pydantic_ai.messages import (
    AgentStreamEvent,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage
from typing_extensions import TypedDict

from toolseam import (
    CAPABILITY_UNAVAILABLE,
    INVALID_ARGS,
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    TOOL_TIMEOUT,
    AbortSignal,
    ElicitationRequest,
    Elicited,
    LogEvent,
    ProgressEvent,
    ToolError,
    ToolEvent,
    ToolExecution,
    ToolHost,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    define_tool,
    nested_input,
)
from toolseam.integrations.pydantic_ai import (
    CODE_METADATA_KEY,
    RegistryToolset,
    ToolLogEvent,
    ToolProgressEvent,
)

GUARD = 15  # seconds: a guard against a hang only; every ordering below is decided by events


@pytest.fixture
def anyio_backend() -> str:
    """pydantic-ai runs on asyncio only (see the module docstring)."""
    return "asyncio"


class AddArgs(TypedDict):
    a: int
    b: int


class NoArgs(TypedDict):
    pass


def parallel(_args: object) -> bool:
    return True


@define_tool(name="add", description="Add two integers.", is_concurrency_safe=parallel)
async def add(args: AddArgs, exec: ToolRunContext) -> dict[str, int]:
    return {"sum": args["a"] + args["b"]}


Turn = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


@dataclass
class Script:
    """A `FunctionModel` that answers turn by turn and keeps what it was sent."""

    turns: Sequence[Turn]
    seen: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])
    tools: list[list[str]] = field(default_factory=list[list[str]])

    def model(self) -> FunctionModel:
        # async, so pydantic-ai calls it on the loop rather than in a worker thread
        async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.seen.append(list(messages))
            self.tools.append([tool.name for tool in info.function_tools])
            return self.turns[len(self.seen) - 1](messages, info)

        # Streamed too (an event_stream_handler streams each model request): the same turns,
        # each in one chunk.
        async def stream(
            messages: list[ModelMessage], info: AgentInfo
        ) -> AsyncIterator[str | DeltaToolCalls]:
            response = await respond(messages, info)
            calls: DeltaToolCalls = {}
            for index, part in enumerate(response.parts):
                if isinstance(part, TextPart):
                    yield part.content
                elif isinstance(part, ToolCallPart):
                    calls[index] = DeltaToolCall(
                        part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id
                    )
            if calls:
                yield calls

        return FunctionModel(respond, stream_function=stream)

    def returns(self, turn: int) -> list[ToolReturnPart]:
        """The tool returns the model was sent in (0-based) request ``turn``."""
        last = self.seen[turn][-1]
        assert isinstance(last, ModelRequest)
        return [part for part in last.parts if isinstance(part, ToolReturnPart)]


def calls(*parts: tuple[str, object, str]) -> Turn:
    def turn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(
            parts=[ToolCallPart(name, args, tool_call_id=call_id) for name, args, call_id in parts]
        )

    return turn


def answer(text: str = "done") -> Turn:
    def turn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(text)])

    return turn


def agent_for(script: Script, toolset: RegistryToolset) -> Agent[None, str]:
    return Agent(script.model(), toolsets=[toolset])


@dataclass
class Published:
    """Every result the registry published, with its call id."""

    results: list[ToolResult] = field(default_factory=list[ToolResult])
    call_ids: list[str] = field(default_factory=list[str])

    def __call__(self, exec: ToolExecution, result: ToolResult) -> None:
        self.results.append(result)
        self.call_ids.append(exec.call_id)

    def codes(self) -> list[str | None]:
        return [None if isinstance(r, ToolSuccess) else r.code for r in self.results]

    def by_call(self) -> dict[str, str | None]:
        """The code published for each call id (``None`` for a success); one per call."""
        assert len(set(self.call_ids)) == len(self.call_ids), self.call_ids
        return dict(zip(self.call_ids, self.codes(), strict=True))


@pytest.fixture
def published() -> Published:
    return Published()


@pytest.fixture
def registry(published: Published) -> ToolRegistry:
    registry = ToolRegistry()
    registry.on_result(published)
    return registry


class TestResults:
    async def test_success_returns_the_value(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        registry.register(add)
        script = Script([calls(("add", {"a": 1, "b": 2}, "call_1")), answer("3")])
        result = await agent_for(script, RegistryToolset(registry)).run("1 + 2?")

        assert result.output == "3"
        (returned,) = script.returns(1)
        assert (returned.tool_call_id, returned.content, returned.outcome) == (
            "call_1",
            {"sum": 3},
            "success",
        )
        assert returned.metadata is None
        (success,) = published.results
        assert isinstance(success, ToolSuccess)
        assert success.value == {"sum": 3}

    async def test_each_call_carries_its_call_id_its_own_signal_and_the_run_context(
        self, registry: ToolRegistry
    ) -> None:
        seen: list[tuple[str, AbortSignal, object]] = []

        @define_tool(name="probe", description="Record the call.", is_concurrency_safe=parallel)
        async def probe(args: NoArgs, exec: ToolRunContext) -> None:
            seen.append((exec.call_id, exec.signal, exec.agent))

        registry.register(probe)
        script = Script([calls(("probe", {}, "call_1"), ("probe", {}, "call_2")), answer()])
        await agent_for(script, RegistryToolset(registry)).run("go")

        assert sorted(call_id for call_id, _, _ in seen) == ["call_1", "call_2"]
        assert seen[0][1] is not seen[1][1]
        for call_id, signal, agent in seen:
            assert not signal.aborted
            assert isinstance(agent, RunContext)
            assert agent.tool_call_id == call_id

    async def test_test_model_calls_the_registry_tools(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        registry.register(add)
        model = TestModel()
        result = await Agent(model, toolsets=[RegistryToolset(registry)]).run("go")

        # TestModel calls every tool with arguments generated from its schema (a=0, b=0).
        assert result.output == '{"add":{"sum":0}}'
        assert published.codes() == [None]
        parameters = model.last_model_request_parameters
        assert parameters is not None
        (definition,) = parameters.function_tools
        assert definition.name == "add"
        assert definition.description == "Add two integers."
        assert definition.parameters_json_schema == add.parameters
        assert definition.sequential is False

    async def test_tools_are_listed_from_the_registry_at_every_request(
        self, registry: ToolRegistry
    ) -> None:
        registry.register(add)

        @define_tool(name="late", description="Registered mid-run.")
        async def late(args: NoArgs, exec: ToolRunContext) -> str:
            return "late"

        def register_late(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            registry.register(late)
            return calls(("add", {"a": 1, "b": 1}, "call_1"))(messages, info)

        script = Script([register_late, answer()])
        await agent_for(script, RegistryToolset(registry)).run("go")

        assert script.tools == [["add"], ["add", "late"]]

    async def test_invalid_arguments_ask_the_model_to_retry(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        registry.register(add)
        script = Script(
            [
                calls(("add", {"a": "one"}, "call_1")),
                calls(("add", {"a": 1, "b": 2}, "call_2")),
                answer("3"),
            ]
        )
        result = await agent_for(script, RegistryToolset(registry)).run("1 + 2?")

        assert result.output == "3"
        (retry,) = script.returns(1)
        assert retry.tool_call_id == "call_1"
        assert retry.outcome == "retried"
        message = published.results[0]
        assert not isinstance(message, ToolSuccess)
        assert retry.content == message.error.message
        assert str(retry.content).startswith('invalid arguments for tool "add": a: ')
        assert published.codes() == [INVALID_ARGS, None]

    async def test_arguments_pydantic_would_refuse_reach_the_registry(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        """toolseam validates: even arguments that are not an object reach `execute`."""
        registry.register(add)
        script = Script([calls(("add", "[1, 2]", "call_1")), answer()])
        await agent_for(script, RegistryToolset(registry)).run("go")

        assert published.codes() == [INVALID_ARGS]
        assert script.returns(1)[0].outcome == "retried"

    async def test_arguments_that_are_not_json_are_answered_by_pydantic_ai(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        """A documented limit: such a call never reaches the registry."""
        registry.register(add)
        script = Script([calls(("add", '{"a": 1,', "call_1")), answer()])
        await agent_for(script, RegistryToolset(registry)).run("go")

        assert published.results == []
        assert script.returns(1)[0].outcome == "retried"

    async def test_the_retry_budget_is_the_toolsets(self, registry: ToolRegistry) -> None:
        registry.register(add)
        script = Script([calls(("add", {}, "call_1")), answer()])
        agent = agent_for(script, RegistryToolset(registry, max_retries=0))

        with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries count of 0"):
            await agent.run("go")

    @pytest.mark.parametrize(
        ("error", "text", "code"),
        [
            (ToolError("disk full", code="DISK_FULL"), "Error: disk full", "DISK_FULL"),
            (ValueError("no such row"), "Error: no such row", None),
        ],
    )
    async def test_a_failure_reaches_the_model_as_text_with_its_code(
        self, registry: ToolRegistry, error: Exception, text: str, code: str | None
    ) -> None:
        @define_tool(name="fail", description="Always fails.")
        async def fail(args: NoArgs, exec: ToolRunContext) -> str:
            raise error

        registry.register(fail)
        script = Script([calls(("fail", {}, "call_1")), answer()])
        await agent_for(script, RegistryToolset(registry)).run("go")

        (returned,) = script.returns(1)
        assert returned.content == text
        assert returned.metadata == {CODE_METADATA_KEY: code}

    def test_only_a_registry_is_accepted(self) -> None:
        with pytest.raises(TypeError, match=r"^RegistryToolset expects a ToolRegistry, got dict$"):
            RegistryToolset({})  # type: ignore[arg-type]


@dataclass
class Bodies:
    """What the bodies of one test did; ``running`` counts bodies that have not returned."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    running: int = 0
    events: list[str] = field(default_factory=list[str])

    def enter(self, name: str) -> None:
        with self.lock:
            self.running += 1
            self.events.append(f"{name} started")

    def leave(self, name: str, how: str) -> None:
        with self.lock:
            self.running -= 1
            self.events.append(f"{name} {how}")


Stop = Literal["token", "run_context", "task", "scope"]


async def run_then_stop(
    agent: Agent[None, str],
    how: Stop,
    ready: Callable[[], Awaitable[object]],
    *,
    context: Sequence[RunContext[object]] = (),
    after_stop: Callable[[], Awaitable[object]] | None = None,
    at_exit: Callable[[], None] = lambda: None,
) -> list[ModelMessage]:
    """Run ``agent``, stop it the given way once ``ready`` returns, and return its history.

    ``after_stop`` runs right after the stop; ``at_exit`` the moment the cancellation has left
    ``agent.run``.
    """
    outcome: BaseException | None = None
    with capture_run_messages() as history:
        if how == "task":
            task = asyncio.ensure_future(agent.run("go"))

            async def stop() -> None:
                await ready()
                task.cancel()
                if after_stop is not None:
                    await after_stop()

            async with anyio.create_task_group() as group:
                group.start_soon(stop)
                try:
                    await task
                except asyncio.CancelledError as error:  # the run's task, not this one
                    outcome = error
                finally:
                    at_exit()
            assert isinstance(outcome, asyncio.CancelledError)
        elif how == "scope":
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as group:

                    async def stop() -> None:
                        await ready()
                        scope.cancel()
                        if after_stop is not None:
                            with anyio.CancelScope(shield=True):
                                await after_stop()

                    group.start_soon(stop)
                    try:
                        await agent.run("go")
                    finally:
                        at_exit()
            assert scope.cancelled_caught
        else:
            token = CancellationToken()

            async def stop() -> None:
                await ready()
                if how == "token":
                    token.cancel()
                else:
                    context[0].cancel()
                if after_stop is not None:
                    await after_stop()

            async with anyio.create_task_group() as group:
                group.start_soon(stop)
                try:
                    await agent.run("go", cancellation_token=token)
                except RunCancelled as error:
                    outcome = error
                finally:
                    at_exit()
            assert isinstance(outcome, RunCancelled)
    return list(history)


def interrupted_turn(history: list[ModelMessage], call_ids: list[str]) -> None:
    """pydantic-ai's record of a turn cancelled before any of its calls returned."""
    *_, response, request = history
    assert isinstance(response, ModelResponse)
    assert [part.tool_call_id for part in response.tool_calls] == call_ids
    assert isinstance(request, ModelRequest)
    assert request.state == "interrupted"
    assert request.parts == []


class TestCancellation:
    @pytest.mark.parametrize("how", ["token", "run_context", "task", "scope"])
    async def test_a_cancelled_run_aborts_and_awaits_every_body(
        self, registry: ToolRegistry, published: Published, how: Stop
    ) -> None:
        bodies = Bodies()
        async_started = anyio.Event()
        thread_started = anyio.Event()
        context: list[RunContext[object]] = []
        signals: list[AbortSignal] = []

        @define_tool(name="wait", description="Waits for its signal.", is_concurrency_safe=parallel)
        async def wait(args: NoArgs, exec: ToolRunContext) -> str:
            assert isinstance(exec.agent, RunContext)
            context.append(exec.agent)
            signals.append(exec.signal)
            bodies.enter("wait")
            async_started.set()
            try:
                await exec.signal.wait()
            except anyio.get_cancelled_exc_class():
                bodies.leave("wait", "cancelled")
                raise
            bodies.leave("wait", "saw the abort")
            return "stopped"

        release = threading.Event()

        @define_tool(name="poll", description="Polls its signal.", is_concurrency_safe=parallel)
        def poll(args: NoArgs, exec: ToolRunContext) -> str:
            signals.append(exec.signal)
            bodies.enter("poll")
            anyio.from_thread.run_sync(thread_started.set)
            while not exec.signal.wait_sync(0.01):
                pass
            # Clean-up that lasts until everything else is quiet: a run that did not wait
            # for this thread would be over by then.
            release.wait(GUARD)
            bodies.leave("poll", "saw the abort")
            return "stopped"

        registry.register(wait)
        registry.register(poll)

        async def ready() -> None:
            await async_started.wait()
            await thread_started.wait()

        async def after_stop() -> None:
            await anyio.wait_all_tasks_blocked()
            release.set()

        at_exit: list[tuple[int, list[str]]] = []
        script = Script([calls(("wait", {}, "call_1"), ("poll", {}, "call_2")), answer()])
        history = await run_then_stop(
            agent_for(script, RegistryToolset(registry)),
            how,
            ready,
            context=context,
            after_stop=after_stop,
            at_exit=lambda: at_exit.append((bodies.running, list(bodies.events))),
        )

        # When the cancellation left agent.run, no body was running: the thread had returned.
        ((running, events),) = at_exit
        assert running == 0
        assert sorted(events) == [
            "poll saw the abort",
            "poll started",
            "wait cancelled",
            "wait started",
        ]
        # The async body took the cancellation at its await; both signals aborted.
        assert all(signal.aborted for signal in signals)
        assert published.by_call() == {"call_1": TOOL_ABORTED, "call_2": TOOL_ABORTED}
        interrupted_turn(history, ["call_1", "call_2"])
        assert len(script.seen) == 1  # the model was not asked again

    async def test_a_call_waiting_for_its_turn_ends_aborted_before_dispatch(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        started = anyio.Event()
        ran: list[str] = []

        @define_tool(name="first", description="Exclusive; waits for its signal.")
        async def first(args: NoArgs, exec: ToolRunContext) -> str:
            ran.append("first")
            started.set()
            await exec.signal.wait()
            return "stopped"

        @define_tool(name="second", description="Exclusive; queued behind the first.")
        async def second(args: NoArgs, exec: ToolRunContext) -> str:
            ran.append("second")
            return "ran"

        registry.register(first)
        registry.register(second)

        async def ready() -> None:
            await started.wait()
            await anyio.wait_all_tasks_blocked()

        script = Script([calls(("first", {}, "call_1"), ("second", {}, "call_2")), answer()])
        history = await run_then_stop(agent_for(script, RegistryToolset(registry)), "token", ready)

        assert ran == ["first"]
        assert published.by_call() == {
            "call_1": TOOL_ABORTED,
            "call_2": TOOL_ABORTED_BEFORE_DISPATCH,
        }
        interrupted_turn(history, ["call_1", "call_2"])

    async def test_a_resumed_history_closes_the_cancelled_calls_as_interrupted(
        self, registry: ToolRegistry
    ) -> None:
        """What pydantic-ai sends the model after a stop, for the calls toolseam aborted."""
        started = anyio.Event()

        @define_tool(name="wait", description="Waits for its signal.")
        async def wait(args: NoArgs, exec: ToolRunContext) -> str:
            started.set()
            await exec.signal.wait()
            return "stopped"

        registry.register(wait)
        script = Script([calls(("wait", {}, "call_1")), answer("resumed")])
        agent = agent_for(script, RegistryToolset(registry))
        history = await run_then_stop(agent, "token", started.wait)

        result = await agent.run("carry on", message_history=history)

        assert result.output == "resumed"
        (closed,) = script.returns(1)
        assert (closed.tool_call_id, closed.outcome, closed.content) == (
            "call_1",
            "interrupted",
            "The tool call was interrupted before a result was produced.",
        )


class TestConcurrency:
    async def test_parallel_calls_overlap_and_an_exclusive_call_runs_alone(
        self, registry: ToolRegistry
    ) -> None:
        running: set[str] = set()
        overlaps: set[frozenset[str]] = set()
        order: list[str] = []

        async def body(args: NoArgs, exec: ToolRunContext) -> str:
            overlaps.update(frozenset((other, exec.call_id)) for other in running)
            running.add(exec.call_id)
            order.append(exec.call_id)
            await anyio.wait_all_tasks_blocked()  # every call that may start now has started
            running.discard(exec.call_id)
            return exec.call_id

        registry.register(
            define_tool(name="p", description="Parallel.", is_concurrency_safe=parallel)(body)
        )
        registry.register(define_tool(name="x", description="Exclusive.")(body))
        script = Script(
            [
                calls(("p", {}, "p1"), ("p", {}, "p2"), ("x", {}, "x1"), ("p", {}, "p3")),
                answer(),
            ]
        )
        await agent_for(script, RegistryToolset(registry)).run("go")

        # p1 and p2 overlapped; x1 ran alone, after both; p3 only once x1 had finished.
        assert order == ["p1", "p2", "x1", "p3"]
        assert overlaps == {frozenset(("p1", "p2"))}
        assert [part.content for part in script.returns(1)] == ["p1", "p2", "x1", "p3"]

    async def test_each_run_orders_its_own_calls(self, registry: ToolRegistry) -> None:
        """Exclusive means exclusive within one run: two runs of one toolset overlap."""
        started = {"run_1": anyio.Event(), "run_2": anyio.Event()}
        saw_the_other: list[str] = []

        @define_tool(name="x", description="Exclusive.")
        async def x(args: NoArgs, exec: ToolRunContext) -> str:
            started[exec.call_id].set()
            other = "run_2" if exec.call_id == "run_1" else "run_1"
            with anyio.move_on_after(GUARD):  # a guard: a shared order would wait for ever
                await started[other].wait()
                saw_the_other.append(exec.call_id)
            return "x"

        registry.register(x)
        toolset = RegistryToolset(registry)
        first = Script([calls(("x", {}, "run_1")), answer()])
        second = Script([calls(("x", {}, "run_2")), answer()])
        async with anyio.create_task_group() as group:
            group.start_soon(agent_for(first, toolset).run, "go")
            group.start_soon(agent_for(second, toolset).run, "go")

        assert sorted(saw_the_other) == ["run_1", "run_2"]


class TestTimeouts:
    @pytest.mark.parametrize("kind", ["async", "thread"])
    async def test_a_timeout_asks_the_body_to_stop_and_the_model_reads_tool_timeout(
        self, registry: ToolRegistry, published: Published, kind: str
    ) -> None:
        bodies = Bodies()

        if kind == "async":

            @define_tool(name="slow", description="Waits for its signal.", timeout=0.01)
            async def slow(args: NoArgs, exec: ToolRunContext) -> str:
                bodies.enter("slow")
                await exec.signal.wait()
                bodies.leave("slow", "asked to stop")
                return "stopped"

        else:

            @define_tool(name="slow", description="Polls its signal.", timeout=0.01)
            def slow(args: NoArgs, exec: ToolRunContext) -> str:
                bodies.enter("slow")
                while not exec.signal.wait_sync(0.01):
                    pass
                bodies.leave("slow", "asked to stop")
                return "stopped"

        registry.register(slow)
        script = Script([calls(("slow", {}, "call_1")), answer("gave up")])
        result = await agent_for(script, RegistryToolset(registry)).run("go")

        assert result.output == "gave up"
        (returned,) = script.returns(1)
        assert returned.content == "Error: tool call timed out after 0.01s"
        assert returned.metadata == {CODE_METADATA_KEY: TOOL_TIMEOUT}
        assert bodies.events == ["slow started", "slow asked to stop"]
        assert bodies.running == 0
        assert published.codes() == [TOOL_TIMEOUT]


# -- progress and logs, into the run's own event stream ---------------------------------------


@define_tool(name="report", description="Reports progress and logs.", is_concurrency_safe=parallel)
async def report(args: NoArgs, exec: ToolRunContext) -> str:
    exec.progress(1, 3, "one")
    exec.log("info", {"step": [1]}, logger="report")
    exec.progress(3, 3)
    return "reported"


def progress_event(
    value: float,
    total: float | None = None,
    message: str | None = None,
    *,
    call_id: str = "call_1",
    tool: str = "report",
    outer: tuple[str, str] = ("call_1", "report"),
) -> ToolProgressEvent:
    """The event pydantic-ai streams for one ``exec.progress`` (``outer``: its tool call)."""
    return ToolProgressEvent(
        progress=value,
        total=total,
        message=message,
        call_id=call_id,
        tool=tool,
        tool_call_id=outer[0],
        tool_name=outer[1],
    )


REPORT_LOG = ToolLogEvent(
    level="info",
    value={"step": [1]},
    logger="report",
    call_id="call_1",
    tool="report",
    tool_call_id="call_1",
    tool_name="report",
)


@dataclass
class Stream:
    """An ``event_stream_handler`` that keeps what the run streamed."""

    events: list[AgentStreamEvent] = field(default_factory=list[AgentStreamEvent])
    saw_progress: anyio.Event = field(default_factory=anyio.Event)

    async def __call__(
        self, ctx: RunContext[None], events: AsyncIterable[AgentStreamEvent]
    ) -> None:
        async for event in events:
            self.events.append(event)
            if isinstance(event, ToolProgressEvent):
                self.saw_progress.set()

    def of_call(self, call_id: str) -> list[object]:
        """What the stream told of one tool call: its start, its events, its result."""
        told: list[object] = []
        for event in self.events:
            if isinstance(event, FunctionToolCallEvent) and event.tool_call_id == call_id:
                told.append("call")
            elif isinstance(event, FunctionToolResultEvent) and event.tool_call_id == call_id:
                told.append("result")
            elif (
                isinstance(event, ToolProgressEvent | ToolLogEvent)
                and event.tool_call_id == call_id
            ):
                told.append(event)
        return told


@dataclass
class Sink:
    """A caller's own progress and log consumer."""

    events: list[tuple[str, ToolEvent]] = field(default_factory=list[tuple[str, ToolEvent]])

    def __call__(self, exec: ToolExecution, event: ToolEvent) -> None:
        self.events.append((exec.call_id, event))


class TestProgressAndLogs:
    async def test_they_reach_the_run_stream_in_order_before_the_result(
        self, registry: ToolRegistry
    ) -> None:
        registry.register(report)
        stream = Stream()
        script = Script([calls(("report", {}, "call_1")), answer()])
        await agent_for(script, RegistryToolset(registry)).run("go", event_stream_handler=stream)

        assert stream.of_call("call_1") == [
            "call",
            progress_event(1, 3, "one"),
            REPORT_LOG,
            progress_event(3, 3),
            "result",
        ]
        (returned,) = script.returns(1)
        assert returned.content == "reported"  # nothing of it reached the model

    async def test_run_stream_events_and_the_event_families(self, registry: ToolRegistry) -> None:
        registry.register(report)
        script = Script([calls(("report", {}, "call_1")), answer()])
        agent = agent_for(script, RegistryToolset(registry))
        async with agent.run_stream_events("go") as events:
            ours = [e async for e in events if isinstance(e, ToolProgressEvent | ToolLogEvent)]

        assert ours == [progress_event(1, 3, "one"), REPORT_LOG, progress_event(3, 3)]
        assert (ours[0].name, ours[1].name) == ("toolseam.progress", "toolseam.log")
        assert ToolProgressEvent.ui  # the UI adapters forward progress...
        assert not ToolLogEvent.ui  # ...and keep logs on the server

    async def test_progress_reaches_the_stream_while_the_call_runs(
        self, registry: ToolRegistry
    ) -> None:
        stream = Stream()

        @define_tool(name="long", description="Waits until its progress was seen.")
        async def long(args: NoArgs, exec: ToolRunContext) -> str:
            exec.progress(1, 2)
            await stream.saw_progress.wait()  # a stream that waited for the result hangs here
            exec.progress(2, 2)
            return "done"

        registry.register(long)
        script = Script([calls(("long", {}, "call_1")), answer()])
        await agent_for(script, RegistryToolset(registry)).run("go", event_stream_handler=stream)

        told = stream.of_call("call_1")
        assert [getattr(event, "progress", event) for event in told] == [
            "call",
            1,
            2,
            "result",
        ]

    async def test_a_sync_body_reports_from_its_thread(self, registry: ToolRegistry) -> None:
        threads: list[int] = []

        @define_tool(name="count", description="Counts in a worker thread.")
        def count(args: NoArgs, exec: ToolRunContext) -> str:
            threads.append(threading.get_ident())
            for step in range(50):
                exec.progress(step, 50)
            exec.log("debug", "counted")
            return "counted"

        registry.register(count)
        stream = Stream()
        script = Script([calls(("count", {}, "call_1")), answer()])
        await agent_for(script, RegistryToolset(registry)).run("go", event_stream_handler=stream)

        assert threads[0] != threading.get_ident()
        told = stream.of_call("call_1")
        assert told[0] == "call"
        assert told[-1] == "result"
        assert told[1:-1] == [
            *(
                progress_event(step, 50, tool="count", outer=("call_1", "count"))
                for step in range(50)
            ),
            ToolLogEvent(
                level="debug",
                value="counted",
                call_id="call_1",
                tool="count",
                tool_call_id="call_1",
                tool_name="count",
            ),
        ]

    async def test_a_nested_call_reports_under_the_outer_tool_call(
        self, registry: ToolRegistry
    ) -> None:
        @define_tool(name="outer", description="Calls report.")
        async def outer(args: NoArgs, exec: ToolRunContext) -> str:
            exec.progress(0, 1)
            await registry.execute(
                nested_input(exec, call_id="inner_1", name="report", arguments={})
            )
            exec.progress(1, 1)
            return "outer"

        registry.register(outer)
        registry.register(report)
        stream = Stream()
        script = Script([calls(("outer", {}, "call_1")), answer()])
        await agent_for(script, RegistryToolset(registry)).run("go", event_stream_handler=stream)

        here = ("call_1", "outer")
        assert stream.of_call("call_1") == [
            "call",
            progress_event(0, 1, call_id="call_1", tool="outer", outer=here),
            progress_event(1, 3, "one", call_id="inner_1", outer=here),
            ToolLogEvent(
                level="info",
                value={"step": [1]},
                logger="report",
                call_id="inner_1",
                tool="report",
                tool_call_id="call_1",
                tool_name="outer",
            ),
            progress_event(3, 3, call_id="inner_1", outer=here),
            progress_event(1, 1, call_id="call_1", tool="outer", outer=here),
            "result",
        ]

    async def test_parallel_calls_each_report_under_their_own_tool_call(
        self, registry: ToolRegistry
    ) -> None:
        registry.register(report)
        stream = Stream()
        script = Script([calls(("report", {}, "call_1"), ("report", {}, "call_2")), answer()])
        await agent_for(script, RegistryToolset(registry)).run("go", event_stream_handler=stream)

        for call_id in ("call_1", "call_2"):
            told = stream.of_call(call_id)
            assert [type(event).__name__ for event in told] == [
                "str",
                "ToolProgressEvent",
                "ToolLogEvent",
                "ToolProgressEvent",
                "str",
            ]
            assert {getattr(event, "call_id", call_id) for event in told} == {call_id}


class TestTheCallersHost:
    async def test_a_host_factory_gets_each_calls_context_and_sees_the_events(
        self, registry: ToolRegistry
    ) -> None:
        registry.register(report)
        sink = Sink()
        contexts: list[RunContext[Any]] = []

        def host(ctx: RunContext[Any]) -> ToolHost:
            contexts.append(ctx)
            return ToolHost(on_progress=sink, on_log=sink)

        stream = Stream()
        script = Script([calls(("report", {}, "call_1")), answer()])
        toolset = RegistryToolset(registry, host=host)
        await agent_for(script, toolset).run("go", event_stream_handler=stream)

        assert [ctx.tool_call_id for ctx in contexts] == ["call_1"]
        assert sink.events == [
            ("call_1", ProgressEvent(1, 3, "one")),
            ("call_1", LogEvent("info", {"step": [1]}, "report")),
            ("call_1", ProgressEvent(3, 3)),
        ]
        assert len(stream.of_call("call_1")) == 5  # the run's stream still has all three

    async def test_the_hosts_elicit_answers_the_body(self, registry: ToolRegistry) -> None:
        asked: list[tuple[str, ElicitationRequest]] = []

        async def elicit(
            exec: ToolExecution, request: ElicitationRequest, signal: AbortSignal
        ) -> Elicited[Any]:
            asked.append((exec.call_id, request))
            return Elicited("accept", {"name": "Ada"})

        class Person(TypedDict):
            name: str

        @define_tool(name="greet", description="Asks the user's name.")
        async def greet(args: NoArgs, exec: ToolRunContext) -> str:
            answer = await exec.elicit("Your name?", Person)
            assert answer.content is not None
            return f"hello {answer.content['name']}"

        registry.register(greet)
        script = Script([calls(("greet", {}, "call_1")), answer()])
        toolset = RegistryToolset(registry, host=ToolHost(elicit=elicit))
        await agent_for(script, toolset).run("go")

        assert script.returns(1)[0].content == "hello Ada"
        assert [(call_id, request.message) for call_id, request in asked] == [
            ("call_1", "Your name?")
        ]

    async def test_without_a_host_elicit_is_unavailable(self, registry: ToolRegistry) -> None:
        @define_tool(name="greet", description="Asks the user's name.")
        async def greet(args: NoArgs, exec: ToolRunContext) -> str:
            await exec.elicit("Your name?", {"type": "object", "properties": {}})
            return "unreachable"

        registry.register(greet)
        script = Script([calls(("greet", {}, "call_1")), answer()])
        await agent_for(script, RegistryToolset(registry)).run("go")

        (returned,) = script.returns(1)
        assert returned.metadata == {CODE_METADATA_KEY: CAPABILITY_UNAVAILABLE}
        assert returned.content == (
            'Error: tool "greet": elicitation is not available: the caller of this call offers '
            "none (ToolHost.elicit is not set)"
        )

    @pytest.mark.parametrize("stop", ["run stopped", "deadline"])
    async def test_an_elicit_on_wait_for_external_event_is_withdrawn_by_a_stop(
        self, registry: ToolRegistry, published: Published, stop: str
    ) -> None:
        """What the docs show composing: pydantic-ai's external events as a host's elicit.

        A stopped run cancels the wait with the call; a deadline aborts the call's signal,
        and the host withdraws the wait itself.
        """
        tokens: list[str] = []
        asked = anyio.Event()

        async def elicit(
            exec: ToolExecution, request: ElicitationRequest, signal: AbortSignal
        ) -> Elicited[Any]:
            async def ask(token: str) -> None:
                tokens.append(token)
                asked.set()

            answer: Any = None
            async with anyio.create_task_group() as group:

                async def withdraw() -> None:
                    await signal.wait()
                    group.cancel_scope.cancel()

                group.start_soon(withdraw)
                answer = await wait_for_external_event("confirm", ask=ask)
                group.cancel_scope.cancel()
            return Elicited("cancel") if answer is None else Elicited("accept", answer)

        timeout = 0.01 if stop == "deadline" else None

        @define_tool(name="confirm", description="Asks the user.", timeout=timeout)
        async def confirm(args: NoArgs, exec: ToolRunContext) -> str:
            return str(await exec.elicit("Sure?", {"type": "object", "properties": {}}))

        registry.register(confirm)
        script = Script([calls(("confirm", {}, "call_1")), answer("gave up")])
        agent = agent_for(script, RegistryToolset(registry, host=ToolHost(elicit=elicit)))
        if stop == "run stopped":
            history = await run_then_stop(agent, "token", asked.wait)
            assert published.by_call() == {"call_1": TOOL_ABORTED}
            interrupted_turn(history, ["call_1"])
        else:
            assert (await agent.run("go")).output == "gave up"
            assert published.by_call() == {"call_1": TOOL_TIMEOUT}
        with pytest.raises(UserError, match="No wait in this process has this token"):
            resolve_external_event(tokens[0], {"too": "late"})

    def test_a_host_that_is_neither_a_tool_host_nor_callable_is_refused(self) -> None:
        with pytest.raises(
            TypeError,
            match=r"^host must be a ToolHost, a callable making one per call, or None, got int$",
        ):
            RegistryToolset(ToolRegistry(), host=3)  # type: ignore[arg-type]

    async def test_a_factory_that_returns_no_host_fails_the_tool_call_before_the_registry(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        registry.register(report)
        script = Script([calls(("report", {}, "call_1")), answer()])
        toolset = RegistryToolset(registry, host=lambda ctx: "host")  # type: ignore[arg-type,return-value]
        with pytest.raises(
            TypeError, match=r"^the host factory must return a ToolHost or None, got str$"
        ):
            await agent_for(script, toolset).run("go")
        assert published.results == []


class TestProgressAndTheStop:
    @pytest.mark.parametrize("kind", ["async", "thread"])
    async def test_a_stopped_run_streamed_what_came_before_and_publishes_one_result_per_call(
        self, registry: ToolRegistry, published: Published, kind: str
    ) -> None:
        if kind == "async":

            @define_tool(
                name="work", description="Reports, then waits.", is_concurrency_safe=parallel
            )
            async def work(args: NoArgs, exec: ToolRunContext) -> str:
                exec.progress(1, 10, "started")
                await exec.signal.wait()
                return "stopped"

        else:

            @define_tool(
                name="work", description="Reports, then polls.", is_concurrency_safe=parallel
            )
            def work(args: NoArgs, exec: ToolRunContext) -> str:
                exec.progress(1, 10, "started")
                while not exec.signal.wait_sync(0.01):
                    pass
                return "stopped"

        registry.register(work)
        stream = Stream()
        script = Script([calls(("work", {}, "call_1"), ("work", {}, "call_2")), answer()])
        agent = agent_for(script, RegistryToolset(registry))
        token = CancellationToken()

        async def stop() -> None:
            await stream.saw_progress.wait()
            while len(stream.of_call("call_1")) + len(stream.of_call("call_2")) < 4:
                await anyio.wait_all_tasks_blocked()  # both calls' progress streamed
            token.cancel()

        async def run() -> None:
            with pytest.raises(RunCancelled):
                await agent.run("go", cancellation_token=token, event_stream_handler=stream)

        async with anyio.create_task_group() as group:
            group.start_soon(stop)
            group.start_soon(run)

        assert published.by_call() == {"call_1": TOOL_ABORTED, "call_2": TOOL_ABORTED}
        for call_id in ("call_1", "call_2"):
            assert stream.of_call(call_id) == [
                "call",
                progress_event(
                    1, 10, "started", call_id=call_id, tool="work", outer=(call_id, "work")
                ),
            ]

    async def test_a_stream_that_refuses_is_contained_and_logged_once(
        self, registry: ToolRegistry, published: Published, caplog: pytest.LogCaptureFixture
    ) -> None:
        """``ctx.emit`` needs an agent run; the toolset called outside one still answers."""
        registry.register(report)
        sink = Sink()
        toolset = RegistryToolset(registry, host=ToolHost(on_progress=sink, on_log=sink))
        ctx = RunContext[Any](deps=None, model=TestModel(), usage=RunUsage(), tool_call_id="call_1")
        tools = await toolset.get_tools(ctx)

        assert await toolset.call_tool("report", {}, ctx, tools["report"]) == "reported"
        assert published.codes() == [None]
        assert len(sink.events) == 3  # the caller's own host saw every event
        (logged,) = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert logged.getMessage() == (
            "delivering tool 'report''s ProgressEvent to the framework raised; contained "
            "(later failures of this call are not logged)"
        )
        assert isinstance(logged.exc_info, tuple)
        assert "only available during an agent run" in str(logged.exc_info[1])


def test_pydantic_ai_still_cannot_run_on_trio() -> None:
    program = (
        "import anyio\n"
        "from pydantic_ai import Agent\n"
        "from pydantic_ai.models.test import TestModel\n"
        "anyio.run(Agent(TestModel()).run, 'hi', backend='trio')\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "RuntimeError: no running event loop" in done.stderr


def test_importing_toolseam_does_not_import_pydantic_ai() -> None:
    program = "import sys, toolseam, toolseam.integrations\nprint('pydantic_ai' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "False\n"
