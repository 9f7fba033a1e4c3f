"""Serving a registry over MCP's streamable HTTP transport (`serve_http`, ``serve --http``).

A real server process on 127.0.0.1 (a free port it picks and announces) and the SDK's real
clients of both protocol eras: a 2025-era session (``initialize``; it cancels with a
``notifications/cancelled`` POST) and a 2026-era client (``server/discover``; it cancels
by closing the request's stream). The server side runs on asyncio only: uvicorn serves
it. Every client runs on asyncio and on trio; the in-process tests of `serve_http` itself
are asyncio only, and one checks it refuses trio.

One server process serves the tests that share it (each with its own tag in the server's
record); the tests about the process's lifetime start their own.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import pytest
from mcp import ClientSession, types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types.version import LATEST_HANDSHAKE_VERSION
from typing_extensions import TypedDict

import mcp_fixtures
from mcp_fixtures.registry import RECORD_ENV
from mcp_fixtures.registry import registry as fixture_registry
from mcp_fixtures.support import (
    GUARD,
    Record,
    Served,
    exited,
    http_server_command,
    serving,
)
from toolseam import ToolExecution, ToolRegistry, ToolResult, ToolRunContext, define_tool
from toolseam.mcp import serve_http
from toolseam.mcp.__main__ import _address, main

# On trio, the SDK's HTTP client (httpx2/httpcore2) leaves async generators of cancelled
# streams to the garbage collector, and trio warns about each (the class of encode/httpx#3686).
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(core)?x?2\.:ResourceWarning",
)

Era = Literal["2025", "2026"]
ERAS: list[Era] = ["2025", "2026"]
MCP_HEADERS = {"accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Module-scoped, so the shared server process serves both backends' tests."""
    return str(request.param)


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> Record:
    return Record(tmp_path_factory.mktemp("mcp-http") / "record.jsonl")


@pytest.fixture(scope="module")
def server(record: Record) -> Iterator[Served]:
    with serving(
        http_server_command(), record.path.with_name("server.log"), {RECORD_ENV: str(record.path)}
    ) as served:
        yield served


@asynccontextmanager
async def connect(url: str, era: Era) -> AsyncGenerator[ClientSession]:
    """An initialized SDK session of the given protocol era."""
    if era == "2025":
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            yield s
    else:
        async with Client(url, cache=None) as client:  # negotiates 2026-07-28 with discover
            yield client.session


def _text(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def _tag(name: str, era: Era, backend: str) -> str:
    return f"{name}-{era}-{backend}"


# -- over the SDK's clients ------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_lists_and_calls_over_http(server: Served, era: Era) -> None:
    with anyio.fail_after(GUARD):
        async with connect(server.url, era) as session:
            listed = await session.list_tools()
            echoed = await session.call_tool("echo", {"text": "hi"})
            point = await session.call_tool("point", {"x": 1, "y": 2})
            numbers = await session.call_tool("count", {"n": 3})
            version = session.protocol_version
    assert version == ("2026-07-28" if era == "2026" else LATEST_HANDSHAKE_VERSION)
    expected = [schema.to_json() for schema in fixture_registry.schemas()]
    assert [
        {"name": t.name, "description": t.description, "parameters": t.input_schema}
        for t in listed.tools
    ] == json.loads(json.dumps(expected))
    assert (echoed.is_error, _text(echoed), echoed.structured_content) == (False, ["hi"], None)
    assert (point.is_error, point.structured_content) == (False, {"x": 1, "y": 2})
    # A value that is not an object: text for any client, exact under _meta for toolseam.
    assert (_text(numbers), numbers.structured_content) == (["[0, 1, 2]"], None)
    assert numbers.meta is not None
    assert numbers.meta["toolseam/value"] == [0, 1, 2]


@pytest.mark.parametrize("era", ERAS)
async def test_client_cancellation_mid_call_aborts_the_body(
    server: Served, record: Record, era: Era, anyio_backend: str
) -> None:
    tag = _tag("cancel", era, anyio_backend)
    with anyio.fail_after(GUARD):
        async with connect(server.url, era) as session:
            async with anyio.create_task_group() as tg:
                tg.start_soon(session.call_tool, "wait_for_abort", {"tag": tag})
                await record.wait_for(event="body-started", tag=tag)
                tg.cancel_scope.cancel()  # the SDK cancels the request its era's way
            published = await record.wait_for(event="result", tag=tag)
            after = await session.call_tool("echo", {"text": "still here"})
    assert published["code"] == "ABORTED"
    # 2025: a notifications/cancelled POST reaches the session; 2026: the stream closes.
    reason = "the MCP request was cancelled" if era == "2025" else "the MCP client closed"
    [saw] = record.events(event="body-saw-abort", tag=tag)
    assert saw["reason"].startswith(f"operation aborted: {reason}")
    assert record.events(event="body-torn-down", tag=tag) == []  # cooperative, not torn down
    assert [e["event"] for e in record.events(tag=tag)] == [
        "body-started",
        "body-saw-abort",
        "result",
    ]
    assert _text(after) == ["still here"]


# -- on the raw wire -------------------------------------------------------------------------


class RawSession:
    """A 2025-era MCP session over plain HTTP requests, without the SDK in between."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self.http = http
        self.url = url
        self.headers = dict(MCP_HEADERS)

    async def open(self) -> None:
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": LATEST_HANDSHAKE_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        }
        answer = await self.http.post(self.url, json=initialize, headers=self.headers)
        assert answer.status_code == 200, answer.text
        self.headers["mcp-session-id"] = answer.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = LATEST_HANDSHAKE_VERSION
        notified = await self.http.post(
            self.url,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=self.headers,
        )
        assert notified.status_code == 202

    def call(self, request_id: int, name: str, arguments: dict[str, Any]) -> Any:
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        return self.http.stream("POST", self.url, json=body, headers=self.headers)


async def test_a_client_that_disconnects_mid_call_aborts_the_body(
    server: Served, record: Record, anyio_backend: str
) -> None:
    tag = f"disconnect-{anyio_backend}"
    with anyio.fail_after(GUARD):
        async with httpx2.AsyncClient() as http:
            session = RawSession(http, server.url)
            await session.open()
            async with session.call(2, "wait_for_abort", {"tag": tag}) as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                await record.wait_for(event="body-started", tag=tag)
            # The response was closed unread: the connection is gone, no cancellation sent.
            published = await record.wait_for(event="result", tag=tag)
    assert published["code"] == "ABORTED"
    assert record.events(event="body-saw-abort", tag=tag) == [
        {
            "event": "body-saw-abort",
            "tag": tag,
            "reason": "operation aborted: the MCP client closed the request's stream",
        }
    ]


async def test_a_cancel_that_overtakes_its_call_on_another_post_stops_it_before_dispatch(
    server: Served, record: Record, anyio_backend: str
) -> None:
    """Issue 36: the cancellation's POST arrives first; the call never runs, never answered."""
    tag = f"overtaken-{anyio_backend}"
    with anyio.fail_after(GUARD):
        async with httpx2.AsyncClient() as http:
            session = RawSession(http, server.url)
            await session.open()
            cancel = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 5, "reason": "overtaken"},
            }
            sent = await http.post(session.url, json=cancel, headers=session.headers)
            assert sent.status_code == 202
            async with session.call(5, "wait_for_abort", {"tag": tag}) as response:
                answer = (await response.aread()).decode()
            published = await record.wait_for(event="result", tag=tag)
    assert published["code"] == "ABORTED_BEFORE_DISPATCH"
    assert record.events(event="body-started", tag=tag) == []
    assert '"result"' not in answer


@pytest.mark.parametrize("era", ERAS)
async def test_an_sdk_client_killed_mid_call_aborts_the_body(
    server: Served, record: Record, era: Era, anyio_backend: str
) -> None:
    tag = _tag("killed", era, anyio_backend)
    script = Path(mcp_fixtures.__file__).with_name("http_client.py")
    argv = [sys.executable, str(script), server.url, era, tag, anyio_backend]
    with anyio.fail_after(GUARD):
        async with await anyio.open_process(argv, stdout=None, stderr=None) as client:
            await record.wait_for(event="body-started", tag=tag)
            client.kill()  # no cancellation, no DELETE: its connections just close
            await client.wait()
            published = await record.wait_for(event="result", tag=tag)
    assert published["code"] == "ABORTED"
    [saw] = record.events(event="body-saw-abort", tag=tag)
    assert saw["reason"] == "operation aborted: the MCP client closed the request's stream"


async def test_a_foreign_host_header_is_refused_on_loopback(server: Served) -> None:
    with anyio.fail_after(GUARD):
        async with httpx2.AsyncClient() as http:
            answer = await http.post(
                server.url, json={}, headers={**MCP_HEADERS, "host": "evil.example"}
            )
    assert (answer.status_code, answer.text) == (421, "Invalid Host header")


# -- the process's lifetime --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sig", "era"), [(signal.SIGTERM, "2025"), (signal.SIGINT, "2026")], ids=["SIGTERM", "SIGINT"]
)
async def test_a_signal_with_a_call_running_aborts_it_answers_and_exits_0(
    tmp_path: Path, sig: signal.Signals, era: Era
) -> None:
    record = Record(tmp_path / "record.jsonl")
    env = {RECORD_ENV: str(record.path)}
    results: list[types.CallToolResult] = []
    with serving(http_server_command(), tmp_path / "server.log", env) as served:
        with anyio.fail_after(GUARD):
            async with connect(served.url, era) as session:

                async def call() -> None:
                    results.append(await session.call_tool("wait_for_abort", {"tag": "sig"}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    await record.wait_for(event="body-started", tag="sig")
                    served.process.send_signal(sig)
                status = await exited(served.process)
    assert status == 0
    # The body was aborted and awaited, and the client got the ABORTED result.
    assert [(e["event"], e.get("code")) for e in record.events(tag="sig")] == [
        ("body-started", None),
        ("body-saw-abort", None),
        ("result", "ABORTED"),
    ]
    assert record.events(event="body-saw-abort")[0]["reason"] == (
        "operation aborted: the MCP server is shutting down"
    )
    assert record.events()[-1] == {"event": "exit"}
    [answer] = results
    assert answer.is_error is True
    assert answer.meta is not None
    assert answer.meta["toolseam/code"] == "ABORTED"


class HoldArgs(TypedDict):
    tag: str


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn is asyncio code
async def test_cancelling_serve_http_aborts_and_awaits_running_calls() -> None:
    registry = ToolRegistry()
    started = anyio.Event()
    events: list[str] = []

    @define_tool(name="hold", description="Hold until aborted.")
    async def hold(args: HoldArgs, exec: ToolRunContext) -> str:
        started.set()
        await exec.signal.wait()
        events.append(f"saw abort: {exec.signal.reason}")
        exec.signal.raise_if_aborted()
        return "never"

    def published(exec: ToolExecution, result: ToolResult) -> None:
        info = result.error.info if result.is_error is True else None
        events.append(f"published {info.code if info else 'OK'}")

    registry.register(hold)
    registry.on_result(published)
    answers: list[types.CallToolResult] = []
    serving_scope = anyio.CancelScope()
    stopped = anyio.Event()

    async def serve(*, task_status: anyio.abc.TaskStatus[str]) -> None:
        with serving_scope:
            await serve_http(registry, port=0, handle_signals=False, task_status=task_status)
        events.append("serve_http returned")
        stopped.set()

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tg:
            url = await tg.start(serve)
            async with connect(url, "2025") as session:

                async def call() -> None:
                    answers.append(await session.call_tool("hold", {"tag": "x"}))

                tg.start_soon(call)
                await started.wait()
                serving_scope.cancel()
                await stopped.wait()
    assert events == [
        "saw abort: operation aborted: the MCP server is shutting down",
        "published ABORTED",
        "serve_http returned",
    ]
    assert [a.meta["toolseam/code"] if a.meta else None for a in answers] == ["ABORTED"]


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_serve_http_refuses_to_run_on_trio() -> None:
    with pytest.raises(
        RuntimeError, match=r"^serve_http runs on asyncio only \(uvicorn serves it\)$"
    ):
        await serve_http(ToolRegistry(), port=0)


# -- command line ------------------------------------------------------------------------------


def test_http_needs_asyncio(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["serve", "mcp_fixtures.registry:registry", "--http", "0", "--backend", "trio"]) == 2
    )
    assert capsys.readouterr().err == (
        "python -m toolseam.mcp serve: error: --http serves with uvicorn, "
        "which runs on asyncio only\n"
    )


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("8000", ("127.0.0.1", 8000)),
        ("0", ("127.0.0.1", 0)),
        ("0.0.0.0:9000", ("0.0.0.0", 9000)),
        ("localhost:1", ("localhost", 1)),
        ("[::1]:8000", ("::1", 8000)),
    ],
)
def test_http_address_defaults_to_loopback(text: str, address: tuple[str, int]) -> None:
    assert _address(text) == address


@pytest.mark.parametrize("text", ["", "host:", "host:port", ":80", "70000"])
def test_a_bad_http_address_is_refused(text: str) -> None:
    with pytest.raises(Exception, match=r"^expected \[HOST:\]PORT, got "):
        _address(text)


def test_a_port_in_use_is_a_clear_error(server: Served, capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{server.port}"
    assert main(["serve", "mcp_fixtures.registry:registry", "--http", address]) == 1
    err = capsys.readouterr().err
    assert err.startswith("python -m toolseam.mcp serve: [Errno ")
    assert "in use" in err
