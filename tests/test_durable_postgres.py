"""toolseam.durable on Postgres, over several machines' worth of processes (``nox -s postgres``).

A real Postgres server on loopback (tests/local_postgres.py: ``initdb`` in a temporary
folder, ``pg_ctl start``); DBOS workers in processes of their own (tests/durable_worker.py),
each with its own executor id, dequeuing tool-call workflows from one DBOS queue; this test
process is a third one, which only shares the database (a `DBOSClient`).

These tests run in the ``postgres`` nox session, which sets ``TOOLSEAM_POSTGRES=1`` and says
why it skips when the Postgres binaries are absent (CI installs them: .ci/run). Other
sessions do not collect this module (tests/conftest.py). asyncio only: DBOS cannot host trio.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from dbos import DBOSClient

from local_postgres import LocalPostgres, find_binaries, missing_reason
from toolseam import ToolSuccess
from toolseam.durable import outcomes_from_steps
from worker_process import outcomes, run_counts, worker

_BINARIES = find_binaries()
if _BINARIES is None:
    pytest.skip(missing_reason(), allow_module_level=True)

APPLICATION = "toolseam_durable_worker"  # the workers' DBOS application name
TURN = [("c1", "notify", {}), ("c2", "write", {}), ("c3", "read", {}), ("c4", "notify", {})]


@pytest.fixture
def anyio_backend() -> str:
    """DBOS is asyncio-only."""
    return "asyncio"


@pytest.fixture
def postgres() -> Iterator[LocalPostgres]:
    assert _BINARIES is not None
    server = LocalPostgres(_BINARIES).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def runs() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runs"
        path.touch()
        yield path


async def test_queued_workflows_on_two_workers_are_cancelled_from_a_third_process(
    postgres: LocalPostgres, runs: Path
) -> None:
    url = postgres.url
    async with worker("serve", url, runs, executor="worker-a") as first:
        await first.expect("serving")  # the first launch creates the schema
        async with worker("serve", url, runs, executor="worker-b") as second:
            await second.expect("serving")
            client = DBOSClient(system_database_url=url, application_name=APPLICATION)
            try:
                ids = ["queued-1", "queued-2"]
                for workflow_id in ids:
                    await client.enqueue_async(
                        {
                            "workflow_name": "turn",
                            "queue_name": "tools",
                            "workflow_id": workflow_id,
                        },
                        TURN,
                    )
                # One workflow each (one at a time per worker): both bodies run in both.
                await first.expect("started c2", "started c3")
                await second.expect("started c2", "started c3")
                for workflow_id in ids:
                    await client.cancel_workflow_async(workflow_id)
                await first.expect("told c2")
                await second.expect("told c2")
                # Each worker ran one of the two workflows; wait until each batch returned.
                done = {
                    (await process.expect_prefix("batch done ")).removeprefix("batch done ")
                    for process in (first, second)
                }
                assert done == set(ids)
                executors = set()
                for workflow_id in ids:
                    handle = await client.retrieve_workflow_async(workflow_id)
                    status = await handle.get_status()
                    assert status.status == "CANCELLED"
                    executors.add(status.executor_id)
                    steps = await client.list_workflow_steps_async(workflow_id)
                    recorded = [
                        (o.call.call_id, _code(o.result), o.dispatched)
                        for o in outcomes_from_steps(steps)
                    ]
                    # Exactly one recorded outcome per call of the batch.
                    assert recorded == [
                        ("c1", "OK", True),
                        ("c2", "ABORTED", True),
                        ("c3", "ABORTED", True),  # done, but published after the cancel
                        ("c4", "ABORTED_BEFORE_DISPATCH", False),
                    ]
                assert executors == {"worker-a", "worker-b"}
            finally:
                client.destroy()
    assert run_counts(runs) == {"c1": 2, "c2": 2, "c3": 2}


def _code(result: object) -> str:
    if isinstance(result, ToolSuccess):
        return "OK"
    return str(getattr(result, "code", None))


async def test_a_database_gone_mid_call_loses_nothing_once_it_is_back(
    postgres: LocalPostgres, runs: Path
) -> None:
    async with worker("outage", postgres.url, runs, "outage-1") as host:
        await host.expect("started p1")
        postgres.halt()  # the database goes away while the body runs
        await host.send("resumed")
        await host.expect("finished p1")  # the body is done; its outcome cannot be written
        postgres.start()  # ... until the database is back
        lines = await host.rest()
    assert host.process.returncode == 0
    assert "batch done outage-1" in lines
    assert outcomes(lines) == [
        {"call_id": "p1", "code": "OK", "text": "resumed", "dispatched": True}
    ]
    assert run_counts(runs) == {"p1": 1}


async def test_mcp_durable_tasks_across_a_server_crash_on_postgres(
    postgres: LocalPostgres, runs: Path
) -> None:
    """tests/test_mcp_tasks_durable_processes.py's crash, on Postgres: the same code."""
    from mcp.client import Client

    from test_mcp_tasks_durable_processes import (
        TasksExtension,
        create,
        final,
        kill,
        request,
        runs_of,
        server,
    )

    url = postgres.url
    async with server("first", url, runs) as (doomed, endpoint):
        async with Client(endpoint, cache=None, extensions=[TasksExtension()]) as client:
            write = await create(client, "write")
            read = await create(client, "read")
            hold = await create(client, "hold")
            await doomed.expect("started write", "started read", "started hold")
            assert (await request(client, "tasks/get", {"taskId": write}))["status"] == "working"
        await kill(doomed)

    async with server("again", url, runs) as (survivor, endpoint):
        await survivor.expect("started hold")  # recovered at launch, running again
        async with Client(endpoint, cache=None, extensions=[TasksExtension()]) as client:
            unknown = await final(client, write)
            done = await final(client, read)
            await request(client, "tasks/cancel", {"taskId": hold})
            await survivor.expect("told hold")
            cancelled = await final(client, hold)
    assert unknown["result"]["_meta"]["toolseam/code"] == "OUTCOME_UNKNOWN"
    assert done["result"]["content"] == [{"type": "text", "text": "read"}]
    assert cancelled["status"] == "cancelled"
    assert cancelled["result"]["_meta"]["toolseam/code"] == "ABORTED"
    assert sorted(runs_of(runs)) == ["hold", "hold", "read", "read", "write"]
