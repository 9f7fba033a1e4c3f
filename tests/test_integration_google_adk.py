"""`toolseam.integrations.google_adk`: a registry as a Google ADK toolset, driven by real runs.

Every test runs a real ADK `LlmAgent` under a real `InMemoryRunner` (its in-memory session
service), with a scripted model: a `BaseLlm` subclass that answers each model request from a
script and keeps what it was sent. No part of ADK is mocked.

asyncio only: ADK's runner, flows and tool calls are asyncio tasks and events
(`asyncio.create_task`, `asyncio.Event` abort signals); it does not run on trio.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from pydantic import Field
from typing_extensions import TypedDict

from toolseam import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    TOOL_TIMEOUT,
    UNKNOWN_TOOL,
    ApprovalAnswer,
    ApprovalRequest,
    Ask,
    LogEvent,
    Next,
    PreDecision,
    ProgressEvent,
    ToolError,
    ToolExecution,
    ToolHost,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    define_tool,
)
from toolseam.integrations.google_adk import SEAL_ERROR_CODE, RegistryToolset

GUARD = 15  # seconds: a guard against a hang only; every ordering below is decided by events


@pytest.fixture
def anyio_backend() -> str:
    """ADK runs on asyncio only (see the module docstring)."""
    return "asyncio"


class KeyArgs(TypedDict):
    key: str


def parallel(_args: object) -> bool:
    return True


Step = Callable[[LlmRequest], LlmResponse]


class ScriptedLlm(BaseLlm):
    """A model that answers request ``n`` with ``steps[n]`` and keeps every request."""

    model: str = "scripted"
    steps: list[Any] = Field(default_factory=list[Any])
    requests: list[LlmRequest] = Field(default_factory=list[LlmRequest])

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        step: Step = self.steps[len(self.requests) - 1]
        yield step(llm_request)


def calls(*parts: tuple[str, str, dict[str, Any]]) -> Step:
    """A model turn asking for ``(call_id, tool, args)`` calls, all at once."""

    def step(request: LlmRequest) -> LlmResponse:
        function_calls = [
            types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=args))
            for call_id, name, args in parts
        ]
        return LlmResponse(content=types.Content(role="model", parts=function_calls))

    return step


def answer(text: str = "done") -> Step:
    def step(request: LlmRequest) -> LlmResponse:
        return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))

    return step


@dataclass
class Published:
    """Every result the registry published, by call id (one per call)."""

    results: dict[str, ToolResult] = field(default_factory=dict[str, ToolResult])

    def __call__(self, exec: ToolExecution, result: ToolResult) -> None:
        assert exec.call_id not in self.results, exec.call_id
        self.results[exec.call_id] = result

    def codes(self) -> dict[str, str | None]:
        return {
            call_id: None if isinstance(result, ToolSuccess) else result.code
            for call_id, result in self.results.items()
        }


@pytest.fixture
def published() -> Published:
    return Published()


@pytest.fixture
def registry(published: Published) -> ToolRegistry:
    registry = ToolRegistry()
    registry.on_result(published)
    return registry


@dataclass
class Run:
    """One agent under an in-memory runner, with its scripted model and its session."""

    model: ScriptedLlm
    runner: InMemoryRunner
    session_id: str
    events: list[Any] = field(default_factory=list[Any])

    async def go(self, text: str = "go", stop: asyncio.Event | None = None) -> None:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async with asyncio.timeout(GUARD):  # a guard against a hang, around the test only
            async for event in self.runner.run_async(
                user_id="user", session_id=self.session_id, new_message=message, abort_signal=stop
            ):
                self.events.append(event)

    def responses(self, request: int) -> dict[str, dict[str, Any]]:
        """The function responses the model was sent in (0-based) ``request``, by call id."""
        found: dict[str, dict[str, Any]] = {}
        for content in self.model.requests[request].contents:
            for part in content.parts or []:
                response = part.function_response
                if response is not None and response.id is not None:
                    assert response.id not in found, response.id
                    found[response.id] = dict(response.response or {})
        return found

    def balanced(self, request: int) -> None:
        """Each function call the model was sent is answered by exactly one response."""
        call_ids = [
            part.function_call.id
            for content in self.model.requests[request].contents
            for part in content.parts or []
            if part.function_call is not None and part.function_call.id is not None
        ]
        assert sorted(call_ids) == sorted(self.responses(request))


async def start(
    registry: ToolRegistry,
    steps: Sequence[Step],
    *,
    toolset: RegistryToolset | None = None,
    plugin: bool = True,
    **agent_options: Any,
) -> Run:
    toolset = toolset or RegistryToolset(registry)
    model = ScriptedLlm(steps=list(steps))
    agent = LlmAgent(name="agent", model=model, tools=[toolset], **agent_options)
    app = App(name="app", root_agent=agent, plugins=[toolset.plugin] if plugin else [])
    runner = InMemoryRunner(app=app)
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="user")
    return Run(model, runner, session.id)


class Bodies:
    """What the scripted bodies did, and how many are running now (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running = 0
        self.events: list[str] = []
        self.started: dict[str, asyncio.Event] = {}
        self._loop = asyncio.get_running_loop()

    def started_event(self, name: str) -> asyncio.Event:
        return self.started.setdefault(name, asyncio.Event())

    def enter(self, name: str) -> None:
        with self._lock:
            self.running += 1
            self.events.append(f"{name} started")
        event = self.started_event(name)
        if threading.current_thread() is threading.main_thread():
            event.set()
        else:
            self._loop.call_soon_threadsafe(event.set)

    def leave(self, name: str, how: str) -> None:
        with self._lock:
            self.running -= 1
            self.events.append(f"{name} {how}")


# -- results ----------------------------------------------------------------------------------


class TestResults:
    async def test_success_answers_with_the_result_and_each_call_carries_its_context(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        seen: list[tuple[str, object, bool]] = []

        @define_tool(name="echo", description="Echoes its key.")
        async def echo(args: KeyArgs, exec: ToolRunContext) -> str:
            seen.append((exec.call_id, exec.agent, exec.signal.aborted))
            return f"echo:{args['key']}"

        registry.register(echo)
        run = await start(registry, [calls(("call_1", "echo", {"key": "a"})), answer()])
        await run.go()

        assert run.responses(1) == {"call_1": {"result": "echo:a"}}
        [(call_id, agent, aborted)] = seen
        assert call_id == "call_1"
        assert isinstance(agent, ToolContext)
        assert agent.function_call_id == "call_1"
        assert not aborted
        assert published.codes() == {"call_1": None}

    async def test_tools_are_listed_from_the_registry_with_their_schema(
        self, registry: ToolRegistry
    ) -> None:
        @define_tool(name="echo", description="Echoes its key.")
        async def echo(args: KeyArgs, exec: ToolRunContext) -> str:
            return args["key"]

        registry.register(echo)
        run = await start(registry, [answer()])
        await run.go()

        [declaration] = [
            declaration
            for tool in run.model.requests[0].config.tools or []
            if isinstance(tool, types.Tool)
            for declaration in tool.function_declarations or []
        ]
        assert declaration.name == "echo"
        assert declaration.description == "Echoes its key."
        [schema] = registry.schemas()
        assert declaration.parameters_json_schema == dict(schema.parameters)

    async def test_a_failure_reaches_the_model_as_its_text_with_its_code(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        @define_tool(name="fail", description="Fails.")
        async def fail(args: KeyArgs, exec: ToolRunContext) -> str:
            raise ToolError("disk full", code="DISK_FULL")

        registry.register(fail)
        run = await start(registry, [calls(("call_1", "fail", {"key": "a"})), answer()])
        await run.go()

        assert run.responses(1) == {"call_1": {"error": "Error: disk full", "code": "DISK_FULL"}}
        assert published.codes() == {"call_1": "DISK_FULL"}

    async def test_invalid_arguments_are_answered_by_the_registry(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        @define_tool(name="echo", description="Echoes its key.")
        async def echo(args: KeyArgs, exec: ToolRunContext) -> str:
            return args["key"]

        registry.register(echo)
        run = await start(registry, [calls(("call_1", "echo", {"key": 3})), answer()])
        await run.go()

        assert run.responses(1)["call_1"]["code"] == "INVALID_ARGS"
        assert published.codes() == {"call_1": "INVALID_ARGS"}

    async def test_a_name_adk_was_not_given_is_answered_by_adk(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        run = await start(registry, [calls(("call_1", "missing", {})), answer()])
        await run.go()

        [response] = run.responses(1).values()
        assert "missing" in response["error"]
        assert published.results == {}  # it never reached the registry
        run.balanced(1)

    async def test_a_tool_removed_after_it_was_listed_answers_unknown_tool(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        @define_tool(name="echo", description="Echoes its key.")
        async def echo(args: KeyArgs, exec: ToolRunContext) -> str:
            return args["key"]

        registration = registry.register(echo)
        ask = calls(("call_1", "echo", {"key": "a"}))

        def step(request: LlmRequest) -> LlmResponse:
            registration.remove()  # listed for this request, gone when the call runs
            return ask(request)

        run = await start(registry, [step, answer()])
        await run.go()

        assert run.responses(1)["call_1"]["code"] == UNKNOWN_TOOL
        assert published.codes() == {"call_1": UNKNOWN_TOOL}

    async def test_adk_confirmation_never_holds_a_registry_tool(
        self, registry: ToolRegistry
    ) -> None:
        @define_tool(name="echo", description="Echoes its key.")
        async def echo(args: KeyArgs, exec: ToolRunContext) -> str:
            return args["key"]

        registry.register(echo)
        [tool] = await RegistryToolset(registry).get_tools()
        assert isinstance(tool, BaseTool)
        assert await tool.check_require_confirmation({}, None) is False  # type: ignore[arg-type]

    def test_only_a_registry_is_accepted(self) -> None:
        with pytest.raises(TypeError, match=r"^RegistryToolset expects a ToolRegistry, got dict$"):
            RegistryToolset({})  # type: ignore[arg-type]


# -- the stop ---------------------------------------------------------------------------------


def stop_when(*events: asyncio.Event) -> tuple[asyncio.Event, asyncio.Task[None]]:
    """ADK's abort signal, set once every one of ``events`` is."""
    stop = asyncio.Event()

    async def press() -> None:
        for event in events:
            await event.wait()
        stop.set()

    return stop, asyncio.create_task(press())


class TestStop:
    async def test_a_stop_aborts_and_awaits_a_thread_body_and_an_async_body(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        bodies = Bodies()

        @define_tool(name="wait", description="Waits for its signal.", is_concurrency_safe=parallel)
        async def wait(args: KeyArgs, exec: ToolRunContext) -> str:
            bodies.enter("wait")
            await exec.signal.wait()
            bodies.leave("wait", "asked to stop")
            exec.signal.raise_if_aborted()
            return "unreachable"

        @define_tool(name="poll", description="Polls its signal.", is_concurrency_safe=parallel)
        def poll(args: KeyArgs, exec: ToolRunContext) -> str:
            bodies.enter("poll")
            while not exec.signal.wait_sync(0.01):
                pass
            bodies.leave("poll", "asked to stop")
            exec.signal.raise_if_aborted()
            return "unreachable"

        registry.register(wait)
        registry.register(poll)
        run = await start(
            registry,
            [
                calls(("call_1", "wait", {"key": "a"}), ("call_2", "poll", {"key": "b"})),
                answer("next"),
            ],
        )
        stop, pressing = stop_when(bodies.started_event("wait"), bodies.started_event("poll"))
        await run.go(stop=stop)
        await pressing

        # Both bodies stopped before the run ended, told through their signals.
        assert bodies.running == 0
        assert sorted(bodies.events[2:]) == ["poll asked to stop", "wait asked to stop"]
        assert published.codes() == {"call_1": TOOL_ABORTED, "call_2": TOOL_ABORTED}
        assert len(run.model.requests) == 1  # the model was not asked again
        [seal] = [e for e in run.events if e.error_code == SEAL_ERROR_CODE]
        assert {r.id: r.response for r in seal.get_function_responses()} == {
            "call_1": {"error": "Error: tool call aborted", "code": TOOL_ABORTED},
            "call_2": {"error": "Error: tool call aborted", "code": TOOL_ABORTED},
        }

        # The next invocation's model request is valid: one response per call, ours.
        await run.go("again")
        run.balanced(1)
        assert {k: v["code"] for k, v in run.responses(1).items()} == {
            "call_1": TOOL_ABORTED,
            "call_2": TOOL_ABORTED,
        }
        assert run.events[-1].content.parts[0].text == "next"

    async def test_a_call_waiting_for_its_turn_is_told_apart_from_one_that_ran(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        bodies = Bodies()

        @define_tool(name="wait", description="Waits for its signal.")  # exclusive
        async def wait(args: KeyArgs, exec: ToolRunContext) -> str:
            bodies.enter("wait")
            await exec.signal.wait()
            bodies.leave("wait", "asked to stop")
            exec.signal.raise_if_aborted()
            return "unreachable"

        registry.register(wait)
        run = await start(
            registry,
            [
                calls(("call_1", "wait", {"key": "a"}), ("call_2", "wait", {"key": "b"})),
                answer("next"),
            ],
        )
        stop, pressing = stop_when(bodies.started_event("wait"))
        await run.go(stop=stop)
        await pressing

        assert bodies.events == ["wait started", "wait asked to stop"]
        assert published.codes() == {
            "call_1": TOOL_ABORTED,
            "call_2": TOOL_ABORTED_BEFORE_DISPATCH,
        }
        await run.go("again")
        run.balanced(1)
        codes = {k: v["code"] for k, v in run.responses(1).items()}
        assert codes == {"call_1": TOOL_ABORTED, "call_2": TOOL_ABORTED_BEFORE_DISPATCH}

    async def test_a_result_adk_dropped_at_the_stop_is_the_calls_own_in_the_seal(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        bodies = Bodies()

        @define_tool(name="echo", description="Echoes its key.", is_concurrency_safe=parallel)
        async def echo(args: KeyArgs, exec: ToolRunContext) -> str:
            return f"echo:{args['key']}"

        @define_tool(name="wait", description="Waits for its signal.", is_concurrency_safe=parallel)
        async def wait(args: KeyArgs, exec: ToolRunContext) -> str:
            bodies.enter("wait")
            await exec.signal.wait()
            bodies.leave("wait", "asked to stop")
            exec.signal.raise_if_aborted()
            return "unreachable"

        registry.register(echo)
        registry.register(wait)
        run = await start(
            registry,
            [
                calls(("call_1", "echo", {"key": "a"}), ("call_2", "wait", {"key": "b"})),
                answer("next"),
            ],
        )
        stop, pressing = stop_when(bodies.started_event("wait"))
        await run.go(stop=stop)
        await pressing

        await run.go("again")
        run.balanced(1)
        assert run.responses(1) == {
            "call_1": {"result": "echo:a"},
            "call_2": {"error": "Error: tool call aborted", "code": TOOL_ABORTED},
        }
        assert published.codes() == {"call_1": None, "call_2": TOOL_ABORTED}

    async def test_a_call_adk_sealed_before_it_reached_the_toolset_never_ran(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        ran: list[str] = []
        held = asyncio.Event()

        @define_tool(name="echo", description="Echoes its key.")
        async def echo(args: KeyArgs, exec: ToolRunContext) -> str:
            ran.append(args["key"])
            return args["key"]

        async def before_tool(
            tool: BaseTool, args: dict[str, Any], tool_context: ToolContext
        ) -> None:
            held.set()
            await asyncio.Event().wait()  # ADK's own stage, before the tool: held until the stop

        registry.register(echo)
        run = await start(
            registry,
            [calls(("call_1", "echo", {"key": "a"})), answer("next")],
            before_tool_callback=before_tool,
        )
        stop, pressing = stop_when(held)
        await run.go(stop=stop)
        await pressing

        assert ran == []
        assert published.codes() == {"call_1": TOOL_ABORTED_BEFORE_DISPATCH}
        await run.go("again")
        run.balanced(1)
        assert run.responses(1)["call_1"]["code"] == TOOL_ABORTED_BEFORE_DISPATCH

    async def test_without_the_plugin_adks_own_seal_answers_every_call(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        bodies = Bodies()

        @define_tool(name="wait", description="Waits for its signal.")
        async def wait(args: KeyArgs, exec: ToolRunContext) -> str:
            bodies.enter("wait")
            await exec.signal.wait()
            bodies.leave("wait", "asked to stop")
            exec.signal.raise_if_aborted()
            return "unreachable"

        registry.register(wait)
        run = await start(
            registry, [calls(("call_1", "wait", {"key": "a"})), answer("next")], plugin=False
        )
        stop, pressing = stop_when(bodies.started_event("wait"))
        await run.go(stop=stop)
        await pressing

        assert bodies.running == 0
        assert published.codes() == {"call_1": TOOL_ABORTED}
        await run.go("again")
        run.balanced(1)
        assert run.responses(1) == {"call_1": {"error": "Invocation was aborted by client."}}

    async def test_cancelling_the_task_driving_the_run_stops_the_calls_too(
        self, registry: ToolRegistry, published: Published
    ) -> None:
        bodies = Bodies()

        @define_tool(name="poll", description="Polls its signal.")
        def poll(args: KeyArgs, exec: ToolRunContext) -> str:
            bodies.enter("poll")
            while not exec.signal.wait_sync(0.01):
                pass
            bodies.leave("poll", "asked to stop")
            return "stopped"

        registry.register(poll)
        run = await start(registry, [calls(("call_1", "poll", {"key": "a"})), answer("never")])
        task = asyncio.create_task(run.go())
        await bodies.started_event("poll").wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

        assert bodies.events == ["poll started", "poll asked to stop"]
        assert bodies.running == 0
        # The body returned once told: the call's one result is what it returned.
        assert published.codes() == {"call_1": TOOL_ABORTED}


class TestApproval:
    async def test_the_registrys_approval_decides_and_a_stop_while_it_waits_never_ran(
        self, published: Published
    ) -> None:
        asked = asyncio.Event()
        requests: list[ApprovalRequest] = []

        class Human:
            async def request(self, request: ApprovalRequest, /) -> ApprovalAnswer:
                requests.append(request)
                asked.set()
                await request.signal.wait()  # nobody answers before the stop
                return "cancelled"

        async def ask_first(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            return Ask("deleting needs a yes")

        ran: list[str] = []

        @define_tool(name="delete", description="Deletes a file.")
        async def delete(args: KeyArgs, exec: ToolRunContext) -> str:
            ran.append(args["key"])
            return "deleted"

        registry = ToolRegistry(Human())
        registry.on_result(published)
        registry.on_pre_execute(ask_first)
        registry.register(delete)
        run = await start(registry, [calls(("call_1", "delete", {"key": "a"})), answer("next")])
        stop, pressing = stop_when(asked)
        await run.go(stop=stop)
        await pressing

        assert ran == []
        [request] = requests
        assert isinstance(request.execution.agent, ToolContext)
        assert published.codes() == {"call_1": TOOL_ABORTED_BEFORE_DISPATCH}
        await run.go("again")
        run.balanced(1)
        assert run.responses(1)["call_1"]["code"] == TOOL_ABORTED_BEFORE_DISPATCH


# -- deadlines and concurrency ----------------------------------------------------------------


class TestTimeoutsAndConcurrency:
    @pytest.mark.parametrize("kind", ["async", "thread"])
    async def test_a_timeout_asks_the_body_to_stop_and_the_model_reads_tool_timeout(
        self, registry: ToolRegistry, published: Published, kind: str
    ) -> None:
        bodies = Bodies()

        if kind == "async":

            @define_tool(name="slow", description="Waits for its signal.", timeout=0.01)
            async def slow(args: KeyArgs, exec: ToolRunContext) -> str:
                bodies.enter("slow")
                await exec.signal.wait()
                bodies.leave("slow", "asked to stop")
                return "stopped"

        else:

            @define_tool(name="slow", description="Polls its signal.", timeout=0.01)
            def slow(args: KeyArgs, exec: ToolRunContext) -> str:
                bodies.enter("slow")
                while not exec.signal.wait_sync(0.01):
                    pass
                bodies.leave("slow", "asked to stop")
                return "stopped"

        registry.register(slow)
        run = await start(registry, [calls(("call_1", "slow", {"key": "a"})), answer("gave up")])
        await run.go()

        assert run.responses(1) == {
            "call_1": {"error": "Error: tool call timed out after 0.01s", "code": TOOL_TIMEOUT}
        }
        assert bodies.events == ["slow started", "slow asked to stop"]
        assert published.codes() == {"call_1": TOOL_TIMEOUT}

    async def test_parallel_calls_overlap_and_an_exclusive_call_runs_alone(
        self, registry: ToolRegistry
    ) -> None:
        log: list[str] = []
        both = asyncio.Event()
        inside: set[str] = set()

        @define_tool(name="shared", description="May overlap.", is_concurrency_safe=parallel)
        async def shared(args: KeyArgs, exec: ToolRunContext) -> str:
            inside.add(args["key"])
            log.append(f"start {args['key']}")
            if len(inside) == 2:
                both.set()
            await both.wait()  # returns only once both parallel calls are inside together
            log.append(f"end {args['key']}")
            inside.discard(args["key"])
            return args["key"]

        @define_tool(name="alone", description="Runs alone.")
        async def alone(args: KeyArgs, exec: ToolRunContext) -> str:
            log.append(f"alone with {sorted(inside)}")
            return args["key"]

        registry.register(shared)
        registry.register(alone)
        run = await start(
            registry,
            [
                calls(
                    ("call_1", "shared", {"key": "a"}),
                    ("call_2", "shared", {"key": "b"}),
                    ("call_3", "alone", {"key": "x"}),
                ),
                answer(),
            ],
        )
        await run.go()

        assert log[:2] == ["start a", "start b"]
        assert log[-1] == "alone with []"
        assert set(run.responses(1)) == {"call_1", "call_2", "call_3"}


# -- progress and logs ------------------------------------------------------------------------


class TestProgressAndLogs:
    async def test_they_reach_the_callers_host_in_order_before_the_result(
        self, registry: ToolRegistry
    ) -> None:
        seen: list[str] = []

        @define_tool(name="report", description="Reports.")
        async def report(args: KeyArgs, exec: ToolRunContext) -> str:
            exec.progress(1, 2, "half")
            exec.log("info", {"step": 1})
            exec.progress(2, 2)
            return "reported"

        def on_progress(exec: ToolExecution, event: ProgressEvent) -> None:
            seen.append(f"{exec.call_id} progress {event.progress}/{event.total}")

        def on_log(exec: ToolExecution, event: LogEvent) -> None:
            seen.append(f"{exec.call_id} log {event.level}")

        contexts: list[ToolContext] = []

        def host_for(context: ToolContext) -> ToolHost:
            contexts.append(context)
            return ToolHost(on_progress=on_progress, on_log=on_log)

        registry.register(report)
        registry.on_result(lambda exec, result: seen.append(f"{exec.call_id} result"))
        toolset = RegistryToolset(registry, host=host_for)
        run = await start(
            registry, [calls(("call_1", "report", {"key": "a"})), answer()], toolset=toolset
        )
        await run.go()

        assert seen == [
            "call_1 progress 1/2",
            "call_1 log info",
            "call_1 progress 2/2",
            "call_1 result",
        ]
        assert [c.function_call_id for c in contexts] == ["call_1"]
        assert run.responses(1) == {"call_1": {"result": "reported"}}


def test_importing_toolseam_does_not_import_google_adk() -> None:
    program = "import sys, toolseam, toolseam.integrations\nprint('google.adk' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "False\n"
