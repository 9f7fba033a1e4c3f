"""toolseam.durable on a real DBOS (SQLite in a temporary folder): calls as steps.

asyncio only: DBOS runs its workflows and steps as asyncio tasks and cannot host trio (the
last test checks the error toolseam.durable raises there). Cancellation goes through the
system database exactly as from another process (``DBOS.cancel_workflow_async`` writes the
status row; nothing in this process is told); tests/test_durable_processes.py does it from
real other processes, and kills a worker mid-body.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import pickle
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import pytest
from dbos import DBOS, Serializer, SetWorkflowID, SetWorkflowTimeout
from dbos._error import DBOSAwaitedWorkflowCancelledError
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from typing_extensions import TypedDict

import dbos_sqlite_compat
from toolseam import (
    INVALID_ARGS,
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    TOOL_TIMEOUT,
    AbortController,
    CallOutcome,
    Next,
    PreDecision,
    Principal,
    ToolCall,
    ToolError,
    ToolExecution,
    ToolExecutionInput,
    ToolFailure,
    ToolHost,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    define_tool,
)
from toolseam.durable import (
    OUTCOME_UNKNOWN,
    RESULT_NOT_RECORDABLE,
    DurableTools,
    _engine,
    outcomes_from_steps,
    recorded_outcomes,
)
from toolseam.durable._records import decode_outcome, encode_outcome
from toolseam.integrations.pydantic_ai import RegistryToolset

dbos_sqlite_compat.install()


@pytest.fixture
def anyio_backend() -> str:
    """DBOS is asyncio-only."""
    return "asyncio"


# -- a journal that refuses large values, as a size-capped serializer would -------------

JOURNAL_LIMIT = 16_384


class CappedSerializer(Serializer):
    """DBOS's default pickle, refusing values whose text exceeds `JOURNAL_LIMIT`."""

    def serialize(self, data: Any) -> str:
        text = base64.b64encode(pickle.dumps(data)).decode()
        if len(text) > JOURNAL_LIMIT:
            raise ValueError(f"{len(text)} characters, more than the journal's {JOURNAL_LIMIT}")
        return text

    def deserialize(self, serialized_data: str) -> Any:
        return pickle.loads(base64.b64decode(serialized_data))

    def name(self) -> str:
        return "capped_pickle"


# -- tools -------------------------------------------------------------------------------


class NoArgs(TypedDict):
    pass


class AddArgs(TypedDict):
    a: int
    b: int


class SizeArgs(TypedDict):
    size: int


class Probe:
    """What the bodies report: runs per tool, bodies running, and who was told to stop."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: dict[str, int] = {}
        self.running = 0
        self.told: list[str] = []
        self.started: anyio.Event | None = None
        self.waiting = 0
        self.expect_waiting = 1

    def reset(self, expect_waiting: int = 1) -> None:
        self.runs.clear()
        self.told.clear()
        self.running = 0
        self.waiting = 0
        self.expect_waiting = expect_waiting
        self.started = anyio.Event()

    def ran(self, name: str) -> None:
        with self.lock:
            self.runs[name] = self.runs.get(name, 0) + 1


PROBE = Probe()


class Refused(ToolError):
    code = "REFUSED"


@define_tool(name="add", description="Add two numbers.", is_concurrency_safe=lambda _: True)
async def add(args: AddArgs, exec: ToolRunContext) -> int:
    PROBE.ran("add")
    return args["a"] + args["b"]


@define_tool(name="refuse", description="Always refuses.")
async def refuse(args: NoArgs, exec: ToolRunContext) -> str:
    PROBE.ran("refuse")
    raise Refused("not today")


@define_tool(name="wait", description="Wait to be told.", is_concurrency_safe=lambda _: True)
async def wait(args: NoArgs, exec: ToolRunContext) -> str:
    PROBE.ran("wait")
    PROBE.running += 1
    try:
        PROBE.waiting += 1
        if PROBE.waiting == PROBE.expect_waiting and PROBE.started is not None:
            PROBE.started.set()
        await exec.signal.wait()
        PROBE.told.append(exec.call_id)
        # Quiescence: still running a little after being told; the outcome waits for it.
        await anyio.sleep(0.01)
        exec.signal.raise_if_aborted()
        return "unreachable"
    finally:
        PROBE.running -= 1


@define_tool(name="notify", description="Send a notification (not idempotent).")
async def notify(args: NoArgs, exec: ToolRunContext) -> str:
    PROBE.ran("notify")
    return "sent"


@define_tool(name="lookup", description="Read a value.", idempotent=True)
async def lookup(args: NoArgs, exec: ToolRunContext) -> str:
    PROBE.ran("lookup")
    return "found"


@define_tool(name="blob", description="Return a large value.")
async def blob(args: SizeArgs, exec: ToolRunContext) -> str:
    PROBE.ran("blob")
    return "x" * args["size"]


@define_tool(name="purge", description="Purge everything.", scopes=["admin"])
async def purge(args: NoArgs, exec: ToolRunContext) -> str:
    PROBE.ran("purge")
    return "purged"


REGISTRY = ToolRegistry()
for _tool in (add, refuse, wait, notify, lookup, blob, purge):
    REGISTRY.register(_tool)
DURABLE = DurableTools(REGISTRY, poll_interval=0.05)

Summary = tuple[str, str, str, bool]


def summary(outcome: CallOutcome) -> Summary:
    """call id, code ("OK" for a success), the content's text, dispatched."""
    result = outcome.result
    code = "OK" if isinstance(result, ToolSuccess) else str(result.code)
    text = result.content[0]["text"] if result.content else ""
    assert isinstance(text, str)
    return outcome.call.call_id, code, text[:80], outcome.dispatched


@DBOS.workflow()
async def batch_workflow(
    calls: list[tuple[str, str, dict[str, Any]]], max_parallel: int
) -> list[Summary]:
    outcomes = await DURABLE.run_tool_calls(
        [ToolCall(*call) for call in calls],
        signal=AbortController().signal,
        max_parallel=max_parallel,
    )
    return [summary(outcome) for outcome in outcomes]


@DBOS.workflow()
async def execute_workflow(call_id: str, name: str) -> tuple[str, str]:
    signal = AbortController().signal
    result = await DURABLE.execute(
        ToolExecutionInput(call_id=call_id, name=name, arguments={}, signal=signal)
    )
    if isinstance(result, ToolSuccess):
        return "OK", ""
    return str(result.code), result.error.message


@DBOS.workflow()
async def principal_workflow(call_id: str, name: str, scopes: list[str]) -> tuple[str, str]:
    signal = AbortController().signal
    result = await DURABLE.execute(
        ToolExecutionInput(
            call_id=call_id,
            name=name,
            arguments={},
            signal=signal,
            principal=Principal("eve", scopes),
        )
    )
    if isinstance(result, ToolSuccess):
        return "OK", str(result.value)
    return str(result.code), result.error.message


@DBOS.workflow()
async def host_cancelled_workflow() -> list[Summary]:
    """Its own task is cancelled (a cancel scope) while a body waits: a host cancellation."""
    scope = anyio.CancelScope()

    async def cancel_once_started() -> None:
        assert PROBE.started is not None
        await PROBE.started.wait()
        scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(cancel_once_started)
        with scope:
            await DURABLE.run_tool_calls(
                [ToolCall("h1", "wait", {}), ToolCall("h2", "notify", {})],
                signal=AbortController().signal,
            )
    return [summary(o) for o in await recorded_outcomes_in_workflow()]


async def recorded_outcomes_in_workflow() -> list[CallOutcome]:
    # Inside a workflow the read is a step of its own: fine for a test.
    workflow_id = DBOS.workflow_id
    assert workflow_id is not None
    return outcomes_from_steps(await DBOS.list_workflow_steps_async(workflow_id))


@pytest.fixture(scope="module", autouse=True)
def dbos() -> Iterator[None]:
    with tempfile.TemporaryDirectory() as folder:
        DBOS(
            config={
                "name": "toolseam_durable_tests",
                "system_database_url": f"sqlite:///{Path(folder) / 'system.sqlite'}",
                "serializer": CappedSerializer(),
                "log_level": "CRITICAL",
            }
        )
        DBOS.launch()
        try:
            yield
        finally:
            DBOS.destroy()


_ids = itertools.count()


def new_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


async def start_batch(
    workflow_id: str, calls: list[tuple[str, str, dict[str, Any]]], max_parallel: int = 10
) -> Any:
    with SetWorkflowID(workflow_id):
        return await DBOS.start_workflow_async(batch_workflow, calls, max_parallel)


async def outcome_steps(workflow_id: str) -> dict[str, int]:
    """How many outcome steps each call id has in the journal."""
    counts: dict[str, int] = {}
    for outcome in await recorded_outcomes(workflow_id):
        counts[outcome.call.call_id] = counts.get(outcome.call.call_id, 0) + 1
    return counts


async def step_names(workflow_id: str) -> list[str]:
    return [step["function_name"] for step in await DBOS.list_workflow_steps_async(workflow_id)]


# -- calls as steps ----------------------------------------------------------------------


async def test_each_call_is_one_step_whose_outcome_is_the_result() -> None:
    PROBE.reset()
    workflow_id = new_id("steps")
    calls = [
        ("c1", "add", {"a": 2, "b": 3}),
        ("c2", "refuse", {}),
        ("c3", "add", {"a": "two"}),
        ("c4", "missing", {}),
    ]
    handle = await start_batch(workflow_id, calls)
    returned = await handle.get_result()
    assert [row[:2] for row in returned] == [
        ("c1", "OK"),
        ("c2", "REFUSED"),
        ("c3", INVALID_ARGS),
        ("c4", "UNKNOWN_TOOL"),
    ]
    recorded = await recorded_outcomes(workflow_id)
    assert [summary(o) for o in recorded] == [tuple(row) for row in returned]
    first = recorded[0]
    assert first.call == ToolCall("c1", "add", {"a": 2, "b": 3})
    assert isinstance(first.result, ToolSuccess)
    assert first.result.value == 5
    assert first.result.to_json()["content"] == [{"type": "text", "text": "5"}]
    refused = recorded[1].result
    assert isinstance(refused, ToolFailure)
    assert refused.error.message == "not today"
    assert refused.error.info is not None
    assert (refused.error.info.name, refused.error.info.code) == ("Refused", "REFUSED")
    # One outcome step per call, each preceded by its dispatch marker (none is idempotent).
    assert await step_names(workflow_id) == [
        "toolseam.dispatch:add",
        "toolseam:add",
        "toolseam.dispatch:refuse",
        "toolseam:refuse",
        "toolseam.dispatch:add",
        "toolseam:add",
        "toolseam.dispatch:missing",
        "toolseam:missing",
    ]


async def test_an_idempotent_tool_gets_no_dispatch_marker() -> None:
    PROBE.reset()
    workflow_id = new_id("idem")
    handle = await start_batch(workflow_id, [("l1", "lookup", {}), ("n1", "notify", {})])
    assert [row[1] for row in await handle.get_result()] == ["OK", "OK"]
    assert await step_names(workflow_id) == [
        "toolseam:lookup",
        "toolseam.dispatch:notify",
        "toolseam:notify",
    ]


async def test_execute_is_a_batch_of_one() -> None:
    workflow_id = new_id("execute")
    with SetWorkflowID(workflow_id):
        handle = await DBOS.start_workflow_async(execute_workflow, "e1", "refuse")
    assert await handle.get_result() == ("REFUSED", "not today")
    assert [summary(o) for o in await recorded_outcomes(workflow_id)] == [
        ("e1", "REFUSED", "Error: not today", True)
    ]


async def test_a_calls_principal_is_checked_inside_a_workflow() -> None:
    """Contract §14: the workflow's batch carries the principal; a missing scope denies."""
    PROBE.reset()
    outcomes: list[tuple[str, str]] = []
    for call_id, scopes in (("p1", ["tools"]), ("p2", ["admin"])):
        with SetWorkflowID(new_id("principal")):
            handle = await DBOS.start_workflow_async(principal_workflow, call_id, "purge", scopes)
        outcomes.append(await handle.get_result())
    assert outcomes == [
        ("None", "tool call denied: the caller lacks the scope admin"),
        ("OK", "purged"),
    ]
    assert PROBE.runs == {"purge": 1}  # only the principal with the scope ran it


async def test_replay_returns_the_recorded_outcomes_without_running_the_bodies() -> None:
    PROBE.reset()
    workflow_id = new_id("replay")
    calls = [("r1", "add", {"a": 1, "b": 1}), ("r2", "notify", {}), ("r3", "lookup", {})]
    first = await (await start_batch(workflow_id, calls)).get_result()
    runs = dict(PROBE.runs)
    assert runs == {"add": 1, "notify": 1, "lookup": 1}
    # A fork that starts after the batch's steps replays the whole batch from the journal.
    last = max(step["function_id"] for step in await DBOS.list_workflow_steps_async(workflow_id))
    fork = await DBOS.fork_workflow_async(workflow_id, last + 1)
    assert await fork.get_result() == first
    assert PROBE.runs == runs


async def test_a_recorded_call_whose_tool_is_gone_replays_its_recorded_outcome() -> None:
    PROBE.reset()
    workflow_id = new_id("gone")
    first = await (await start_batch(workflow_id, [("g1", "notify", {})])).get_result()
    registration = REGISTRY.get("notify")
    assert registration is not None
    # The registry changed after the call was recorded: the tool is gone.
    unregister = _unregister("notify")
    try:
        fork = await DBOS.fork_workflow_async(workflow_id, 3)
        assert await fork.get_result() == first == [("g1", "OK", "sent", True)]
    finally:
        unregister()
    assert PROBE.runs == {"notify": 1}


def _unregister(name: str) -> Any:
    definition = REGISTRY.get(name)
    assert definition is not None
    tools = REGISTRY._tools
    del tools[name]

    def restore() -> None:
        tools[name] = definition

    return restore


async def test_a_dispatched_call_without_outcome_is_not_run_again() -> None:
    """The journal as a crash leaves it (marker, no outcome), made with a fork."""
    PROBE.reset()
    workflow_id = new_id("unknown")
    calls = [("u1", "add", {"a": 1, "b": 2}), ("u2", "notify", {}), ("u3", "notify", {})]
    await (await start_batch(workflow_id, calls)).get_result()
    assert PROBE.runs == {"add": 1, "notify": 2}
    # Steps: u1 marker 1, outcome 2; u2 marker 3, outcome 4; u3 marker 5, outcome 6. A fork
    # from step 4 keeps u1's outcome and u2's marker: u2 was dispatched, its outcome lost.
    fork = await DBOS.fork_workflow_async(workflow_id, 4)
    replayed = await fork.get_result()
    assert [row[:2] for row in replayed] == [("u1", "OK"), ("u2", OUTCOME_UNKNOWN), ("u3", "OK")]
    unknown = (await recorded_outcomes(fork.get_workflow_id()))[1]
    assert isinstance(unknown.result, ToolFailure)
    assert unknown.dispatched is True
    assert unknown.result.error.info is not None
    assert unknown.result.error.info.name == "OutcomeUnknownError"
    assert "may or may not have happened" in unknown.result.error.message
    # u2's body did not run a second time; u3 (never dispatched before) ran once more.
    assert PROBE.runs == {"add": 1, "notify": 3}


async def test_an_idempotent_call_without_outcome_runs_again() -> None:
    PROBE.reset()
    workflow_id = new_id("rerun")
    handle = await start_batch(workflow_id, [("i0", "notify", {}), ("i1", "lookup", {})])
    await handle.get_result()
    # i0: marker 1, outcome 2; i1: (no marker at 3), outcome 4. A fork from 4 loses i1's outcome.
    fork = await DBOS.fork_workflow_async(workflow_id, 4)
    assert [row[1] for row in await fork.get_result()] == ["OK", "OK"]
    assert PROBE.runs == {"notify": 1, "lookup": 2}


# -- cancellation through the system database ---------------------------------------------


async def test_cancel_tells_every_body_in_flight_and_records_one_outcome_per_call() -> None:
    PROBE.reset(expect_waiting=2)
    workflow_id = new_id("cancel")
    calls = [
        ("k1", "lookup", {}),  # exclusive: done before k2 and k3 start
        ("k2", "wait", {}),
        ("k3", "wait", {}),
        ("k4", "notify", {}),  # exclusive: waits for k2 and k3, never dispatched
    ]
    handle = await start_batch(workflow_id, calls)
    assert PROBE.started is not None
    await PROBE.started.wait()
    await DBOS.cancel_workflow_async(workflow_id)
    with pytest.raises(DBOSAwaitedWorkflowCancelledError):
        await handle.get_result()
    assert sorted(PROBE.told) == ["k2", "k3"]
    assert PROBE.running == 0
    assert await outcome_steps(workflow_id) == {"k1": 1, "k2": 1, "k3": 1, "k4": 1}
    assert [summary(o) for o in await recorded_outcomes(workflow_id)] == [
        ("k1", "OK", "found", True),
        ("k2", TOOL_ABORTED, "Error: tool call aborted", True),
        ("k3", TOOL_ABORTED, "Error: tool call aborted", True),
        ("k4", TOOL_ABORTED_BEFORE_DISPATCH, "Error: tool call aborted before dispatch", False),
    ]
    assert "toolseam.dispatch:notify" not in await step_names(workflow_id)
    assert PROBE.runs.get("notify") is None


async def test_a_call_waiting_for_its_turn_ends_aborted_before_dispatch() -> None:
    PROBE.reset()
    workflow_id = new_id("turn")
    # max_parallel=1: the second wait is started by the batch but waits for the first.
    handle = await start_batch(workflow_id, [("w1", "wait", {}), ("w2", "wait", {})], 1)
    assert PROBE.started is not None
    await PROBE.started.wait()
    await DBOS.cancel_workflow_async(workflow_id)
    with pytest.raises(DBOSAwaitedWorkflowCancelledError):
        await handle.get_result()
    assert [summary(o)[:2] for o in await recorded_outcomes(workflow_id)] == [
        ("w1", TOOL_ABORTED),
        ("w2", TOOL_ABORTED_BEFORE_DISPATCH),
    ]
    assert PROBE.runs == {"wait": 1}


async def test_a_workflow_timeout_ends_calls_in_flight_with_tool_timeout() -> None:
    PROBE.reset()
    workflow_id = new_id("timeout")
    with SetWorkflowID(workflow_id), SetWorkflowTimeout(0.5):
        handle = await DBOS.start_workflow_async(
            batch_workflow, [("t1", "wait", {}), ("t2", "notify", {})], 10
        )
    # The calls stop at the deadline itself. The workflow then ends, unless DBOS's timeout
    # sweep (once a second or so) has marked it cancelled first: the journal is the same.
    with contextlib.suppress(DBOSAwaitedWorkflowCancelledError):
        await handle.get_result()
    recorded = await recorded_outcomes(workflow_id)
    assert [summary(o)[:2] for o in recorded] == [
        ("t1", TOOL_TIMEOUT),
        ("t2", TOOL_ABORTED_BEFORE_DISPATCH),
    ]
    timed_out = recorded[0].result
    assert isinstance(timed_out, ToolFailure)
    assert timed_out.error.message == "tool call timed out: its workflow's deadline passed"
    assert timed_out.error.info is not None
    assert timed_out.error.info.name == "ToolTimeoutError"
    assert PROBE.told == ["t1"]


async def test_a_cancel_of_an_unknown_workflow_disturbs_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    PROBE.reset()
    workflow_id = new_id("unknown-cancel")
    reads = 0
    read_twice = anyio.Event()
    token = anyio.lowlevel.current_token()
    real = _engine.cancelled_workflows

    def counted(workflow_ids: list[str]) -> set[str]:
        nonlocal reads
        found = real(workflow_ids)
        reads += 1
        if reads == 2:
            anyio.from_thread.run_sync(read_twice.set, token=token)
        return found

    handle = await start_batch(workflow_id, [("x1", "wait", {}), ("x2", "notify", {})])
    assert PROBE.started is not None
    await PROBE.started.wait()
    unknown = new_id("no-such-workflow")
    await DBOS.cancel_workflow_async(unknown)  # DBOS accepts it, and changes nothing
    assert await DBOS.get_workflow_status_async(unknown) is None
    monkeypatch.setattr(_engine, "cancelled_workflows", counted)
    await read_twice.wait()  # two reads of the status since: nothing to tell anyone
    assert PROBE.told == []
    await DBOS.cancel_workflow_async(workflow_id)
    with pytest.raises(DBOSAwaitedWorkflowCancelledError):
        await handle.get_result()
    assert PROBE.told == ["x1"]


async def test_a_host_cancellation_still_records_every_outcome() -> None:
    PROBE.reset()
    workflow_id = new_id("host")
    with SetWorkflowID(workflow_id):
        handle = await DBOS.start_workflow_async(host_cancelled_workflow)
    assert await handle.get_result() == [
        ("h1", TOOL_ABORTED, "Error: tool call aborted", True),
        ("h2", TOOL_ABORTED_BEFORE_DISPATCH, "Error: tool call aborted before dispatch", False),
    ]
    assert PROBE.running == 0


# -- faults ------------------------------------------------------------------------------


async def test_a_result_the_engine_cannot_serialize_is_recorded_as_such() -> None:
    PROBE.reset()
    workflow_id = new_id("big")
    calls = [("b1", "blob", {"size": 4 * JOURNAL_LIMIT}), ("b2", "blob", {"size": 3})]
    returned = await (await start_batch(workflow_id, calls)).get_result()
    assert [row[:2] for row in returned] == [("b1", RESULT_NOT_RECORDABLE), ("b2", "OK")]
    recorded = await recorded_outcomes(workflow_id)
    failure = recorded[0].result
    assert isinstance(failure, ToolFailure)
    assert failure.error.message.startswith(
        'tool "blob" ran, but its result could not be recorded: the durable engine cannot '
        "serialize it (ValueError: "
    )
    assert recorded[0].dispatched is True
    assert PROBE.runs == {"blob": 2}


async def test_a_batch_that_cannot_be_journaled_is_refused_before_any_step() -> None:
    workflow_id = new_id("refused")
    handle = await start_batch(workflow_id, [("d", "add", {}), ("d", "add", {})])
    with pytest.raises(ValueError, match=r"^duplicate call_id 'd' in one batch$"):
        await handle.get_result()
    assert await step_names(workflow_id) == []


async def test_outside_a_workflow_calls_run_plainly() -> None:
    PROBE.reset()
    outcomes = await DURABLE.run_tool_calls(
        [ToolCall("p1", "add", {"a": 1, "b": 2})], signal=AbortController().signal
    )
    assert [summary(o) for o in outcomes] == [("p1", "OK", "3", True)]
    signal = AbortController().signal
    result: ToolResult = await DURABLE.execute(
        ToolExecutionInput(call_id="p2", name="notify", arguments={}, signal=signal)
    )
    assert isinstance(result, ToolSuccess)


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_trio_is_refused_with_a_clear_error() -> None:
    with pytest.raises(
        RuntimeError,
        match=r"^toolseam\.durable: DurableTools\.run_tool_calls runs on asyncio only, not on "
        r"trio: DBOS runs workflows and their steps as asyncio tasks and cannot host trio$",
    ):
        await DURABLE.run_tool_calls([], signal=AbortController().signal)


# -- composed with pydantic-ai's own DBOS durability ---------------------------------------


def refund_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Asks for one refund of the order named by the prompt, then answers with its result."""
    if len(messages) == 1:
        prompt = messages[0].parts[-1]
        assert isinstance(prompt, UserPromptPart)
        order = prompt.content
        assert isinstance(order, str)
        return ModelResponse(parts=[ToolCallPart("refund", {"order": order}, tool_call_id="r1")])
    returned = messages[-1].parts[0]
    assert isinstance(returned, ToolReturnPart)
    return ModelResponse(parts=[TextPart(f"done: {returned.model_response_str()}")])


class OrderArgs(TypedDict):
    order: str


@define_tool(name="refund", description="Refund an order.")
async def refund_order(args: OrderArgs, exec: ToolRunContext) -> str:
    PROBE.ran("refund")
    if args["order"] == "slow":
        if PROBE.started is not None:
            PROBE.started.set()
        await exec.signal.wait()
        PROBE.told.append(exec.call_id)
        exec.signal.raise_if_aborted()
    return f"refunded {args['order']}"


REGISTRY.register(refund_order)
AGENT = Agent(
    FunctionModel(refund_model),
    name="refunds",
    capabilities=[DBOSDurability()],
    toolsets=[RegistryToolset(REGISTRY, execute=DURABLE.execute)],
)


@DBOS.workflow()
async def agent_workflow(order: str) -> str:
    return (await AGENT.run(order)).output


async def test_pydantic_ai_dbos_durability_runs_each_registry_call_as_a_durable_step() -> None:
    PROBE.reset()
    workflow_id = new_id("agent")
    with SetWorkflowID(workflow_id):
        handle = await DBOS.start_workflow_async(agent_workflow, "A7")
    assert await handle.get_result() == "done: refunded A7"
    # pydantic-ai's model requests are its steps; the tool call is toolseam's.
    assert await step_names(workflow_id) == [
        "refunds__model.request",
        "toolseam.dispatch:refund",
        "toolseam:refund",
        "refunds__model.request",
    ]
    fork = await DBOS.fork_workflow_async(workflow_id, 5)
    assert await fork.get_result() == "done: refunded A7"
    assert PROBE.runs == {"refund": 1}  # replayed, not run again


async def test_pydantic_ai_under_dbos_cancel_tells_the_tool_body() -> None:
    PROBE.reset()
    workflow_id = new_id("agent-cancel")
    with SetWorkflowID(workflow_id):
        handle = await DBOS.start_workflow_async(agent_workflow, "slow")
    assert PROBE.started is not None
    await PROBE.started.wait()
    await DBOS.cancel_workflow_async(workflow_id)
    with pytest.raises(DBOSAwaitedWorkflowCancelledError):
        await handle.get_result()
    assert PROBE.told == ["r1"]
    assert [summary(o) for o in await recorded_outcomes(workflow_id)] == [
        ("r1", TOOL_ABORTED, "Error: tool call aborted", True)
    ]


@define_tool(name="interrupt", description="Raises KeyboardInterrupt.")
async def interrupt(args: NoArgs, exec: ToolRunContext) -> str:
    PROBE.ran("interrupt")
    raise KeyboardInterrupt


REGISTRY.register(interrupt)


@DBOS.workflow()
async def interrupted_workflow() -> str:
    calls = [ToolCall("i1", "add", {"a": 1, "b": 1}), ToolCall("i2", "interrupt", {})]
    calls.append(ToolCall("i3", "notify", {}))
    try:
        await DURABLE.run_tool_calls(calls, signal=AbortController().signal)
    except KeyboardInterrupt:
        return "interrupted, bare"
    return "not interrupted"


async def test_an_interrupt_propagates_bare_once_every_outcome_is_recorded() -> None:
    PROBE.reset()
    workflow_id = new_id("interrupt")
    with SetWorkflowID(workflow_id):
        handle = await DBOS.start_workflow_async(interrupted_workflow)
    assert await handle.get_result() == "interrupted, bare"
    recorded = [summary(o) for o in await recorded_outcomes(workflow_id)]
    assert [row[0] for row in recorded] == ["i1", "i2", "i3"]
    assert recorded[0][1] == "OK"
    assert recorded[1] == ("i2", TOOL_ABORTED, "Error: tool call aborted", True)
    assert recorded[2][1:] == (
        TOOL_ABORTED_BEFORE_DISPATCH,
        "Error: tool call aborted before dispatch",
        False,
    )
    assert PROBE.runs == {"add": 1, "interrupt": 1}


# -- the module's surface ------------------------------------------------------------------


def test_the_public_names_are_documented_and_report_the_public_module() -> None:
    import toolseam.durable as durable

    for name in durable.__all__:
        value = getattr(durable, name)
        if callable(value):
            assert value.__doc__, name
            assert value.__module__ == "toolseam.durable", name
    assert getattr(DurableTools, "__final__", False) is True


@pytest.mark.parametrize(
    ("poll_interval", "kind", "message"),
    [
        (
            0,
            ValueError,
            r"^DurableTools\(poll_interval=\.\.\.\) must be positive and finite, got 0$",
        ),
        (float("inf"), ValueError, r"must be positive and finite, got inf$"),
        (
            "1",
            TypeError,
            r"^DurableTools\(poll_interval=\.\.\.\) must be a number of seconds, got str$",
        ),
        (True, TypeError, r"must be a number of seconds, got bool$"),
    ],
)
def test_a_bad_poll_interval_is_refused(poll_interval: object, kind: type, message: str) -> None:
    with pytest.raises(kind, match=message):
        DurableTools(ToolRegistry(), poll_interval=poll_interval)  # type: ignore[arg-type]


def test_durable_tools_want_a_registry() -> None:
    with pytest.raises(TypeError, match=r"^DurableTools expects a ToolRegistry, got dict$"):
        DurableTools({})  # type: ignore[arg-type]


def test_close_takes_the_wrapper_and_the_observer_off_the_registry() -> None:
    registry = ToolRegistry()
    with DurableTools(registry) as durable:
        assert (len(registry._wrappers.items), len(registry._observers.items)) == (1, 1)
        assert durable.registry is registry
    assert (len(registry._wrappers.items), len(registry._observers.items)) == (0, 0)
    durable.close()  # idempotent


def test_a_recorded_outcome_round_trips_every_field() -> None:
    success = ToolSuccess(
        value={"rows": [1, 2.5, None, {"deep": [[["x"]]]}]},
        content=[{"type": "text", "text": "two rows"}],
        meta={"source": "db"},
        additional_contexts=[{"note": "cached"}],
    )
    failure = ToolFailure.from_message("boom")  # no code: info is None
    for result, dispatched in ((success, True), (failure, False)):
        outcome = CallOutcome(ToolCall("c", "t", {"q": [1, 2]}), result, dispatched)
        assert decode_outcome(encode_outcome(outcome)) == outcome


def test_outcomes_from_steps_reads_toolseam_steps_only() -> None:
    recorded = encode_outcome(CallOutcome(ToolCall("c", "t", {}), ToolSuccess(value=1), True))
    steps: list[Any] = [
        {"function_name": "toolseam.dispatch:t", "output": {"toolseam": 1, "marker": "c"}},
        {"function_name": "toolseam:t", "output": recorded},
        {"function_name": "model.request", "output": "anything"},
    ]
    [outcome] = outcomes_from_steps(steps)
    assert outcome.call.call_id == "c"
    with pytest.raises(ValueError, match=r"^not a toolseam outcome \(version 7\)$"):
        outcomes_from_steps([{"function_name": "toolseam:t", "output": {"toolseam": 7}}])


# A registry whose batches learn of a cancel only from DBOS itself (the poller is made idle),
# with a pre-execute gate: the cancel lands between a call's start and its dispatch marker.
GATED = ToolRegistry()
GATED.register(notify)
GATE: dict[str, anyio.Event] = {}


async def hold_at_the_gate(execution: ToolExecution, next: Next[PreDecision]) -> PreDecision:
    GATE["reached"].set()
    await GATE["open"].wait()
    return await next()


GATED.on_pre_execute(hold_at_the_gate)
SLOW_POLL = DurableTools(GATED, poll_interval=3600)


@DBOS.workflow()
async def gated_workflow() -> None:
    await SLOW_POLL.run_tool_calls([ToolCall("g1", "notify", {})], signal=AbortController().signal)


async def test_a_cancel_before_the_dispatch_marker_lands_keeps_the_body_from_running() -> None:
    PROBE.reset()
    GATE.update(reached=anyio.Event(), open=anyio.Event())
    workflow_id = new_id("gated")
    with SetWorkflowID(workflow_id):
        handle = await DBOS.start_workflow_async(gated_workflow)
    await GATE["reached"].wait()
    await DBOS.cancel_workflow_async(workflow_id)
    GATE["open"].set()  # the call goes on to its dispatch: DBOS refuses its marker
    with pytest.raises(DBOSAwaitedWorkflowCancelledError):
        await handle.get_result()
    assert [summary(o) for o in await recorded_outcomes(workflow_id)] == [
        ("g1", TOOL_ABORTED_BEFORE_DISPATCH, "Error: tool call aborted before dispatch", True)
    ]
    assert "toolseam.dispatch:notify" not in await step_names(workflow_id)
    assert PROBE.runs == {}


# -- the caller's host reaches a durable call's body ----------------------------------------

HEARD: list[float] = []


@define_tool(name="progressing", description="Reports its progress.")
async def progressing(args: NoArgs, exec: ToolRunContext) -> str:
    exec.progress(1, 2)
    exec.progress(2, 2)
    return "done"


REGISTRY.register(progressing)


@DBOS.workflow()
async def hosted_workflow() -> str:
    host = ToolHost(on_progress=lambda execution, event: HEARD.append(event.progress))
    signal = AbortController().signal
    result = await DURABLE.execute(
        ToolExecutionInput(call_id="p", name="progressing", arguments={}, signal=signal, host=host)
    )
    return "OK" if isinstance(result, ToolSuccess) else str(result.code)


async def test_the_callers_host_reaches_the_body_of_a_durable_call() -> None:
    HEARD.clear()
    with SetWorkflowID(new_id("host-progress")):
        handle = await DBOS.start_workflow_async(hosted_workflow)
    assert await handle.get_result() == "OK"
    assert HEARD == [1, 2]
