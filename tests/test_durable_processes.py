"""toolseam.durable across real processes (SQLite): a cancel from another process, a crash.

asyncio only (DBOS cannot host trio). The workers are tests/durable_worker.py; each prints
``started <call id>`` as a body starts, which is how the test knows a body is running
(no sleep decides anything). A worker is killed with SIGKILL, as a machine going away
would be: no cleanup runs in it.
"""

from __future__ import annotations

import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from dbos import DBOSClient

import dbos_sqlite_compat
from toolseam.durable import outcomes_from_steps
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
