"""toolseam.durable across real processes (SQLite): a cancel from another process, a crash.

asyncio only (DBOS cannot host trio). The workers are tests/durable_worker.py; each prints
``started <call id>`` as a body starts, which is how the test knows a body is running
(no sleep decides anything). A worker is killed with SIGKILL, as a machine going away
would be: no cleanup runs in it.
"""

from __future__ import annotations

import json
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from dbos import DBOSClient

import dbos_sqlite_compat
from toolseam import CallOutcome, ToolSuccess
from toolseam.durable import outcomes_from_steps, settle_cancelled
from worker_process import outcomes, run_counts, worker

dbos_sqlite_compat.install()


@pytest.fixture
def anyio_backend() -> str:
    """DBOS is asyncio-only."""
    return "asyncio"


@pytest.fixture
def database() -> Iterator[tuple[str, Path]]:
    """A fresh SQLite system database, and the file where the bodies count their runs."""
    with tempfile.TemporaryDirectory() as folder:
        runs = Path(folder) / "runs"
        runs.touch()
        yield f"sqlite:///{Path(folder) / 'system.sqlite'}", runs


async def test_a_cancel_from_another_process_tells_the_body_and_records_every_outcome(
    database: tuple[str, Path],
) -> None:
    url, runs = database
    async with worker("host", url, runs, "turn-cancel") as host:
        await host.expect("started c2", "started c3")
        # This process is not the one running the workflow: it shares the database only.
        client = DBOSClient(system_database_url=url)
        try:
            await client.cancel_workflow_async("turn-cancel")
        finally:
            client.destroy()
        lines = await host.rest()
    assert host.process.returncode == 0
    assert "told c2" in lines
    assert "ended DBOSAwaitedWorkflowCancelledError" in lines
    assert outcomes(lines) == [
        {"call_id": "c1", "code": "OK", "text": "sent", "dispatched": True},
        {
            "call_id": "c2",
            "code": "ABORTED",
            "text": "Error: tool call aborted",
            "dispatched": True,
        },
        # c3's body returned at once, but its post-execute stage runs after c2's (model
        # order): the turn was aborted before its success was published (contract §5).
        {
            "call_id": "c3",
            "code": "ABORTED",
            "text": "Error: tool call aborted",
            "dispatched": True,
        },
        {
            "call_id": "c4",
            "code": "ABORTED_BEFORE_DISPATCH",
            "text": "Error: tool call aborted before dispatch",
            "dispatched": False,
        },
    ]
    assert run_counts(runs) == {"c1": 1, "c2": 1, "c3": 1}


async def until_recorded(url: str, workflow_id: str, call_id: str) -> None:
    """Wait until the journal holds the call's outcome (read from this process)."""
    client = DBOSClient(system_database_url=url)
    try:
        with anyio.fail_after(60):
            while True:
                steps = await client.list_workflow_steps_async(workflow_id)
                if any(o.call.call_id == call_id for o in outcomes_from_steps(steps)):
                    return
                await anyio.sleep(0.05)
    finally:
        client.destroy()


async def test_a_killed_worker_recovers_without_running_a_side_effect_twice(
    database: tuple[str, Path],
) -> None:
    url, runs = database
    async with worker("crash", url, runs, "turn-crash") as doomed:
        await doomed.expect("started c2", "started c3")
        # c1 finished before c2 and c3 began; its outcome is written beside them. Kill once
        # it is in the journal (a kill before that would rightly make c1 OUTCOME_UNKNOWN).
        await until_recorded(url, "turn-crash", "c1")
        doomed.process.send_signal(signal.SIGKILL)
        await doomed.process.wait()
    assert doomed.process.returncode == -signal.SIGKILL
    assert run_counts(runs) == {"c1": 1, "c2": 1, "c3": 1}

    # A new process with the same executor id recovers the workflow at launch.
    async with worker("recover", url, runs, "turn-crash") as survivor:
        lines = await survivor.rest()
    assert survivor.process.returncode == 0
    recorded = outcomes(lines)
    assert [(o["call_id"], o["code"], o["dispatched"]) for o in recorded] == [
        ("c1", "OK", True),  # recorded before the crash: replayed
        ("c2", "OUTCOME_UNKNOWN", True),  # dispatched, not idempotent: not run again
        ("c3", "OK", True),  # idempotent: run again
        ("c4", "OK", True),  # never dispatched before the crash: runs now
    ]
    assert recorded[1]["text"] == (
        "Error: tool \"write\" (call 'c2') was running when its worker stopped, before its "
        "outcome was recorded; the tool is not idempotent, so the call was not run again: "
        "its side effects may or may not have happened"
    )
    # c2's body ran once, ever; c3's twice; c1's once (its recorded outcome replayed).
    assert run_counts(runs) == {"c1": 1, "c2": 1, "c3": 2, "c4": 1}


async def killed_mid_body(url: str, runs: Path, workflow_id: str) -> None:
    """Run the turn in a worker and SIGKILL it while c2's and c3's bodies run."""
    async with worker("crash", url, runs, workflow_id) as doomed:
        await doomed.expect("started c2", "started c3")
        await until_recorded(url, workflow_id, "c1")
        doomed.process.send_signal(signal.SIGKILL)
        await doomed.process.wait()
    assert doomed.process.returncode == -signal.SIGKILL
    assert run_counts(runs) == {"c1": 1, "c2": 1, "c3": 1}


async def test_a_cancel_during_the_recovered_run_keeps_every_call_true_to_the_journal(
    database: tuple[str, Path],
) -> None:
    """Issue 35: kill mid-body, recover, cancel before the recovered batch reads the journal.

    The batch once recorded c2 "never ran" (ABORTED_BEFORE_DISPATCH, dispatched=False)
    though its marker was in the journal and its body had run, and handed c1's workflow
    code ABORTED_BEFORE_DISPATCH though its recorded outcome was OK.
    """
    url, runs = database
    await killed_mid_body(url, runs, "turn-recover-cancel")
    async with worker("recover-paused", url, runs, "turn-recover-cancel") as survivor:
        await survivor.expect("paused turn-recover-cancel")
        client = DBOSClient(system_database_url=url)
        try:
            await client.cancel_workflow_async("turn-recover-cancel")
        finally:
            client.destroy()
        await survivor.send("go on")
        lines = await survivor.rest()
    assert survivor.process.returncode == 0
    expected = [
        ("c1", "OK", True),  # recorded before the crash
        ("c2", "OUTCOME_UNKNOWN", True),  # its marker is in the journal: it may have run
        # c3's tool is idempotent (no marker): the journal cannot say, and it may run again.
        ("c3", "ABORTED_BEFORE_DISPATCH", False),
        ("c4", "ABORTED_BEFORE_DISPATCH", False),  # never dispatched
    ]
    assert [(o["call_id"], o["code"], o["dispatched"]) for o in outcomes(lines)] == expected
    returned = [
        json.loads(line.removeprefix("returned ")) for line in lines if line.startswith("returned ")
    ]
    assert [(o["call_id"], o["code"], o["dispatched"]) for o in returned] == expected
    assert run_counts(runs) == {"c1": 1, "c2": 1, "c3": 1}  # nothing ran in the recovery


async def test_a_workflow_cancelled_while_its_worker_is_dead_is_settled_from_the_journal(
    database: tuple[str, Path],
) -> None:
    """Issue 35: DBOS never recovers a cancelled workflow; `settle_cancelled` records its
    dispatched calls, from a process with nothing but a `DBOSClient`, and runs nothing."""
    url, runs = database
    await killed_mid_body(url, runs, "turn-dead-cancel")
    client = DBOSClient(system_database_url=url)
    try:
        await client.cancel_workflow_async("turn-dead-cancel")
        before = outcomes_from_steps(await client.list_workflow_steps_async("turn-dead-cancel"))
        settled = await settle_cancelled("turn-dead-cancel", client=client)
        again = await settle_cancelled("turn-dead-cancel", client=client)
    finally:
        client.destroy()
    assert [o.call.call_id for o in before] == ["c1"]  # c2: a marker, no outcome
    summary = [(o.call.call_id, _code(o), o.dispatched) for o in settled]
    assert summary == [("c1", "OK", True), ("c2", "OUTCOME_UNKNOWN", True)]
    assert [(o.call.call_id, _code(o), o.dispatched) for o in again] == summary
    assert run_counts(runs) == {"c1": 1, "c2": 1, "c3": 1}


def _code(outcome: CallOutcome) -> str:
    result = outcome.result
    return "OK" if isinstance(result, ToolSuccess) else str(result.code)
