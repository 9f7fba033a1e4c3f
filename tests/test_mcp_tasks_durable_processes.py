"""Durable tasks across a server crash: real server processes on one SQLite system database.

asyncio only: DBOS runs its workflows as asyncio tasks and cannot host trio. The server is
tests/mcp_fixtures/durable_task_server.py (``serve_http(tasks=..., durable=...)``); the
client is the SDK's own ``Client`` over streamable HTTP (2026-07-28, declaring the tasks
extension). A server is killed with SIGKILL while a task's body runs (it prints ``started
<tool>``, which is how the test knows; no sleep decides anything), then started again on
the same database: DBOS recovers the task at launch and the same task id is read from the
new process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from mcp import types
from mcp.client import Client
from mcp.client.extension import ClientExtension
from pydantic import TypeAdapter

from worker_process import PATIENCE, Worker

SERVER = Path(__file__).parent / "mcp_fixtures" / "durable_task_server.py"
CLI_SERVING = "toolseam.mcp: serving "
ANY = TypeAdapter(dict[str, Any])


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


class TasksExtension(ClientExtension):
    identifier = "io.modelcontextprotocol/tasks"


@asynccontextmanager
async def server(
    role: str, url: str, runs: Path, argv: list[str] | None = None
) -> AsyncIterator[tuple[Worker, str]]:
    """Start the server process; yield it and its MCP endpoint once it serves.

    ``argv``: another command (the CLI) instead of the fixture's own main; its standard
    error is read with its standard output.
    """
    tests = str(Path(__file__).parent)
    environment = {
        **os.environ,
        "DBOS_SYSTEM_DATABASE_URL": url,
        "DURABLE_RUNS": str(runs),
        "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]),
        "PYTHONUNBUFFERED": "1",
    }
    command = [sys.executable, str(SERVER), role] if argv is None else argv
    process = await anyio.open_process(
        command, env=environment, stderr=None if argv is None else subprocess.STDOUT
    )
    try:
        running = Worker(process)
        line = await running.expect_prefix("serving " if argv is None else CLI_SERVING)
        yield running, line.removeprefix("serving " if argv is None else CLI_SERVING)
    finally:
        if process.returncode is None:
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.wait()


async def request(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = await client.session.send_request(
        types.Request[Any, Any](method=method, params=params),
        cast("Any", ANY),
    )
    return answer


async def final(client: Client, task_id: str) -> dict[str, Any]:
    """Poll ``tasks/get`` until the task is final (the test caused it)."""
    with anyio.fail_after(PATIENCE):
        while True:
            task = await request(client, "tasks/get", {"taskId": task_id})
            if task["status"] != "working":
                return task
            await anyio.sleep(0.05)


async def create(client: Client, tool: str) -> str:
    created = await request(client, "tools/call", {"name": tool, "arguments": {}})
    assert created["resultType"] == "task"
    return str(created["taskId"])


def runs_of(runs: Path) -> list[str]:
    return [line.split()[0] for line in runs.read_text().splitlines()]


async def kill(process: Worker) -> None:
    process.process.send_signal(signal.SIGKILL)
    await process.process.wait()
    assert process.process.returncode == -signal.SIGKILL


@pytest.mark.anyio
async def test_tasks_cut_short_by_a_crash_end_as_the_journal_says_after_a_restart(
    database: tuple[str, Path],
) -> None:
    url, runs = database
    async with server("first", url, runs) as (doomed, endpoint):
        async with Client(endpoint, cache=None, extensions=[TasksExtension()]) as client:
            write = await create(client, "write")
            read = await create(client, "read")
            await doomed.expect("started write", "started read")
            assert (await request(client, "tasks/get", {"taskId": write}))["status"] == "working"
        await kill(doomed)
    assert sorted(runs_of(runs)) == ["read", "write"]

    async with (
        server("again", url, runs) as (_, endpoint),
        Client(endpoint, cache=None, extensions=[TasksExtension()]) as client,
    ):
        unknown = await final(client, write)
        done = await final(client, read)
    # Dispatched, not idempotent, cut short: not run again, and said so.
    assert unknown["status"] == "completed"
    assert unknown["result"]["isError"] is True
    assert unknown["result"]["_meta"]["toolseam/code"] == "OUTCOME_UNKNOWN"
    # Idempotent: run again by the recovered workflow, to its end.
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "read"}]
    assert sorted(runs_of(runs)) == ["read", "read", "write"]


@pytest.mark.anyio
async def test_a_cancel_after_a_restart_reaches_the_recovered_body(
    database: tuple[str, Path],
) -> None:
    url, runs = database
    async with server("first", url, runs) as (doomed, endpoint):
        async with Client(endpoint, cache=None, extensions=[TasksExtension()]) as client:
            task_id = await create(client, "hold")
            await doomed.expect("started hold")
        await kill(doomed)

    async with server("again", url, runs) as (survivor, endpoint):
        await survivor.expect("started hold")  # recovered at launch, running again
        async with Client(endpoint, cache=None, extensions=[TasksExtension()]) as client:
            assert (await request(client, "tasks/get", {"taskId": task_id}))["status"] == "working"
            await request(client, "tasks/cancel", {"taskId": task_id})
            await survivor.expect("told hold")
            cancelled = await final(client, task_id)
    assert cancelled["status"] == "cancelled"
    assert cancelled["result"]["_meta"]["toolseam/code"] == "ABORTED"
    assert runs_of(runs) == ["hold", "hold"]


@pytest.mark.anyio
async def test_a_graceful_shutdown_tells_a_running_task_and_records_its_outcome(
    database: tuple[str, Path],
) -> None:
    url, runs = database
    async with server("first", url, runs) as (stopping, endpoint):
        async with Client(endpoint, cache=None, extensions=[TasksExtension()]) as client:
            task_id = await create(client, "hold")
            await stopping.expect("started hold")
        stopping.process.send_signal(signal.SIGTERM)
        await stopping.expect("told hold")
        await stopping.rest()
    assert stopping.process.returncode == 0

    async with (
        server("again", url, runs) as (_, endpoint),
        Client(endpoint, cache=None, extensions=[TasksExtension()]) as client,
    ):
        ended = await final(client, task_id)
    assert ended["status"] == "cancelled"
    assert ended["result"]["_meta"]["toolseam/code"] == "ABORTED"
    assert runs_of(runs) == ["hold"]


@pytest.mark.anyio
async def test_the_cli_serves_durable_tasks(database: tuple[str, Path]) -> None:
    url, runs = database
    argv = [
        sys.executable,
        "-m",
        "toolseam.mcp",
        "serve",
        f"{SERVER}:registry",
        "--http",
        "127.0.0.1:0",
        "--task",
        "read=required",
        "--durable",
    ]
    async with server("", url, runs, argv) as (first, endpoint):
        async with Client(endpoint, cache=None, extensions=[TasksExtension()]) as client:
            task_id = await create(client, "read")
            done = await final(client, task_id)
        first.process.send_signal(signal.SIGTERM)
        await first.rest()
    assert first.process.returncode == 0
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "read"}]

    # Another server process on the same database reads the same task.
    async with (
        server("", url, runs, argv) as (_, endpoint),
        Client(endpoint, cache=None, extensions=[TasksExtension()]) as client,
    ):
        again = await request(client, "tasks/get", {"taskId": task_id})
    assert again["result"] == done["result"]
    assert runs_of(runs) == ["read"]


LATE = """
import os, sys
from dbos import DBOS
import dbos_sqlite_compat
from toolseam import ToolRegistry
from toolseam.durable import DurableTools
from toolseam.mcp import create_server

dbos_sqlite_compat.install()
DBOS(config={"name": "late", "system_database_url": os.environ["DBOS_SYSTEM_DATABASE_URL"]})
registry = ToolRegistry()
durable = DurableTools(registry)
DBOS.launch()
try:
    create_server(registry, tasks={"x": "optional"}, durable=durable)
except RuntimeError as error:
    print(error)
finally:
    DBOS.destroy()
"""


@pytest.mark.anyio
async def test_a_server_made_after_dbos_launched_is_refused(database: tuple[str, Path]) -> None:
    url, _ = database
    tests = str(Path(__file__).parent)
    environment = {
        **os.environ,
        "DBOS_SYSTEM_DATABASE_URL": url,
        "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]),
    }
    done = await anyio.run_process([sys.executable, "-c", LATE], env=environment)
    assert done.stdout.decode().strip() == (
        "create_server(durable=...) must be called before DBOS.launch(): DBOS recovers the "
        "tasks a crashed server left at launch, and their workflow must be registered by then"
    )
