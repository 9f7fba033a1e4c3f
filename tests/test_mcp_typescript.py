"""An independent client: the MCP TypeScript SDK cancels calls on toolseam's server.

``nox -s mcp_typescript`` installs the SDK (npm ``@modelcontextprotocol/sdk``, pinned in the
noxfile) into nox's cache dir and runs this module with ``TOOLSEAM_MCP_TS_SDK`` set to the
installed package; other sessions do not collect it (tests/conftest.py). The client is
tests/mcp_fixtures/ts_client.mjs on the system's node, driven line by line; the server is
``python -m toolseam.mcp serve`` over stdio (started by the TypeScript client, on this
test's backend) and over streamable HTTP (one process for the module, asyncio: uvicorn).
What the server did is read from the fixture registry's record: each cancelled body was
told (its signal aborted) and awaited (its result published after it returned), and a
cancellation that overtakes its call on the wire (the client holds the request back until
its ``notifications/cancelled`` was sent) still stops the call before its body runs.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.abc
import pytest
from anyio.streams.text import TextReceiveStream

from mcp_fixtures.registry import RECORD_ENV
from mcp_fixtures.support import (
    GUARD,
    PATH_TARGET,
    Record,
    Served,
    http_server_command,
    server_command,
    serving,
)

SDK = os.environ.get("TOOLSEAM_MCP_TS_SDK", "")
CLIENT = Path(__file__).with_name("mcp_fixtures") / "ts_client.mjs"

Transport = Literal["stdio", "http"]
TRANSPORTS: list[Transport] = ["stdio", "http"]


def test_the_typescript_sdk_is_installed() -> None:
    """The session installed it: without it every test below would fail less clearly."""
    assert (Path(SDK) / "package.json").is_file(), f"TOOLSEAM_MCP_TS_SDK={SDK!r}"
    assert shutil.which("node") is not None, "node is not on PATH"


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Module-scoped, so the shared HTTP server serves both backends' tests."""
    return str(request.param)


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> Record:
    return Record(tmp_path_factory.mktemp("mcp-ts") / "record.jsonl")


@pytest.fixture(scope="module")
def http_server(record: Record) -> Iterator[Served]:
    with serving(
        http_server_command(), record.path.with_name("server.log"), {RECORD_ENV: str(record.path)}
    ) as served:
        yield served


class TsClient:
    """The TypeScript client process: commands in, events out (JSON lines)."""

    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self._process = process
        self._stdin = process.stdin
        self._lines = TextReceiveStream(process.stdout)
        self._buffer = ""
        self.events: list[dict[str, Any]] = []

    async def send(self, **command: object) -> None:
        await self._stdin.send((json.dumps(command) + "\n").encode())

    async def wait_for(self, **match: object) -> dict[str, Any]:
        while True:
            for event in self.events:
                if all(event.get(k) == v for k, v in match.items()):
                    return event
            while "\n" not in self._buffer:
                self._buffer += await self._lines.receive()
            line, self._buffer = self._buffer.split("\n", 1)
            self.events.append(json.loads(line))


@asynccontextmanager
async def ts_client(
    transport: Transport, record: Record, backend: str, http: Served | None
) -> AsyncGenerator[TsClient]:
    if transport == "stdio":
        target = json.dumps(server_command(PATH_TARGET, backend))
    else:
        assert http is not None
        target = http.url
    argv = ["node", str(CLIENT), SDK, transport, target]
    env = {**os.environ, RECORD_ENV: str(record.path)}
    async with await anyio.open_process(argv, env=env, stderr=None) as process:
        client = TsClient(process)
        try:
            await client.wait_for(event="ready")
            yield client
            await client.send(op="quit")
            await client.wait_for(event="closed")
            await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
    assert process.returncode == 0


@pytest.fixture
def http(request: pytest.FixtureRequest, transport: Transport) -> Served | None:
    return request.getfixturevalue("http_server") if transport == "http" else None


def _tag(name: str, transport: Transport, backend: str) -> str:
    return f"ts-{name}-{transport}-{backend}"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_typescript_client_cancels_running_calls(
    transport: Transport, record: Record, http: Served | None, anyio_backend: str
) -> None:
    tags = [_tag(f"cancel{i}", transport, anyio_backend) for i in range(4)]
    with anyio.fail_after(GUARD):
        async with ts_client(transport, record, anyio_backend, http) as client:
            await client.send(op="echo", text="before")
            assert (await client.wait_for(event="echo"))["text"] == "before"
            for tag in tags:
                await client.send(op="call", tag=tag)
            for tag in tags:
                await record.wait_for(event="body-started", tag=tag)
            for tag in tags:
                await client.send(op="abort", tag=tag)
            for tag in tags:
                settled = await client.wait_for(event="settled", tag=tag)
                assert settled["outcome"] == "aborted", settled
            published = [await record.wait_for(event="result", tag=tag) for tag in tags]
            await client.send(op="echo", text="after")
            assert (await client.wait_for(event="echo", text="after"))["text"] == "after"
    assert [p["code"] for p in published] == ["ABORTED"] * len(tags)
    for tag in tags:
        # Told (the signal aborted, with the 2025-era reason), awaited (the result was
        # published after the body returned), never torn down.
        assert [e["event"] for e in record.events(tag=tag)] == [
            "body-started",
            "body-saw-abort",
            "result",
        ]
        [saw] = record.events(event="body-saw-abort", tag=tag)
        assert saw["reason"] == "operation aborted: the MCP request was cancelled"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_typescript_cancel_that_overtakes_its_call_stops_it_before_dispatch(
    transport: Transport, record: Record, http: Served | None, anyio_backend: str
) -> None:
    tag = _tag("overtaken", transport, anyio_backend)
    with anyio.fail_after(GUARD):
        async with ts_client(transport, record, anyio_backend, http) as client:
            await client.send(op="overtake", tag=tag)
            settled = await client.wait_for(event="settled", tag=tag)
            published = await record.wait_for(event="result", tag=tag)
            await client.send(op="echo", text="after")
            assert (await client.wait_for(event="echo", text="after"))["text"] == "after"
    assert settled["outcome"] == "aborted"
    assert published["code"] == "ABORTED_BEFORE_DISPATCH"
    assert [e["event"] for e in record.events(tag=tag)] == ["result"]  # the body never ran
