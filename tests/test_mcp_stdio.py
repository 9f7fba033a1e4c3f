"""``serve_stdio``'s transport (``toolseam.mcp._stdio``) on the raw wire.

A real server process (``python -m toolseam.mcp serve``, on the test's backend) on pipes,
as an MCP client starts one, driven line by line without the SDK in between: no worker
thread reads or writes the wire; a line may end in ``\\r\\n``, arrive in pieces or carry 1 MB;
an invalid UTF-8 byte is replaced, a line that is no JSON-RPC leaves the server serving;
a tool's prints never reach the wire (fd 1 is diverted to stderr while it serves). The
SDK's own transport serves whatever is not a pipe or a socket.
"""

from __future__ import annotations

import io
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import Process
from mcp.types.version import LATEST_HANDSHAKE_VERSION

from mcp_fixtures.support import GUARD, ROOT
from toolseam.mcp._stdio import _backed, _is_stream  # pyright: ignore[reportPrivateUsage]

TARGET = f"{ROOT / 'tests' / 'mcp_fixtures' / 'loud.py'}:registry"


class Wire:
    """The server's stdin and stdout, as bytes."""

    def __init__(self, process: Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.buffer = b""
        self.lines: list[bytes] = []  # every line the server wrote, as it came

    async def send_raw(self, data: bytes) -> None:
        await self.stdin.send(data)

    async def send(self, message: dict[str, Any], end: bytes = b"\n") -> None:
        await self.stdin.send(json.dumps({"jsonrpc": "2.0", **message}).encode() + end)

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            self.buffer += await self.stdout.receive()
        line, self.buffer = self.buffer.split(b"\n", 1)
        self.lines.append(line)
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def answer(self, request_id: int) -> dict[str, Any]:
        while True:
            message = await self.receive()
            if message.get("id") == request_id:
                return message

    async def call(self, request_id: int, name: str, arguments: dict[str, Any]) -> Any:
        await self.send(
            {
                "id": request_id,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            }
        )
        return (await self.answer(request_id))["result"]


def _text(result: dict[str, Any]) -> str:
    text: str = result["content"][0]["text"]
    return text


async def test_the_wire_is_served_without_threads_whatever_its_lines_look_like(
    anyio_backend: str,
) -> None:
    with anyio.fail_after(GUARD):
        async with await anyio.open_process(
            [sys.executable, "-m", "toolseam.mcp", "serve", TARGET, "--backend", anyio_backend],
            cwd=ROOT,
        ) as process:
            wire = Wire(process)
            initialize = {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": LATEST_HANDSHAKE_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
            await wire.send(initialize, end=b"\r\n")  # a CRLF line
            assert "result" in await wire.answer(1)
            await wire.send({"method": "notifications/initialized"})
            threads = await wire.call(2, "threads", {})
            # Torn and joined: one call in three writes, then two calls in one write.
            line = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "in pieces"}},
                }
            ).encode()
            for part in (line[:10], line[10:30], line[30:] + b"\n"):
                await wire.send_raw(part)
                await anyio.lowlevel.checkpoint()  # best effort: separate reads
            pieces = (await wire.answer(3))["result"]
            both = b"".join(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "method": "tools/call",
                        "params": {"name": "echo", "arguments": {"text": f"joined {request_id}"}},
                    }
                ).encode()
                + b"\n"
                for request_id in (4, 5)
            )
            await wire.send_raw(both)
            joined = [(await wire.answer(4))["result"], (await wire.answer(5))["result"]]
            big = await wire.call(6, "echo", {"text": "x" * 1_000_000})
            await wire.send_raw(b"this is not JSON\n")
            await wire.send_raw(
                b'{"jsonrpc":"2.0","id":7,"method":"tools/call",'
                b'"params":{"name":"echo","arguments":{"text":"a\xffb"}}}\n'
            )
            replaced = (await wire.answer(7))["result"]
            loud = await wire.call(8, "loud", {})
            after = await wire.call(9, "echo", {"text": "still clean"})
            await wire.stdin.aclose()
            with pytest.raises(anyio.EndOfStream):
                await wire.receive()
            assert await process.wait() == 0
    # Only the event loop's own thread: the SDK's transport would hold a worker thread.
    assert threads["_meta"]["toolseam/value"] == ["MainThread"]
    assert _text(pieces) == "in pieces"
    assert [_text(result) for result in joined] == ["joined 4", "joined 5"]
    assert _text(big) == "x" * 1_000_000
    assert _text(replaced) == "a\ufffdb"
    assert _text(loud) == "said"
    assert _text(after) == "still clean"
    # Every line on the wire was JSON-RPC: the tool's prints went elsewhere.
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in wire.lines)


def test_only_pipes_and_sockets_take_the_threadless_transport(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    left, right = socket.socketpair()
    regular = tmp_path / "file"
    regular.write_text("{}\n")
    with regular.open("rb") as file:
        try:
            assert _is_stream(read_end)
            assert _is_stream(write_end)
            assert _is_stream(left.fileno())
            assert not _is_stream(file.fileno())
        finally:
            os.close(read_end)
            os.close(write_end)
            left.close()
            right.close()
    assert not _is_stream(read_end)  # closed: not a stream at all
    # A replaced sys.stdin (a host's, a test runner's) is served by the SDK's transport.
    assert not _backed(io.StringIO(), 0)
