"""A body's questions over MCP 2026-07-28: InputRequiredResult rounds, the body never run twice.

The registry is served in process (``create_server``) to the SDK's real ``Client``, which
negotiates 2026-07-28 (``mode="auto"``, its direct in-process dispatcher) or the handshake
(``mode="legacy"``, 2025-11-25); on asyncio and trio. The attacker cases drive the rounds by
hand with ``client.session.call_tool(..., allow_input_required=True)``. `TestOverStdio` runs
real server processes (``python -m toolseam.mcp serve``, on the test's backend), so a
restart is a real one; `TestOverHttp` uses streamable HTTP (asyncio only there: uvicorn).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import MCPError, types
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from mcp.server.lowlevel.server import Server
from mcp_types import MISSING_REQUIRED_CLIENT_CAPABILITY
from typing_extensions import TypedDict

from mcp_fixtures.support import GUARD, Record, first_error, server_parameters
from toolseam import Root, ToolRegistry, ToolResult, ToolRunContext, define_tool
from toolseam.mcp import create_server, serve_http

REFUSED = "requestState refused: "


class Name(TypedDict):
    name: str


@dataclass
class World:
    """The server's registry, what its bodies did, and what its observers saw."""

    registry: ToolRegistry = field(default_factory=ToolRegistry)
    effects: list[str] = field(default_factory=list[str])
    reasons: list[str] = field(default_factory=list[str])
    published: list[ToolResult] = field(default_factory=list[ToolResult])
    asked: anyio.Event = field(default_factory=anyio.Event)
    any_published: anyio.Event = field(default_factory=anyio.Event)

    def __post_init__(self) -> None:
        world = self

        @define_tool(name="order", description="Orders once, after asking whose name.")
        async def order(args: dict[str, Any], exec: ToolRunContext) -> str:
            world.effects.append("charged")  # the side effect before the question
            try:
                world.asked.set()
                answer = await exec.elicit("Whose name?", Name, key="who")
            finally:
                if exec.signal.aborted:
                    world.reasons.append(str(exec.signal.reason))
            who = answer.content["name"] if answer.content else "nobody"
            world.effects.append(f"shipped to {who}")
            return f"ordered for {who}"

        @define_tool(name="survey", description="Asks the user, the model and the roots.")
        async def survey(args: dict[str, Any], exec: ToolRunContext) -> str:
            world.effects.append("started")
            name = await exec.elicit("Your name?", Name)
            first = await exec.elicit("Again?", Name)
            sampled = await exec.sample("Capital of France?", max_tokens=10)
            roots = await exec.roots()
            return f"{name} / {first} / {sampled} / {[root.uri for root in roots]}"

        @define_tool(name="lookup", description="Idempotent: asks, then reads.", idempotent=True)
        async def lookup(args: dict[str, Any], exec: ToolRunContext) -> str:
            world.effects.append("looked up")
            answer = await exec.elicit("Whose name?", Name, key="who")
            return f"found {answer.content['name'] if answer.content else 'nobody'}"

        @define_tool(name="chatty", description="Reports, asks, reports.")
        async def chatty(args: dict[str, Any], exec: ToolRunContext) -> str:
            exec.log("info", "before")
            exec.progress(1, total=2)
            await exec.elicit("Go on?", Name, key="who")
            exec.log("info", "after")
            exec.progress(2, total=2)
            return "done"

        self.registry.register(order)
        self.registry.register(chatty)
        self.registry.register(survey)
        self.registry.register(lookup)
        self.registry.on_result(self._observe)

    def _observe(self, exec: object, result: ToolResult) -> None:
        self.published.append(result)
        self.any_published.set()

    def codes(self) -> list[str]:
        return [
            (result.error.info.code if result.error.info else "?") if result.is_error else "OK"
            for result in self.published
        ]


@dataclass
class Person:
    """The client's side: answers every question, and counts them."""

    questions: list[str] = field(default_factory=list[str])

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.questions.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.questions.append("sample")
        reply = types.TextContent(type="text", text="Paris")
        return types.CreateMessageResult(role="assistant", content=reply, model="stub")

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        self.questions.append("roots")
        return types.ListRootsResult(
            roots=[types.Root.model_validate({"uri": "file:///work", "name": "work"})]
        )

    def kwargs(self) -> dict[str, Any]:
        return {
            "elicitation_callback": self.elicit,
            "sampling_callback": self.sample,
            "list_roots_callback": self.roots,
        }


def _text(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


def _answer(name: str = "Ada") -> dict[str, Any]:
    return {"who": types.ElicitResult(action="accept", content={"name": name})}


@asynccontextmanager
async def connect(
    server: Server[Any], person: Person | None = None, mode: str = "auto"
) -> AsyncIterator[Client]:
    kwargs = (person or Person()).kwargs()
    async with Client(server, mode=mode, cache=None, **kwargs) as client:
        yield client


async def _ask(client: Client, name: str = "order", **arguments: Any) -> types.InputRequiredResult:
    first = await client.session.call_tool(name, arguments, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult), first
    return first


async def _retry(
    client: Client,
    state: str | None,
    answers: dict[str, Any] | None = None,
    name: str = "order",
    **arguments: Any,
) -> types.CallToolResult | types.InputRequiredResult:
    return await client.session.call_tool(
        name,
        arguments,
        input_responses=_answer() if answers is None else answers,
        request_state=state,
        allow_input_required=True,
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_body_cannot_tell_which_revision_its_caller_speaks(mode: str) -> None:
    world, person = World(), Person()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(create_server(world.registry), person, mode) as client:
            assert (client.session.protocol_version == "2026-07-28") == (mode == "auto")
            result = await client.call_tool("survey", {})
    assert _text(result) == (
        'accepted {"name": "Ada"} / accepted {"name": "Ada"} / Paris / [\'file:///work\']'
    )
    assert person.questions == ["Your name?", "Again?", "sample", "roots"]
    assert world.effects == ["started"]  # four questions, one run of the body
    assert world.codes() == ["OK"]


async def test_a_question_suspends_the_body_and_the_retry_resumes_it() -> None:
    """The SDK's Client drives the rounds: the side effect before the question happens once."""
    world, person = World(), Person()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(create_server(world.registry), person) as client:
            result = await client.call_tool("order", {"item": "book"})
    assert _text(result) == "ordered for Ada"
    assert person.questions == ["Whose name?"]
    assert world.effects == ["charged", "shipped to Ada"]
    assert world.codes() == ["OK"]


async def test_the_questions_travel_as_an_input_required_result() -> None:
    world = World()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(create_server(world.registry)) as client:
            first = await _ask(client)
            assert first.input_requests is not None
            question = first.input_requests["who"]
            assert isinstance(question, types.ElicitRequest)
            assert question.params.message == "Whose name?"
            assert world.published == []  # suspended, not finished
            final = await _retry(client, first.request_state)
    assert isinstance(final, types.CallToolResult)
    assert _text(final) == "ordered for Ada"
    assert world.effects == ["charged", "shipped to Ada"]


async def test_a_missing_answer_is_asked_again_and_an_extra_one_ignored() -> None:
    world = World()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(create_server(world.registry)) as client:
            first = await _ask(client)
            extra = {"other": types.ElicitResult(action="accept", content={"name": "Eve"})}
            again = await _retry(client, first.request_state, extra)
            assert isinstance(again, types.InputRequiredResult)
            assert again.input_requests is not None
            assert list(again.input_requests) == ["who"]
            assert again.request_state != first.request_state
            final = await _retry(client, again.request_state)
    assert isinstance(final, types.CallToolResult)
    assert _text(final) == "ordered for Ada"
    assert world.effects == ["charged", "shipped to Ada"]


class TestRefusedStates:
    """A state that is not this server's, current, and bound to this call resumes nothing."""

    async def _refused(self, client: Client, state: str | None, **arguments: Any) -> str:
        with pytest.raises(MCPError) as refused:
            await _retry(client, state, **arguments)
        assert refused.value.error.code == types.INVALID_PARAMS
        return refused.value.error.message

    async def test_a_tampered_state_is_refused_and_the_body_still_waits(self) -> None:
        world = World()
        with first_error(), anyio.fail_after(GUARD):
            async with connect(create_server(world.registry)) as client:
                first = await _ask(client)
                state = first.request_state
                assert state is not None
                flipped = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
                for tampered in (flipped, state + "-TAMPERED", "garbage", state[:-1]):
                    message = await self._refused(client, tampered)
                    assert message.startswith(REFUSED), message
                assert world.effects == ["charged"]
                assert world.published == []
                final = await _retry(client, state)  # the genuine state still resumes it
        assert isinstance(final, types.CallToolResult)
        assert _text(final) == "ordered for Ada"
        assert world.effects == ["charged", "shipped to Ada"]
        assert world.codes() == ["OK"]

    async def test_the_message_says_the_signature_does_not_match(self) -> None:
        world = World()
        with first_error(), anyio.fail_after(GUARD):
            async with connect(create_server(world.registry)) as client:
                first = await _ask(client)
                assert first.request_state is not None
                message = await self._refused(client, first.request_state + "-TAMPERED")
                await _retry(client, first.request_state)
        assert message == f"{REFUSED}its signature does not match: it was altered"

    async def test_a_replayed_state_is_refused(self) -> None:
        world = World()
        with first_error(), anyio.fail_after(GUARD):
            async with connect(create_server(world.registry)) as client:
                first = await _ask(client)
                await _retry(client, first.request_state)
                message = await self._refused(client, first.request_state)
        assert message == (
            f"{REFUSED}it was already answered, or the call it continues has ended (its "
            "deadline passed, or the server shut down)"
        )
        assert world.effects == ["charged", "shipped to Ada"]
        assert world.codes() == ["OK"]

    async def test_a_state_for_other_arguments_is_refused(self) -> None:
        world = World()
        with first_error(), anyio.fail_after(GUARD):
            async with connect(create_server(world.registry)) as client:
                first = await _ask(client, item="book")
                message = await self._refused(client, first.request_state, item="car")
                final = await _retry(client, first.request_state, item="book")
        assert message == (
            f"{REFUSED}it was issued for another tool call (the tool, its arguments or the "
            "caller differ)"
        )
        assert isinstance(final, types.CallToolResult)
        assert world.effects == ["charged", "shipped to Ada"]

    async def test_a_foreign_state_neither_resumes_nor_starts_a_body(self) -> None:
        """Another server's state (a restart, another process): a clear error, no re-run."""
        world, other = World(), World()
        with first_error(), anyio.fail_after(GUARD):
            async with (
                connect(create_server(world.registry)) as client,
                connect(create_server(other.registry)) as elsewhere,
            ):
                first = await _ask(client)
                message = await self._refused(elsewhere, first.request_state)
                await _retry(client, first.request_state)
        assert message == (
            f"{REFUSED}it was issued by another server process (this server restarted, or "
            'the retry reached another one), and tool "order" is not idempotent: its call '
            "cannot continue here, and was not run again"
        )
        assert other.effects == []
        assert other.published == []
        assert world.effects == ["charged", "shipped to Ada"]


async def test_an_idempotent_tool_runs_again_elsewhere_with_the_answers_supplied() -> None:
    world, other = World(), World()
    with first_error(), anyio.fail_after(GUARD):
        async with (
            connect(create_server(world.registry)) as client,
            connect(create_server(other.registry)) as elsewhere,
        ):
            first = await _ask(client, "lookup")
            final = await _retry(elsewhere, first.request_state, name="lookup")
    assert isinstance(final, types.CallToolResult)
    assert _text(final) == "found Ada"  # answered from the retry, not asked again
    assert other.effects == ["looked up"]
    assert other.codes() == ["OK"]


async def test_a_retry_that_never_comes_aborts_the_suspended_body() -> None:
    world = World()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(create_server(world.registry, input_deadline=0.05)) as client:
            first = await _ask(client)
            await world.any_published.wait()
            with pytest.raises(MCPError, match=r"^requestState refused: it was already"):
                await _retry(client, first.request_state)  # too late
    reason = "no retry answered the MCP client's input request within 0.05 s"
    assert world.reasons == [
        f"operation aborted: {reason}"
    ]  # told, and its finally ran before the result
    assert world.codes() == ["ABORTED"]
    assert world.effects == ["charged"]


async def test_a_suspended_body_is_aborted_and_awaited_when_the_server_stops() -> None:
    world = World()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(create_server(world.registry)) as client:
            await _ask(client)
        # Leaving the client ends the server's lifespan: the parked call is aborted, awaited.
    assert world.reasons == ["operation aborted: the MCP server is shutting down"]
    assert world.codes() == ["ABORTED"]


async def test_cancelling_the_retry_aborts_the_resumed_body() -> None:
    """The retry's request serves the call: cancelling it stops the body, which is awaited."""
    world = World()
    resumed = anyio.Event()

    @define_tool(name="hold", description="Asks, then runs until aborted.")
    async def hold(args: dict[str, Any], exec: ToolRunContext) -> str:
        await exec.elicit("Go on?", Name, key="who")
        resumed.set()
        await exec.signal.wait()
        world.reasons.append(str(exec.signal.reason))
        exec.signal.raise_if_aborted()
        return "unreachable"

    world.registry.register(hold)
    with first_error(), anyio.fail_after(GUARD):
        async with connect(create_server(world.registry)) as client:
            first = await _ask(client, "hold")
            async with anyio.create_task_group() as tg:
                tg.start_soon(functools.partial(_retry, client, first.request_state, name="hold"))
                await resumed.wait()
                tg.cancel_scope.cancel()
            await world.any_published.wait()
    assert world.reasons == ["operation aborted: the MCP request was cancelled"]
    assert world.codes() == ["ABORTED"]


async def test_suspended_calls_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond the bound, a question fails instead of parking one more body."""
    monkeypatch.setattr("toolseam.mcp._rounds.MAX_SUSPENDED", 1)
    world = World()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(create_server(world.registry)) as client:
            first = await _ask(client)
            second = await client.session.call_tool("order", {}, allow_input_required=True)
            assert isinstance(second, types.CallToolResult)
            await _retry(client, first.request_state)
    assert _text(second) == (
        'Error: tool "order": elicitation is not available: this MCP server already holds 1 '
        "calls waiting for their client's answers"
    )
    assert world.codes() == ["CAPABILITY_UNAVAILABLE", "OK"]


async def test_what_the_body_reports_reaches_the_client_around_its_question() -> None:
    world, logs, seen = World(), list[object](), list[float]()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    with first_error(), anyio.fail_after(GUARD):
        async with Client(
            create_server(world.registry),
            cache=None,
            log_level="info",
            logging_callback=on_log,
            **Person().kwargs(),
        ) as client:
            result = await client.call_tool("chatty", {}, progress_callback=on_progress)
    assert _text(result) == "done"
    assert logs == ["before", "after"]
    assert seen == [1, 2]


async def test_a_call_that_ends_while_suspended_answers_the_next_retry() -> None:
    world, release = World(), anyio.Event()

    @define_tool(name="impatient", description="Asks, then gives up on its own.")
    async def impatient(args: dict[str, Any], exec: ToolRunContext) -> str:
        async def ask() -> None:
            await exec.elicit("Quick?", Name, key="who")

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await release.wait()
            tg.cancel_scope.cancel()  # the body's own scope: it stops asking
        return "gave up"

    world.registry.register(impatient)
    with first_error(), anyio.fail_after(GUARD):
        async with connect(create_server(world.registry)) as client:
            first = await _ask(client, "impatient")
            release.set()
            await world.any_published.wait()
            final = await _retry(client, first.request_state, name="impatient")
    assert isinstance(final, types.CallToolResult)
    assert _text(final) == "gave up"
    assert world.codes() == ["OK"]


async def test_a_fresh_call_may_carry_its_answers() -> None:
    """SEP-2322 lets a client answer before it is asked: one call, one run, no round."""
    world = World()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(create_server(world.registry)) as client:
            final = await _retry(client, None)
    assert isinstance(final, types.CallToolResult)
    assert _text(final) == "ordered for Ada"
    assert world.effects == ["charged", "shipped to Ada"]


async def test_questions_asked_together_go_out_in_one_round() -> None:
    world = World()

    @define_tool(name="both", description="")
    async def both(args: dict[str, Any], exec: ToolRunContext) -> str:
        got: list[str] = []

        async def ask(key: str) -> None:
            got.append(str(await exec.elicit(key, Name, key=key)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "a")
            tg.start_soon(ask, "b")
        roots: tuple[Root, ...] = await exec.roots(key="r")
        return f"{len(got)} answers, {len(roots)} roots"

    world.registry.register(both)
    with first_error(), anyio.fail_after(GUARD):
        async with connect(create_server(world.registry)) as client:
            first = await _ask(client, "both")
            assert first.input_requests is not None
            assert sorted(first.input_requests) == ["a", "b"]
            result = await client.call_tool("both", {})
    assert _text(result) == "2 answers, 1 roots"


async def test_a_client_without_the_capability_is_not_asked() -> None:
    world = World()
    with first_error(), anyio.fail_after(GUARD):
        async with Client(create_server(world.registry), cache=None) as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool("order", {})
    # 2026-07-28 answers such a call with MissingRequiredClientCapabilityError, naming it.
    assert raised.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert "did not declare the elicitation capability" in raised.value.error.message
    assert world.effects == ["charged"]


class TestOverStdio:
    """A real server process: its restart loses the suspended call, never re-runs it."""

    async def test_the_side_effect_happens_once(self, tmp_path: Path, anyio_backend: str) -> None:
        record, person = Record(tmp_path / "record.jsonl"), Person()
        parameters = server_parameters(record, anyio_backend)
        with first_error(), anyio.fail_after(GUARD):
            async with Client(parameters, cache=None, **person.kwargs()) as client:
                assert client.session.protocol_version == "2026-07-28"
                result = await client.call_tool("ask_once", {"tag": "a"})
        assert _text(result) == "for Ada"
        assert person.questions == ["Whose name?"]
        assert [event["tag"] for event in record.events(event="side_effect")] == ["a"]

    async def test_the_command_line_sets_the_deadline(
        self, tmp_path: Path, anyio_backend: str
    ) -> None:
        record = Record(tmp_path / "record.jsonl")
        parameters = server_parameters(record, anyio_backend)
        parameters.args = [*parameters.args, "--input-deadline", "0.05"]
        with first_error(), anyio.fail_after(GUARD):
            async with Client(parameters, cache=None, **Person().kwargs()) as client:
                await _ask(client, "ask_once", tag="a")
                published = await record.wait_for(event="result")
        assert published["code"] == "ABORTED"

    @pytest.mark.parametrize(("tool", "runs_again"), [("ask_once", False), ("lookup_once", True)])
    async def test_a_restarted_server_refuses_the_retry_unless_the_tool_is_idempotent(
        self, tmp_path: Path, anyio_backend: str, tool: str, runs_again: bool
    ) -> None:
        before, after = Record(tmp_path / "before.jsonl"), Record(tmp_path / "after.jsonl")
        person = Person()
        with first_error(), anyio.fail_after(GUARD):
            parameters = server_parameters(before, anyio_backend)
            async with Client(parameters, cache=None, **person.kwargs()) as client:
                first = await _ask(client, tool, tag="a")
            # The process is gone (its suspended call aborted); a new one takes the retry.
            parameters = server_parameters(after, anyio_backend)
            async with Client(parameters, cache=None, **person.kwargs()) as client:
                if runs_again:
                    final = await _retry(client, first.request_state, name=tool, tag="a")
                    assert isinstance(final, types.CallToolResult)
                    assert _text(final) == "found Ada"
                else:
                    with pytest.raises(MCPError, match="was issued by another server process"):
                        await _retry(client, first.request_state, name=tool, tag="a")
        assert [event["code"] for event in before.events(event="result")] == ["ABORTED"]
        assert person.questions == []  # the idempotent re-run used the answer it was given
        assert len(after.events(event="side_effect")) == (1 if runs_again else 0)
        assert len(after.events(event="result")) == (1 if runs_again else 0)


class TestOverHttp:
    """The same over streamable HTTP, each round a POST of its own (asyncio only: uvicorn)."""

    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"

    @pytest.mark.filterwarnings(r"ignore:Async generator 'http(core)?x?2\.:ResourceWarning")
    async def test_the_side_effect_happens_once(self) -> None:
        world, person = World(), Person()
        with first_error(), anyio.fail_after(GUARD):
            async with anyio.create_task_group() as tg:
                url = await tg.start(
                    functools.partial(serve_http, world.registry, port=0, handle_signals=False)
                )
                async with Client(url, cache=None, **person.kwargs()) as client:
                    assert client.session.protocol_version == "2026-07-28"
                    result = await client.call_tool("order", {"item": "book"})
                    first = await _ask(client)
                    assert first.request_state is not None
                    with pytest.raises(MCPError, match=r"^requestState refused: its signature"):
                        await _retry(client, first.request_state + "x")
                    await _retry(client, first.request_state)
                tg.cancel_scope.cancel()
        assert _text(result) == "ordered for Ada"
        assert person.questions == ["Whose name?"]
        assert world.effects == ["charged", "shipped to Ada"] * 2
        assert world.codes() == ["OK", "OK"]

    @pytest.mark.filterwarnings(r"ignore:Async generator 'http(core)?x?2\.:ResourceWarning")
    async def test_notifications_ride_the_stream_of_the_round_they_belong_to(self) -> None:
        world, logs, seen = World(), list[object](), list[float]()

        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            logs.append(params.data)

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        with first_error(), anyio.fail_after(GUARD):
            async with anyio.create_task_group() as tg:
                url = await tg.start(
                    functools.partial(serve_http, world.registry, port=0, handle_signals=False)
                )
                async with Client(
                    url, cache=None, log_level="info", logging_callback=on_log, **Person().kwargs()
                ) as client:
                    result = await client.call_tool("chatty", {}, progress_callback=on_progress)
                tg.cancel_scope.cancel()
        assert _text(result) == "done"
        assert logs == ["before", "after"]
        assert seen == [1, 2]
