"""The gateway's lean hop 2: a 2026-07-28 HTTP upstream called without the SDK's dispatcher.

client --hop 1--> gateway (mount_upstreams + create_server, in this process) --hop 2--> upstream

The upstream is a toolseam server process over streamable HTTP (uvicorn: asyncio in its own
process); the gateway runs on the test's backend and hop 1 is the SDK's ``Client`` over its
in-memory transport. Each test first replaces the upstream session's ``call_tool`` with one
that fails the test, so every call proves it went the lean way (``toolseam.mcp._lean``), and
checks what the SDK's path gives: the result's value and content, a remote failure's code,
progress and log messages relayed over the call's SSE stream, in order, and a cancellation
that reaches the upstream body, which is told and publishes ``ABORTED``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client import Client

from mcp_fixtures.registry import RECORD_ENV
from mcp_fixtures.support import (
    GUARD,
    ROOT,
    Record,
    first_error,
    http_server_command,
    serving,
)
from test_mcp_host import Peer, Served, _code, _text, progress_sink
from toolseam import ToolRegistry
from toolseam.mcp import McpToolDefinition, create_server, mount_upstreams
from toolseam.mcp._lean import lean_for

CAPABILITIES = ROOT / "tests" / "mcp_fixtures" / "capabilities.py"

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(core)?x?2\.:ResourceWarning",
)


@contextmanager
def _upstream(tmp_path: Path, target: str | None = None) -> Iterator[tuple[str, Record]]:
    record = Record(tmp_path / "upstream.jsonl")
    argv = http_server_command() if target is None else http_server_command(target)
    with serving(argv, tmp_path / "upstream.log", {RECORD_ENV: str(record.path)}) as served:
        yield served.url, record


async def _no_sdk_call(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the call went through the SDK's ClientSession.call_tool")


@asynccontextmanager
async def _gateway(
    url: str, gateway: Served, tool: str, peer: Peer | None = None
) -> AsyncIterator[ClientSession]:
    async with mount_upstreams(gateway.registry, {"up": url}):
        definition = gateway.registry.get(tool)
        assert isinstance(definition, McpToolDefinition)
        upstream = await definition._link.session()  # pyright: ignore[reportPrivateUsage]
        assert upstream.protocol_version == "2026-07-28"
        assert lean_for(upstream) is not None
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(upstream, "call_tool", _no_sdk_call)
            # Hop 1 is at 2026-07-28 too: its client opts in to the call's log messages.
            callbacks: dict[str, Any] = (
                {} if peer is None else {**peer.callbacks(), "log_level": "debug"}
            )
            server = create_server(gateway.registry)
            async with Client(server, cache=None, **callbacks) as client:
                yield client.session
    assert lean_for(upstream) is None  # forgotten with its connection: nothing holds it


@pytest.fixture
def gateway() -> Served:
    registry = ToolRegistry()
    served = Served(registry)
    registry.on_result(served.observe)
    return served


async def test_results_and_failures_come_back_as_through_the_sdk(
    tmp_path: Path, gateway: Served, anyio_backend: str
) -> None:
    with first_error(), _upstream(tmp_path) as (url, _):
        with anyio.fail_after(GUARD):
            async with _gateway(url, gateway, "up_echo") as session:
                echoed = await session.call_tool("up_echo", {"text": "héllo"})
                point = await session.call_tool("up_point", {"x": 1, "y": 2})
                counted = await session.call_tool("up_count", {"n": 3})
                late = await session.call_tool("up_deadline", {"tag": "late"})
    assert (echoed.is_error, _text(echoed)) == (False, "héllo")
    assert point.structured_content == {"x": 1, "y": 2}
    assert counted.meta is not None
    assert counted.meta["toolseam/value"] == [0, 1, 2]
    assert (late.is_error, _code(late)) == (True, "REMOTE_TOOL_ERROR")
    assert "(TOOL_TIMEOUT)" in _text(late)


async def test_progress_and_logs_cross_the_sse_answer_in_order(
    tmp_path: Path, gateway: Served, anyio_backend: str
) -> None:
    peer = Peer()
    seen, on_progress = progress_sink()
    with first_error(), _upstream(tmp_path, f"{CAPABILITIES}:registry") as (url, _):
        with anyio.fail_after(GUARD):
            async with _gateway(url, gateway, "up_steps", peer) as session:
                stepped = await session.call_tool(
                    "up_steps", {"n": 3}, progress_callback=on_progress
                )
    assert _text(stepped) == "done"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert peer.order == ["log step 1", "log step 2", "log step 3"]


async def test_a_cancel_closes_the_stream_and_the_upstream_body_is_told(
    tmp_path: Path, gateway: Served, anyio_backend: str
) -> None:
    with first_error(), _upstream(tmp_path) as (url, record):
        with anyio.fail_after(GUARD):
            async with (
                _gateway(url, gateway, "up_wait_for_abort") as session,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(session.call_tool, "up_wait_for_abort", {"tag": "lean"})
                await record.wait_for(event="body-started", tag="lean")
                tg.cancel_scope.cancel()
            ended = await record.wait_for(event="result", tag="lean")
            await gateway.any_published.wait()
    assert ended["code"] == "ABORTED"
    assert gateway.published == [("up_wait_for_abort", "ABORTED")]
