"""The gateway's lean hop 2 over stdio: a 2026-07-28 call on the SDK's own dispatcher.

client --hop 1--> gateway (mount_upstreams + create_server, in this process) --hop 2--> upstream

The upstream is a toolseam server process over stdio, started by the gateway; hop 1 is the
SDK's ``Client`` over its in-memory transport. Each test first replaces the upstream
session's ``call_tool`` with one that fails the test, so every call proves it went the lean
way (``toolseam.mcp._lean.LeanSession``), and checks what the SDK's path gives: the result's
value and content, a remote failure's code, a protocol error, progress and log messages,
a cancellation that reaches the upstream body (``notifications/cancelled``: told, then
``ABORTED``), and an upstream that exits mid-call (``REMOTE_TOOL_ERROR``).
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client import Client
from mcp.types import INVALID_PARAMS

from mcp_fixtures.registry import RECORD_ENV
from mcp_fixtures.support import GUARD, PATH_TARGET, ROOT, Record, first_error, server_command
from test_mcp_host import Peer, Served, _code, _text, progress_sink
from toolseam import ToolRegistry
from toolseam.mcp import McpToolDefinition, create_server, mount_upstreams
from toolseam.mcp._lean import LeanSession, lean_for

CAPABILITIES = ROOT / "tests" / "mcp_fixtures" / "capabilities.py"


async def _no_sdk_call(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the call went through the SDK's ClientSession.call_tool")


def _upstream(record: Record, backend: str, target: str = PATH_TARGET) -> StdioServerParameters:
    command, *args = server_command(target, backend)
    return StdioServerParameters(
        command=command,
        args=args,
        env={**os.environ, RECORD_ENV: str(record.path)},
        cwd=ROOT,
    )


@asynccontextmanager
async def _gateway(
    upstream: StdioServerParameters, gateway: Served, tool: str, peer: Peer | None = None
) -> AsyncIterator[tuple[ClientSession, ClientSession]]:
    async with mount_upstreams(gateway.registry, {"up": upstream}):
        definition = gateway.registry.get(tool)
        assert isinstance(definition, McpToolDefinition)
        session = await definition._link.session()  # pyright: ignore[reportPrivateUsage]
        assert session.protocol_version == "2026-07-28"
        assert isinstance(lean_for(session), LeanSession)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(session, "call_tool", _no_sdk_call)
            callbacks: dict[str, Any] = (
                {} if peer is None else {**peer.callbacks(), "log_level": "debug"}
            )
            server = create_server(gateway.registry)
            async with Client(server, cache=None, **callbacks) as client:
                yield client.session, session


@pytest.fixture
def gateway() -> Served:
    registry = ToolRegistry()
    served = Served(registry)
    registry.on_result(served.observe)
    return served


async def test_results_and_failures_come_back_as_through_the_sdk(
    tmp_path: Path, gateway: Served, anyio_backend: str
) -> None:
    upstream = _upstream(Record(tmp_path / "up.jsonl"), anyio_backend)
    with first_error(), anyio.fail_after(GUARD):
        async with _gateway(upstream, gateway, "up_echo") as (session, _):
            echoed = await session.call_tool("up_echo", {"text": "héllo"})
            point = await session.call_tool("up_point", {"x": 1, "y": 2})
            counted = await session.call_tool("up_count", {"n": 3})
            late = await session.call_tool("up_deadline", {"tag": "late"})
            invalid = await session.call_tool("up_point", {"x": "one"})
    assert (echoed.is_error, _text(echoed)) == (False, "héllo")
    assert point.structured_content == {"x": 1, "y": 2}
    assert point.meta is not None
    assert point.meta["toolseam/additional_contexts"] == [{"note": "points are integers"}]
    assert counted.meta is not None
    assert counted.meta["toolseam/value"] == [0, 1, 2]
    assert (late.is_error, _code(late)) == (True, "REMOTE_TOOL_ERROR")
    assert "(TOOL_TIMEOUT)" in _text(late)
    assert (invalid.is_error, _code(invalid)) == (True, "REMOTE_TOOL_ERROR")


async def test_a_json_rpc_error_is_an_mcp_error(
    tmp_path: Path, gateway: Served, anyio_backend: str
) -> None:
    upstream = _upstream(Record(tmp_path / "up.jsonl"), anyio_backend)
    with first_error(), anyio.fail_after(GUARD):
        async with _gateway(upstream, gateway, "up_echo") as (session, upstream_session):
            lean = lean_for(upstream_session)
            assert isinstance(lean, LeanSession)
            # A request the server refuses (its `_meta` is not what MCP allows): its error.
            with pytest.raises(MCPError) as refused:
                await lean.call_tool("echo", {"text": "x"}, None, {"progressToken": [1]})
            echoed = await session.call_tool("up_echo", {"text": "still here"})
    assert refused.value.error.code == INVALID_PARAMS
    assert _text(echoed) == "still here"


async def test_progress_and_logs_reach_the_gateway_call(
    tmp_path: Path, gateway: Served, anyio_backend: str
) -> None:
    peer = Peer()
    seen, on_progress = progress_sink()
    upstream = _upstream(Record(tmp_path / "up.jsonl"), anyio_backend, f"{CAPABILITIES}:registry")
    with first_error(), anyio.fail_after(GUARD):
        async with _gateway(upstream, gateway, "up_steps", peer) as (session, _):
            stepped = await session.call_tool("up_steps", {"n": 3}, progress_callback=on_progress)
    assert _text(stepped) == "done"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert sorted(peer.order) == ["log step 1", "log step 2", "log step 3"]


async def test_a_cancel_is_told_to_the_upstream_body(
    tmp_path: Path, gateway: Served, anyio_backend: str
) -> None:
    record = Record(tmp_path / "up.jsonl")
    upstream = _upstream(record, anyio_backend)
    with first_error(), anyio.fail_after(GUARD):
        async with _gateway(upstream, gateway, "up_wait_for_abort") as (session, upstream_session):
            async with anyio.create_task_group() as tg:
                tg.start_soon(session.call_tool, "up_wait_for_abort", {"tag": "lean"})
                await record.wait_for(event="body-started", tag="lean")
                tg.cancel_scope.cancel()
            ended = await record.wait_for(event="result", tag="lean")
            await gateway.any_published.wait()
            dispatcher: Any = upstream_session._dispatcher  # pyright: ignore[reportPrivateUsage]
            assert dispatcher._pending == {}  # the cancelled request left the table
            echoed = await session.call_tool("up_echo", {"text": "next"})
    assert [e["event"] for e in record.events(tag="lean")] == [
        "body-started",
        "body-saw-abort",
        "result",
    ]
    assert ended["code"] == "ABORTED"
    assert gateway.published[0] == ("up_wait_for_abort", "ABORTED")
    assert _text(echoed) == "next"


async def test_an_upstream_that_exits_mid_call_fails_the_call(
    tmp_path: Path, gateway: Served, anyio_backend: str
) -> None:
    record = Record(tmp_path / "up.jsonl")
    upstream = _upstream(record, anyio_backend)
    outcome: list[Any] = []

    async def call(session: ClientSession) -> None:
        outcome.append(await session.call_tool("up_wait_for_abort", {"tag": "exit"}))

    with first_error(), anyio.fail_after(GUARD):
        async with (
            _gateway(upstream, gateway, "up_wait_for_abort") as (session, _),
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(call, session)
            await record.wait_for(event="body-started", tag="exit")
            started = await record.wait_for(event="started")
            os.kill(int(started["pid"]), signal.SIGKILL)
    assert len(outcome) == 1
    assert (outcome[0].is_error, _code(outcome[0])) == (True, "REMOTE_TOOL_ERROR")


async def test_an_sdk_without_the_parts_it_uses_keeps_the_sdks_own_path(
    tmp_path: Path, gateway: Served, anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lean path uses private parts of the SDK's dispatcher; a release that renames one
    # must leave the gateway working through `ClientSession.call_tool`, not break it.
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

    monkeypatch.delattr(JSONRPCDispatcher, "_cancel_outbound")
    upstream = _upstream(Record(tmp_path / "up.jsonl"), anyio_backend)
    with first_error(), anyio.fail_after(GUARD):
        async with mount_upstreams(gateway.registry, {"up": upstream}):
            definition = gateway.registry.get("up_echo")
            assert isinstance(definition, McpToolDefinition)
            session = await definition._link.session()  # pyright: ignore[reportPrivateUsage]
            async with Client(create_server(gateway.registry), cache=None) as client:
                echoed = await client.session.call_tool("up_echo", {"text": "via the SDK"})
    assert lean_for(session) is None
    assert (echoed.is_error, _text(echoed)) == (False, "via the SDK")
