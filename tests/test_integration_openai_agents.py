"""toolseam.integrations.openai_agents against the real OpenAI Agents SDK.

asyncio only: the SDK is asyncio-only (it creates, cancels and waits for asyncio tasks
itself), so ``anyio_backend`` is pinned to asyncio here. The model is `ScriptModel`, an
implementation of the SDK's own `Model` interface (both ``get_response`` and
``stream_response``) that answers from a script: no network.
Tracing is off for the whole module, so nothing is exported either.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from agents import (
    Agent,
    FunctionTool,
    ModelResponse,
    Runner,
    SQLiteSession,
    Usage,
    set_tracing_disabled,
)
from agents.exceptions import UserError
from agents.items import TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.stream_events import RunItemStreamEvent
from agents.strict_schema import ensure_strict_json_schema
from agents.tool_context import ToolContext
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from toolseam import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    AbortSignal,
    ApprovalAnswer,
    ApprovalRequest,
    Ask,
    LogEvent,
    Next,
    PreDecision,
    ProgressEvent,
    Registration,
    Sampled,
    SamplingRequest,
    ToolEvent,
    ToolExecution,
    ToolHost,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
    nested_input,
)
from toolseam.integrations.openai_agents import RegistryToolStreamEvent, function_tools


@pytest.fixture
def anyio_backend() -> str:
    """The SDK runs on asyncio only."""
    return "asyncio"


@pytest.fixture(autouse=True, scope="module")
def _no_tracing() -> Iterator[None]:
    # No API key and no network here: the SDK must not try to export traces.
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


# -- a model that answers from a script (the SDK's Model interface) ---------------------------


class ScriptModel(Model):
    """Answers turn after turn from a script, and records what each turn was sent."""

    def __init__(self, *turns: list[TResponseOutputItem]) -> None:
        self.turns = list(turns)
        self.inputs: list[str | list[TResponseInputItem]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> ModelResponse:
        self.inputs.append(copy.deepcopy(input))
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        *args: Any,
        **kwargs: Any,
    ) -> AsyncIterator[TResponseStreamEvent]:
        self.inputs.append(copy.deepcopy(input))
        response = Response(
            id="resp_1",
            created_at=0,
            model="script",
            object="response",
            output=self.turns.pop(0),
            tool_choice="auto",
            tools=[],
            parallel_tool_calls=True,
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=0
        )

    def outputs(self, turn: int) -> list[dict[str, Any]]:
        """The tool outputs the model was sent in ``turn`` (0-based)."""
        sent = self.inputs[turn]
        assert isinstance(sent, list)
        return [
            {"call_id": item["call_id"], "output": item["output"]}  # type: ignore[typeddict-item]
            for item in sent
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]


def call(name: str, arguments: str, call_id: str) -> TResponseOutputItem:
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}", call_id=call_id, type="function_call", name=name, arguments=arguments
    )


def say(text: str) -> TResponseOutputItem:
    return ResponseOutputMessage(
        id="msg_1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def context(call_id: str, name: str = "echo", arguments: str = "{}") -> ToolContext[None]:
    """What the SDK hands ``on_invoke_tool``, for tests that call a tool directly."""
    return ToolContext(context=None, tool_name=name, tool_call_id=call_id, tool_arguments=arguments)


# -- a registry whose tools report what happened to them -------------------------------------


class TextArgs(TypedDict):
    text: str


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    count: int


class Optional(BaseModel):
    text: str
    count: int = 1


class Open(BaseModel):
    tags: dict[str, int]


@dataclass
class Probe:
    """The bodies' side of a test: when they started, were told to stop, and finished."""

    started: anyio.Event = field(default_factory=anyio.Event)
    told: anyio.Event = field(default_factory=anyio.Event)
    release_async: anyio.Event = field(default_factory=anyio.Event)
    release_thread: threading.Event = field(default_factory=threading.Event)
    heard: list[object] = field(default_factory=list[object])
    finished: list[str] = field(default_factory=list[str])

    def release(self) -> None:
        self.release_async.set()
        self.release_thread.set()


@dataclass
class Setup:
    registry: ToolRegistry
    probe: Probe
    registrations: dict[str, Registration] = field(default_factory=dict[str, Registration])
    results: list[tuple[str, object, ToolResult]] = field(
        default_factory=list["tuple[str, object, ToolResult]"]
    )

    def observe(self, exec: ToolExecution, result: ToolResult) -> None:
        self.results.append((exec.call_id, exec.agent, result))

    @property
    def only(self) -> tuple[str, object, ToolResult]:
        assert len(self.results) == 1, self.results
        return self.results[0]

    def tool(self, name: str) -> FunctionTool:
        (found,) = [tool for tool in function_tools(self.registry) if tool.name == name]
        return found


def setup(registry: ToolRegistry | None = None) -> Setup:
    registry = ToolRegistry() if registry is None else registry
    probe = Probe()

    @define_tool(name="echo", description="Echo the text.")
    async def echo(args: TextArgs, exec: ToolRunContext) -> str:
        return args["text"]

    @define_tool(name="closed", description="Every property required, no others.")
    async def closed(args: Closed, exec: ToolRunContext) -> str:
        return args.text * args.count

    @define_tool(name="optional", description="An optional count.")
    async def optional(args: Optional, exec: ToolRunContext) -> str:
        return args.text * args.count

    @define_tool(name="open", description="An open object.")
    async def open_(args: Open, exec: ToolRunContext) -> int:
        return sum(args.tags.values())

    @define_tool(name="fails", description="Always fails.")
    async def fails(args: TextArgs, exec: ToolRunContext) -> str:
        raise ValueError(f"no {args['text']}")

    @define_tool(name="waits", description="Waits for its signal; cleans up when told.")
    async def waits(args: TextArgs, exec: ToolRunContext) -> str:
        exec.signal.add_listener(lambda signal: probe.heard.append(signal.reason))
        probe.started.set()
        try:
            await exec.signal.wait()
        except BaseException:
            probe.told.set()  # the host's cancellation, delivered at this await
            with anyio.CancelScope(shield=True):
                await probe.release_async.wait()  # cleanup that takes a while
            probe.finished.append("async")
            raise
        return "stopped by its signal"

    @define_tool(name="blocks", description="A thread body that waits for its signal.")
    def blocks(args: TextArgs, exec: ToolRunContext) -> str:
        exec.signal.add_listener(lambda signal: probe.heard.append(signal.reason))
        anyio.from_thread.run_sync(probe.started.set)
        exec.signal.wait_sync()
        anyio.from_thread.run_sync(probe.told.set)
        probe.release_thread.wait()  # cleanup that takes a while
        probe.finished.append("thread")
        return "stopped by its signal"

    done = Setup(registry, probe)
    for tool in (echo, closed, optional, open_, fails, waits, blocks):
        done.registrations[tool.name] = registry.register(tool)
    registry.on_result(done.observe)
    return done


# -- the tools --------------------------------------------------------------------------------


def test_import_toolseam_does_not_import_the_sdk() -> None:
    probe = "import sys, toolseam; assert 'agents' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)


def test_one_function_tool_per_registered_tool_with_its_schema() -> None:
    registry = setup().registry
    tools = function_tools(registry)
    assert [tool.name for tool in tools] == [schema.name for schema in registry.schemas()]
    for tool, schema in zip(tools, registry.schemas(), strict=True):
        assert isinstance(tool, FunctionTool)
        assert tool.description == schema.description
        assert tool.params_json_schema == schema.parameters
        assert type(tool.params_json_schema) is dict  # plain, for the SDK to keep
        assert tool.needs_approval is False
        assert tool.timeout_seconds is None  # the registry enforces timeouts, not the SDK


def test_strict_exactly_when_the_sdk_takes_the_schema_as_it_is() -> None:
    tools = {tool.name: tool for tool in function_tools(setup().registry)}
    strict = {name for name, tool in tools.items() if tool.strict_json_schema}
    assert strict == {"closed"}
    closed = tools["closed"].params_json_schema
    assert ensure_strict_json_schema(copy.deepcopy(closed)) == closed
    # Strict mode would make `count` required: the model could no longer leave it out.
    optional = tools["optional"].params_json_schema
    assert ensure_strict_json_schema(copy.deepcopy(optional))["required"] == ["text", "count"]
    assert optional["required"] == ["text"]
    # It would close the object `echo` takes (extra keys are accepted today).
    echo = tools["echo"].params_json_schema
    assert "additionalProperties" not in echo
    assert ensure_strict_json_schema(copy.deepcopy(echo))["additionalProperties"] is False
    # And it refuses a map with open keys.
    with pytest.raises(UserError):
        ensure_strict_json_schema(copy.deepcopy(tools["open"].params_json_schema))


def test_a_schema_that_is_not_json_is_refused_naming_the_tool() -> None:
    registry = ToolRegistry()
    echo = setup().registry.get("echo")
    assert echo is not None

    class Odd:
        name = "odd"
        description = "A schema with a set in it."
        parameters = {"type": "object", "enum": {1, 2}}  # noqa: RUF012
        timeout = None
        parse_arguments = echo.parse_arguments
        run = echo.run
        serialize_output = echo.serialize_output
        render = echo.render
        is_concurrency_safe = echo.is_concurrency_safe
        finalize_content = echo.finalize_content

    registry.register(Odd())
    with pytest.raises(ValueError, match=r'^tool "odd": its parameters schema is not JSON \(\$'):
        function_tools(registry)


# -- one call ---------------------------------------------------------------------------------


async def test_a_success_is_its_content_text_and_the_call_id_is_the_sdks() -> None:
    done = setup()
    ctx = context("call_7")
    assert await done.tool("echo").on_invoke_tool(ctx, '{"text": "hi"}') == "hi"
    call_id, agent, result = done.only
    assert call_id == "call_7"
    assert agent is ctx
    assert not result.is_error


async def test_a_json_value_is_its_json_text() -> None:
    done = setup()
    output = await done.tool("open").on_invoke_tool(context("c"), '{"tags": {"a": 1, "b": 2}}')
    assert output == "3"


@pytest.mark.parametrize(
    ("name", "arguments", "text"),
    [
        ("fails", '{"text": "luck"}', "Error: no luck"),
        ("echo", '{"text": 1}', "Error: invalid arguments for tool"),
        ("echo", "", "Error: invalid arguments for tool"),  # "" is {}, as in the SDK
        ("echo", "[1, 2]", "Error: invalid arguments for tool"),
        (
            "echo",
            '{"text": NaN}',
            "Error: tool execution arguments must be losslessly JSON-serializable ($.text: ",
        ),
    ],
)
async def test_a_failure_is_its_error_text_and_never_raises(
    name: str, arguments: str, text: str
) -> None:
    done = setup()
    output = await done.tool(name).on_invoke_tool(context("call_f", name), arguments)
    assert isinstance(output, str)
    assert output.startswith(text)
    _, _, result = done.only
    assert result.is_error


async def test_a_tool_unregistered_since_is_an_unknown_tool() -> None:
    done = setup()
    tool = done.tool("echo")
    done.registrations["echo"].remove()
    assert await tool.on_invoke_tool(context("b"), '{"text": "x"}') == 'Error: unknown tool "echo"'
    assert len(done.results) == 1


@pytest.mark.parametrize("arguments", ['{"text": ', "[" * 100_000 + "]" * 100_001])
async def test_arguments_that_are_not_json_are_an_error_text_without_a_call(
    arguments: str,
) -> None:
    done = setup()
    output = await done.tool("echo").on_invoke_tool(context("call_j"), arguments)
    assert output.startswith("Error: the tool call's arguments could not be read as JSON (")
    assert done.results == []


async def test_arguments_100_000_levels_deep_reach_the_registry() -> None:
    """Contract §5.2: depth is limited only by memory, for arguments that arrive as JSON
    text too. ``json.loads`` gives up about a thousand levels down, and such arguments were
    answered "could not be read as JSON" without a call."""
    registry = ToolRegistry()
    depths: list[int] = []

    class Deep(TypedDict):
        tree: object

    @define_tool(name="depth", description="How deep the tree is.")
    async def depth(args: Deep, exec: ToolRunContext) -> int:
        node, levels = args["tree"], 0
        while isinstance(node, dict):
            node, levels = node["a"], levels + 1  # pyright: ignore[reportUnknownVariableType]
        depths.append(levels)
        return levels

    registry.register(depth)
    done = setup(registry)
    deep = '{"tree": ' + '{"a": ' * 100_000 + "[1]" + "}" * 100_000 + "}"
    [tool] = [tool for tool in function_tools(registry) if tool.name == "depth"]
    assert await tool.on_invoke_tool(context("call_d", "depth", deep), deep) == "100000"
    _, _, result = done.only
    assert not result.is_error
    assert depths == [100_000]


# -- cancellation of the task that runs on_invoke_tool ----------------------------------------


async def _cancelled_call(done: Setup, tool: str, how: str) -> asyncio.Task[Any]:
    """Start the call in a task, wait until its body runs, cancel it, and return the task."""
    scopes: list[anyio.CancelScope] = []

    async def in_scope() -> object:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            return await done.tool(tool).on_invoke_tool(context("call_c", tool), '{"text": "x"}')
        return None

    if how == "Task.cancel":
        task = asyncio.create_task(
            done.tool(tool).on_invoke_tool(context("call_c", tool), '{"text": "x"}')
        )
    else:
        task = asyncio.create_task(in_scope())
    await done.probe.started.wait()
    if how == "Task.cancel":
        task.cancel()
    else:
        scopes[0].cancel()
    return task


@pytest.mark.parametrize("how", ["Task.cancel", "cancel scope"])
@pytest.mark.parametrize("tool", ["waits", "blocks"])
async def test_a_cancelled_call_aborts_the_body_and_wait_idle_waits_for_it(
    tool: str, how: str
) -> None:
    done = setup()
    task = await _cancelled_call(done, tool, how)
    await done.probe.told.wait()  # the body is told to stop...
    idle = asyncio.create_task(done.registry.wait_idle())
    await anyio.wait_all_tasks_blocked()
    assert not idle.done()  # ...and while it cleans up, the call is not over
    assert done.results == []
    done.probe.release()
    await idle
    assert done.probe.finished == ["async" if tool == "waits" else "thread"]
    call_id, _, result = done.only
    assert (call_id, result.is_error, getattr(result, "code", None)) == (
        "call_c",
        True,
        TOOL_ABORTED,
    )
    assert len(done.probe.heard) == 1  # the registry aborted the body's signal
    assert task.done()
    if how == "Task.cancel":
        assert task.cancelled()  # the cancellation went on, unchanged
    else:
        assert task.result() is None  # the scope took its own cancellation back


# -- a whole run ------------------------------------------------------------------------------


async def test_a_run_calls_a_registry_tool_and_then_answers() -> None:
    done = setup()
    model = ScriptModel(
        [call("echo", '{"text": "hi"}', "call_1"), call("fails", '{"text": "luck"}', "call_2")],
        [say("done")],
    )
    agent = Agent(name="assistant", model=model, tools=function_tools(done.registry))
    result = await Runner.run(agent, "go")
    assert result.final_output == "done"
    assert model.outputs(1) == [
        {"call_id": "call_1", "output": "hi"},
        {"call_id": "call_2", "output": "Error: no luck"},
    ]
    assert sorted(call_id for call_id, _, _ in done.results) == ["call_1", "call_2"]
    for call_id, agent_value, _ in done.results:
        assert isinstance(agent_value, ToolContext)
        assert agent_value.tool_call_id == call_id


@pytest.mark.parametrize("tool", ["waits", "blocks"])
async def test_a_run_cancelled_mid_tool_returns_at_once_and_wait_idle_waits(tool: str) -> None:
    done = setup()
    model = ScriptModel([call(tool, '{"text": "x"}', "call_1")], [say("never sent")])
    agent = Agent(name="assistant", model=model, tools=function_tools(done.registry))
    session = SQLiteSession("cancelled-run")
    try:
        run = asyncio.create_task(Runner.run(agent, "go", session=session))
        await done.probe.started.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        # The SDK is done with the run: it cancelled the tool's task and did not wait.
        await done.probe.told.wait()
        assert done.probe.finished == []
        assert done.results == []
        idle = asyncio.create_task(done.registry.wait_idle())
        await anyio.wait_all_tasks_blocked()
        assert not idle.done()
        done.probe.release()
        await idle
        assert len(done.probe.finished) == 1
        call_id, _, result = done.only
        assert (call_id, getattr(result, "code", None)) == ("call_1", TOOL_ABORTED)
        # What the SDK kept: one model turn, and in the session only the user's input —
        # neither the tool call nor an output for it.
        assert len(model.inputs) == 1
        assert await session.get_items() == [{"content": "go", "role": "user"}]
    finally:
        session.close()


async def test_an_sdk_timeout_aborts_the_body_and_waits_for_it() -> None:
    done = setup()
    (waits,) = [tool for tool in function_tools(done.registry) if tool.name == "waits"]
    waits.timeout_seconds = 0.01  # the SDK's own deadline: asyncio.wait_for, a cancellation
    model = ScriptModel([call("waits", '{"text": "x"}', "call_1")], [say("done")])
    agent = Agent(name="assistant", model=model, tools=[waits])
    run = asyncio.create_task(Runner.run(agent, "go"))
    await done.probe.told.wait()
    await anyio.wait_all_tasks_blocked()
    # Unlike a cancelled run, wait_for waits for the task it cancelled: the run is held up
    # while the body cleans up.
    assert not run.done()
    assert done.results == []
    done.probe.release()
    result = await run
    assert result.final_output == "done"
    assert done.probe.finished == ["async"]
    assert [getattr(r, "code", None) for _, _, r in done.results] == [TOOL_ABORTED]
    assert model.outputs(1) == [
        {"call_id": "call_1", "output": "Tool 'waits' timed out after 0.01 seconds."}
    ]


async def test_a_registry_timeout_asks_the_body_and_the_model_reads_it() -> None:
    registry = ToolRegistry()
    done = setup(registry)

    @define_tool(name="patient", description="Waits for its signal.", timeout=0.01)
    async def patient(args: TextArgs, exec: ToolRunContext) -> str:
        await exec.signal.wait()
        done.probe.finished.append(str(exec.signal.reason))
        return "late"

    registry.register(patient)
    model = ScriptModel([call("patient", '{"text": "x"}', "call_1")], [say("done")])
    agent = Agent(name="assistant", model=model, tools=function_tools(registry))
    assert (await Runner.run(agent, "go")).final_output == "done"
    assert done.probe.finished == ["tool call timed out after 0.01s"]
    assert model.outputs(1) == [
        {"call_id": "call_1", "output": "Error: tool call timed out after 0.01s"}
    ]


@pytest.mark.parametrize("tool", ["waits", "blocks"])
async def test_a_streamed_run_stopped_with_cancel_is_the_same(tool: str) -> None:
    """``result.cancel()``, the SDK's own stop, cancels the tool's task and does not wait."""
    done = setup()
    model = ScriptModel([call(tool, '{"text": "x"}', "call_1")], [say("never sent")])
    agent = Agent(name="assistant", model=model, tools=function_tools(done.registry))
    streamed = Runner.run_streamed(agent, "go")

    async def consume() -> None:
        async for _ in streamed.stream_events():
            pass

    consumer = asyncio.create_task(consume())
    await done.probe.started.wait()
    streamed.cancel()
    await consumer
    await done.probe.told.wait()
    assert done.results == []
    assert done.probe.finished == []
    done.probe.release()
    await done.registry.wait_idle()
    call_id, _, result = done.only
    assert (call_id, getattr(result, "code", None)) == ("call_1", TOOL_ABORTED)
    assert streamed.new_items == []
    assert streamed.to_input_list() == [{"content": "go", "role": "user"}]


# -- approval ---------------------------------------------------------------------------------


@dataclass
class Approver:
    """An `ApprovalService` with a fixed answer, or one that waits for the caller's signal."""

    answer: ApprovalAnswer | None
    requests: list[ApprovalRequest] = field(default_factory=list[ApprovalRequest])
    asked: anyio.Event = field(default_factory=anyio.Event)

    async def request(self, request: ApprovalRequest, /) -> ApprovalAnswer:
        self.requests.append(request)
        self.asked.set()
        if self.answer is None:
            await request.signal.wait()
            return "cancelled"
        return self.answer


async def ask(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
    return Ask("echo needs a yes") if exec.name == "echo" else await next()


@pytest.mark.parametrize(
    ("answer", "output"),
    [("allowed-once", "hi"), ("rejected", "Error: tool call denied: rejected by approval")],
)
async def test_the_registry_owns_approval_by_default(answer: ApprovalAnswer, output: str) -> None:
    approver = Approver(answer)
    done = setup(ToolRegistry(approver))
    done.registry.on_pre_execute(ask)
    model = ScriptModel([call("echo", '{"text": "hi"}', "call_1")], [say("done")])
    agent = Agent(name="assistant", model=model, tools=function_tools(done.registry))
    result = await Runner.run(agent, "go")
    assert result.interruptions == []  # the SDK never paused the run
    assert model.outputs(1) == [{"call_id": "call_1", "output": output}]
    (request,) = approver.requests
    assert request.reason == "echo needs a yes"
    assert isinstance(request.execution.agent, ToolContext)
    assert request.execution.agent.tool_call_id == "call_1"
    assert len(done.results) == 1


async def test_a_run_cancelled_while_the_registry_asks_never_ran_the_body() -> None:
    approver = Approver(None)
    done = setup(ToolRegistry(approver))
    done.registry.on_pre_execute(ask)
    model = ScriptModel([call("echo", '{"text": "hi"}', "call_1")], [say("never sent")])
    agent = Agent(name="assistant", model=model, tools=function_tools(done.registry))
    run = asyncio.create_task(Runner.run(agent, "go"))
    await approver.asked.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await done.registry.wait_idle()
    _, _, result = done.only
    assert getattr(result, "code", None) == TOOL_ABORTED_BEFORE_DISPATCH


@pytest.mark.parametrize("registry_answer", [None, "allowed-once", "rejected"])
@pytest.mark.parametrize("sdk_approves", [True, False])
async def test_the_sdks_gate_comes_first_and_the_registry_still_decides(
    sdk_approves: bool, registry_answer: ApprovalAnswer | None
) -> None:
    """``needs_approval=True``: the SDK pauses the run; the registry runs only what it let by."""
    done = setup(ToolRegistry(None if registry_answer is None else Approver(registry_answer)))
    if registry_answer is not None:
        done.registry.on_pre_execute(ask)
    model = ScriptModel([call("echo", '{"text": "hi"}', "call_1")], [say("done")])
    tools = function_tools(done.registry, needs_approval=True)
    assert {tool.needs_approval for tool in tools} == {True}
    agent = Agent(name="assistant", model=model, tools=tools)
    paused = await Runner.run(agent, "go")
    (pending,) = paused.interruptions
    assert done.results == []  # the registry has not seen the call yet
    state = paused.to_state()
    if sdk_approves:
        state.approve(pending)
    else:
        state.reject(pending)
    result = await Runner.run(agent, state)
    assert result.final_output == "done"
    (output,) = model.outputs(1)
    if not sdk_approves:
        assert output["output"] == "Tool execution was not approved."  # the SDK's own text
        assert done.results == []  # the registry never saw the call
    elif registry_answer == "rejected":
        assert output["output"] == "Error: tool call denied: rejected by approval"
        assert len(done.results) == 1
    else:
        assert output["output"] == "hi"
        assert len(done.results) == 1


# -- progress and logs: the on_stream callback ---------------------------------------------


@define_tool(name="report", description="Reports progress and a log.")
async def report(args: TextArgs, exec: ToolRunContext) -> str:
    exec.progress(1, 3, "one")
    exec.log("info", {"step": [1]}, logger="report")
    exec.progress(3, 3)
    return "reported"


REPORTED: list[ToolEvent] = [
    ProgressEvent(1, 3, "one"),
    LogEvent("info", {"step": [1]}, "report"),
    ProgressEvent(3, 3),
]


@dataclass
class Streamed:
    """What a streamed run's consumer saw, in one order: on_stream's events and the SDK's."""

    seen: list[object] = field(default_factory=list[object])
    payloads: list[RegistryToolStreamEvent] = field(default_factory=list[RegistryToolStreamEvent])

    def on_stream(self, payload: RegistryToolStreamEvent) -> None:
        self.payloads.append(payload)
        self.seen.append(payload["event"])

    async def consume(self, streamed: Any) -> None:
        async for event in streamed.stream_events():
            if isinstance(event, RunItemStreamEvent) and event.name == "tool_output":
                self.seen.append("tool_output")


def registry_of(*tools: Any) -> tuple[ToolRegistry, list[tuple[str, ToolResult]]]:
    registry = ToolRegistry()
    published: list[tuple[str, ToolResult]] = []
    for tool in tools:
        registry.register(tool)
    registry.on_result(lambda exec, result: published.append((exec.call_id, result)))
    return registry, published


async def test_a_streamed_run_hands_on_stream_every_event_before_the_tool_output() -> None:
    registry, _ = registry_of(report)
    stream = Streamed()
    model = ScriptModel([call("report", '{"text": "x"}', "call_1")], [say("done")])
    tools = function_tools(registry, on_stream=stream.on_stream)
    streamed = Runner.run_streamed(Agent(name="a", model=model, tools=tools), "go")
    await stream.consume(streamed)

    assert stream.seen == [*REPORTED, "tool_output"]
    for payload in stream.payloads:
        assert payload["execution"].call_id == "call_1"
        assert payload["execution"].name == "report"
        assert payload["context"].tool_call_id == "call_1"
        assert payload["tool_call"] is not None
        assert payload["tool_call"].call_id == "call_1"
    assert model.outputs(1) == [{"call_id": "call_1", "output": "reported"}]


async def test_an_async_callback_is_awaited_before_the_sdk_gets_the_output() -> None:
    registry, published = registry_of(report)
    entered = anyio.Event()
    release = anyio.Event()
    handed: list[ToolEvent] = []

    async def on_stream(payload: RegistryToolStreamEvent) -> None:
        handed.append(payload["event"])
        if len(handed) == 3:
            entered.set()
            await release.wait()  # a slow consumer, say a websocket

    model = ScriptModel([call("report", '{"text": "x"}', "call_1")], [say("done")])
    tools = function_tools(registry, on_stream=on_stream)
    run = asyncio.create_task(Runner.run(Agent(name="a", model=model, tools=tools), "go"))
    await entered.wait()
    await anyio.wait_all_tasks_blocked()
    assert len(published) == 1  # the registry is done with the call...
    assert len(model.inputs) == 1  # ...and the SDK has not had its output yet
    release.set()
    assert (await run).final_output == "done"
    assert handed == REPORTED


async def test_a_sync_body_and_a_nested_call_report_through_on_stream() -> None:
    @define_tool(name="count", description="Counts in a worker thread, then calls report.")
    def count(args: TextArgs, exec: ToolRunContext) -> str:
        for step in range(50):
            exec.progress(step, 50)
        anyio.from_thread.run(
            registry.execute,
            nested_input(exec, call_id="inner_1", name="report", arguments={"text": "y"}),
        )
        return "counted"

    registry, _ = registry_of(count, report)
    stream = Streamed()
    model = ScriptModel([call("count", '{"text": "x"}', "call_1")], [say("done")])
    tools = function_tools(registry, on_stream=stream.on_stream)
    await stream.consume(Runner.run_streamed(Agent(name="a", model=model, tools=tools), "go"))

    assert stream.seen == [*(ProgressEvent(s, 50) for s in range(50)), *REPORTED, "tool_output"]
    reporters = [(p["execution"].call_id, p["execution"].name) for p in stream.payloads]
    assert reporters == [("call_1", "count")] * 50 + [("inner_1", "report")] * 3
    assert {p["context"].tool_call_id for p in stream.payloads} == {"call_1"}


async def test_a_raising_callback_is_contained_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry, _ = registry_of(report)

    def on_stream(payload: RegistryToolStreamEvent) -> None:
        raise RuntimeError("the websocket is gone")

    model = ScriptModel([call("report", '{"text": "x"}', "call_1")], [say("done")])
    tools = function_tools(registry, on_stream=on_stream)
    assert (await Runner.run(Agent(name="a", model=model, tools=tools), "go")).final_output == (
        "done"
    )
    assert model.outputs(1) == [{"call_id": "call_1", "output": "reported"}]
    (logged,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert logged.getMessage().startswith("delivering tool 'report''s ProgressEvent")


@pytest.mark.parametrize("kind", ["async", "thread"])
async def test_a_cancelled_streamed_run_with_on_stream_still_gives_one_result(kind: str) -> None:
    if kind == "async":

        @define_tool(name="work", description="Reports, then waits for its signal.")
        async def work(args: TextArgs, exec: ToolRunContext) -> str:
            exec.progress(1, 10)
            await exec.signal.wait()
            exec.progress(2, 10, "stopping")
            return "stopped"

    else:

        @define_tool(name="work", description="Reports, then polls its signal.")
        def work(args: TextArgs, exec: ToolRunContext) -> str:
            exec.progress(1, 10)
            while not exec.signal.wait_sync(0.01):
                pass
            exec.progress(2, 10, "stopping")
            return "stopped"

    registry, published = registry_of(work)
    stream = Streamed()
    first = anyio.Event()

    def on_stream(payload: RegistryToolStreamEvent) -> None:
        stream.on_stream(payload)
        first.set()

    model = ScriptModel([call("work", '{"text": "x"}', "call_1")], [say("never sent")])
    tools = function_tools(registry, on_stream=on_stream)
    streamed = Runner.run_streamed(Agent(name="a", model=model, tools=tools), "go")
    consumer = asyncio.create_task(stream.consume(streamed))
    await first.wait()
    streamed.cancel()
    await consumer
    await registry.wait_idle()

    ((call_id, result),) = published
    assert (call_id, getattr(result, "code", None)) == ("call_1", TOOL_ABORTED)
    # What the body reported before the stop reached the callback; no output reached the SDK.
    assert stream.seen[0] == ProgressEvent(1, 10)
    assert "tool_output" not in stream.seen
    assert len(model.inputs) == 1


# -- the caller's own host ------------------------------------------------------------------


async def test_a_host_factory_gets_each_calls_tool_context_and_answers_sample() -> None:
    sampled: list[tuple[str, SamplingRequest]] = []
    progress: list[tuple[str, ToolEvent]] = []

    async def sample(exec: ToolExecution, request: SamplingRequest, signal: AbortSignal) -> Sampled:
        sampled.append((exec.call_id, request))
        return Sampled(content=[{"type": "text", "text": "a haiku"}], model="host-model")

    def host(ctx: ToolContext[Any]) -> ToolHost:
        def seen(exec: ToolExecution, event: ToolEvent) -> None:
            progress.append((ctx.tool_call_id, event))

        return ToolHost(on_progress=seen, sample=sample)

    @define_tool(name="poet", description="Asks the caller's model.")
    async def poet(args: TextArgs, exec: ToolRunContext) -> str:
        exec.progress(0, 1, "asking")
        return str(await exec.sample(args["text"], max_tokens=50))

    registry, _ = registry_of(poet)
    stream = Streamed()
    model = ScriptModel([call("poet", '{"text": "write"}', "call_1")], [say("done")])
    tools = function_tools(registry, on_stream=stream.on_stream, host=host)
    await Runner.run(Agent(name="a", model=model, tools=tools), "go")

    assert model.outputs(1) == [{"call_id": "call_1", "output": "a haiku"}]
    assert progress == [("call_1", ProgressEvent(0, 1, "asking"))]
    assert stream.seen == [ProgressEvent(0, 1, "asking")]  # both saw it
    assert [(call_id, request.max_tokens) for call_id, request in sampled] == [("call_1", 50)]


async def test_without_on_stream_the_host_alone_sees_the_events() -> None:
    registry, _ = registry_of(report)
    seen: list[ToolEvent] = []

    def sink(exec: ToolExecution, event: ToolEvent) -> None:
        seen.append(event)

    model = ScriptModel([call("report", '{"text": "x"}', "call_1")], [say("done")])
    tools = function_tools(registry, host=ToolHost(on_progress=sink, on_log=sink))
    await Runner.run(Agent(name="a", model=model, tools=tools), "go")
    assert seen == REPORTED


def test_on_stream_and_host_are_checked() -> None:
    registry = ToolRegistry()
    with pytest.raises(TypeError, match=r"^on_stream must be callable or None, got str$"):
        function_tools(registry, on_stream="print")  # type: ignore[arg-type]
    with pytest.raises(
        TypeError,
        match=r"^host must be a ToolHost, a callable making one per call, or None, got dict$",
    ):
        function_tools(registry, host={})  # type: ignore[arg-type]
