"""`serve_http` sends a small response in one write to its connection (issue 36: CPU per call).

uvicorn writes a response's head and its body with a write each; with ``TCP_NODELAY`` that
was two sends, two segments and two reads for the client, per call. The server's transport
(`_Coalescing`) holds a response's head until the write that follows it. The unit tests drive it
over a recording transport; the end-to-end test records the writes the server makes to the
accepted connection's real transport during a 2026-07-28 ``tools/call``.

asyncio only: `serve_http` runs on uvicorn, which is asyncio code, and `_Coalescing` is an
asyncio transport.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from mcp.client import Client

from mcp_fixtures.support import GUARD, echo_registry
from toolseam.mcp import serve_http
from toolseam.mcp._http import _Coalescing  # pyright: ignore[reportPrivateUsage]

pytestmark = pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn is asyncio code


class _Recording(asyncio.Transport):
    """A transport that records what is written to it and whether it was closed."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closing = False
        self.aborted = False
        self.eof = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.aborted = True
        self.closing = True

    def write_eof(self) -> None:
        self.eof = True

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 0


async def _next_turn() -> None:
    # The held writes go out from a `call_soon` made before this yields: FIFO, so they
    # have gone when this returns.
    await asyncio.sleep(0)


def _coalescing() -> tuple[_Coalescing, _Recording]:
    inner = _Recording()
    return _Coalescing(inner, asyncio.get_running_loop()), inner


HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


async def test_a_head_goes_out_with_the_write_that_follows_it() -> None:
    outer, inner = _coalescing()
    outer.write(HEAD)
    assert inner.writes == []
    assert outer.get_write_buffer_size() == len(HEAD)
    outer.write(b"")
    outer.write(bytearray(b"{}"))
    assert inner.writes == [HEAD + b"{}"]
    await _next_turn()
    assert inner.writes == [HEAD + b"{}"]


async def test_other_writes_go_straight_through_in_order() -> None:
    outer, inner = _coalescing()
    outer.write(b"event: message\r\n")
    outer.write(memoryview(b"data: {}\r\n\r\n"))
    assert inner.writes == [b"event: message\r\n", b"data: {}\r\n\r\n"]


async def test_a_head_alone_goes_out_at_the_next_turn() -> None:
    outer, inner = _coalescing()
    head = bytearray(HEAD)
    outer.write(head)
    head[:] = b"reused"  # the caller may reuse its buffer once `write` returns
    await _next_turn()
    assert inner.writes == [HEAD]
    outer.write(b"{}")
    assert inner.writes == [HEAD, b"{}"]


async def test_close_and_write_eof_send_a_held_head_first() -> None:
    outer, inner = _coalescing()
    outer.write(HEAD)
    outer.write_eof()
    assert (inner.writes, inner.eof) == ([HEAD], True)
    outer, inner = _coalescing()
    outer.write(HEAD)
    outer.close()
    assert (inner.writes, inner.closing) == ([HEAD], True)
    await _next_turn()
    assert inner.writes == [HEAD]


async def test_abort_and_a_lost_connection_drop_a_held_head() -> None:
    outer, inner = _coalescing()
    outer.write(HEAD)
    outer.abort()
    await _next_turn()
    assert (inner.writes, inner.aborted) == ([], True)
    outer, inner = _coalescing()
    outer.write(HEAD)
    inner.closing = True  # the connection was lost before the next turn
    await _next_turn()
    assert inner.writes == []
    assert outer.is_closing()


def _record_writes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Record every write to an asyncio socket transport (the accepted connections')."""
    from asyncio import selector_events

    writes: list[bytes] = []
    cls: Any = getattr(selector_events, "_SelectorSocketTransport")  # noqa: B009
    real: Callable[[Any, bytes], None] = cls.write

    def write(self: Any, data: bytes) -> None:
        writes.append(bytes(data))
        real(self, data)

    monkeypatch.setattr(cls, "write", write)
    return writes


async def test_a_2026_call_is_answered_in_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    writes = _record_writes(monkeypatch)
    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tg:
            url = await tg.start(
                functools.partial(serve_http, echo_registry(), port=0, handle_signals=False)
            )
            async with Client(url) as client:  # 2026-07-28: one POST, a JSON answer
                await client.call_tool("echo", {"text": "hi"})
                before = len(writes)
                result = await client.call_tool("echo", {"text": "again"})
                during = writes[before:]
            tg.cancel_scope.cancel()
    assert [block.model_dump()["text"] for block in result.content] == ["again"]
    # The server's writes during the second call; the client's own (its request) are
    # recorded too, and start with a method, not a status line.
    answers = [data for data in during if data.startswith(b"HTTP/1.1 ")]
    assert len(answers) == 1
    head, _, body = answers[0].partition(b"\r\n\r\n")
    fields = dict(line.lower().split(b": ", 1) for line in head.split(b"\r\n")[1:])
    assert fields[b"content-type"] == b"application/json"
    assert len(body) == int(fields[b"content-length"])
    assert json.loads(body)["result"]["content"] == [{"type": "text", "text": "again"}]
