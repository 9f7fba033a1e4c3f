"""Durable tasks (``create_server(tasks=..., durable=DurableTools(...))``) in one process.

asyncio only: DBOS runs its workflows as asyncio tasks and cannot host trio. A real DBOS on
SQLite in a temporary folder; the registry is served in process to the SDK's real
``Client`` (2026-07-28, declaring the tasks extension). A task's call is a DBOS workflow of
its own, read back from the system database. Orderings are decided by events; polling
``tasks/get`` only waits for a status the test caused. Restarts and crashes are in
tests/test_mcp_tasks_durable_processes.py.
"""

from __future__ import annotations

import contextvars
import itertools
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from dbos import DBOS, SetWorkflowID
from mcp import MCPError, types
from mcp.client import Client
from mcp.client.extension import ClientExtension
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp_types import INVALID_PARAMS
from pydantic import TypeAdapter

import dbos_sqlite_compat
from mcp_fixtures.support import GUARD, first_error
from toolseam import (
    Next,
    PreDecision,
    ToolExecution,
    ToolRegistry,
    ToolRunContext,
    define_tool,
)
from toolseam.durable import DurableTools, recorded_outcomes
from toolseam.mcp import create_server
from toolseam.mcp.__main__ import main
from toolseam.mcp._durable import _task_workflow, workflow_id

dbos_sqlite_compat.install()

ANY = TypeAdapter(dict[str, Any])
_names = itertools.count()


@pytest.fixture
def anyio_backend() -> str:
    """DBOS is asyncio-only."""
    return "asyncio"


@pytest.fixture(scope="module", autouse=True)
def dbos() -> Iterator[None]:
    with tempfile.TemporaryDirectory() as folder:
        DBOS(
            config={
                "name": "toolseam_mcp_durable_tasks",
                "system_database_url": f"sqlite:///{Path(folder) / 'system.sqlite'}",
                "log_level": "CRITICAL",
            }
        )
        DBOS.launch()
        try:
            yield
        finally:
            DBOS.destroy()


class TasksExtension(ClientExtension):
    identifier = "io.modelcontextprotocol/tasks"


class World:
    """A registry with a tool that waits for the test, and a durable server of it."""

    def __init__(self) -> None:
        self.registry = ToolRegistry()
        self.started = anyio.Event()
        self.told = anyio.Event()
        self.release = anyio.Event()
        self.gate: anyio.Event | None = None
        self.gated = anyio.Event()
        self.runs = 0
        self.bodies_done = 0
        world = self

        @define_tool(name="work", description="Works until released.")
        async def work(args: dict[str, Any], exec: ToolRunContext) -> str:
            world.runs += 1
            world.started.set()
            exec.signal.add_listener(lambda reason: world.told.set())
            await world.release.wait()
            world.bodies_done += 1
            exec.signal.raise_if_aborted()
            return f"worked {args.get('n', 0)}"

        async def gate(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            if world.gate is not None:
                world.gated.set()
                await world.gate.wait()
            return await next()

        @define_tool(name="ask", description="Asks the user first.")
        async def ask(args: dict[str, Any], exec: ToolRunContext) -> str:
            answer = await exec.elicit("Proceed?", {"type": "object", "properties": {}})
            return answer.action

        self.registry.register(work)
        self.registry.register(ask)
        self.registry.on_pre_execute(gate)
        self.durable = DurableTools(self.registry, poll_interval=0.05)
        self.server = create_server(
            self.registry,
            name=f"durable-{next(_names)}",
            tasks={"work": "optional", "ask": "optional"},
            durable=self.durable,
        )


async def request(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = await client.session.send_request(
        types.Request[Any, Any](method=method, params=params),
        cast("Any", ANY),
    )
    return answer


async def until(client: Client, task_id: str, *statuses: str) -> dict[str, Any]:
    """Poll ``tasks/get`` until the task reaches one of ``statuses`` (the test caused it)."""
    while True:
        task = await request(client, "tasks/get", {"taskId": task_id})
        if task["status"] in statuses:
            return task
        await anyio.sleep(0.02)


def code(result: dict[str, Any]) -> str:
    return str(result["_meta"]["toolseam/code"])


@pytest.mark.anyio
async def test_a_durable_task_completes_and_its_outcome_is_in_the_journal() -> None:
    world = World()
    with first_error(), anyio.fail_after(GUARD):
        async with Client(world.server, extensions=[TasksExtension()]) as client:
            created = await request(client, "tools/call", {"name": "work", "arguments": {"n": 7}})
            assert created["resultType"] == "task"
            assert created["status"] == "working"
            task_id = created["taskId"]
            assert len(task_id) >= 20  # 16 random bytes
            await world.started.wait()
            assert (await request(client, "tasks/get", {"taskId": task_id}))["status"] == "working"
            world.release.set()
            done = await until(client, task_id, "completed", "failed", "cancelled")
            assert done["status"] == "completed"
            assert done["result"]["content"] == [{"type": "text", "text": "worked 7"}]
            again = await request(client, "tasks/get", {"taskId": task_id})
            assert again["result"] == done["result"]
            with pytest.raises(MCPError) as unknown:
                await request(client, "tasks/get", {"taskId": task_id[:-1] + "x"})
            assert unknown.value.error.code == INVALID_PARAMS
    outcomes = await recorded_outcomes(workflow_id(task_id))
    assert [(o.call.name, o.result.is_error) for o in outcomes] == [("work", False)]
    assert world.runs == 1


@pytest.mark.anyio
async def test_a_cancelled_durable_task_is_final_once_its_body_was_awaited() -> None:
    world = World()
    with first_error(), anyio.fail_after(GUARD):
        async with Client(world.server, extensions=[TasksExtension()]) as client:
            created = await request(client, "tools/call", {"name": "work", "arguments": {}})
            task_id = created["taskId"]
            await world.started.wait()
            ack = await request(client, "tasks/cancel", {"taskId": task_id})
            assert "status" not in ack
            await world.told.wait()
            # Told, not yet returned: the task is not final.
            assert (await request(client, "tasks/get", {"taskId": task_id}))["status"] == "working"
            world.release.set()
            final = await until(client, task_id, "cancelled", "completed", "failed")
            assert final["status"] == "cancelled"
            assert code(final["result"]) == "ABORTED"
            await request(client, "tasks/cancel", {"taskId": task_id})
            assert (await request(client, "tasks/get", {"taskId": task_id}))["result"] == final[
                "result"
            ]
    assert world.bodies_done == 1
    outcomes = await recorded_outcomes(workflow_id(task_id))
    assert len(outcomes) == 1
    assert outcomes[0].result.to_json()["error"]["info"]["code"] == "ABORTED"


@pytest.mark.anyio
async def test_a_durable_task_cancelled_before_dispatch_never_runs_its_body() -> None:
    world = World()
    world.gate = anyio.Event()
    with first_error(), anyio.fail_after(GUARD):
        async with Client(world.server, extensions=[TasksExtension()]) as client:
            created = await request(client, "tools/call", {"name": "work", "arguments": {}})
            task_id = created["taskId"]
            await world.gated.wait()  # held in a pre-execute stage, before the body
            await request(client, "tasks/cancel", {"taskId": task_id})
            world.gate.set()
            final = await until(client, task_id, "cancelled", "completed", "failed")
    assert final["status"] == "cancelled"
    assert code(final["result"]) == "ABORTED_BEFORE_DISPATCH"
    assert world.runs == 0


@pytest.mark.anyio
async def test_a_durable_task_cannot_ask_its_client() -> None:
    world = World()
    with first_error(), anyio.fail_after(GUARD):
        async with Client(world.server, extensions=[TasksExtension()]) as client:
            created = await request(client, "tools/call", {"name": "ask", "arguments": {}})
            final = await until(client, created["taskId"], "completed", "failed", "cancelled")
    assert final["status"] == "completed"
    assert final["result"]["isError"] is True
    assert code(final["result"]) == "CAPABILITY_UNAVAILABLE"


def as_user(client_id: str, subject: str) -> contextvars.Token[AuthenticatedUser | None]:
    """Requests of the next `Client` come from this bearer token's principal.

    The in-memory transport has no HTTP middleware; the SDK's auth context variable is what
    it would set (`AuthContextMiddleware`), and the server's tasks inherit it.
    """
    token = AccessToken(
        token=f"secret-{subject}",
        client_id=client_id,
        scopes=[],
        subject=subject,
        claims={"iss": "https://issuer.example"},
    )
    return auth_context_var.set(AuthenticatedUser(token))


@pytest.mark.anyio
async def test_a_durable_task_belongs_to_its_creator() -> None:
    world = World()
    with first_error(), anyio.fail_after(GUARD):
        alice = as_user("app", "alice")
        try:
            async with Client(world.server, extensions=[TasksExtension()]) as client:
                created = await request(client, "tools/call", {"name": "work", "arguments": {}})
                task_id = created["taskId"]
                await world.started.wait()
        finally:
            auth_context_var.reset(alice)
        for someone in (("app", "bob"), ("other-app", "alice"), None):
            who = None if someone is None else as_user(*someone)
            try:
                async with Client(world.server, extensions=[TasksExtension()]) as client:
                    for method in ("tasks/get", "tasks/cancel"):
                        with pytest.raises(MCPError) as refused:
                            await request(client, method, {"taskId": task_id})
                        assert refused.value.error.code == INVALID_PARAMS
                        assert "no task" in refused.value.error.message
            finally:
                if who is not None:
                    auth_context_var.reset(who)
        assert not world.told.is_set()  # nobody else's cancel reached it
        alice = as_user("app", "alice")
        try:
            async with Client(world.server, extensions=[TasksExtension()]) as client:
                assert (await request(client, "tasks/get", {"taskId": task_id}))[
                    "status"
                ] == "working"
                world.release.set()
                done = await until(client, task_id, "completed", "failed", "cancelled")
                assert done["status"] == "completed"
        finally:
            auth_context_var.reset(alice)
    # The system database keeps who created the task, never the token.
    status = await DBOS.get_workflow_status_async(workflow_id(task_id))
    assert status is not None
    stored = repr(status.input)
    assert "alice" in stored
    assert "secret-alice" not in stored


@pytest.mark.anyio
async def test_one_principal_holds_at_most_its_share_of_durable_tasks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("toolseam.mcp._tasks.MAX_TASKS_PER_PRINCIPAL", 2)
    world = World()
    created: dict[str, list[str]] = {"alice": [], "bob": []}
    refused: list[str] = []

    async def create(subject: str) -> None:
        who = as_user("app", subject)
        try:
            async with Client(world.server, extensions=[TasksExtension()]) as client:
                try:
                    answer = await request(client, "tools/call", {"name": "work", "arguments": {}})
                except MCPError as error:
                    refused.append(f"{subject}: {error.error.message}")
                else:
                    created[subject].append(answer["taskId"])
        finally:
            auth_context_var.reset(who)

    with first_error(), anyio.fail_after(GUARD):
        try:
            for subject in ("alice", "alice", "alice", "bob"):
                await create(subject)
        finally:
            world.release.set()
        for subject, ids in created.items():
            who = as_user("app", subject)
            try:
                async with Client(world.server, extensions=[TasksExtension()]) as client:
                    for task_id in ids:
                        done = await until(client, task_id, "completed", "failed", "cancelled")
                        assert done["status"] == "completed"
            finally:
                auth_context_var.reset(who)
    assert [len(created["alice"]), len(created["bob"])] == [2, 1]
    assert refused == [
        "alice: this MCP server already runs 2 tasks of this principal, its share; the call "
        "was not run: retry once one has finished"
    ]
    assert world.runs == 3


def test_durable_settings_are_checked() -> None:
    world = World()
    with pytest.raises(ValueError, match="after-input"):
        create_server(world.registry, tasks={"work": "after-input"}, durable=world.durable)
    with pytest.raises(ValueError, match="name the tools"):
        create_server(world.registry, durable=world.durable)
    with pytest.raises(ValueError, match="registry"):
        create_server(ToolRegistry(), tasks={"work": "optional"}, durable=world.durable)
    with pytest.raises(TypeError, match="DurableTools"):
        create_server(world.registry, tasks={"work": "optional"}, durable=object())  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_durable_task_cancelled_before_any_execution_ran_it() -> None:
    """Recovery queued the workflow, and the cancel came before any execution dequeued it.

    The workflow is enqueued on a queue no worker of this process serves, as DBOS's
    recovery enqueues (on its internal queue) before an execution takes it.
    """
    world = World()
    task_id = "queued-task-0123456789"
    spec = {
        "task": task_id,
        "call_id": "1",
        "tool": "work",
        "arguments": {},
        "principal": None,
        "owner": None,
    }
    with SetWorkflowID(workflow_id(task_id)):
        await DBOS.enqueue_workflow_async("unserved", _task_workflow, world.server.name, spec)
    with first_error(), anyio.fail_after(GUARD):
        async with Client(world.server, extensions=[TasksExtension()]) as client:
            assert (await request(client, "tasks/get", {"taskId": task_id}))["status"] == "working"
            await request(client, "tasks/cancel", {"taskId": task_id})
            final = await until(client, task_id, "cancelled", "completed", "failed")
            again = await request(client, "tasks/get", {"taskId": task_id})
    assert final["status"] == "cancelled"
    assert code(final["result"]) == "ABORTED_BEFORE_DISPATCH"
    assert again["result"] == final["result"]
    assert world.runs == 0


def test_the_cli_refuses_durable_without_what_it_needs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = "tests/mcp_fixtures/registry.py:registry"
    monkeypatch.delenv("DBOS_SYSTEM_DATABASE_URL", raising=False)
    assert main(["serve", target, "--http", "127.0.0.1:0", "--task", "x", "--durable"]) == 2
    monkeypatch.setenv("DBOS_SYSTEM_DATABASE_URL", "sqlite:///unused.sqlite")
    assert main(["serve", target, "--task", "x", "--durable"]) == 2
    assert main(["serve", target, "--http", "127.0.0.1:0", "--durable"]) == 2
    assert capsys.readouterr().err.count("--durable needs --http, --task") == 3


def test_on_trio_a_durable_task_is_refused_and_nothing_runs() -> None:
    world = World()

    async def call() -> None:
        async with Client(world.server, extensions=[TasksExtension()]) as client:
            with pytest.raises(MCPError) as refused:
                await request(client, "tools/call", {"name": "work", "arguments": {}})
            assert "runs on asyncio only" in refused.value.error.message

    with first_error():
        anyio.run(call, backend="trio")
    assert world.runs == 0
