"""The MCP server side: a real server process, the SDK's real client, and the raw wire.

One server process per backend serves the tests that share its connection (each uses its
own tag in the server's record); the tests about cancellation on the wire and about the
process's lifetime start their own.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import ByteReceiveStream, ByteSendStream, Process
from mcp import ClientSession, types
from mcp.types.version import LATEST_HANDSHAKE_VERSION

import toolseam.mcp
from mcp_fixtures.registry import RECORD_ENV
from mcp_fixtures.registry import registry as fixture_registry
from mcp_fixtures.support import (
    MODULE_TARGET,
    PATH_TARGET,
    ROOT,
    Record,
    connect,
    server_command,
    server_parameters,
)
from toolseam.mcp import CODE_META_KEY
from toolseam.mcp.__main__ import main

GUARD = 15  # seconds: a test guard only; every wait below ends on an event or a record


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Module-scoped, so one server process per backend serves the shared-session tests."""
    return str(request.param)


@pytest.fixture(scope="module")
def record(anyio_backend: str, tmp_path_factory: pytest.TempPathFactory) -> Record:
    return Record(tmp_path_factory.mktemp(f"mcp-server-{anyio_backend}") / "record.jsonl")


@pytest.fixture(scope="module")
async def session(anyio_backend: str, record: Record) -> AsyncIterator[ClientSession]:
    # The dotted form, started from the repository root; the other tests use a file path.
    async with connect(server_parameters(record, anyio_backend, target=MODULE_TARGET)) as s:
        yield s


def _text(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


# -- packaging and command line -------------------------------------------------------------


def test_import_toolseam_does_not_import_mcp() -> None:
    probe = "import sys, toolseam; assert 'mcp' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_colon", "expected MODULE:ATTR, got 'no_colon'"),
        ("no_such_module_xyz:registry", "cannot import 'no_such_module_xyz'"),
        ("mcp_fixtures.registry:nothing", "'mcp_fixtures.registry' has no attribute 'nothing'"),
        ("mcp_fixtures.registry:echo", "is a DefinedTool, not a toolseam.ToolRegistry"),
        ("/no/such/file.py:registry", "no such file: '/no/such/file.py'"),
    ],
)
def test_serve_rejects_a_target_that_is_not_a_registry(
    target: str, message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # the loader may add the current dir
    assert main(["serve", target]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m toolseam.mcp serve: error: ")
    assert message in err


def test_the_public_api_is_exactly_all_documented_and_reported_at_its_public_path() -> None:
    public = {
        name
        for name, value in vars(toolseam.mcp).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert set(toolseam.mcp.__all__) == public
    for name in toolseam.mcp.__all__:
        value = getattr(toolseam.mcp, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), name
            assert value.__module__ == "toolseam.mcp", name


# -- over the SDK client ---------------------------------------------------------------------


async def test_lists_the_registry_schemas_as_tools(session: ClientSession) -> None:
    with anyio.fail_after(GUARD):
        listed = await session.list_tools()
    expected = [schema.to_json() for schema in fixture_registry.schemas()]
    assert [
        {"name": t.name, "description": t.description, "parameters": t.input_schema}
        for t in listed.tools
    ] == json.loads(json.dumps(expected))


async def test_a_call_answers_with_content_and_structured_value(session: ClientSession) -> None:
    with anyio.fail_after(GUARD):
        echoed = await session.call_tool("echo", {"text": "hi"})
        point = await session.call_tool("point", {"x": 1, "y": 2})
    assert echoed.is_error is False
    assert _text(echoed) == ["hi"]
    assert echoed.structured_content is None  # a string is content, not structured content
    assert echoed.meta == {"toolseam/value": "hi"}  # ...and its exact value travels in _meta
    assert point.is_error is False
    assert point.structured_content == {"x": 1, "y": 2}
    assert _text(point) == ['{"x": 1, "y": 2}']
    assert point.meta == {"toolseam/additional_contexts": [{"note": "points are integers"}]}


@pytest.mark.parametrize(
    ("name", "arguments", "code", "message"),
    [
        (
            "echo",
            {"txt": "hi"},
            "INVALID_ARGS",
            'invalid arguments for tool "echo": text: Field required',
        ),
        ("nope", {}, "UNKNOWN_TOOL", 'unknown tool "nope"'),
        ("deadline", {"tag": "t"}, "TOOL_TIMEOUT", "tool call timed out after 0.01s"),
    ],
)
async def test_a_failure_carries_its_toolseam_code_in_meta(
    session: ClientSession, name: str, arguments: dict[str, Any], code: str, message: str
) -> None:
    with anyio.fail_after(GUARD):
        result = await session.call_tool(name, arguments)
    assert result.is_error is True
    assert result.meta == {CODE_META_KEY: code, "toolseam/message": message}
    assert _text(result) == [f"Error: {message}"]


async def test_client_cancellation_aborts_the_body_signal(
    session: ClientSession, record: Record
) -> None:
    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.call_tool, "wait_for_abort", {"tag": "sdk-cancel"})
            await record.wait_for(event="body-started", tag="sdk-cancel")
            tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled for the request
        published = await record.wait_for(event="result", tag="sdk-cancel")
        # The connection is still healthy after the cancelled request.
        after = await session.call_tool("echo", {"text": "still here"})
    assert published["code"] == "ABORTED"
    assert record.events(event="body-saw-abort", tag="sdk-cancel") == [
        {
            "event": "body-saw-abort",
            "tag": "sdk-cancel",
            "reason": "operation aborted: the MCP request was cancelled",
        }
    ]
    assert record.events(event="body-torn-down") == []  # cooperative, not host cancellation
    assert _text(after) == ["still here"]


# -- on the raw wire -------------------------------------------------------------------------


class RawClient:
    """JSON-RPC lines to and from a server process, without the SDK in between."""

    def __init__(self, process: Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.stdin: ByteSendStream = process.stdin
        self.stdout: ByteReceiveStream = process.stdout
        self._buffer = b""

    async def send(self, message: dict[str, Any]) -> None:
        await self.stdin.send(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            self._buffer += await self.stdout.receive()
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    async def receive_all(self) -> list[dict[str, Any]]:
        """Every message until the server closes its stdout."""
        messages: list[dict[str, Any]] = []
        while True:
            try:
                messages.append(await self.receive())
            except anyio.EndOfStream:
                return messages

    async def initialize(self) -> None:
        await self.send(
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": LATEST_HANDSHAKE_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
        )
        assert (await self.receive())["id"] == 1
        await self.send({"method": "notifications/initialized"})

    async def call(self, request_id: int, name: str, arguments: dict[str, Any]) -> None:
        await self.send(
            {
                "id": request_id,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            }
        )


async def _open_server(record: Record, backend: str) -> Process:
    return await anyio.open_process(
        server_command(PATH_TARGET, backend),
        env={**os.environ, RECORD_ENV: str(record.path)},
        cwd=ROOT,
        stderr=None,
    )


async def test_cancelled_request_is_never_answered_and_its_body_settles_first(
    anyio_backend: str, tmp_path: Path
) -> None:
    record = Record(tmp_path / "record.jsonl")
    with anyio.fail_after(GUARD):
        async with await _open_server(record, anyio_backend) as process:
            client = RawClient(process)
            await client.initialize()
            await client.call(2, "wait_for_abort", {"tag": "raw"})
            await record.wait_for(event="body-started", tag="raw")
            await client.send(
                {"method": "notifications/cancelled", "params": {"requestId": 2, "reason": "test"}}
            )
            published = await record.wait_for(event="result", tag="raw")
            await client.call(3, "echo", {"text": "after"})
            seen = [await client.receive()]
            while seen[-1].get("id") != 3:
                seen.append(await client.receive())
            await client.stdin.aclose()
            seen += await client.receive_all()
            assert await process.wait() == 0
    # The MCP request id is the call id; the body observed its signal, not a teardown.
    assert published == {
        "event": "result",
        "name": "wait_for_abort",
        "tag": "raw",
        "call_id": "2",
        "code": "ABORTED",
    }
    assert [e["event"] for e in record.events(tag="raw")] == [
        "body-started",
        "body-saw-abort",
        "result",
    ]
    assert [m.get("id") for m in seen] == [3]  # nothing ever answers request 2
    assert record.events(event="exit") == [{"event": "exit"}]


async def test_closing_the_connection_aborts_running_calls_and_awaits_them(
    anyio_backend: str, tmp_path: Path
) -> None:
    record = Record(tmp_path / "record.jsonl")
    with anyio.fail_after(GUARD):
        async with await _open_server(record, anyio_backend) as process:
            client = RawClient(process)
            await client.initialize()
            await client.call(2, "wait_for_abort", {"tag": "eof"})
            await record.wait_for(event="body-started", tag="eof")
            await client.stdin.aclose()  # the client goes away mid-call
            answers = await client.receive_all()
            assert await process.wait() == 0
    assert [e["event"] for e in record.events(tag="eof")] == [
        "body-started",
        "body-saw-abort",
        "result",
    ]
    assert record.events(event="result", tag="eof")[0]["code"] == "ABORTED"
    # The process exited only after the body settled and its result was published.
    assert record.events()[-1] == {"event": "exit"}
    # At shutdown the SDK answers an interrupted request with CONNECTION_CLOSED, best effort
    # (the answer may lose the race with stdout closing); never with the aborted result.
    assert [(a["id"], a["error"]["message"]) for a in answers] in ([], [(2, "Connection closed")])
