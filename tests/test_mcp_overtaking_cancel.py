"""A ``notifications/cancelled`` that arrives before its call (issue 36: the overtaking cancel).

A 2025-era HTTP client sends a call and its cancellation as two POSTs; the cancellation can
reach the server first. The server remembers it for the session, and the call that then
arrives ends ``ABORTED_BEFORE_DISPATCH``, published to observers, its body never run and
its request never answered. On the raw wire, in process (`create_server` over memory
streams, the notification sent first, then the call), on asyncio and trio; the memory's
bounds are checked on `EarlyCancels` itself, with explicit times.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel.server import Server
from mcp.shared.message import SessionMessage
from typing_extensions import TypedDict

from mcp_fixtures.support import GUARD, first_error
from toolseam import ToolExecution, ToolRegistry, ToolResult, ToolRunContext, define_tool
from toolseam.mcp import create_server
from toolseam.mcp._overtaken import (  # pyright: ignore[reportPrivateUsage]
    EARLY_CANCEL_LIMIT,
    EARLY_CANCEL_WINDOW,
    EarlyCancels,
    request_key,
)


class TextArgs(TypedDict):
    text: str


class Served:
    """A registry whose bodies and observer say what happened."""

    def __init__(self) -> None:
        self.registry = ToolRegistry()
        self.events: list[str] = []

        @define_tool(name="echo", description="Echo the text.")
        async def echo(args: TextArgs, exec: ToolRunContext) -> str:
            self.events.append(f"body {exec.call_id}")
            return args["text"]

        def observe(exec: ToolExecution, result: ToolResult) -> None:
            info = result.error.info if result.is_error is True else None
            self.events.append(f"published {info.code if info else 'OK'} for {exec.call_id}")

        self.registry.register(echo)
        self.registry.on_result(observe)


class Wire(list[dict[str, Any]]):
    """The messages a server wrote; `answered` waits for the answer to a request."""

    def __init__(self) -> None:
        super().__init__()
        self._changed = anyio.Event()

    def append(self, message: dict[str, Any]) -> None:
        super().append(message)
        self._changed.set()
        self._changed = anyio.Event()

    async def answered(self, request_id: int) -> dict[str, Any]:
        while True:
            for message in self:
                if message.get("id") == request_id:
                    return message
            await self._changed.wait()


@asynccontextmanager
async def raw(server: Server[Any]) -> AsyncIterator[tuple[Any, Wire]]:
    """The server's input stream, and the wire: everything the server wrote, in order.

    Once the block ends (the input closed, the server finished) the wire is complete.
    """
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](64)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](64)
    wire = Wire()

    async def read_all() -> None:
        async with from_server:
            async for item in from_server:
                wire.append(item.message.model_dump(by_alias=True, mode="json", exclude_unset=True))

    async with anyio.create_task_group() as tg:
        options = server.create_initialization_options()
        tg.start_soon(server.run, server_reads, server_writes, options)
        tg.start_soon(read_all)
        async with to_server:  # closed at the end: the server finishes, then its output ends
            await _send(
                to_server,
                {
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "raw", "version": "0"},
                    },
                },
            )
            await _send(to_server, {"method": "notifications/initialized"})
            yield to_server, wire


async def _send(stream: Any, message: dict[str, Any]) -> None:
    parsed = types.jsonrpc_message_adapter.validate_python({"jsonrpc": "2.0", **message})
    await stream.send(SessionMessage(parsed))


def _cancel(request_id: int | str) -> dict[str, Any]:
    return {"method": "notifications/cancelled", "params": {"requestId": request_id}}


def _call(request_id: int | str, text: str) -> dict[str, Any]:
    return {
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": text}},
    }


async def test_a_cancel_that_overtakes_its_call_stops_it_before_dispatch() -> None:
    served = Served()
    with first_error(), anyio.fail_after(GUARD):
        async with raw(create_server(served.registry)) as (send, wire):
            await _send(send, _cancel(7))
            await _send(send, _call(7, "never"))
            await _send(send, _call(8, "after"))
            await wire.answered(8)
    # The whole transcript, once the server has finished: call 7 was never answered.
    assert [m.get("id") for m in wire] == [1, 8]
    assert wire[-1]["result"]["content"] == [{"type": "text", "text": "after"}]
    # The server handles requests concurrently: call 7's publication and call 8's events
    # may interleave in either order.
    assert sorted(served.events) == [
        "body 8",
        "published ABORTED_BEFORE_DISPATCH for 7",
        "published OK for 8",
    ]
    assert served.events.index("body 8") < served.events.index("published OK for 8")


async def test_an_overtaking_cancel_matches_a_string_id_and_the_same_number() -> None:
    """``"7"`` and ``7`` are one id, as the SDK correlates them."""
    served = Served()
    with first_error(), anyio.fail_after(GUARD):
        async with raw(create_server(served.registry)) as (send, wire):
            await _send(send, _cancel("7"))
            await _send(send, _call(7, "never"))
            await _send(send, _call(8, "after"))
            await wire.answered(8)
    assert [m.get("id") for m in wire] == [1, 8]
    assert "published ABORTED_BEFORE_DISPATCH for 7" in served.events
    assert "body 7" not in served.events


async def test_a_cancel_for_another_id_leaves_a_call_alone() -> None:
    served = Served()
    with first_error(), anyio.fail_after(GUARD):
        async with raw(create_server(served.registry)) as (send, wire):
            await _send(send, _cancel(9))
            await _send(send, _call(7, "runs"))
            await wire.answered(7)
    assert [m.get("id") for m in wire] == [1, 7]
    assert wire[-1]["result"]["content"] == [{"type": "text", "text": "runs"}]
    assert served.events == ["body 7", "published OK for 7"]


async def test_an_overtaking_cancel_is_used_once() -> None:
    """Taken by its call, it is forgotten: a (forbidden) reuse of the id runs."""
    served = Served()
    with first_error(), anyio.fail_after(GUARD):
        async with raw(create_server(served.registry)) as (send, wire):
            await _send(send, _cancel(7))
            await _send(send, _call(7, "never"))
            await _send(send, _call(7, "again"))
            await wire.answered(7)
    assert [m.get("id") for m in wire] == [1, 7]
    # The two requests are handled concurrently: one takes the cancel, the other runs, and
    # their events may interleave in either order.
    assert sorted(served.events) == [
        "body 7",
        "published ABORTED_BEFORE_DISPATCH for 7",
        "published OK for 7",
    ]
    assert served.events.index("body 7") < served.events.index("published OK for 7")


class TestEarlyCancels:
    def test_an_id_is_taken_within_the_window_only(self) -> None:
        early = EarlyCancels()
        early.remember(1, now=100.0)
        early.remember(2, now=100.0)
        assert early.take(1, now=100.0 + EARLY_CANCEL_WINDOW) is True
        assert early.take(1, now=100.0) is False  # taken once
        assert early.take(2, now=100.0 + EARLY_CANCEL_WINDOW + 0.001) is False
        assert len(early) == 0

    def test_expired_ids_are_dropped_when_one_is_added(self) -> None:
        early = EarlyCancels()
        for key in range(10):
            early.remember(key, now=0.0)
        early.remember("late", now=EARLY_CANCEL_WINDOW + 1)
        assert len(early) == 1

    def test_memory_is_bounded_and_the_oldest_goes_first(self) -> None:
        early = EarlyCancels()
        for key in range(EARLY_CANCEL_LIMIT * 4):
            early.remember(key, now=0.0)
        assert len(early) == EARLY_CANCEL_LIMIT
        assert early.take(0, now=0.0) is False
        assert early.take(EARLY_CANCEL_LIMIT * 4 - 1, now=0.0) is True

    def test_request_keys(self) -> None:
        assert [request_key(v) for v in (7, "7", "x", True, None, 1.5)] == [
            7,
            7,
            "x",
            None,
            None,
            None,
        ]
