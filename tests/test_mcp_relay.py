"""The MCP client side of the capabilities: a server's progress, logs and questions relayed.

A remote tool (`register_mcp_tools` with `SessionCallbacks`) is called through a local
registry by a caller that offers a `ToolHost`; the server is a toolseam registry served in
process to the SDK's real client (its in-memory transport, handshake mode unless a test says
otherwise), on asyncio and trio. Foreign servers are the SDK's own: a low-level ``Server``
that does not tag its messages, and an ``MCPServer`` tool whose resolver elicits at MCP
2026-07-28 (``InputRequiredResult``). Attribution by the request's stream needs streamable
HTTP: that test runs on asyncio only (uvicorn).
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
import uvicorn
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import Elicit, MCPServer, Resolve
from pydantic import BaseModel

from mcp_fixtures.capabilities import LEVELS, make_registry
from mcp_fixtures.foreign import foreign_server
from mcp_fixtures.support import GUARD, first_error
from test_mcp_host import Served
from toolseam import (
    AbortController,
    AbortSignal,
    ElicitationRequest,
    Elicited,
    LogEvent,
    LogLevel,
    ProgressEvent,
    Sampled,
    SamplingRequest,
    ToolExecution,
    ToolExecutionInput,
    ToolFailure,
    ToolHost,
    ToolRegistry,
    ToolResult,
    ToolSuccess,
)
from toolseam.mcp import SessionCallbacks, create_server, register_mcp_tools


@dataclass
class Caller:
    """The caller of the local registry: its `ToolHost`, recording what reaches it."""

    answer: Elicited[Any] | None = None  # None: hold until withdrawn
    events: list[ProgressEvent | LogEvent] = field(default_factory=list[ProgressEvent | LogEvent])
    asked: list[ElicitationRequest] = field(default_factory=list[ElicitationRequest])
    sampled: list[SamplingRequest] = field(default_factory=list[SamplingRequest])
    pending: anyio.Event = field(default_factory=anyio.Event)
    withdrawn: anyio.Event = field(default_factory=anyio.Event)
    how: str = ""  # how a held request ended: "signal" or "cancelled"
    release: anyio.Event | None = None  # answer only once this is set

    def event(self, exec: ToolExecution, event: ProgressEvent | LogEvent) -> None:
        self.events.append(event)

    async def elicit(
        self, exec: ToolExecution, request: ElicitationRequest, signal: AbortSignal
    ) -> Elicited[Any]:
        self.asked.append(request)
        self.pending.set()
        if self.release is not None:
            await self.release.wait()
        if self.answer is not None:
            return self.answer
        try:
            await signal.wait()
            self.how = "signal"
            return Elicited("cancel")
        except anyio.get_cancelled_exc_class():
            self.how = "cancelled"
            raise
        finally:
            self.withdrawn.set()

    async def sample(
        self, exec: ToolExecution, request: SamplingRequest, signal: AbortSignal
    ) -> Sampled:
        self.sampled.append(request)
        return Sampled(content=[{"type": "text", "text": "Paris"}], model="caller-model")

    def host(self, *, elicit: bool = True, sample: bool = True) -> ToolHost:
        return ToolHost(
            on_progress=self.event,
            on_log=self.event,
            elicit=self.elicit if elicit else None,
            sample=self.sample if sample else None,
        )

    def progress(self) -> list[tuple[float, float | None, str | None]]:
        return [(e.progress, e.total, e.message) for e in self.events if type(e) is ProgressEvent]

    def logs(self) -> list[tuple[LogLevel, object]]:
        return [(e.level, e.data) for e in self.events if type(e) is LogEvent]


@pytest.fixture
def upstream() -> Served:
    registry = make_registry()
    served = Served(registry)
    registry.on_result(served.observe)
    return served


@asynccontextmanager
async def remote(
    server: Server[Any] | MCPServer | StdioServerParameters,
    callbacks: SessionCallbacks | None = None,
    *,
    relay: bool = True,
    mode: str = "legacy",
) -> AsyncIterator[tuple[ToolRegistry, ClientSession]]:
    """A local registry with the server's tools, through the SDK's client.

    With ``relay`` (fresh `SessionCallbacks` unless given), the server's logs and questions
    reach the callers; without, only progress does.
    """
    if relay and callbacks is None:
        callbacks = SessionCallbacks()
    kwargs: Any = {} if callbacks is None else callbacks.session_kwargs()
    # mcp 2.0's Client takes stdio parameters only as a transport.
    target = stdio_client(server) if isinstance(server, StdioServerParameters) else server
    async with Client(target, mode=mode, cache=None, **kwargs) as client:
        local = ToolRegistry()
        await register_mcp_tools(local, client.session, callbacks=callbacks)
        yield local, client.session


def call(
    name: str, arguments: object, host: ToolHost | None, signal: AbortSignal | None = None
) -> ToolExecutionInput:
    signal = AbortController().signal if signal is None else signal
    return ToolExecutionInput(
        call_id=name, name=name, arguments=arguments, signal=signal, host=host
    )


def remote_code(result: ToolResult) -> str | None:
    """The server's code of a relayed failure (``remote tool "x" failed (CODE): ...``)."""
    assert isinstance(result, ToolFailure)
    assert result.code == "REMOTE_TOOL_ERROR"
    found = re.match(r'remote tool "\w+" failed \((\w+)\): ', result.error.message)
    return found.group(1) if found else None


# -- from a toolseam server ----------------------------------------------------------------


async def test_progress_and_logs_reach_the_caller(upstream: Served) -> None:
    caller = Caller()
    with first_error(), anyio.fail_after(GUARD):
        async with remote(create_server(upstream.registry), SessionCallbacks()) as (local, _):
            result = await local.execute(call("steps", {"n": 3}, caller.host()))
    assert isinstance(result, ToolSuccess)
    assert result.value == "done"
    assert caller.progress() == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert caller.logs() == [("info", "step 1"), ("info", "step 2"), ("info", "step 3")]


async def test_progress_relays_without_callbacks(upstream: Served) -> None:
    caller = Caller()
    with first_error(), anyio.fail_after(GUARD):
        async with remote(create_server(upstream.registry), relay=False) as (local, _):
            await local.execute(call("steps", {"n": 2}, caller.host()))
    assert caller.progress() == [(1, 2, "step 1"), (2, 2, "step 2")]
    assert caller.logs() == []


@pytest.mark.parametrize(
    ("level", "expected"), [("warning", LEVELS[3:]), ("debug", LEVELS), (None, LEVELS)]
)
async def test_the_log_level_is_asked_of_the_server(
    upstream: Served, level: LogLevel | None, expected: tuple[str, ...]
) -> None:
    caller = Caller()
    with first_error(), anyio.fail_after(GUARD):
        async with remote(create_server(upstream.registry), SessionCallbacks(log_level=level)) as (
            local,
            _,
        ):
            await local.execute(call("levels", {}, caller.host()))
    assert caller.logs() == [(name, {"level": name}) for name in expected]


async def test_elicitation_reaches_the_caller(upstream: Served) -> None:
    caller = Caller(answer=Elicited("accept", {"name": "Ada"}))
    with first_error(), anyio.fail_after(GUARD):
        async with remote(create_server(upstream.registry)) as (local, _):
            result = await local.execute(call("ask", {"message": "Who?"}, caller.host()))
    assert isinstance(result, ToolSuccess)
    assert result.value == 'accepted {"name": "Ada"}'
    [request] = caller.asked
    assert request.message == "Who?"
    assert request.requested_schema["required"] == ["name"]


async def test_sampling_reaches_the_caller(upstream: Served) -> None:
    caller = Caller()
    with first_error(), anyio.fail_after(GUARD):
        async with remote(create_server(upstream.registry)) as (local, _):
            result = await local.execute(call("ask_model", {"message": "Capital?"}, caller.host()))
    assert isinstance(result, ToolSuccess)
    assert result.value == "caller-model: Paris"
    [request] = caller.sampled
    assert (request.max_tokens, request.system_prompt) == (20, "be brief")
    assert [dict(m) for m in request.messages] == [
        {"role": "user", "content": {"type": "text", "text": "Capital?"}}
    ]


async def test_a_caller_without_the_capability_fails_the_server_request(upstream: Served) -> None:
    caller = Caller()
    with first_error(), anyio.fail_after(GUARD):
        async with remote(create_server(upstream.registry)) as (local, _):
            result = await local.execute(call("ask", {"message": "?"}, caller.host(elicit=False)))
    assert remote_code(result) == "CAPABILITY_FAILED"
    assert isinstance(result, ToolFailure)
    assert result.error.message.endswith(
        "elicitation is not available: the caller of this call offers none (ToolHost.elicit is "
        "not set)"
    )


async def test_without_callbacks_the_server_cannot_ask(upstream: Served) -> None:
    caller = Caller(answer=Elicited("accept", {"name": "Ada"}))
    with first_error(), anyio.fail_after(GUARD):
        async with remote(create_server(upstream.registry), relay=False) as (local, _):
            result = await local.execute(call("ask", {"message": "?"}, caller.host()))
    assert remote_code(result) == "CAPABILITY_UNAVAILABLE"
    assert caller.asked == []


async def test_concurrent_calls_each_reach_their_own_caller(upstream: Served) -> None:
    release = anyio.Event()
    ada = Caller(answer=Elicited("accept", {"name": "Ada"}), release=release)
    bob = Caller(answer=Elicited("accept", {"name": "Bob"}), release=release)
    results: dict[str, ToolResult] = {}
    with first_error(), anyio.fail_after(GUARD):
        async with remote(create_server(upstream.registry)) as (local, _):

            async def run(who: str, caller: Caller) -> None:
                results[who] = await local.execute(call("ask", {"message": who}, caller.host()))

            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "ada", ada)
                tg.start_soon(run, "bob", bob)
                await ada.pending.wait()
                await bob.pending.wait()
                release.set()  # both questions are pending at once
    assert [(r.message) for r in ada.asked + bob.asked] == ["ada", "bob"]
    assert {who: r.value for who, r in results.items() if isinstance(r, ToolSuccess)} == {
        "ada": 'accepted {"name": "Ada"}',
        "bob": 'accepted {"name": "Bob"}',
    }


# -- withdrawal, both ways -------------------------------------------------------------------


async def test_the_server_withdrawing_its_question_withdraws_the_callers(upstream: Served) -> None:
    caller = Caller()
    with first_error(), anyio.fail_after(GUARD):
        async with remote(create_server(upstream.registry)) as (local, _):
            result = await local.execute(call("ask_then_time_out", {"message": "?"}, caller.host()))
    assert caller.how == "cancelled"  # the relay's callback was cancelled, and so the host
    assert remote_code(result) == "TOOL_TIMEOUT"


async def test_the_caller_aborting_withdraws_both_questions(upstream: Served) -> None:
    caller = Caller()
    stop = AbortController()
    with first_error(), anyio.fail_after(GUARD):
        async with remote(create_server(upstream.registry)) as (local, _):
            async with anyio.create_task_group() as tg:
                results: list[ToolResult] = []

                async def run() -> None:
                    host = caller.host()
                    results.append(
                        await local.execute(call("ask", {"message": "?"}, host, stop.signal))
                    )

                tg.start_soon(run)
                await caller.pending.wait()
                stop.abort()
            await upstream.any_published.wait()
    assert caller.how in ("signal", "cancelled")
    assert isinstance(results[0], ToolFailure)
    assert results[0].code == "ABORTED"
    assert upstream.published == [("ask", "ABORTED")]  # the server's body was stopped too


# -- from foreign servers --------------------------------------------------------------------


FOREIGN = Path(__file__).resolve().with_name("mcp_fixtures") / "foreign.py"


def foreign_stdio(together: int, backend: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=[str(FOREIGN), str(together), backend]
    )


async def _hail_both(local: ToolRegistry, callers: dict[str, Caller]) -> dict[str, ToolResult]:
    results: dict[str, ToolResult] = {}
    async with anyio.create_task_group() as tg:

        async def run(who: str) -> None:
            results[who] = await local.execute(call("hail", {"who": who}, callers[who].host()))

        tg.start_soon(run, "a")
        tg.start_soon(run, "b")
    return results


def _answering() -> dict[str, Caller]:
    return {who: Caller(answer=Elicited("accept", {"name": who.upper()})) for who in "ab"}


async def test_a_foreign_server_with_one_call_in_flight(anyio_backend: str) -> None:
    """Over stdio nothing tells the calls apart, but there is only one."""
    caller = Caller(answer=Elicited("accept", {"name": "Ada"}))
    with first_error(), anyio.fail_after(GUARD):
        async with remote(foreign_stdio(1, anyio_backend)) as (local, _):
            result = await local.execute(call("hail", {"who": "a"}, caller.host()))
    assert isinstance(result, ToolSuccess)
    assert result.value == "accept {'name': 'Ada'}"
    assert caller.logs() == [("info", "hailing a")]


async def test_a_foreign_server_with_two_calls_in_flight_over_stdio_is_not_guessed(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """No tag, no request context: the logs go to the Python logger, the questions refused."""
    callers = _answering()
    caplog.set_level(logging.INFO, logger="toolseam.mcp")
    with first_error(), anyio.fail_after(GUARD):
        async with remote(foreign_stdio(2, anyio_backend)) as (local, _):
            results = await _hail_both(local, callers)
    assert all(caller.events == [] and caller.asked == [] for caller in callers.values())
    for result in results.values():
        assert isinstance(result, ToolFailure)
        assert result.error.message.endswith(
            "elicitation refused: no toolseam tool call in flight to relay it to"
        )
    relayed = [r.getMessage() for r in caplog.records if r.name == "toolseam.mcp"]
    assert sorted(relayed) == [
        f"MCP server log (no toolseam call in flight to relay it to): hailing {who}"
        for who in ("a", "b")
    ]


async def test_a_foreign_server_in_memory_is_told_apart_by_the_request_context() -> None:
    """The SDK's in-memory transport carries the sender's context, as HTTP does."""
    callers = _answering()
    with first_error(), anyio.fail_after(GUARD):
        async with remote(foreign_server(2)) as (local, _):
            results = await _hail_both(local, callers)
    for who, caller in callers.items():
        assert caller.logs() == [("info", f"hailing {who}")]
    assert {who: r.value for who, r in results.items() if isinstance(r, ToolSuccess)} == {
        "a": "accept {'name': 'A'}",
        "b": "accept {'name': 'B'}",
    }


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_foreign_server_over_http_is_told_apart_by_the_request_stream(
    anyio_backend: str,
) -> None:
    """asyncio only: uvicorn serves the foreign server."""
    callers = {who: Caller(answer=Elicited("accept", {"name": who.upper()})) for who in "ab"}
    release = anyio.Event()
    for caller in callers.values():
        caller.release = release
    results: dict[str, ToolResult] = {}
    server = foreign_server(2)
    app = server.streamable_http_app(stateless_http=False, json_response=False)
    web = uvicorn.Server(uvicorn.Config(app, port=0, log_config=None, lifespan="on"))
    with first_error(), anyio.fail_after(GUARD):
        async with anyio.create_task_group() as servers:
            servers.start_soon(web.serve)
            # uvicorn has no other way to say it listens
            while not web.started:  # noqa: ASYNC110
                await anyio.sleep(0.01)
            port = web.servers[0].sockets[0].getsockname()[1]
            callbacks = SessionCallbacks()
            async with (
                streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write),
                ClientSession(read, write, **callbacks.session_kwargs()) as session,
            ):
                await session.initialize()
                local = ToolRegistry()
                await register_mcp_tools(local, session, callbacks=callbacks)
                async with anyio.create_task_group() as tg:

                    async def run(who: str) -> None:
                        host = callers[who].host()
                        results[who] = await local.execute(call("hail", {"who": who}, host))

                    tg.start_soon(run, "a")
                    tg.start_soon(run, "b")
                    for caller in callers.values():
                        await caller.pending.wait()
                    release.set()
            web.should_exit = True
    for who, caller in callers.items():
        assert caller.logs() == [("info", f"hailing {who}")]
        assert [request.message for request in caller.asked] == [f"name for {who}?"]
    assert {who: r.value for who, r in results.items() if isinstance(r, ToolSuccess)} == {
        "a": "accept {'name': 'A'}",
        "b": "accept {'name': 'B'}",
    }


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("Who are you?", Name)


def resolving_server() -> MCPServer:
    server = MCPServer("mrtr")

    @server.tool()
    def greet(name: Annotated[Name, Resolve(ask_name)]) -> str:
        return f"hello {name.name}"

    return server


async def test_a_2026_server_asking_for_input_is_answered_by_the_caller() -> None:
    caller = Caller(answer=Elicited("accept", {"name": "Ada"}))
    with first_error(), anyio.fail_after(GUARD):
        async with remote(resolving_server(), mode="auto") as (local, session):
            assert session.protocol_version == "2026-07-28"
            result = await local.execute(call("greet", {}, caller.host()))
    assert isinstance(result, ToolSuccess)
    assert result.value == {"result": "hello Ada"}
    assert [request.message for request in caller.asked] == ["Who are you?"]


async def test_a_2026_server_asking_a_caller_without_elicitation_fails_the_call() -> None:
    caller = Caller()
    with first_error(), anyio.fail_after(GUARD):
        async with remote(resolving_server(), mode="auto") as (local, _):
            result = await local.execute(call("greet", {}, caller.host(elicit=False)))
    assert isinstance(result, ToolFailure)
    assert result.code == "CAPABILITY_UNAVAILABLE"


async def test_a_2026_server_asking_while_the_caller_aborts() -> None:
    caller = Caller()
    stop = AbortController()
    results: list[ToolResult] = []
    with first_error(), anyio.fail_after(GUARD):
        async with (
            remote(resolving_server(), mode="auto") as (local, _),
            anyio.create_task_group() as tg,
        ):

            async def run() -> None:
                results.append(await local.execute(call("greet", {}, caller.host(), stop.signal)))

            tg.start_soon(run)
            await caller.pending.wait()
            stop.abort()
    assert isinstance(results[0], ToolFailure)
    assert results[0].code == "ABORTED"
    assert caller.how in ("signal", "cancelled")


async def test_a_2026_toolseam_server_relays_progress_logs_and_questions(upstream: Served) -> None:
    """Its question travels as an InputRequiredResult, answered by the local caller."""
    caller = Caller(answer=Elicited("accept", {"name": "Ada"}))
    with first_error(), anyio.fail_after(GUARD):
        async with remote(create_server(upstream.registry), mode="auto") as (local, session):
            assert session.protocol_version == "2026-07-28"
            await local.execute(call("steps", {"n": 2}, caller.host()))
            asked = await local.execute(call("ask", {"message": "?"}, caller.host()))
    assert caller.progress() == [(1, 2, "step 1"), (2, 2, "step 2")]
    assert caller.logs() == [("info", "step 1"), ("info", "step 2")]
    assert [request.message for request in caller.asked] == ["?"]
    assert asked.is_error is False
    assert asked.value == 'accepted {"name": "Ada"}'
