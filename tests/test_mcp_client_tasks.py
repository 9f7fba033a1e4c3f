"""toolseam's MCP client on a server's tasks (``io.modelcontextprotocol/tasks``, SEP-2663).

A remote tool (`McpToolDefinition`, through `register_mcp_tools`) whose server answers a
call with a task follows it: it polls ``tasks/get``, answers the task's questions through
the call's ``exec.elicit``, sends ``tasks/cancel`` when its signal aborts and returns only
once the task is final. The upstream is toolseam's server with ``tasks=`` (a tool that
runs only as a task), in this process behind the SDK's real ``Client`` (2026-07-28, the
SDK's direct dispatch) or as a real ``python -m toolseam.mcp serve --task`` process over
stdio; a tool a 2025-11-25 server lists as ``taskSupport: "required"`` is the SDK's own
low-level ``Server``. On asyncio and trio. Orderings are decided by events, never by sleeps
(the client's own polling waits only for a status the test caused).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters, types
from mcp.client import Client
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server

from mcp_fixtures.registry import RECORD_ENV
from mcp_fixtures.support import GUARD, PATH_TARGET, ROOT, Record, first_error, server_command
from test_mcp_tasks import World
from toolseam import (
    AbortController,
    AbortSignal,
    ElicitationRequest,
    Elicited,
    Next,
    PreDecision,
    ToolExecution,
    ToolExecutionInput,
    ToolFailure,
    ToolHost,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    define_tool,
)
from toolseam.mcp import (
    REMOTE_TOOL_ERROR,
    SessionCallbacks,
    TasksExtension,
    create_server,
    register_mcp_tools,
)


def _code(result: ToolResult) -> str | None:
    if isinstance(result, ToolFailure) and result.error.info is not None:
        return result.error.info.code
    return None


def _call(
    name: str, controller: AbortController, host: ToolHost | None = None
) -> ToolExecutionInput:
    return ToolExecutionInput(
        call_id="c1", name=name, arguments={}, signal=controller.signal, host=host
    )


def _watch_polls(server: Server[Any]) -> anyio.Event:
    """Set at the first ``tasks/get``: the client holds the task's id (an abort from then
    on cancels the task, not the ``tools/call`` that creates it)."""
    polled = anyio.Event()

    async def seen(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tasks/get":
            polled.set()
        return await call_next(ctx)

    server.middleware.append(seen)
    return polled


@pytest.mark.anyio
async def test_a_required_task_tool_is_followed_to_its_result() -> None:
    world = World()
    server = create_server(world.registry, tasks={"work": "required"})
    local = ToolRegistry()
    with first_error(), anyio.fail_after(GUARD):
        async with Client(server, extensions=[TasksExtension()]) as client:
            assert client.protocol_version == "2026-07-28"
            await register_mcp_tools(local, client.session)
            controller = AbortController()
            results: list[ToolResult] = []
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    results.append(await local.execute(_call("work", controller)))

                tg.start_soon(call)
                await world.started.wait()  # the upstream body runs in its task
                world.release.set()
    [result] = results
    assert isinstance(result, ToolSuccess)
    assert result.value == "worked"
    assert len(world.published) == 1


@pytest.mark.anyio
async def test_an_abort_cancels_the_task_and_waits_for_its_final_status() -> None:
    world = World()
    server = create_server(world.registry, tasks={"work": "required"})
    polled = _watch_polls(server)
    local = ToolRegistry()
    seen: list[str] = []
    world.registry.on_result(lambda exec, result: seen.append(f"upstream {_code(result)}"))
    local.on_result(lambda exec, result: seen.append(f"local {_code(result)}"))
    with first_error(), anyio.fail_after(GUARD):
        async with Client(server, extensions=[TasksExtension()]) as client:
            await register_mcp_tools(local, client.session)
            controller = AbortController()
            async with anyio.create_task_group() as tg:
                tg.start_soon(local.execute, _call("work", controller))
                await world.started.wait()
                await polled.wait()  # the remote tool holds the task's id
                controller.abort()
                await world.told.wait()  # tasks/cancel reached the upstream body's signal
                assert seen == []  # told, not yet returned: nothing is final anywhere
                world.release.set()
    # The upstream body was awaited (its ABORTED published) before the local call ended.
    assert seen == ["upstream ABORTED", "local ABORTED"]
    assert world.bodies_done == 1


@pytest.mark.anyio
async def test_a_task_cancelled_before_its_upstream_body_ran_reads_as_aborted() -> None:
    world = World()
    gated = anyio.Event()

    async def hold(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        gated.set()
        await exec.signal.wait()  # held before the body until tasks/cancel aborts the call
        return await next()

    world.registry.on_pre_execute(hold)
    server = create_server(world.registry, tasks={"work": "required"})
    polled = _watch_polls(server)
    local = ToolRegistry()
    with first_error(), anyio.fail_after(GUARD):
        async with Client(server, extensions=[TasksExtension()]) as client:
            await register_mcp_tools(local, client.session)
            controller = AbortController()
            results: list[ToolResult] = []
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    results.append(await local.execute(_call("work", controller)))

                tg.start_soon(call)
                await gated.wait()  # held upstream, before its body
                await polled.wait()
                controller.abort()
    assert [_code(r) for r in world.published] == ["ABORTED_BEFORE_DISPATCH"]
    assert not world.started.is_set()
    # Locally the remote tool ran (it created the task): ABORTED, not before dispatch.
    assert [_code(r) for r in results] == ["ABORTED"]


@pytest.mark.anyio
async def test_a_task_question_is_answered_through_the_calls_elicit() -> None:
    upstream = ToolRegistry()
    effects: list[str] = []

    @define_tool(name="ask", description="Count a side effect, then ask a name.")
    async def ask(args: dict[str, Any], exec: ToolRunContext) -> str:
        effects.append("charged")
        answer = await exec.elicit(
            "Who?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="who"
        )
        assert answer.content is not None
        return f"hello {answer.content['name']}"

    upstream.register(ask)
    asked: list[str] = []

    async def elicit(
        exec: ToolExecution, request: ElicitationRequest, signal: object
    ) -> Elicited[Any]:
        asked.append(request.message)
        return Elicited("accept", {"name": "Ada"})

    server = create_server(upstream, tasks={"ask": "required"})
    local = ToolRegistry()
    callbacks = SessionCallbacks()  # declares elicitation, which the upstream body needs
    with first_error(), anyio.fail_after(GUARD):
        async with Client(
            server, extensions=[TasksExtension()], **callbacks.session_kwargs()
        ) as client:
            await register_mcp_tools(local, client.session, callbacks=callbacks)
            result = await local.execute(_call("ask", AbortController(), ToolHost(elicit=elicit)))
    assert isinstance(result, ToolSuccess)
    assert result.value == "hello Ada"
    assert asked == ["Who?"]
    assert effects == ["charged"]  # asked in the task: the body ran once


@pytest.mark.anyio
async def test_without_the_extension_a_required_tool_says_how_to_call_it() -> None:
    world = World()
    world.release.set()
    server = create_server(world.registry, tasks={"work": "required"})
    local = ToolRegistry()
    with first_error(), anyio.fail_after(GUARD):
        async with Client(server) as client:
            await register_mcp_tools(local, client.session)
            result = await local.execute(_call("work", AbortController()))
    assert _code(result) == REMOTE_TOOL_ERROR
    assert isinstance(result, ToolFailure)
    assert "-32021" in result.error.message
    assert "extensions=[toolseam.mcp.TasksExtension()]" in result.error.message
    assert world.published == []


@pytest.mark.anyio
async def test_a_legacy_server_requiring_tasks_gets_a_clear_error_and_nothing_sent() -> None:
    """MCP 2025-11-25's draft tasks (``execution.taskSupport``) are not spoken: refused."""
    calls: list[str] = []

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name="slow",
                    input_schema={"type": "object"},
                    execution=types.ToolExecution(task_support="required"),
                )
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        calls.append(params.name)
        return types.CallToolResult(content=[])

    server: Server[Any] = Server("legacy", on_list_tools=list_tools, on_call_tool=call_tool)
    local = ToolRegistry()
    with first_error(), anyio.fail_after(GUARD):
        async with Client(server, mode="legacy", extensions=[TasksExtension()]) as client:
            assert client.protocol_version == "2025-11-25"
            await register_mcp_tools(local, client.session)
            result = await local.execute(_call("slow", AbortController()))
    assert _code(result) == REMOTE_TOOL_ERROR
    assert isinstance(result, ToolFailure)
    assert "does not speak; nothing was sent" in result.error.message
    assert calls == []


@pytest.mark.anyio
async def test_a_task_of_a_server_process_is_followed_and_cancelled(
    tmp_path: Path, anyio_backend: str
) -> None:
    record = Record(tmp_path / "upstream.jsonl")
    command, *args = server_command(PATH_TARGET, anyio_backend)
    upstream = StdioServerParameters(
        command=command,
        args=[*args, "--task", "step=required", "--task", "ask_once=required"],
        env={RECORD_ENV: str(record.path)},
        cwd=ROOT,
    )
    local = ToolRegistry()
    callbacks = SessionCallbacks()
    with first_error(), anyio.fail_after(GUARD):
        async with Client(
            upstream, extensions=[TasksExtension()], **callbacks.session_kwargs()
        ) as client:
            assert client.protocol_version == "2026-07-28"
            await register_mcp_tools(local, client.session, callbacks=callbacks)
            done = await local.execute(
                ToolExecutionInput(
                    call_id="c1",
                    name="step",
                    arguments={"tag": "quick", "hold": False},
                    signal=AbortController().signal,
                )
            )
            assert isinstance(done, ToolSuccess)
            assert done.value == "quick"
            # Cancelled while the task asks: the remote tool holds the task's id then.
            controller = AbortController()
            asking = anyio.Event()

            async def elicit(
                exec: ToolExecution, request: ElicitationRequest, signal: AbortSignal
            ) -> Elicited[Any]:
                asking.set()
                await signal.wait()
                signal.raise_if_aborted()
                raise AssertionError("unreachable")

            held = ToolExecutionInput(
                call_id="c2",
                name="ask_once",
                arguments={"tag": "held"},
                signal=controller.signal,
                host=ToolHost(elicit=elicit),
            )
            results: list[ToolResult] = []
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    results.append(await local.execute(held))

                tg.start_soon(call)
                await asking.wait()
                controller.abort()
            # Final only once the upstream published its result: the body was awaited.
            assert record.events(event="result", tag="held")[0]["code"] == "ABORTED"
    assert [_code(r) for r in results] == ["ABORTED"]
    assert [e["event"] for e in record.events(tag="held")] == ["side_effect", "result"]


@pytest.mark.anyio
async def test_a_question_the_caller_cannot_answer_cancels_the_task_first() -> None:
    upstream = ToolRegistry()
    seen: list[str] = []

    @define_tool(name="ask", description="Ask a name.")
    async def ask(args: dict[str, Any], exec: ToolRunContext) -> str:
        await exec.elicit("Who?", {"type": "object", "properties": {}}, key="who")
        return "answered"

    upstream.register(ask)
    upstream.on_result(lambda exec, result: seen.append(f"upstream {_code(result)}"))
    server = create_server(upstream, tasks={"ask": "required"})
    local = ToolRegistry()
    local.on_result(lambda exec, result: seen.append(f"local {_code(result)}"))
    callbacks = SessionCallbacks()
    with first_error(), anyio.fail_after(GUARD):
        async with Client(
            server, extensions=[TasksExtension()], **callbacks.session_kwargs()
        ) as client:
            await register_mcp_tools(local, client.session, callbacks=callbacks)
            # No host: the local caller offers no elicitation.
            await local.execute(_call("ask", AbortController()))
    # The upstream task was cancelled and final before the local call failed.
    assert seen == ["upstream ABORTED", "local CAPABILITY_UNAVAILABLE"]


@pytest.mark.anyio
async def test_a_failed_task_is_a_remote_tool_error() -> None:
    upstream = ToolRegistry()

    @define_tool(name="crash", description="Crash.")
    async def crash(args: dict[str, Any], exec: ToolRunContext) -> str:
        raise RuntimeError("the disk is on fire")

    upstream.register(crash)
    server = create_server(upstream, tasks={"crash": "required"})
    local = ToolRegistry()
    with first_error(), anyio.fail_after(GUARD):
        async with Client(server, extensions=[TasksExtension()]) as client:
            await register_mcp_tools(local, client.session)
            result = await local.execute(_call("crash", AbortController()))
    assert isinstance(result, ToolFailure)
    assert _code(result) == REMOTE_TOOL_ERROR
    assert result.error.message.startswith('remote tool "crash" failed: MCP error -32603:')


def test_the_poll_interval_is_the_servers_within_bounds() -> None:
    from toolseam.mcp._client_tasks import DEFAULT_POLL, MIN_POLL, _interval

    assert _interval({"pollIntervalMs": 2000}) == 2.0
    assert _interval({"pollIntervalMs": 0}) == MIN_POLL  # never a busy loop
    assert _interval({}) == DEFAULT_POLL
    assert _interval({"pollIntervalMs": "soon"}) == DEFAULT_POLL


@pytest.mark.anyio
async def test_the_sdk_clients_own_call_tool_follows_a_task() -> None:
    world = World()
    world.release.set()
    server = create_server(world.registry, tasks={"work": "required"})
    with first_error(), anyio.fail_after(GUARD):
        async with Client(server, extensions=[TasksExtension()]) as client:
            result = await client.call_tool("work", {})
    assert (result.is_error, result.content[0]) == (
        False,
        types.TextContent(type="text", text="worked"),
    )
    assert len(world.published) == 1
