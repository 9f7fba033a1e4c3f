"""The gateway's tasks: a client's task-augmented call crosses two hops.

client --hop 1 (tasks)--> gateway (mount_upstreams + create_server(tasks=...)) --hop 2--> upstream

Hop 1 is the SDK's ``Client`` at 2026-07-28 declaring ``io.modelcontextprotocol/tasks``
(toolseam's `TasksExtension`), on the gateway's server in this process; the task methods
are raw requests. Hop 2 is the gateway's own client to an upstream process: toolseam's
server with ``--task TOOL=required`` (hop 2 is a task too: the gateway's remote tool
follows it), toolseam's server without tasks at 2026-07-28 or 2025-11-25, and the SDK's
``MCPServer`` at either revision; over stdio on the test's backend, and toolseam's server
with and without tasks over streamable HTTP (uvicorn: asyncio; the gateway runs on the
test's backend).
The last test runs both hops over real pipes: ``python -m toolseam.mcp gateway --task``.

Orderings are decided by events (the upstream's record file, the gateway's published
results), never by sleeps; polling ``tasks/get`` only waits for a status the test caused.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import AsyncGenerator, Callable, Generator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters
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
from test_mcp_host import Peer, Served
from test_mcp_tasks import code, request, until
from toolseam import Next, PreDecision, ToolExecution, ToolRegistry
from toolseam.mcp import McpToolDefinition, TasksExtension, create_server, mount_upstreams

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(core)?x?2\.:ResourceWarning",
)

UPSTREAMS = ROOT / "tests" / "mcp_fixtures" / "upstreams.py"
LEGACY, MODERN = "2025-11-25", "2026-07-28"
# The upstream's own tasks: every tool these tests call runs there only as a task.
UPSTREAM_TASKS = [
    *("--task", "wait_for_abort=required"),
    *("--task", "ask_once=required"),
    *("--task", "step=required"),
]
# The gateway's tasks, for its client.
GATEWAY_TASKS = {
    "up_wait_for_abort": "required",
    "up_ask_once": "required",
    "up_greet": "required",
    "up_step": "required",
}
FINAL = ("completed", "failed", "cancelled")


@dataclass(frozen=True)
class Upstream:
    """An upstream server: how to start it, the revision it speaks, what its body records."""

    kind: str
    revision: str
    http: bool = False

    @property
    def toolseam(self) -> bool:
        return self.kind.startswith("toolseam")

    @property
    def tasks(self) -> bool:
        """Whether hop 2 is a task of the upstream's own."""
        return "tasks" in self.kind

    @property
    def stopped(self) -> str:
        return "body-saw-abort" if self.toolseam else "body-cancelled"

    @property
    def asking_tool(self) -> str:
        return "up_ask_once" if self.toolseam else "up_greet"


STDIO = [
    Upstream("toolseam-tasks", MODERN),
    Upstream("toolseam", MODERN),
    Upstream("toolseam-legacy", LEGACY),
    Upstream("sdk", MODERN),
    Upstream("sdk-legacy", LEGACY),
]
HTTP = [
    Upstream("toolseam-http", MODERN, http=True),
    Upstream("toolseam-tasks-http", MODERN, http=True),
]
# Where hop 2 is a task, a cancel that comes before the gateway has read the upstream's
# CreateTaskResult cancels the tools/call that creates it instead (a race the upstream
# loses once its answer is on the wire: docs/mcp.md). Those upstreams are cancelled once
# the gateway holds the upstream task's id, while it asks (`_cancel_while_the_upstream_task_asks`).
PLAIN_HOP_2 = [u for u in [*STDIO, *HTTP] if not u.tasks]


def _stdio_target(upstream: Upstream, backend: str, record: Record) -> StdioServerParameters:
    if upstream.kind in ("toolseam", "toolseam-tasks"):
        command, *args = server_command(PATH_TARGET, backend)
        if upstream.tasks:
            args += UPSTREAM_TASKS
    else:
        command, args = sys.executable, [str(UPSTREAMS), upstream.kind, backend]
    return StdioServerParameters(
        command=command, args=args, env={RECORD_ENV: str(record.path)}, cwd=ROOT
    )


@contextmanager
def _target(
    upstream: Upstream, backend: str, record: Record
) -> Generator[str | StdioServerParameters]:
    if not upstream.http:
        yield _stdio_target(upstream, backend, record)
        return
    argv = [*http_server_command(), *(UPSTREAM_TASKS if upstream.tasks else [])]
    with serving(argv, record.path.with_suffix(".log"), {RECORD_ENV: str(record.path)}) as up:
        yield up.url


@asynccontextmanager
async def gateway(
    upstream: Upstream,
    backend: str,
    record: Record,
    setup: Callable[[ToolRegistry], object] | None = None,
) -> AsyncGenerator[tuple[Client, Served]]:
    """The gateway (with tasks) in front of ``upstream``, and a client declaring tasks."""
    registry = ToolRegistry()
    served = Served(registry)
    registry.on_result(served.observe)
    if setup is not None:
        setup(registry)
    peer = Peer()  # declares elicitation; a task's questions travel on tasks/get instead
    with _target(upstream, backend, record) as target:
        async with mount_upstreams(registry, {"up": target}):
            definition = registry.get("up_wait_for_abort")
            assert isinstance(definition, McpToolDefinition)
            session = await definition._link.session()  # pyright: ignore[reportPrivateUsage]
            assert session.protocol_version == upstream.revision  # hop 2 negotiated it
            server = create_server(registry, tasks=GATEWAY_TASKS)  # type: ignore[arg-type]
            async with Client(
                server, cache=None, extensions=[TasksExtension()], **peer.callbacks()
            ) as client:
                assert client.protocol_version == MODERN
                yield client, served
    assert peer.asked == []


@pytest.fixture
def record(tmp_path: Path) -> Record:
    return Record(tmp_path / "upstream.jsonl")


async def _cancel_a_task_at_the_gateway(upstream: Upstream, backend: str, record: Record) -> None:
    tag = f"{upstream.kind}-{backend}"
    with first_error(), anyio.fail_after(GUARD):
        async with gateway(upstream, backend, record) as (client, served):
            created = await request(
                client, "tools/call", {"name": "up_wait_for_abort", "arguments": {"tag": tag}}
            )
            assert created["resultType"] == "task"
            task_id = created["taskId"]
            await record.wait_for(event="body-started", tag=tag)  # in the background
            running = await request(client, "tasks/get", {"taskId": task_id})
            assert running["status"] == "working"
            ack = await request(client, "tasks/cancel", {"taskId": task_id})
            assert "status" not in ack  # an acknowledgement, not a final status
            final = await until(client, task_id, *FINAL)
            assert (final["status"], code(final["result"])) == ("cancelled", "ABORTED")
            stopped = await record.wait_for(event=upstream.stopped, tag=tag)
            if upstream.toolseam:
                assert stopped["reason"]  # told why, through its signal
                at_upstream = await record.wait_for(event="result", tag=tag)
                assert at_upstream["code"] == "ABORTED"
    assert served.published == [("up_wait_for_abort", "ABORTED")]
    expected = ["body-started", upstream.stopped] + (["result"] if upstream.toolseam else [])
    assert [e["event"] for e in record.events(tag=tag)] == expected


@pytest.mark.parametrize("upstream", PLAIN_HOP_2, ids=lambda u: u.kind)
async def test_a_task_cancelled_at_the_gateway_reaches_the_upstream_body(
    upstream: Upstream, record: Record, anyio_backend: str
) -> None:
    await _cancel_a_task_at_the_gateway(upstream, anyio_backend, record)


async def test_a_task_cancelled_at_the_gateway_before_dispatch_sends_nothing_upstream(
    record: Record, anyio_backend: str
) -> None:
    gated = anyio.Event()

    async def hold(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        if exec.name == "up_wait_for_abort":
            gated.set()
            await exec.signal.wait()  # a stage that holds the call until it is cancelled
        return await next()

    upstream = STDIO[0]
    tag = f"gated-{anyio_backend}"
    with first_error(), anyio.fail_after(GUARD):
        async with gateway(
            upstream, anyio_backend, record, lambda registry: registry.on_pre_execute(hold)
        ) as (client, served):
            created = await request(
                client, "tools/call", {"name": "up_wait_for_abort", "arguments": {"tag": tag}}
            )
            await gated.wait()
            await request(client, "tasks/cancel", {"taskId": created["taskId"]})
            final = await until(client, created["taskId"], *FINAL)
            # The gateway is still connected: a later call reaches the upstream.
            quick = await request(
                client,
                "tools/call",
                {"name": "up_step", "arguments": {"tag": "quick", "hold": False}},
            )
            done = await until(client, quick["taskId"], *FINAL)
    assert (final["status"], code(final["result"])) == ("cancelled", "ABORTED_BEFORE_DISPATCH")
    assert done["status"] == "completed"
    assert served.published == [
        ("up_wait_for_abort", "ABORTED_BEFORE_DISPATCH"),
        ("up_step", None),
    ]
    assert record.events(tag=tag) == []  # nothing reached the upstream


@pytest.mark.parametrize("upstream", STDIO, ids=lambda u: u.kind)
async def test_an_upstream_question_surfaces_as_input_required_on_the_gateways_task(
    upstream: Upstream, record: Record, anyio_backend: str
) -> None:
    """Whichever way the upstream asks (its own task's ``input_required``, an
    ``InputRequiredResult``, or a request during the call), the gateway's task is
    ``input_required`` with the question, and ``tasks/update`` answers it."""
    tag = f"ask-{upstream.kind}-{anyio_backend}"
    tool = upstream.asking_tool
    with first_error(), anyio.fail_after(GUARD):
        async with gateway(upstream, anyio_backend, record) as (client, served):
            created = await request(client, "tools/call", {"name": tool, "arguments": {"tag": tag}})
            asking = await until(client, created["taskId"], "input_required", *FINAL)
            assert asking["status"] == "input_required"
            [(key, question)] = asking["inputRequests"].items()
            assert question["method"] == "elicitation/create"
            assert question["params"]["message"] in ("Whose name?", "Who are you?")
            answer = {"action": "accept", "content": {"name": "Ada"}}
            await request(
                client,
                "tasks/update",
                {"taskId": created["taskId"], "inputResponses": {key: answer}},
            )
            final = await until(client, created["taskId"], *FINAL)
    assert final["status"] == "completed"
    text = final["result"]["content"][0]["text"]
    assert text == ("for Ada" if upstream.toolseam else "hello Ada")
    assert served.published == [(tool, None)]
    if upstream.toolseam:  # its side effect before the question ran once
        assert len(record.events(event="side_effect", tag=tag)) == 1


async def _cancel_while_the_upstream_task_asks(client: Client, record: Record, tag: str) -> None:
    """Cancel the gateway's task once hop 2's task asked: the gateway then holds the
    upstream task's id, so its final status waits for the upstream's."""
    created = await request(
        client, "tools/call", {"name": "up_ask_once", "arguments": {"tag": tag}}
    )
    assert created["resultType"] == "task"
    asking = await until(client, created["taskId"], "input_required", *FINAL)
    assert asking["status"] == "input_required"
    await request(client, "tasks/cancel", {"taskId": created["taskId"]})
    final = await until(client, created["taskId"], *FINAL)
    # Final at the gateway only once the upstream's own task was: its body had been awaited
    # and had published ABORTED before the gateway's task said so.
    assert [(e["event"], e.get("code")) for e in record.events(tag=tag)] == [
        ("side_effect", None),
        ("result", "ABORTED"),
    ]
    assert (final["status"], code(final["result"])) == ("cancelled", "ABORTED")


@pytest.mark.parametrize("upstream", [u for u in [*STDIO, *HTTP] if u.tasks], ids=lambda u: u.kind)
async def test_a_task_cancelled_at_the_gateway_is_final_after_the_upstream_task(
    upstream: Upstream, record: Record, anyio_backend: str
) -> None:
    with first_error(), anyio.fail_after(GUARD):
        async with gateway(upstream, anyio_backend, record) as (client, served):
            await _cancel_while_the_upstream_task_asks(client, record, f"{upstream.kind}-ask")
    assert served.published == [("up_ask_once", "ABORTED")]


async def test_a_task_cancelled_at_a_gateway_process_reaches_the_upstream_task(
    record: Record, anyio_backend: str
) -> None:
    """Both hops over real pipes: ``python -m toolseam.mcp gateway --task``, its upstream
    toolseam's server with ``--task`` (hop 2 a task too)."""
    up = _stdio_target(STDIO[0], anyio_backend, record)
    command = shlex.join([up.command, *up.args])
    argv = ["-m", "toolseam.mcp", "gateway", "--upstream", f"up={command}"]
    gateway_process = StdioServerParameters(
        command=sys.executable,
        args=[*argv, "--task", "up_ask_once", "--backend", anyio_backend],
        env={RECORD_ENV: str(record.path)},
        cwd=ROOT,
    )
    peer = Peer()  # declares elicitation; the question travels on tasks/get
    with first_error(), anyio.fail_after(GUARD):
        async with Client(
            gateway_process, cache=None, extensions=[TasksExtension()], **peer.callbacks()
        ) as client:
            assert client.protocol_version == MODERN
            await _cancel_while_the_upstream_task_asks(client, record, f"process-{anyio_backend}")
    assert peer.asked == []
