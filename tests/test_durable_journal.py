"""toolseam.durable: the journal decides every call, whenever a cancel lands (issue 35).

asyncio only: DBOS runs its workflows and steps as asyncio tasks and cannot host trio
(tests/test_durable.py checks the error toolseam.durable raises there). SQLite in a
temporary folder. A crash is made as in tests/test_durable.py, with ``DBOS.fork_workflow``:
a fork from step ``k`` keeps the steps before ``k`` and runs the workflow again, as a
recovery runs it after a worker died between two commits; tests/test_durable_processes.py
kills real worker processes. A cancel goes through the system database, and lands where the
test holds the workflow (events, never a sleep): before the batch, inside DBOS's read of the
journal, in the commit of the dispatch markers, or while a body runs.

The rules (docs/durable.md, "After a crash" and "Cancellation"): a call with a recorded
outcome gets it; a dispatched call without one, that the execution did not start itself,
gets ``OUTCOME_UNKNOWN``; only a call with no dispatch marker can be
``ABORTED_BEFORE_DISPATCH``; the workflow code gets what the journal holds.
"""

from __future__ import annotations

import contextvars
import itertools
import random
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from dbos import DBOS, SetWorkflowID
from dbos._error import DBOSAwaitedWorkflowCancelledError
from typing_extensions import TypedDict

import dbos_sqlite_compat
from toolseam import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    AbortController,
    CallOutcome,
    ToolCall,
    ToolFailure,
    ToolRegistry,
    ToolRunContext,
    ToolSuccess,
    define_tool,
)
from toolseam.durable import (
    OUTCOME_UNKNOWN,
    DurableTools,
    _engine,
    recorded_outcomes,
    settle_cancelled,
)
from toolseam.durable._records import encode_outcome

dbos_sqlite_compat.install()


@pytest.fixture
def anyio_backend() -> str:
    """DBOS is asyncio-only."""
    return "asyncio"


class NoArgs(TypedDict):
    pass


# -- the side-effect log: every body start, by workflow ------------------------------------


class Log:
    """Which bodies started in which workflow, and the events a test holds a workflow with."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: list[tuple[str, str]] = []
        self.hold_batch = False
        self.hold_body = False
        # Threading events: a fork runs on DBOS's own event loop, in another thread.
        self.reached = threading.Event()
        self.open = threading.Event()

    def reset(self, *, hold_batch: bool = False, hold_body: bool = False) -> None:
        self.hold_batch, self.hold_body = hold_batch, hold_body
        self.reached, self.open = threading.Event(), threading.Event()

        self.finished: dict[str, threading.Event] = {}

    async def wait_reached(self) -> None:
        await anyio.to_thread.run_sync(self.reached.wait)

    def finish(self, workflow_id: str) -> None:
        with self.lock:
            self.finished.setdefault(workflow_id, threading.Event()).set()

    async def wait_finished(self, workflow_id: str) -> None:
        """Until the workflow's code is past its batch (the awaited handle of a cancelled
        workflow raises at once, while its execution still runs)."""
        with self.lock:
            event = self.finished.setdefault(workflow_id, threading.Event())
        assert await anyio.to_thread.run_sync(event.wait, 60)

    def ran(self, call_id: str) -> None:
        with self.lock:
            self.runs.append((_workflow_id(), call_id))

    def ran_in(self, workflow_id: str) -> list[str]:
        return [call for workflow, call in self.runs if workflow == workflow_id]


LOG = Log()


def _workflow_id() -> str:
    workflow_id = DBOS.workflow_id
    assert workflow_id is not None
    return workflow_id


@define_tool(name="send", description="Send a message (not idempotent).")
async def send(args: NoArgs, exec: ToolRunContext) -> str:
    LOG.ran(exec.call_id)
    return "sent"


@define_tool(name="look", description="Read a value.", idempotent=True)
async def look(args: NoArgs, exec: ToolRunContext) -> str:
    LOG.ran(exec.call_id)
    return "seen"


@define_tool(
    name="write",
    description="Write a record (not idempotent); held while the test says so.",
    is_concurrency_safe=lambda _: True,
)
async def write(args: NoArgs, exec: ToolRunContext) -> str:
    LOG.ran(exec.call_id)
    if LOG.hold_body:
        LOG.reached.set()
        await exec.signal.wait()
        exec.signal.raise_if_aborted()
    return "written"


REGISTRY = ToolRegistry()
for _tool in (send, look, write):
    REGISTRY.register(_tool)
DURABLE = DurableTools(REGISTRY, poll_interval=0.02)

Summary = tuple[str, str, bool]


def summary(outcome: CallOutcome) -> Summary:
    """call id, code ("OK" for a success), dispatched."""
    result = outcome.result
    code = "OK" if isinstance(result, ToolSuccess) else str(result.code)
    return outcome.call.call_id, code, outcome.dispatched


SEEN: dict[str, list[Summary]] = {}
"""What the batch returned to each workflow's code (a cancelled workflow records no result)."""


@DBOS.workflow()
async def turn(calls: list[tuple[str, str, dict[str, Any]]]) -> None:
    if LOG.hold_batch:
        # A pause before the batch reads the journal: where a recovered run meets the cancel.
        LOG.reached.set()
        await anyio.to_thread.run_sync(LOG.open.wait)
    try:
        outcomes = await DURABLE.run_tool_calls(
            [ToolCall(*call) for call in calls], signal=AbortController().signal
        )
        SEEN[_workflow_id()] = [summary(o) for o in outcomes]
    finally:
        LOG.finish(_workflow_id())


@pytest.fixture(scope="module", autouse=True)
def dbos() -> Iterator[None]:
    with tempfile.TemporaryDirectory() as folder:
        DBOS(
            config={
                "name": "toolseam_durable_journal_tests",
                "system_database_url": f"sqlite:///{Path(folder) / 'system.sqlite'}",
                "log_level": "CRITICAL",
            }
        )
        DBOS.launch()
        try:
            yield
        finally:
            DBOS.destroy()


_ids = itertools.count()

# Steps: t1 marker 1, outcome 2; t2 marker 3, outcome 4; t3 (idempotent: no marker at 5),
# outcome 6. t1 and t2 are exclusive, one after the other.
CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("t1", "send", {}),
    ("t2", "send", {}),
    ("t3", "look", {}),
]


async def completed_turn(calls: list[tuple[str, str, dict[str, Any]]] = CALLS) -> str:
    """A turn run to its end: the journal every crash below is cut from."""
    LOG.reset()
    workflow_id = f"turn-{next(_ids)}"
    with SetWorkflowID(workflow_id):
        await (await DBOS.start_workflow_async(turn, calls)).get_result()
    return workflow_id


def cancel_now(workflow_id: str) -> None:
    """``DBOS.cancel_workflow`` outside any workflow's context (from a batch's thread too)."""
    contextvars.Context().run(DBOS.cancel_workflow, workflow_id)


async def ended(handle: Any) -> None:
    with pytest.raises(DBOSAwaitedWorkflowCancelledError):
        await handle.get_result()
    await LOG.wait_finished(handle.get_workflow_id())


async def journal(workflow_id: str) -> list[Summary]:
    return [summary(o) for o in await recorded_outcomes(workflow_id)]


RECOVERED_AND_CANCELLED = [
    ("t1", "OK", True),  # recorded before the crash: its outcome, not "never ran"
    ("t2", OUTCOME_UNKNOWN, True),  # its marker is in the journal, its outcome is not
    ("t3", TOOL_ABORTED_BEFORE_DISPATCH, False),  # nothing in the journal: not run
]


async def test_a_cancel_before_a_recovered_batch_takes_every_call_from_the_journal() -> None:
    """Issue 35's reproduction: kill mid-body, recover, cancel before the batch reads."""
    original = await completed_turn()
    LOG.reset(hold_batch=True)
    # A crash in t2's body: t1's outcome and t2's marker are in the journal, no more.
    fork = await DBOS.fork_workflow_async(original, 4)
    await LOG.wait_reached()
    await DBOS.cancel_workflow_async(fork.get_workflow_id())
    LOG.open.set()
    await ended(fork)
    assert await journal(fork.get_workflow_id()) == RECOVERED_AND_CANCELLED
    assert SEEN[fork.get_workflow_id()] == RECOVERED_AND_CANCELLED
    assert LOG.ran_in(fork.get_workflow_id()) == []


async def test_a_cancel_inside_the_journal_read_takes_the_call_from_the_journal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DBOS found no outcome; the cancel lands before the batch reads the marker."""
    original = await completed_turn()
    real = _engine.marker_recorded
    cancelled: list[str] = []

    def cancel_then_read(workflow_id: str, step_id: int, name: str) -> bool:
        if not cancelled:
            cancelled.append(workflow_id)
            cancel_now(workflow_id)
        return real(workflow_id, step_id, name)  # DBOS raises "cancelled" here

    monkeypatch.setattr(_engine, "marker_recorded", cancel_then_read)
    LOG.reset()
    fork = await DBOS.fork_workflow_async(original, 4)
    await ended(fork)
    assert cancelled == [fork.get_workflow_id()]
    assert await journal(fork.get_workflow_id()) == RECOVERED_AND_CANCELLED
    assert SEEN[fork.get_workflow_id()] == RECOVERED_AND_CANCELLED
    assert LOG.ran_in(fork.get_workflow_id()) == []


async def test_a_cancel_during_the_recovered_run_keeps_what_the_journal_holds() -> None:
    """The recovered run has decided its calls; the cancel lands while a body runs."""
    calls = [*CALLS, ("t4", "write", {})]  # t4: marker 7, outcome 8
    original = await completed_turn(calls)
    LOG.reset(hold_body=True)
    fork = await DBOS.fork_workflow_async(original, 4)
    await LOG.wait_reached()  # t4's body runs (t3 ran again before it: idempotent)
    await DBOS.cancel_workflow_async(fork.get_workflow_id())
    await ended(fork)
    expected = [
        ("t1", "OK", True),
        ("t2", OUTCOME_UNKNOWN, True),
        ("t3", "OK", True),
        ("t4", TOOL_ABORTED, True),
    ]
    assert await journal(fork.get_workflow_id()) == expected
    assert SEEN[fork.get_workflow_id()] == expected
    assert LOG.ran_in(fork.get_workflow_id()) == ["t3", "t4"]


async def test_an_outcome_another_execution_recorded_is_the_one_returned() -> None:
    """A cancelled execution's outcome yields to one already in the journal."""
    LOG.reset(hold_body=True)
    workflow_id = f"turn-{next(_ids)}"
    with SetWorkflowID(workflow_id):
        handle = await DBOS.start_workflow_async(turn, [("w1", "write", {})])
    await LOG.wait_reached()
    await DBOS.cancel_workflow_async(workflow_id)
    # Another writer records w1 first (its outcome step is step 2).
    elsewhere = CallOutcome(ToolCall("w1", "write", {}), ToolSuccess(value="elsewhere"), True)
    assert await anyio.to_thread.run_sync(
        _engine.record_after_cancel, workflow_id, 2, "toolseam:write", encode_outcome(elsewhere)
    )
    await ended(handle)
    assert await journal(workflow_id) == [("w1", "OK", True)]
    assert SEEN[workflow_id] == [("w1", "OK", True)]


async def test_the_markers_of_a_parallel_group_are_one_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = _engine.record_markers
    commits: list[list[int]] = []

    def counted(workflow_id: str, markers: Any) -> None:
        commits.append([step for step, _, _ in markers])
        real(workflow_id, markers)

    monkeypatch.setattr(_engine, "record_markers", counted)
    calls = [("p1", "write", {}), ("p2", "write", {}), ("p3", "write", {}), ("p4", "send", {})]
    workflow_id = await completed_turn(calls)
    # p1..p3 run in parallel: one commit; p4 (exclusive) after them: its own.
    assert commits == [[1, 3, 5], [7]]
    assert await journal(workflow_id) == [(c, "OK", True) for c in ("p1", "p2", "p3", "p4")]


async def test_a_cancel_that_refuses_the_markers_commit_runs_no_body_of_the_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = _engine.record_markers

    def cancel_then_write(workflow_id: str, markers: Any) -> None:
        cancel_now(workflow_id)
        real(workflow_id, markers)  # DBOS's ownership check refuses the whole commit

    monkeypatch.setattr(_engine, "record_markers", cancel_then_write)
    LOG.reset()
    workflow_id = f"turn-{next(_ids)}"
    with SetWorkflowID(workflow_id):
        handle = await DBOS.start_workflow_async(turn, [("q1", "write", {}), ("q2", "write", {})])
    await ended(handle)
    expected = [
        ("q1", TOOL_ABORTED_BEFORE_DISPATCH, True),
        ("q2", TOOL_ABORTED_BEFORE_DISPATCH, True),
    ]
    assert await journal(workflow_id) == expected
    assert SEEN[workflow_id] == expected
    assert LOG.ran_in(workflow_id) == []
    steps = [step["function_name"] for step in await DBOS.list_workflow_steps_async(workflow_id)]
    assert "toolseam.dispatch:write" not in steps


# -- a workflow cancelled while its worker was dead -----------------------------------------


async def test_settle_cancelled_records_every_dispatched_call_and_runs_nothing() -> None:
    original = await completed_turn()
    LOG.reset(hold_batch=True)
    # The fork stands for a worker that died in t2's body: held, it never reaches its batch.
    fork = await DBOS.fork_workflow_async(original, 4)
    fork_id = fork.get_workflow_id()
    await LOG.wait_reached()
    with pytest.raises(ValueError, match=r"^settle_cancelled: workflow '.*' is PENDING: "):
        await settle_cancelled(fork_id)
    await DBOS.cancel_workflow_async(fork_id)
    settled = [("t1", "OK", True), ("t2", OUTCOME_UNKNOWN, True)]
    assert [summary(o) for o in await settle_cancelled(fork_id)] == settled
    assert [summary(o) for o in await settle_cancelled(fork_id)] == settled  # idempotent
    unknown = (await recorded_outcomes(fork_id))[1].result
    assert isinstance(unknown, ToolFailure)
    assert unknown.error.message.startswith("tool \"send\" (call 't2') was running when")
    # Were the held execution to go on, it replays what the journal holds.
    LOG.open.set()
    await ended(fork)
    assert await journal(fork_id) == RECOVERED_AND_CANCELLED
    assert LOG.ran_in(fork_id) == []


async def test_settle_cancelled_refuses_an_unknown_workflow() -> None:
    with pytest.raises(ValueError, match=r"^settle_cancelled: no workflow 'nowhere'$"):
        await settle_cancelled("nowhere")


# -- randomized: crashes and cancels interleaved, the journal against the side-effect log ---

# r1, r2 exclusive; r3 and r4 parallel. Steps: r1 m1 o2; r2 (idempotent) o4; r3 m5 o6;
# r4 m7 o8.
RANDOM_CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("r1", "send", {}),
    ("r2", "look", {}),
    ("r3", "write", {}),
    ("r4", "write", {}),
]
IDEMPOTENT = {"r2"}
MARKER_STEP = {"r1": 1, "r3": 5, "r4": 7}
OUTCOME_STEP = {"r1": 2, "r2": 4, "r3": 6, "r4": 8}
CANCELS = ("none", "before the batch", "in the journal read", "in the markers commit", "in a body")


async def test_randomized_crashes_and_cancels_keep_the_journal_true(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seed = random.randrange(2**32)
    chooser = random.Random(seed)
    original = await completed_turn(RANDOM_CALLS)
    # A scenario is a fork, about a second on a busy machine: a few a run, a new seed each.
    for _ in range(8):
        crash_at = chooser.randrange(1, 10)  # the fork keeps steps 1 .. crash_at - 1
        cancel = chooser.choice(CANCELS)
        if cancel == "in a body" and crash_at > MARKER_STEP["r3"]:
            cancel = "before the batch"  # r3 would not run: no body to cancel in
        scenario = f"seed {seed}, crash at step {crash_at}, cancel {cancel}"
        with monkeypatch.context() as patch:
            await _scenario(patch, original, crash_at, cancel, scenario)


async def _scenario(
    patch: pytest.MonkeyPatch, original: str, crash_at: int, cancel: str, scenario: str
) -> None:
    LOG.reset(hold_batch=cancel == "before the batch", hold_body=cancel == "in a body")
    if cancel in ("in the journal read", "in the markers commit"):
        attribute = "marker_recorded" if cancel == "in the journal read" else "record_markers"
        patch.setattr(_engine, attribute, _cancelling(getattr(_engine, attribute)))
    fork = await DBOS.fork_workflow_async(original, crash_at)
    fork_id = fork.get_workflow_id()
    if cancel in ("before the batch", "in a body"):
        await LOG.wait_reached()
        await DBOS.cancel_workflow_async(fork_id)
        LOG.open.set()
    # Not the handle's result: DBOS polls for it; the batch's return is what matters here.
    await LOG.wait_finished(fork_id)
    recorded = {o.call.call_id: summary(o) for o in await recorded_outcomes(fork_id)}
    ran = LOG.ran_in(fork_id)
    # The workflow code got what the journal holds, one outcome per call.
    assert SEEN[fork_id] == [recorded[call_id] for call_id, _, _ in RANDOM_CALLS], scenario
    for call_id, _, _ in RANDOM_CALLS:
        _, code, dispatched = recorded[call_id]
        copied_outcome = OUTCOME_STEP[call_id] < crash_at
        copied_marker = call_id in MARKER_STEP and MARKER_STEP[call_id] < crash_at
        runs = ran.count(call_id)
        where = f"{call_id}: {code}, ran {runs}x ({scenario})"
        assert runs <= 1, where
        if copied_outcome:
            assert (code, runs) == ("OK", 0), where  # replayed
        elif code == TOOL_ABORTED_BEFORE_DISPATCH:
            assert (runs, copied_marker) == (0, False), where
        elif code == OUTCOME_UNKNOWN:
            assert (copied_marker, runs, dispatched) == (True, 0, True), where
        else:
            assert code in ("OK", TOOL_ABORTED), where
            assert runs == 1, where
        if copied_marker and call_id not in IDEMPOTENT:
            assert runs == 0, where  # never a second run of a side effect


def _cancelling(real: Callable[..., Any]) -> Callable[..., Any]:
    """``real``, after cancelling the workflow the first time it is called."""
    done: list[bool] = []

    def cancel_first(workflow_id: str, *args: Any) -> Any:
        if not done:
            done.append(True)
            cancel_now(workflow_id)
        return real(workflow_id, *args)

    return cancel_first
