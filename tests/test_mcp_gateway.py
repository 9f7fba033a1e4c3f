"""The gateway: two upstream servers served as one, and cancellation through two hops.

Upstream ``a`` is a toolseam server over streamable HTTP (its own process, asyncio: uvicorn
serves it); upstream ``b`` is a toolseam server over stdio that the gateway starts. The
gateway (``python -m toolseam.mcp gateway --policy ...``) serves both over stdio (on the
client's backend, trio included) or over HTTP (asyncio). The clients are the SDK's own
``Client`` on both backends. Each server process appends what it saw to a record file:
``a`` and ``b`` their bodies and results, the gateway (through its policy) its results.

Shared processes serve the tests that share them (each with its own tag); the tests that
kill, restart or count start their own.
"""

from __future__ import annotations

import os
import random
import runpy
import shlex
import signal
import sys
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.lowlevel
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client, types
from mcp.client import Client
from mcp.types import INVALID_REQUEST

from mcp_fixtures.policy import GATEWAY_RECORD_ENV
from mcp_fixtures.registry import RECORD_ENV
from mcp_fixtures.registry import registry as fixture_registry
from mcp_fixtures.support import (
    FIXTURE,
    GUARD,
    PATH_TARGET,
    ROOT,
    Record,
    Served,
    exited,
    http_server_command,
    reap,
    server_command,
    serving,
)
from toolseam.mcp.__main__ import main
from toolseam.mcp._gateway import _Upstream

pytestmark = pytest.mark.filterwarnings(
    # On trio, the SDK's HTTP client leaves async generators of cancelled streams to the
    # garbage collector, and trio warns about each (the class of encode/httpx#3686).
    r"ignore:Async generator 'http(core)?x?2\.:ResourceWarning",
)

POLICY = f"{FIXTURE.with_name('policy.py')}:policy"


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Module-scoped, so the shared processes serve both backends' tests."""
    return str(request.param)


def gateway_command(a_url: str, backend: str, *, http: bool) -> list[str]:
    b = shlex.join(server_command(PATH_TARGET, backend))
    argv = [sys.executable, "-m", "toolseam.mcp", "gateway", "--upstream", f"a={a_url}"]
    argv += ["--upstream", f"b={b}", "--policy", POLICY, "--backend", backend]
    return [*argv, "--http", "127.0.0.1:0"] if http else argv


@dataclass
class Deployment:
    """A gateway with its two upstreams, and their records."""

    target: str | StdioServerParameters  # how a client reaches the gateway
    a: Record
    b: Record
    gateway: Record

    def upstream(self, name: str) -> Record:
        return self.a if name == "a" else self.b


def _records(directory: Path) -> tuple[Record, Record]:
    directory.mkdir(parents=True, exist_ok=True)
    return Record(directory / "b.jsonl"), Record(directory / "gateway.jsonl")


def _env(b: Record, gateway: Record) -> dict[str, str]:
    # The gateway starts b with its own environment: b records into b.jsonl.
    return {RECORD_ENV: str(b.path), GATEWAY_RECORD_ENV: str(gateway.path)}


def stdio_gateway(a_url: str, backend: str, b: Record, gateway: Record) -> StdioServerParameters:
    command, *args = gateway_command(a_url, backend, http=False)
    return StdioServerParameters(command=command, args=args, env=_env(b, gateway), cwd=ROOT)


@asynccontextmanager
async def connect(target: str | StdioServerParameters) -> AsyncGenerator[ClientSession]:
    transport = target if isinstance(target, str) else stdio_client(target)
    async with Client(transport, cache=None) as client:
        yield client.session


def _text(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def _code(result: types.CallToolResult) -> str | None:
    code = (result.meta or {}).get("toolseam/code")
    return code if isinstance(code, str) else None


# -- shared processes ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def a_record(tmp_path_factory: pytest.TempPathFactory) -> Record:
    return Record(tmp_path_factory.mktemp("gateway-a") / "a.jsonl")


@pytest.fixture(scope="module")
def upstream_a(a_record: Record) -> Iterator[Served]:
    log = a_record.path.with_name("a.log")
    with serving(http_server_command(), log, {RECORD_ENV: str(a_record.path)}) as served:
        yield served


@pytest.fixture(scope="module")
def http_gateway(
    upstream_a: Served, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Served, Record, Record]]:
    b, gateway = _records(tmp_path_factory.mktemp("gateway-http"))
    argv = gateway_command(upstream_a.url, "asyncio", http=True)
    with serving(argv, gateway.path.with_name("gateway.log"), _env(b, gateway)) as served:
        yield served, b, gateway


@pytest.fixture(scope="module", params=["stdio", "http"])
def deployment(
    request: pytest.FixtureRequest,
    anyio_backend: str,
    upstream_a: Served,
    a_record: Record,
    tmp_path_factory: pytest.TempPathFactory,
) -> Deployment:
    if request.param == "http":
        served, b, gateway = request.getfixturevalue("http_gateway")
        return Deployment(served.url, a_record, b, gateway)
    b, gateway = _records(tmp_path_factory.mktemp(f"gateway-stdio-{anyio_backend}"))
    return Deployment(
        stdio_gateway(upstream_a.url, anyio_backend, b, gateway), a_record, b, gateway
    )


@pytest.fixture(scope="module")
async def session(deployment: Deployment) -> AsyncGenerator[ClientSession]:
    async with connect(deployment.target) as s:
        yield s


@pytest.fixture
def tag(request: pytest.FixtureRequest) -> str:
    return request.node.name  # unique per test, parameters included


async def test_tools_are_listed_under_each_upstreams_prefix(session: ClientSession) -> None:
    with anyio.fail_after(GUARD):
        listed = await session.list_tools()
    expected = [
        {"name": f"{prefix}_{s.name}", "description": s.description, "inputSchema": s.parameters}
        for prefix in "ab"
        for s in fixture_registry.schemas()
    ]
    assert [
        {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
        for t in listed.tools
    ] == expected


async def test_calls_go_through_to_each_upstream(
    session: ClientSession, deployment: Deployment, tag: str
) -> None:
    with anyio.fail_after(GUARD):
        echoed = await session.call_tool("a_echo", {"text": "via a"})
        point = await session.call_tool("b_point", {"x": 1, "y": 2})
        numbers = await session.call_tool("b_count", {"n": 2})
        stepped = await session.call_tool("a_step", {"tag": tag, "hold": False})
        await deployment.gateway.wait_for(event="result", tag=tag)
    assert (echoed.is_error, _text(echoed)) == (False, ["via a"])
    assert (point.is_error, point.structured_content) == (False, {"x": 1, "y": 2})
    assert point.meta is not None
    assert point.meta["toolseam/additional_contexts"] == [{"note": "points are integers"}]
    assert numbers.meta is not None
    assert numbers.meta["toolseam/value"] == [0, 1]  # exact across both hops
    assert _text(stepped) == [tag]
    assert [e["code"] for e in deployment.a.events(event="result", tag=tag)] == [None]
    assert deployment.gateway.events(event="result", tag=tag) == [
        {"event": "result", "name": "a_step", "tag": tag, "code": None}
    ]


@pytest.mark.parametrize("upstream", ["a", "b"])
async def test_a_cancellation_at_the_gateway_reaches_the_upstream_body(
    session: ClientSession, deployment: Deployment, upstream: str, tag: str
) -> None:
    record = deployment.upstream(upstream)
    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.call_tool, f"{upstream}_wait_for_abort", {"tag": tag})
            await record.wait_for(event="body-started", tag=tag)
            tg.cancel_scope.cancel()  # hop 1: the client cancels its request at the gateway
        at_upstream = await record.wait_for(event="result", tag=tag)
        at_gateway = await deployment.gateway.wait_for(event="result", tag=tag)
    # hop 2: the gateway's remote tool cancelled its own request; the upstream body saw it.
    assert [e["event"] for e in record.events(tag=tag)] == [
        "body-started",
        "body-saw-abort",
        "result",
    ]
    assert (at_upstream["code"], at_gateway["code"]) == ("ABORTED", "ABORTED")


async def test_the_policy_applies_to_every_upstream(
    session: ClientSession, deployment: Deployment, tag: str
) -> None:
    with anyio.fail_after(GUARD):
        denied = [await session.call_tool(f"{up}_crash", {"tag": tag}) for up in "ab"]
        await deployment.gateway.wait_for(event="result", name="b_crash", tag=tag)
    assert [(d.is_error, _text(d)) for d in denied] == [
        (True, ["Error: tool call denied: crashing an upstream is not allowed"])
    ] * 2
    assert deployment.a.events(event="crashing", tag=tag) == []
    assert deployment.b.events(event="crashing", tag=tag) == []


# -- upstreams that go away --------------------------------------------------------------------


@pytest.mark.parametrize("victim", ["a", "b"])
async def test_an_upstream_killed_mid_session_fails_only_its_own_calls(
    tmp_path: Path, anyio_backend: str, victim: str
) -> None:
    a = Record(tmp_path / "a.jsonl")
    b, gateway = _records(tmp_path)
    other = "b" if victim == "a" else "a"
    results: list[types.CallToolResult] = []
    with serving(http_server_command(), tmp_path / "a.log", {RECORD_ENV: str(a.path)}) as served:
        target = stdio_gateway(served.url, anyio_backend, b, gateway)
        with anyio.fail_after(GUARD):
            async with connect(target) as session:

                async def call() -> None:
                    results.append(
                        await session.call_tool(f"{victim}_wait_for_abort", {"tag": "k"})
                    )

                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    await (a if victim == "a" else b).wait_for(event="body-started", tag="k")
                    if victim == "a":
                        served.process.kill()
                    else:
                        os.kill(b.events(event="started")[0]["pid"], signal.SIGKILL)
                after = await session.call_tool(f"{victim}_echo", {"text": "anyone?"})
                alive = await session.call_tool(f"{other}_echo", {"text": "still here"})
    [in_flight] = results
    assert (in_flight.is_error, _code(in_flight)) == (True, "REMOTE_TOOL_ERROR")
    assert _text(in_flight)[0].startswith('Error: remote tool "wait_for_abort" failed: ')
    assert (after.is_error, _code(after)) == (True, "REMOTE_TOOL_ERROR")
    assert _text(after)[0].startswith('Error: remote tool "echo" failed: ')
    assert (alive.is_error, _text(alive)) == (False, ["still here"])
    codes = [(e["name"], e["code"]) for e in gateway.events(event="result")]
    assert codes == [
        (f"{victim}_wait_for_abort", "REMOTE_TOOL_ERROR"),
        (f"{victim}_echo", "REMOTE_TOOL_ERROR"),
        (f"{other}_echo", None),
    ]


async def test_an_http_upstream_that_comes_back_is_reconnected(
    tmp_path: Path, anyio_backend: str
) -> None:
    a = Record(tmp_path / "a.jsonl")
    b, gateway = _records(tmp_path)
    failures: list[str | None] = []
    with serving(http_server_command(), tmp_path / "a.log", {RECORD_ENV: str(a.path)}) as first:
        url, port = first.url, first.port
        target = stdio_gateway(url, anyio_backend, b, gateway)
        # One guard over three process starts (the gateway, b, a again) and a shutdown.
        with anyio.fail_after(3 * GUARD):
            async with connect(target) as session:
                before = await session.call_tool("a_echo", {"text": "before"})
                assert reap(first.process) == 0  # a stops cleanly (SIGTERM)
                gone = await session.call_tool("a_echo", {"text": "gone"})
                again = http_server_command(address=f"127.0.0.1:{port}")
                with serving(again, tmp_path / "a2.log", {RECORD_ENV: str(a.path)}):
                    # The gateway reconnects on a call once its backoff has passed; until
                    # then calls fail at once. Poll: the wait is bounded by the guard.
                    while (back := await session.call_tool("a_echo", {"text": "back"})).is_error:
                        failures.append(_code(back))
                        await anyio.sleep(0.1)
    assert _text(before) == ["before"]
    assert (gone.is_error, _code(gone)) == (True, "REMOTE_TOOL_ERROR")
    assert set(failures) <= {"REMOTE_TOOL_ERROR"}
    assert _text(back) == ["back"]
    assert [e["event"] for e in a.events(event="started")] == ["started", "started"]


# -- load ----------------------------------------------------------------------------------------


@dataclass
class Plan:
    tag: str
    upstream: str
    cancel: str | None  # None, "early" (after a few checkpoints), "late" (body running)
    checkpoints: int


async def _watch_started(records: list[Record], started: dict[str, anyio.Event]) -> None:
    """Set each tag's event once an upstream recorded its body starting."""
    while True:
        for record in records:
            for event in record.events(event="body-started"):
                if event["tag"] in started:
                    started[event["tag"]].set()
        await anyio.sleep(0.01)


def _settled(records: list[Record]) -> bool:
    """Every body an upstream started has published its one result."""
    for record in records:
        started = {e["tag"] for e in record.events(event="body-started")}
        done = {e["tag"] for e in record.events(event="result")}
        if not started <= done:
            return False
    return True


async def test_a_hundred_concurrent_calls_with_random_cancellations_lose_no_result(
    tmp_path: Path, anyio_backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """asyncio: through an HTTP gateway; trio: through a stdio gateway running on trio."""
    rng = random.Random(20)
    plans = [
        Plan(
            tag=f"load-{i}",
            upstream="ab"[i % 2],
            cancel=rng.choice(["early", "late"]) if rng.random() < 0.4 else None,
            checkpoints=rng.randrange(0, 2000),
        )
        for i in range(100)
    ]
    a = Record(tmp_path / "a.jsonl")
    b, gateway = _records(tmp_path)
    answers: dict[str, types.CallToolResult] = {}
    started = {p.tag: anyio.Event() for p in plans}

    async def one(session: ClientSession, plan: Plan) -> None:
        arguments: dict[str, Any] = {"tag": plan.tag, "hold": plan.cancel is not None}
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                answers[plan.tag] = await session.call_tool(f"{plan.upstream}_step", arguments)

            tg.start_soon(call)
            if plan.cancel == "late":
                await started[plan.tag].wait()
            elif plan.cancel == "early":
                for _ in range(plan.checkpoints):
                    await anyio.lowlevel.checkpoint()
            if plan.cancel is not None:
                tg.cancel_scope.cancel()

    with serving(http_server_command(), tmp_path / "a.log", {RECORD_ENV: str(a.path)}) as up:
        gateway_log = tmp_path / "gateway.log"
        if anyio_backend == "asyncio":
            argv = gateway_command(up.url, anyio_backend, http=True)
            with serving(argv, gateway_log, _env(b, gateway)) as front:
                with anyio.fail_after(GUARD * 2):
                    async with connect(front.url) as session, anyio.create_task_group() as tg:
                        tg.start_soon(_watch_started, [a, b], started)
                        async with anyio.create_task_group() as calls:
                            for plan in plans:
                                calls.start_soon(one, session, plan)
                        while not _settled([a, b]):  # noqa: ASYNC110 - other processes
                            await anyio.sleep(0.01)
                        tg.cancel_scope.cancel()
                    front.process.send_signal(signal.SIGTERM)
                    assert await exited(front.process) == 0
        else:
            with anyio.fail_after(GUARD * 2):
                target = stdio_gateway(up.url, anyio_backend, b, gateway)
                async with connect(target) as session, anyio.create_task_group() as tg:
                    tg.start_soon(_watch_started, [a, b], started)
                    async with anyio.create_task_group() as calls:
                        for plan in plans:
                            calls.start_soon(one, session, plan)
                    while not _settled([a, b]):  # noqa: ASYNC110 - other processes
                        await anyio.sleep(0.01)
                    tg.cancel_scope.cancel()
        up.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(GUARD):
            assert await exited(up.process) == 0
    # Every process has exited: the records are complete.
    at_gateway = {p.tag: [e["code"] for e in gateway.events(tag=p.tag)] for p in plans}
    upstream_records = {"a": a, "b": b}
    at_upstream = {
        p.tag: [e["code"] for e in upstream_records[p.upstream].events(event="result", tag=p.tag)]
        for p in plans
    }
    aborted = {"ABORTED", "ABORTED_BEFORE_DISPATCH"}
    for plan in plans:
        gateway_codes, upstream_codes = at_gateway[plan.tag], at_upstream[plan.tag]
        ran = upstream_records[plan.upstream].events(event="body-started", tag=plan.tag)
        assert len(gateway_codes) <= 1, plan
        assert len(upstream_codes) <= 1, plan
        assert len(upstream_codes) == len(ran), plan  # every started body published
        if upstream_codes:  # whatever reached an upstream was published by the gateway too
            assert len(gateway_codes) == 1, plan
        if plan.cancel is None:
            assert _text(answers[plan.tag]) == [plan.tag]
            assert gateway_codes == upstream_codes == [None], plan
        else:
            assert plan.tag not in answers, plan
            assert set(gateway_codes) <= aborted, plan
            assert set(upstream_codes) <= aborted, plan
        if plan.cancel == "late":
            assert gateway_codes == upstream_codes == ["ABORTED"], plan
    cancelled = [p for p in plans if p.cancel]
    early = [at_gateway[p.tag] for p in cancelled if p.cancel == "early"]
    print(
        f"{anyio_backend}: 100 calls, {len(cancelled)} cancelled "
        f"({sum(p.cancel == 'late' for p in cancelled)} once running upstream, "
        f"{len(early)} early: {early.count([])} never reached the gateway, "
        f"{early.count(['ABORTED_BEFORE_DISPATCH'])} ABORTED_BEFORE_DISPATCH and "
        f"{early.count(['ABORTED'])} ABORTED there); "
        f"results published: gateway {sum(map(len, at_gateway.values()))}, "
        f"upstreams {sum(map(len, at_upstream.values()))} "
        f"(a {len(a.events(event='result'))}, b {len(b.events(event='result'))})"
    )
    with capsys.disabled():
        print(capsys.readouterr().out, end="")


# -- command line ------------------------------------------------------------------------------


def test_an_unreachable_upstream_stops_the_gateway_with_a_clear_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "http://127.0.0.1:9/mcp"  # the discard port: nothing listens
    assert main(["gateway", "--upstream", f"gone={url}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f'python -m toolseam.mcp gateway: upstream "gone" ({url}): ')


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--upstream", "x=http://h", "--upstream", "x=http://i"], "every --upstream needs"),
        (["--upstream", "x=y", "--policy", "mcp_fixtures.policy:GATEWAY_RECORD_ENV"], "neither"),
        (["--upstream", "x=y", "--http", "0", "--backend", "trio"], "asyncio only"),
        (["--upstream", "x y=http://h"], "upstream name must be letters, digits"),
    ],
)
def test_bad_gateway_arguments_are_refused(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gateway", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m toolseam.mcp gateway: error: ")
    assert message in err


def test_an_upstream_needs_a_name_and_a_target(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["gateway", "--upstream", "x"])
    assert exit.value.code == 2
    assert "expected NAME=URL_OR_COMMAND, got 'x'" in capsys.readouterr().err


# -- the docs example ----------------------------------------------------------------------------


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # it serves an upstream with uvicorn
async def test_the_docs_example_gateway(capsys: pytest.CaptureFixture[str]) -> None:
    example = ROOT / "docs" / "examples" / "mcp_gateway.py"
    source = example.read_text(encoding="utf-8")
    promised = [
        line.removeprefix("# -> ") for line in source.splitlines() if line.startswith("# -> ")
    ]
    main = runpy.run_path(str(example), run_name="example")["main"]
    with anyio.fail_after(GUARD):
        await main()
    assert capsys.readouterr().out.splitlines() == promised
    assert len(promised) == 7


# -- the reconnect policy's transitions --------------------------------------------------------


async def test_a_forgotten_session_reconnects_on_the_next_call_without_backoff() -> None:
    """A 2025-era server that restarted answers 404 for the old session (no real one here)."""
    upstream = _Upstream("a", "http://127.0.0.1:9/mcp")
    old, new = cast("ClientSession", object()), cast("ClientSession", object())
    upstream._lost = lost = anyio.Event()
    upstream._connected(old)
    upstream.failed(old, MCPError(code=INVALID_REQUEST, message="Session not found"))
    assert lost.is_set()  # the supervisor closes the old connection
    got: list[ClientSession] = []
    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                got.append(await upstream.session())

            tg.start_soon(call)
            await anyio.wait_all_tasks_blocked()
            assert upstream._wanted is not None
            assert upstream._wanted.is_set()  # at once: the server answered, it is up
            upstream._connected(new)  # what the supervisor does once it reconnected
    assert got == [new]


async def test_a_failed_connection_makes_calls_fail_at_once_until_the_backoff_passed() -> None:
    upstream = _Upstream("a", "http://127.0.0.1:9/mcp")
    upstream._down("connection lost: ConnectError: refused", backoff=True)
    with pytest.raises(
        ConnectionError, match=r"^upstream \"a\" is unavailable \(connection lost: "
    ):
        await upstream.session()
    assert upstream._wanted is not None
    assert not upstream._wanted.is_set()  # nothing reconnects in the background
    upstream._down("connection lost: ConnectError: refused", backoff=True)
    assert upstream._delay == 2.0  # doubling, from 1 s, up to 30 s
