"""A worker process of the durable tests (tests/durable_worker.py) and the lines it prints."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

WORKER = Path(__file__).with_name("durable_worker.py")
# A worker imports DBOS (seconds on a small, busy machine) before it does anything.
PATIENCE = 90


class Worker:
    """A worker process and the lines it prints."""

    def __init__(self, process: Process) -> None:
        self.process = process
        assert process.stdout is not None
        self._text = TextReceiveStream(process.stdout)
        self._buffer = ""
        self.lines: list[str] = []

    async def send(self, line: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(f"{line}\n".encode())

    async def line(self) -> str:
        while "\n" not in self._buffer:
            self._buffer += await self._text.receive()
        line, self._buffer = self._buffer.split("\n", 1)
        self.lines.append(line)
        return line

    async def expect(self, *wanted: str) -> None:
        """Read lines until every one of ``wanted`` has been printed."""
        missing = set(wanted)
        with anyio.move_on_after(PATIENCE):
            while missing:
                missing.discard(await self.line())
        if missing:  # a hang guard: say what did not come and what did
            raise AssertionError(
                f"worker {self.process.pid} did not print {sorted(missing)} within "
                f"{PATIENCE}s; it printed {self.lines}"
            )

    async def expect_prefix(self, prefix: str) -> str:
        """Read lines until one starts with ``prefix``; return it."""
        with anyio.fail_after(PATIENCE):
            while not (line := await self.line()).startswith(prefix):
                pass
        return line

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
async def worker(
    role: str, url: str, runs: Path, workflow_id: str = "", executor: str = "local"
) -> AsyncIterator[Worker]:
    """Start tests/durable_worker.py in ``role``; kill it on the way out if still running."""
    environment = {
        **os.environ,
        # DBOS's convention for where the system database is (the worker reads it).
        "DBOS_SYSTEM_DATABASE_URL": url,
        "DURABLE_RUNS": str(runs),
        "DURABLE_EXECUTOR": executor,
        "PYTHONUNBUFFERED": "1",
    }
    process = await anyio.open_process(
        [sys.executable, str(WORKER), role, workflow_id], env=environment, stderr=None
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
