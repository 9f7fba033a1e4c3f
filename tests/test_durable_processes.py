"""toolseam.durable across real processes (SQLite): a cancel from another process, a crash.

asyncio only (DBOS cannot host trio). The workers are tests/durable_worker.py; each prints
``started <call id>`` as a body starts, which is how the test knows a body is running
(no sleep decides anything). A worker is killed with SIGKILL, as a machine going away
would be: no cleanup runs in it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream
from dbos import DBOSClient

WORKER = Path(__file__).with_name("durable_worker.py")
# A worker imports DBOS (seconds on a small machine) before it does anything.
PATIENCE = 90


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


class Worker:
    """A worker process and the lines it prints."""

    def __init__(self, process: Process) -> None:
        self.process = process
        assert process.stdout is not None
        self._text = TextReceiveStream(process.stdout)
        self._buffer = ""
        self.lines: list[str] = []

    async def line(self) -> str:
        while "\n" not in self._buffer:
            self._buffer += await self._text.receive()
        line, self._buffer = self._buffer.split("\n", 1)
        self.lines.append(line)
        return line

    async def expect(self, *wanted: str) -> None:
        """Read lines until every one of ``wanted`` has been printed."""
        missing = set(wanted)
        with anyio.fail_after(PATIENCE):
            while missing:
                missing.discard(await self.line())

    async def rest(self) -> list[str]:
        """Every line until the worker exits."""
        lines = []
        with anyio.fail_after(PATIENCE):
            try:
                while True:
                    lines.append(await self.line())
            except anyio.EndOfStream:
                pass
            await self.process.wait()
        return lines


@asynccontextmanager
async def worker(role: str, url: str, runs: Path, workflow_id: str = "") -> AsyncIterator[Worker]:
    environment = {**os.environ, "DURABLE_RUNS": str(runs), "PYTHONUNBUFFERED": "1"}
    process = await anyio.open_process(
        [sys.executable, str(WORKER), role, url, workflow_id],
        env=environment,
        stderr=None,
    )
    try:
        yield Worker(process)
    finally:
        if process.returncode is None:
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.wait()


def outcomes(lines: list[str]) -> list[dict[str, Any]]:
    return [
        json.loads(line.removeprefix("outcome ")) for line in lines if line.startswith("outcome ")
    ]


def run_counts(runs: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for call_id in runs.read_text().split():
        counts[call_id] = counts.get(call_id, 0) + 1
    return counts


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


async def test_a_killed_worker_recovers_without_running_a_side_effect_twice(
    database: tuple[str, Path],
) -> None:
    url, runs = database
    async with worker("crash", url, runs, "turn-crash") as doomed:
        await doomed.expect("started c2", "started c3")
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
