"""The MCP server side of the capabilities over streamable HTTP.

asyncio only: `serve_http` runs on uvicorn, which is asyncio code. The server runs in this
process (so the bodies and the test share events), the clients are the SDK's own: a
2025-era ``ClientSession`` (the ``initialize`` handshake), and the 2026-era ``Client``.
Over HTTP, what a server sends about a request rides that request's own SSE stream, which
closes with the answer: these tests check nothing of a call is sent after it.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import ClientSession, types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_fixtures.capabilities import make_registry
from mcp_fixtures.support import GUARD, first_error
from test_mcp_host import Peer, Served, _text, progress_sink
from toolseam import ToolRunContext, define_tool
from toolseam.mcp import serve_http

pytestmark = pytest.mark.filterwarnings(
    # The SDK's HTTP client leaves async generators of cancelled streams to the garbage
    # collector (the class of encode/httpx#3686).
    r"ignore:Async generator 'http(core)?x?2\.:ResourceWarning",
)


@pytest.fixture
def anyio_backend() -> str:
    """asyncio only: uvicorn serves the registry."""
    return "asyncio"


@pytest.fixture
def served() -> Served:
    registry = make_registry()
    served = Served(registry)
    registry.on_result(served.observe)
    return served


@asynccontextmanager
async def serving(served: Served) -> AsyncIterator[str]:
    async with anyio.create_task_group() as tg:
        url = await tg.start(
            functools.partial(serve_http, served.registry, port=0, handle_signals=False)
        )
        yield url
        tg.cancel_scope.cancel()  # serve_http shuts down cleanly


@asynccontextmanager
async def session_2025(url: str, peer: Peer) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write, **peer.callbacks()) as session,
    ):
        await session.initialize()
        yield session


async def test_all_four_reach_a_2025_client(served: Served) -> None:
    peer = Peer(answer=types.ElicitResult(action="accept", content={"name": "Ada"}))
    seen, on_progress = progress_sink()
    with first_error(), anyio.fail_after(GUARD):
        async with serving(served) as url, session_2025(url, peer) as session:
            stepped = await session.call_tool("steps", {"n": 3}, progress_callback=on_progress)
            asked = await session.call_tool("log_then_ask", {"message": "who?"})
            sampled = await session.call_tool("ask_model", {"message": "Capital?"})
    assert _text(stepped) == "done"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert peer.order == [
        "log step 1",
        "log step 2",
        "log step 3",
        "log about to ask",
        "elicit who?",
    ]
    assert _text(asked) == 'accepted {"name": "Ada"}'
    assert _text(sampled) == "stub: Paris"


async def test_a_cancelled_call_withdraws_its_pending_elicitation(served: Served) -> None:
    peer = Peer()
    with first_error(), anyio.fail_after(GUARD):
        async with serving(served) as url, session_2025(url, peer) as session:
            async with anyio.create_task_group() as tg:
                tg.start_soon(session.call_tool, "ask", {"message": "hold"})
                await peer.pending.wait()
                tg.cancel_scope.cancel()  # a notifications/cancelled POST
            await peer.withdrawn.wait()
            await served.any_published.wait()
    assert served.published == [("ask", "ABORTED")]


async def test_a_request_pending_when_the_call_ends_is_withdrawn_on_its_stream(
    served: Served,
) -> None:
    """Withdrawn after the answer, it would find the call's stream closed (and be dropped)."""
    peer = Peer()
    handed: list[ToolRunContext] = []
    body_started, body_may_return = anyio.Event(), anyio.Event()
    answers: list[str] = []

    @define_tool(name="hands_out", description="")
    async def hands_out(args: dict[str, str], exec: ToolRunContext) -> str:
        handed.append(exec)
        body_started.set()
        exec.signal.add_listener(lambda _: body_may_return.set())  # a failing test ends too
        await body_may_return.wait()
        return "returned"

    served.registry.register(hands_out)

    async def ask_through(exec: ToolRunContext) -> None:
        form: dict[str, Any] = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
        answers.append(str(await exec.elicit("still there?", form)))

    with first_error(), anyio.fail_after(GUARD):
        async with serving(served) as url, session_2025(url, peer) as session:
            results: list[types.CallToolResult] = []
            async with anyio.create_task_group() as tg:

                async def run_call() -> None:
                    results.append(await session.call_tool("hands_out", {}))

                tg.start_soon(run_call)
                await body_started.wait()
                tg.start_soon(ask_through, handed[0])
                await peer.pending.wait()
                body_may_return.set()
            await peer.withdrawn.wait()
    assert _text(results[0]) == "returned"
    assert answers == ["cancelled"]


async def test_a_2026_client_gets_progress_and_opted_in_logs_and_is_asked_between_rounds(
    served: Served,
) -> None:
    peer = Peer(answer=types.ElicitResult(action="accept", content={"name": "Ada"}))
    seen, on_progress = progress_sink()
    with first_error(), anyio.fail_after(GUARD):
        async with (
            serving(served) as url,
            Client(url, cache=None, log_level="info", **peer.callbacks()) as client,
        ):
            assert client.session.protocol_version == "2026-07-28"
            stepped = await client.call_tool("steps", {"n": 2}, progress_callback=on_progress)
            asked = await client.call_tool("ask", {"message": "?"})
    assert _text(stepped) == "done"
    assert seen == [(1, 2, "step 1"), (2, 2, "step 2")]
    assert [log.data for log in peer.logs] == ["step 1", "step 2"]
    assert _text(asked) == 'accepted {"name": "Ada"}'
    assert [params.message for params, _ in peer.asked] == ["?"]
