"""The gateway on every revision pair: a cancel at the gateway reaches the upstream body.

client --hop 1--> gateway (mount_upstreams + create_server, in this process) --hop 2--> upstream

Hop 1 is the SDK's ``Client`` on the gateway's server in this process: ``mode="legacy"``
(MCP 2025-11-25, JSON-RPC over the SDK's in-memory streams) or ``mode="auto"`` (MCP
2026-07-28, the SDK's direct per-request dispatch). Hop 2 is the gateway's own client to an
upstream process, which negotiates: 2026-07-28 with a server that answers
``server/discover``, 2025-11-25 with one that does not. Upstreams (tests/mcp_fixtures):
toolseam's server (``python -m toolseam.mcp serve``, both revisions), toolseam's server in
the SDK's handshake-only loop (2025-11-25 only), and the SDK's own ``MCPServer`` (a server
nobody here wrote) in both; over stdio on the test's backend, and over streamable HTTP
(their processes run asyncio: uvicorn; the gateway runs on the test's backend) for
toolseam's server and ``MCPServer``, one of them behind what a 2025-11-25 server answers a
2026 request (400).

Each test checks which revision each hop speaks, then cancels a call at hop 1 once the
upstream body has started, and reads what the upstream recorded: its body was told (a
toolseam body's signal aborted, then its ``ABORTED`` result; an ``MCPServer`` body's
handler cancelled) and the gateway published ``ABORTED``.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters, types
from mcp.client import Client

from mcp_fixtures.registry import RECORD_ENV
from mcp_fixtures.support import (
    GUARD,
    PATH_TARGET,
    ROOT,
    Record,
    first_error,
    http_server_command,
    server_command,
    serving,
)
from test_mcp_host import Peer, Served, _text
from toolseam import ToolRegistry
from toolseam.mcp import McpToolDefinition, create_server, mount_upstreams

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(core)?x?2\.:ResourceWarning",
)

UPSTREAMS = ROOT / "tests" / "mcp_fixtures" / "upstreams.py"
LEGACY, MODERN = "2025-11-25", "2026-07-28"


@dataclass(frozen=True)
class Upstream:
    """An upstream server: how to start it, the revision it speaks, what its body records."""

    kind: str
    revision: str  # what the gateway's client must negotiate with it
    http: bool
    stopped: str  # the event its body records when told to stop

    @property
    def toolseam(self) -> bool:
        return self.kind.startswith("toolseam")


STDIO = [
    Upstream("toolseam", MODERN, http=False, stopped="body-saw-abort"),
    Upstream("toolseam-legacy", LEGACY, http=False, stopped="body-saw-abort"),
    Upstream("sdk", MODERN, http=False, stopped="body-cancelled"),
    Upstream("sdk-legacy", LEGACY, http=False, stopped="body-cancelled"),
]
HTTP = [
    Upstream("toolseam-http", MODERN, http=True, stopped="body-saw-abort"),
    Upstream("sdk-http", MODERN, http=True, stopped="body-cancelled"),
    Upstream("sdk-http-legacy", LEGACY, http=True, stopped="body-cancelled"),
]


def _stdio_target(upstream: Upstream, backend: str, record: Record) -> StdioServerParameters:
    if upstream.kind == "toolseam":
        command, *args = server_command(PATH_TARGET, backend)
    else:
        command, args = sys.executable, [str(UPSTREAMS), upstream.kind, backend]
    return StdioServerParameters(
        command=command, args=args, env={RECORD_ENV: str(record.path)}, cwd=ROOT
    )


@contextmanager
def _http_target(upstream: Upstream, record: Record) -> Iterator[str]:
    if upstream.kind == "toolseam-http":
        argv = http_server_command()
    else:
        argv = [sys.executable, str(UPSTREAMS), upstream.kind]
    log = record.path.with_suffix(".log")
    with serving(argv, log, {RECORD_ENV: str(record.path)}) as served:
        yield served.url


@asynccontextmanager
async def gateway(
    upstream: Upstream,
    backend: str,
    record: Record,
    mode: str,
    peer: Peer | None = None,
    *,
    roots: bool = False,
) -> AsyncIterator[tuple[Client, Served]]:
    """The gateway in front of ``upstream``, and the SDK client connected to it in ``mode``."""
    callbacks = {} if peer is None else peer.callbacks(roots=roots)
    registry = ToolRegistry()
    served = Served(registry)
    registry.on_result(served.observe)
    with _http_target(upstream, record) if upstream.http else _nothing() as url:
        target = url if upstream.http else _stdio_target(upstream, backend, record)
        async with mount_upstreams(registry, {"up": target}):
            definition = registry.get("up_wait_for_abort")
            assert isinstance(definition, McpToolDefinition)
            session = await definition._link.session()  # pyright: ignore[reportPrivateUsage]
            assert session.protocol_version == upstream.revision  # hop 2 negotiated it
            server = create_server(registry)
            async with Client(server, mode=mode, cache=None, **callbacks) as client:
                assert client.protocol_version == (LEGACY if mode == "legacy" else MODERN)
                yield client, served


@contextmanager
def _nothing() -> Iterator[str]:
    yield ""


async def _cancel_at_the_gateway(
    upstream: Upstream, backend: str, record: Record, mode: str
) -> None:
    tag = f"{upstream.kind}-{mode}-{backend}"
    with first_error(), anyio.fail_after(GUARD):
        async with gateway(upstream, backend, record, mode) as (client, served):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "up_wait_for_abort", {"tag": tag})
                await record.wait_for(event="body-started", tag=tag)
                tg.cancel_scope.cancel()  # hop 1: the client cancels its request
            stopped = await record.wait_for(event=upstream.stopped, tag=tag)
            if upstream.toolseam:
                at_upstream = await record.wait_for(event="result", tag=tag)
                assert at_upstream["code"] == "ABORTED"
                assert stopped["reason"]  # told why, through its signal
            await served.any_published.wait()
    assert served.published == [("up_wait_for_abort", "ABORTED")]
    events = [e["event"] for e in record.events(tag=tag)]
    expected = ["body-started", upstream.stopped] + (["result"] if upstream.toolseam else [])
    assert events == expected


@pytest.fixture
def record(tmp_path: Path) -> Record:
    return Record(tmp_path / "upstream.jsonl")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("upstream", STDIO, ids=lambda u: u.kind)
async def test_a_cancel_reaches_a_stdio_upstream_body_on_every_revision_pair(
    upstream: Upstream, mode: str, record: Record, anyio_backend: str
) -> None:
    await _cancel_at_the_gateway(upstream, anyio_backend, record, mode)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("upstream", HTTP, ids=lambda u: u.kind)
async def test_a_cancel_reaches_an_http_upstream_body_on_every_revision_pair(
    upstream: Upstream, mode: str, record: Record, anyio_backend: str
) -> None:
    await _cancel_at_the_gateway(upstream, anyio_backend, record, mode)


SDK_ASKING = [u for u in [*STDIO, *HTTP] if u.kind.startswith("sdk")]
SDK_STDIO = [u for u in STDIO if u.kind.startswith("sdk")]


@pytest.mark.parametrize("upstream", SDK_ASKING, ids=lambda u: u.kind)
async def test_an_upstream_question_reaches_the_gateways_client_on_either_revision(
    upstream: Upstream, record: Record, anyio_backend: str
) -> None:
    """The SDK's server asks through its own model (``Resolve``): at 2026-07-28 an
    ``InputRequiredResult`` that the gateway's remote tool answers and retries with, at
    2025-11-25 a request during the call; either way the question reaches client A, asked
    once, and the answer reaches the upstream tool."""
    peer = Peer(answer=types.ElicitResult(action="accept", content={"name": "Ada"}))
    with first_error(), anyio.fail_after(GUARD):
        async with gateway(upstream, anyio_backend, record, "legacy", peer) as (client, served):
            result = await client.call_tool("up_greet", {})
    assert (result.is_error, _text(result)) == (False, "hello Ada")
    assert [params.message for params, _ in peer.asked] == ["Who are you?"]
    assert served.published == [("up_greet", None)]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("upstream", SDK_ASKING, ids=lambda u: u.kind)
async def test_an_upstream_asking_for_roots_gets_the_gateways_client_roots(
    upstream: Upstream, mode: str, record: Record, anyio_backend: str
) -> None:
    """``roots/list`` crosses both hops on every revision pair: the SDK's server asks
    (``Resolve(ListRoots)``: at 2026-07-28 an ``InputRequiredResult``, at 2025-11-25 a request
    during the call), the gateway's remote tool asks ``exec.roots()``, and the gateway's
    server asks client A in A's revision; A's roots reach the upstream tool, asked once."""
    peer = Peer()
    with first_error(), anyio.fail_after(GUARD):
        async with gateway(upstream, anyio_backend, record, mode, peer, roots=True) as (
            client,
            served,
        ):
            result = await client.call_tool("up_where", {})
    assert (result.is_error, _text(result)) == (False, "work=file:///srv/work")
    assert peer.order == ["roots"]
    assert served.published == [("up_where", None)]


async def test_an_upstream_asking_for_roots_of_a_client_without_them_fails_clearly(
    record: Record, anyio_backend: str
) -> None:
    """Client A declared no roots: the gateway's call ends ``CAPABILITY_UNAVAILABLE`` (hop 1
    at 2025-11-25), and the upstream is refused rather than given an empty list."""
    upstream = SDK_STDIO[0]
    with first_error(), anyio.fail_after(GUARD):
        async with gateway(upstream, anyio_backend, record, "legacy", Peer()) as (client, served):
            result = await client.call_tool("up_where", {})
    assert result.is_error
    assert served.published == [("up_where", "CAPABILITY_UNAVAILABLE")]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("upstream", SDK_STDIO, ids=lambda u: u.kind)
async def test_a_cancel_crosses_a_gateway_process_on_every_revision_pair(
    upstream: Upstream, mode: str, record: Record, anyio_backend: str
) -> None:
    """Both hops over real pipes: ``python -m toolseam.mcp gateway`` over stdio, its client
    in ``mode``, its upstream the SDK's ``MCPServer`` at either revision."""
    tag = f"process-{upstream.kind}-{mode}-{anyio_backend}"
    up = _stdio_target(upstream, anyio_backend, record)
    command = shlex.join([up.command, *up.args])
    argv = ["-m", "toolseam.mcp", "gateway", "--upstream", f"up={command}"]
    gateway_process = StdioServerParameters(
        command=sys.executable,
        args=[*argv, "--backend", anyio_backend],
        env={RECORD_ENV: str(record.path)},  # the gateway starts its upstream with its own
        cwd=ROOT,
    )
    with first_error(), anyio.fail_after(GUARD):
        async with Client(gateway_process, mode=mode, cache=None) as client:
            assert client.protocol_version == (LEGACY if mode == "legacy" else MODERN)
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "up_wait_for_abort", {"tag": tag})
                await record.wait_for(event="body-started", tag=tag)
                tg.cancel_scope.cancel()
            await record.wait_for(event=upstream.stopped, tag=tag)
            echoed = await client.call_tool("up_echo", {"text": "still up"})
    assert [e["event"] for e in record.events(tag=tag)] == ["body-started", upstream.stopped]
    assert (echoed.is_error, _text(echoed)) == (False, "still up")
