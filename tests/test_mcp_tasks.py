"""The MCP tasks extension (SEP-2663) over 2026-07-28, carried by the contract.

The registry is served in process (``create_server(tasks=...)``) to the SDK's real
``Client``, which negotiates 2026-07-28 and declares ``io.modelcontextprotocol/tasks`` (a
`ClientExtension`); the task methods are sent as raw requests (the SDK ships no client for
them). On asyncio and trio. Orderings are decided by events, never by sleeps; polling
``tasks/get`` only waits for a status the test caused.
"""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest
from mcp import MCPError, types
from mcp.client import Client
from mcp.client.extension import ClientExtension
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, MISSING_REQUIRED_CLIENT_CAPABILITY
from pydantic import TypeAdapter

from mcp_fixtures.support import GUARD, first_error
from toolseam import (
    Next,
    PreDecision,
    ToolExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
)
from toolseam.mcp import create_server

ANY = TypeAdapter(dict[str, Any])


class TasksExtension(ClientExtension):
    identifier = "io.modelcontextprotocol/tasks"


class World:
    """A registry with a tool that waits for the test, and what the test saw of it."""

    def __init__(self) -> None:
        self.registry = ToolRegistry()
        self.started = anyio.Event()
        self.told = anyio.Event()
        self.release = anyio.Event()
        self.gate: anyio.Event | None = None
        self.gated = anyio.Event()
        self.bodies_done = 0
        self.published: list[ToolResult] = []
        world = self

        @define_tool(name="work", description="Works until released or told to stop.")
        async def work(args: dict[str, Any], exec: ToolRunContext) -> str:
            world.started.set()
            exec.signal.add_listener(lambda reason: world.told.set())
            # Winds down only once the test lets it: a told task must wait for its body.
            await world.release.wait()
            world.bodies_done += 1
            exec.signal.raise_if_aborted()
            return "worked"

        async def gate(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            if world.gate is not None:
                world.gated.set()
                await world.gate.wait()
            return await next()

        self.registry.register(work)
        self.registry.on_pre_execute(gate)
        self.registry.on_result(lambda exec, result: self.published.append(result))


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
        await anyio.sleep(0.01)


def code(result: dict[str, Any]) -> str:
    return str(result["_meta"]["toolseam/code"])


@pytest.mark.anyio
async def test_a_task_completes_with_its_one_result() -> None:
    world = World()
    server = create_server(world.registry, tasks={"work": "optional"})
    with first_error(), anyio.fail_after(GUARD):
        async with Client(server, extensions=[TasksExtension()]) as client:
            created = await request(client, "tools/call", {"name": "work", "arguments": {}})
            assert created["resultType"] == "task"
            assert created["status"] == "working"
            await world.started.wait()
            assert (await request(client, "tasks/get", {"taskId": created["taskId"]}))[
                "status"
            ] == "working"
            world.release.set()
            done = await until(client, created["taskId"], "completed")
            assert done["result"]["content"] == [{"type": "text", "text": "worked"}]
            again = await request(client, "tasks/get", {"taskId": created["taskId"]})
            assert again["result"] == done["result"]
    assert len(world.published) == 1
    assert not world.published[0].is_error


@pytest.mark.anyio
async def test_a_cancelled_task_is_final_only_once_its_body_was_awaited() -> None:
    world = World()
    server = create_server(world.registry, tasks={"work": "optional"})
    with first_error(), anyio.fail_after(GUARD):
        async with Client(server, extensions=[TasksExtension()]) as client:
            created = await request(client, "tools/call", {"name": "work", "arguments": {}})
            task_id = created["taskId"]
            await world.started.wait()
            ack = await request(client, "tasks/cancel", {"taskId": task_id})
            assert "status" not in ack
            await world.told.wait()  # the body was told through its signal
            # Told, not yet returned: the task is not final.
            assert (await request(client, "tasks/get", {"taskId": task_id}))["status"] == "working"
            assert world.bodies_done == 0
            world.release.set()
            final = await until(client, task_id, "cancelled", "completed", "failed")
            assert world.bodies_done == 1
            assert final["status"] == "cancelled"
            assert code(final["result"]) == "ABORTED"
            # A second cancel of a finished task: the same empty acknowledgement, no change.
            await request(client, "tasks/cancel", {"taskId": task_id})
            assert (await request(client, "tasks/get", {"taskId": task_id}))["result"] == final[
                "result"
            ]
    assert [
        r.error.info.code for r in world.published if isinstance(r, ToolFailure) and r.error.info
    ] == ["ABORTED"]
    assert len(world.published) == 1


@pytest.mark.anyio
async def test_a_task_cancelled_before_dispatch_never_runs_its_body() -> None:
    world = World()
    world.gate = anyio.Event()
    server = create_server(world.registry, tasks={"work": "optional"})
    with first_error(), anyio.fail_after(GUARD):
        async with Client(server, extensions=[TasksExtension()]) as client:
            created = await request(client, "tools/call", {"name": "work", "arguments": {}})
            task_id = created["taskId"]
            await world.gated.wait()  # held in a pre-execute stage, before the body
            await request(client, "tasks/cancel", {"taskId": task_id})
            world.gate.set()
            final = await until(client, task_id, "cancelled", "completed", "failed")
    assert final["status"] == "cancelled"
    assert code(final["result"]) == "ABORTED_BEFORE_DISPATCH"
    assert not world.started.is_set()
    assert world.bodies_done == 0
    assert len(world.published) == 1


@pytest.mark.anyio
async def test_the_caps_on_live_tasks_and_finished_ones() -> None:
    world = World()
    server = create_server(world.registry, tasks={"work": "optional"}, max_tasks=1, task_ttl=0.05)
    with first_error(), anyio.fail_after(GUARD):
        async with Client(server, extensions=[TasksExtension()]) as client:
            first = await request(client, "tools/call", {"name": "work", "arguments": {}})
            with pytest.raises(MCPError) as refused:
                await request(client, "tools/call", {"name": "work", "arguments": {}})
            assert refused.value.error.code == INVALID_REQUEST
            assert "1 tasks, its limit" in refused.value.error.message
            assert len(world.published) == 0  # the refused call ran nothing
            world.release.set()
            await until(client, first["taskId"], "completed")
            # Finished, and kept for task_ttl: then forgotten, with a clear error.
            await anyio.sleep(0.1)  # outlives task_ttl (no ordering rides on it)
            with pytest.raises(MCPError) as forgotten:
                await request(client, "tasks/get", {"taskId": first["taskId"]})
            assert forgotten.value.error.code == INVALID_PARAMS
            assert "forgotten" in forgotten.value.error.message
    assert len(world.published) == 1


@pytest.mark.anyio
async def test_a_client_without_the_extension() -> None:
    world = World()
    world.release.set()
    server = create_server(world.registry, tasks={"work": "required"})
    with first_error(), anyio.fail_after(GUARD):
        async with Client(server) as client:
            with pytest.raises(MCPError) as missing:
                await client.call_tool("work", {})
            assert missing.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
            with pytest.raises(MCPError) as gated:
                await request(client, "tasks/get", {"taskId": "x"})
            assert gated.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert world.published == []


def test_task_settings_are_checked() -> None:
    registry = ToolRegistry()
    with pytest.raises(ValueError, match="max_tasks"):
        create_server(registry, tasks={"x": "optional"}, max_tasks=0)
    with pytest.raises(ValueError, match="task_ttl"):
        create_server(registry, tasks={"x": "optional"}, task_ttl=float("inf"))
    with pytest.raises(ValueError, match="tasks"):
        create_server(registry, tasks={"x": "sometimes"})  # type: ignore[dict-item]
