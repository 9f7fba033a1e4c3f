"""The gateway relays progress, logs, elicitation and sampling across both hops.

client A --hop 1--> gateway (mount_upstreams + create_server) --hop 2--> upstream

Over stdio (asyncio and trio): the upstream is a toolseam server process serving
``mcp_fixtures/capabilities.py`` (its results go to a record file), the gateway runs in this
process, and A is the SDK's client over its in-memory transport (both hops are real MCP).
Over streamable HTTP (asyncio only: uvicorn): both servers run in this process and A is a
2025-era ``ClientSession``; there, anything a server withdraws after answering a request
would be dropped with its stream, so the withdrawal tests matter most.

Hop 2 is made at MCP 2025-11-25 here (``_Upstream.mode``, which the gateway otherwise
leaves to negotiation): what these tests cross the hop with, a server's requests *during*
a call and their withdrawal, exists only in that revision. The 2026-07-28 hop 2, where an
upstream asks by answering ``InputRequiredResult``, is tested in
tests/test_mcp_gateway_revisions.py.
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_fixtures.capabilities import LEVELS, RECORD_ENV, make_registry
from mcp_fixtures.support import GUARD, ROOT, Record, first_error, server_command
from test_mcp_host import Peer, Served, _code, _text, progress_sink
from toolseam import ToolRegistry
from toolseam.mcp import create_server, mount_upstreams, serve_http
from toolseam.mcp._gateway import _Upstream

UPSTREAM = ROOT / "tests" / "mcp_fixtures" / "capabilities.py"

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(core)?x?2\.:ResourceWarning",
)


@pytest.fixture(autouse=True)
def handshake_upstreams(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_Upstream, "mode", "legacy")


@pytest.fixture
def gateway() -> Served:
    registry = ToolRegistry()
    served = Served(registry)
    registry.on_result(served.observe)
    return served


@asynccontextmanager
async def over_stdio(
    gateway: Served, peer: Peer, backend: str, record: Record
) -> AsyncIterator[ClientSession]:
    command = shlex.join(server_command(f"{UPSTREAM}:registry", backend))
    # The upstream process inherits the environment: it records its results there.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(RECORD_ENV, str(record.path))
        async with mount_upstreams(gateway.registry, {"up": command}):
            server = create_server(gateway.registry)
            async with Client(server, mode="legacy", cache=None, **peer.callbacks()) as client:
                yield client.session


@pytest.fixture
def record(tmp_path: Path) -> Record:
    return Record(tmp_path / "upstream.jsonl")


async def test_all_four_cross_both_hops(
    gateway: Served, record: Record, anyio_backend: str
) -> None:
    peer = Peer(answer=types.ElicitResult(action="accept", content={"name": "Ada"}))
    seen, on_progress = progress_sink()
    with first_error(), anyio.fail_after(GUARD):
        async with over_stdio(gateway, peer, anyio_backend, record) as session:
            stepped = await session.call_tool("up_steps", {"n": 3}, progress_callback=on_progress)
            asked = await session.call_tool("up_log_then_ask", {"message": "Who?"})
            sampled = await session.call_tool("up_ask_model", {"message": "Capital?"})
    assert _text(stepped) == "done"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert peer.order == [
        "log step 1",
        "log step 2",
        "log step 3",
        "log about to ask",
        "elicit Who?",
    ]
    assert _text(asked) == 'accepted {"name": "Ada"}'
    assert _text(sampled) == "stub: Paris"
    assert [p.system_prompt for p in peer.sampled] == ["be brief"]


async def test_the_level_client_a_set_filters_the_upstream_logs(
    gateway: Served, record: Record, anyio_backend: str
) -> None:
    peer = Peer()
    with first_error(), anyio.fail_after(GUARD):
        async with over_stdio(gateway, peer, anyio_backend, record) as session:
            level = types.SetLevelRequest(params=types.SetLevelRequestParams(level="error"))
            await session.send_request(level, types.EmptyResult)
            await session.call_tool("up_levels", {})
    assert [log.level for log in peer.logs] == list(LEVELS[4:])


async def test_client_a_aborting_withdraws_the_question_on_both_hops(
    gateway: Served, record: Record, anyio_backend: str
) -> None:
    peer = Peer()
    with first_error(), anyio.fail_after(GUARD):
        async with over_stdio(gateway, peer, anyio_backend, record) as session:
            async with anyio.create_task_group() as tg:
                tg.start_soon(session.call_tool, "up_ask", {"message": "hold"})
                await peer.pending.wait()
                tg.cancel_scope.cancel()  # hop 1: notifications/cancelled
            await peer.withdrawn.wait()  # the gateway withdrew its question to A
            upstream = await record.wait_for(event="result", name="ask")  # hop 2 stopped it
            await gateway.any_published.wait()
    assert upstream["code"] == "ABORTED"
    assert gateway.published == [("up_ask", "ABORTED")]


async def test_the_upstream_withdrawing_withdraws_the_question_at_client_a(
    gateway: Served, record: Record, anyio_backend: str
) -> None:
    peer = Peer()
    with first_error(), anyio.fail_after(GUARD):
        async with over_stdio(gateway, peer, anyio_backend, record) as session:
            result = await session.call_tool("up_ask_then_time_out", {"message": "hold"})
            await peer.withdrawn.wait()
    assert (result.is_error, _code(result)) == (True, "REMOTE_TOOL_ERROR")
    assert "(TOOL_TIMEOUT)" in _text(result)
    assert (await record.wait_for(event="result", name="ask_then_time_out"))["code"] == (
        "TOOL_TIMEOUT"
    )


# -- over streamable HTTP, both hops (asyncio only) ------------------------------------------


@asynccontextmanager
async def over_http(gateway: Served, upstream: Served, peer: Peer) -> AsyncIterator[ClientSession]:
    serve = functools.partial(serve_http, port=0, handle_signals=False)
    async with anyio.create_task_group() as servers:
        upstream_url = await servers.start(serve, upstream.registry)
        async with mount_upstreams(gateway.registry, {"up": upstream_url}):
            gateway_url = await servers.start(serve, gateway.registry)
            async with (
                streamable_http_client(gateway_url) as (read, write),
                ClientSession(read, write, **peer.callbacks()) as session,
            ):
                await session.initialize()
                yield session
        servers.cancel_scope.cancel()


@pytest.fixture
def upstream() -> Served:
    registry = make_registry()
    served = Served(registry)
    registry.on_result(served.observe)
    return served


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_all_four_cross_both_http_hops(
    gateway: Served, upstream: Served, anyio_backend: str
) -> None:
    peer = Peer(answer=types.ElicitResult(action="accept", content={"name": "Ada"}))
    seen, on_progress = progress_sink()
    with first_error(), anyio.fail_after(GUARD):
        async with over_http(gateway, upstream, peer) as session:
            stepped = await session.call_tool("up_steps", {"n": 2}, progress_callback=on_progress)
            asked = await session.call_tool("up_log_then_ask", {"message": "Who?"})
            sampled = await session.call_tool("up_ask_model", {"message": "Capital?"})
    assert seen == [(1, 2, "step 1"), (2, 2, "step 2")]
    assert peer.order == ["log step 1", "log step 2", "log about to ask", "elicit Who?"]
    assert (_text(stepped), _text(asked), _text(sampled)) == (
        "done",
        'accepted {"name": "Ada"}',
        "stub: Paris",
    )


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_abort_withdraws_the_question_on_both_http_hops(
    gateway: Served, upstream: Served, anyio_backend: str
) -> None:
    peer = Peer()
    with first_error(), anyio.fail_after(GUARD):
        async with over_http(gateway, upstream, peer) as session:
            async with anyio.create_task_group() as tg:
                tg.start_soon(session.call_tool, "up_ask", {"message": "hold"})
                await peer.pending.wait()
                tg.cancel_scope.cancel()
            await peer.withdrawn.wait()
            await upstream.any_published.wait()
            await gateway.any_published.wait()
    assert upstream.published == [("ask", "ABORTED")]
    assert gateway.published == [("up_ask", "ABORTED")]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_upstream_withdrawing_reaches_client_a_over_http(
    gateway: Served, upstream: Served, anyio_backend: str
) -> None:
    peer = Peer()
    with first_error(), anyio.fail_after(GUARD):
        async with over_http(gateway, upstream, peer) as session:
            result = await session.call_tool("up_ask_then_time_out", {"message": "hold"})
            await peer.withdrawn.wait()
    assert "(TOOL_TIMEOUT)" in _text(result)
    assert upstream.published == [("ask_then_time_out", "TOOL_TIMEOUT")]
