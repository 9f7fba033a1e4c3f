"""The MCP client side: remote tools in a toolseam registry, against a toolseam server process.

One server process per backend serves the tests that share its connection (each uses its
own tag in the server's record); a test that must see the server exit starts its own.
"""

from __future__ import annotations

import runpy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession

from mcp_fixtures.registry import registry as fixture_registry
from mcp_fixtures.support import Record, connect, server_parameters
from toolseam import (
    AbortController,
    AbortSignal,
    ErrorInfo,
    ToolExecutionInput,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolSuccess,
)
from toolseam.mcp import REMOTE_TOOL_ERROR, McpToolDefinition, RemoteToolError, register_mcp_tools

GUARD = 15  # seconds: a test guard only; every wait below ends on an event or a record
EXAMPLES = Path(__file__).parent.parent / "docs" / "examples"


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Module-scoped, so one server process per backend serves the shared-session tests."""
    return str(request.param)


@pytest.fixture(scope="module")
def record(anyio_backend: str, tmp_path_factory: pytest.TempPathFactory) -> Record:
    return Record(tmp_path_factory.mktemp(f"mcp-client-{anyio_backend}") / "record.jsonl")


@pytest.fixture(scope="module")
async def session(anyio_backend: str, record: Record) -> AsyncIterator[ClientSession]:
    async with connect(server_parameters(record, anyio_backend)) as s:
        yield s


@pytest.fixture
async def registry(session: ClientSession) -> ToolRegistry:
    registry = ToolRegistry()
    with anyio.fail_after(GUARD):
        await register_mcp_tools(registry, session)
    return registry


def call(
    name: str, arguments: object, signal: AbortSignal | None = None, call_id: str = "c1"
) -> ToolExecutionInput:
    return ToolExecutionInput(
        call_id=call_id,
        name=name,
        arguments=arguments,
        signal=AbortController().signal if signal is None else signal,
    )


def failure(result: ToolResult) -> ToolFailure:
    assert isinstance(result, ToolFailure), result
    return result


async def test_registers_every_remote_tool_with_its_schema(session: ClientSession) -> None:
    registry = ToolRegistry()
    with anyio.fail_after(GUARD):
        registrations = await register_mcp_tools(registry, session)
    assert registry.schemas() == fixture_registry.schemas()
    assert len(registrations) == len(fixture_registry.schemas())
    definition = registry.get("echo")
    assert isinstance(definition, McpToolDefinition)
    assert (definition.name, definition.remote_name, definition.timeout) == ("echo", "echo", None)
    registrations[0].remove()
    assert registry.get("echo") is None


async def test_a_duplicate_name_registers_nothing_and_a_prefix_keeps_servers_apart(
    session: ClientSession,
) -> None:
    registry = ToolRegistry()
    with anyio.fail_after(GUARD):
        await register_mcp_tools(registry, session)
        before = registry.schemas()
        with pytest.raises(ValueError, match=r'^tool "echo" is already registered$'):
            await register_mcp_tools(registry, session)
        assert registry.schemas() == before
        await register_mcp_tools(registry, session, name_prefix="other.")
    prefixed = registry.get("other.echo")
    assert isinstance(prefixed, McpToolDefinition)
    assert prefixed.remote_name == "echo"
    result = await registry.execute(call("other.echo", {"text": "via prefix"}))
    assert isinstance(result, ToolSuccess)
    assert result.value == "via prefix"


async def test_a_remote_success_keeps_value_content_and_contexts(registry: ToolRegistry) -> None:
    with anyio.fail_after(GUARD):
        echoed = await registry.execute(call("echo", {"text": "hi"}))
        point = await registry.execute(call("point", {"x": 1, "y": 2}))
        numbers = await registry.execute(call("count", {"n": 3}))
    assert isinstance(echoed, ToolSuccess)
    assert (echoed.value, list(echoed.content)) == ("hi", [{"type": "text", "text": "hi"}])
    assert isinstance(point, ToolSuccess)
    assert point.value == {"x": 1, "y": 2}  # from structuredContent
    assert list(point.content) == [{"type": "text", "text": '{"x": 1, "y": 2}'}]
    assert list(point.additional_contexts) == [{"note": "points are integers"}]
    # Not an object: from a toolseam server the exact value, not the text of the content.
    assert isinstance(numbers, ToolSuccess)
    assert (numbers.value, list(numbers.content)) == (
        [0, 1, 2],
        [{"type": "text", "text": "[0, 1, 2]"}],
    )


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        (
            "echo",
            {"txt": "hi"},
            'remote tool "echo" failed (INVALID_ARGS): '
            'invalid arguments for tool "echo": text: Field required',
        ),
        (
            "deadline",
            {"tag": "t"},
            'remote tool "deadline" failed (TOOL_TIMEOUT): tool call timed out after 0.01s',
        ),
    ],
)
async def test_a_remote_failure_is_a_remote_tool_error_naming_the_remote_code(
    registry: ToolRegistry, name: str, arguments: dict[str, Any], message: str
) -> None:
    with anyio.fail_after(GUARD):
        result = failure(await registry.execute(call(name, arguments)))
    assert result.error.info == ErrorInfo("RemoteToolError", REMOTE_TOOL_ERROR)
    assert result.error.message == message
    assert [dict(block) for block in result.content] == [
        {"type": "text", "text": f"Error: {message}"}
    ]


async def test_non_object_arguments_fail_locally(registry: ToolRegistry) -> None:
    with anyio.fail_after(GUARD):
        result = failure(await registry.execute(call("echo", ["hi"])))
    assert result.error.info == ErrorInfo("ToolArgsError", "INVALID_ARGS")
    assert result.error.message == (
        'invalid arguments for tool "echo": expected a JSON object, got FrozenList'
    )


async def test_abort_mid_flight_cancels_the_remote_call_cooperatively(
    registry: ToolRegistry, record: Record
) -> None:
    stop = AbortController()
    results: list[ToolResult] = []

    async def run() -> None:
        results.append(await registry.execute(call("wait_for_abort", {"tag": "e2e"}, stop.signal)))

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await record.wait_for(event="body-started", tag="e2e")
            stop.abort("user pressed stop")
        published = await record.wait_for(event="result", tag="e2e")
        # The abort travelled as notifications/cancelled: the connection is still open.
        after = await registry.execute(call("echo", {"text": "after"}))
    assert failure(results[0]).error.info == ErrorInfo("AbortError", "ABORTED")
    assert published["code"] == "ABORTED"
    assert [e["event"] for e in record.events(tag="e2e")] == [
        "body-started",
        "body-saw-abort",
        "result",
    ]
    assert isinstance(after, ToolSuccess)


async def test_a_pre_aborted_call_never_reaches_the_server(
    anyio_backend: str, tmp_path: Path
) -> None:
    record = Record(tmp_path / "record.jsonl")
    registry = ToolRegistry()
    with anyio.fail_after(GUARD):
        async with connect(server_parameters(record, anyio_backend)) as session:
            await register_mcp_tools(registry, session)
            aborted = await registry.execute(
                call("wait_for_abort", {"tag": "pre"}, AbortSignal.aborted_signal())
            )
            marker = await registry.execute(call("echo", {"text": "marker"}))
    # The session is closed and the server exited normally: its record is complete.
    assert failure(aborted).error.info == ErrorInfo("AbortError", "ABORTED_BEFORE_DISPATCH")
    assert isinstance(marker, ToolSuccess)
    assert [(e["event"], e.get("name")) for e in record.events()] == [
        ("started", None),
        ("result", "echo"),
        ("exit", None),
    ]


async def test_a_connection_lost_mid_call_is_a_remote_tool_error(
    anyio_backend: str, tmp_path: Path
) -> None:
    record = Record(tmp_path / "record.jsonl")
    registry = ToolRegistry()
    with anyio.fail_after(GUARD):
        async with connect(server_parameters(record, anyio_backend)) as session:
            await register_mcp_tools(registry, session)
            result = failure(await registry.execute(call("crash", {"tag": "crash"})))
    assert record.events(event="crashing", tag="crash")
    assert result.error.info == ErrorInfo("RemoteToolError", REMOTE_TOOL_ERROR)
    assert result.error.message == 'remote tool "crash" failed: MCP error -32000: Connection closed'


def test_remote_tool_error_names_tool_and_remote_code() -> None:
    error = RemoteToolError("search", "tool call aborted", remote_code="ABORTED")
    assert str(error) == 'remote tool "search" failed (ABORTED): tool call aborted'
    assert (error.code, error.remote_code, error.tool_name) == (
        REMOTE_TOOL_ERROR,
        "ABORTED",
        "search",
    )
    assert str(RemoteToolError("search", "boom")) == 'remote tool "search" failed: boom'


async def test_the_docs_example_client_and_server(capsys: pytest.CaptureFixture[str]) -> None:
    main = runpy.run_path(str(EXAMPLES / "mcp_client.py"), run_name="example")["main"]
    with anyio.fail_after(GUARD):
        await main()
    assert capsys.readouterr().out.splitlines() == [
        "tools: search, word_count",
        'call_1 OK {"words": 6}',
        'call_2 REMOTE_TOOL_ERROR: remote tool "word_count" failed (INVALID_ARGS): '
        'invalid arguments for tool "word_count": text: Field required',
        "call_3 ABORTED: tool call aborted",
    ]
