"""The MCP server side of the capabilities: what a body's exec.progress/log/elicit/sample become.

The registry is served in process (``create_server``) to the SDK's real client over its
in-memory transport, in the handshake mode (``mode="legacy"``, MCP 2025-11-25) unless a test
says otherwise: real JSON-RPC both ways, on asyncio and trio, and the tool bodies and the
test share events. ``test_mcp_host_http.py`` does the same over streamable HTTP.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from mcp import ClientSession, types
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.message import SessionMessage

from mcp_fixtures.capabilities import FORM, LEVELS, make_registry
from mcp_fixtures.support import GUARD, first_error
from toolseam import (
    AbortError,
    Elicited,
    ToolExecution,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
)
from toolseam.mcp import CODE_META_KEY, create_server
from toolseam.mcp._host import OUTBOX_LIMIT

CALL_META = "toolseam/call"


@dataclass
class Peer:
    """The MCP client's side: records what reaches it, and answers as the test says."""

    answer: types.ElicitResult | None = None  # None: hold until withdrawn
    logs: list[types.LoggingMessageNotificationParams] = field(
        default_factory=list[types.LoggingMessageNotificationParams]
    )
    asked: list[tuple[types.ElicitRequestParams, ClientRequestContext]] = field(
        default_factory=list[tuple[types.ElicitRequestParams, ClientRequestContext]]
    )
    sampled: list[types.CreateMessageRequestParams] = field(
        default_factory=list[types.CreateMessageRequestParams]
    )
    notifications: list[str] = field(default_factory=list[str])
    order: list[str] = field(default_factory=list[str])
    pending: anyio.Event = field(default_factory=anyio.Event)
    withdrawn: anyio.Event = field(default_factory=anyio.Event)

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.asked.append((params, context))
        self.order.append(f"elicit {params.message}")
        if self.answer is not None:
            return self.answer
        self.pending.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.withdrawn.set()  # only a cancellation ends the wait
        raise AssertionError("unreachable")

    async def sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.sampled.append(params)
        reply = types.TextContent(type="text", text="Paris")
        return types.CreateMessageResult(role="assistant", content=reply, model="stub")

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)
        self.order.append(f"log {params.data}")

    async def message(self, message: object) -> None:
        if not isinstance(message, Exception):
            self.notifications.append(type(message).__name__)

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        self.order.append("roots")
        root = types.Root.model_validate({"uri": "file:///srv/work", "name": "work"})
        return types.ListRootsResult(roots=[root])

    def callbacks(
        self, *, elicit: bool = True, sample: bool = True, roots: bool = False
    ) -> dict[str, Any]:
        chosen: dict[str, Any] = {"logging_callback": self.log, "message_handler": self.message}
        if elicit:
            chosen["elicitation_callback"] = self.elicit
        if sample:
            chosen["sampling_callback"] = self.sample
        if roots:
            chosen["list_roots_callback"] = self.roots
        return chosen


@dataclass
class Served:
    """The registry a test serves, and the results it published."""

    registry: ToolRegistry
    published: list[tuple[str, str | None]] = field(default_factory=list[tuple[str, str | None]])
    any_published: anyio.Event = field(default_factory=anyio.Event)

    def observe(self, exec: ToolExecution, result: ToolResult) -> None:
        code = result.error.info.code if result.is_error is True and result.error.info else None
        self.published.append((exec.name, code))
        self.any_published.set()


@pytest.fixture
def served() -> Served:
    registry = make_registry()
    served = Served(registry)
    registry.on_result(served.observe)
    return served


@asynccontextmanager
async def connect(
    registry: ToolRegistry, peer: Peer, *, mode: str = "legacy", **options: Any
) -> AsyncIterator[ClientSession]:
    callbacks = {**peer.callbacks(), **options}
    async with Client(create_server(registry), mode=mode, cache=None, **callbacks) as client:
        yield client.session


def _text(result: types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


def _code(result: types.CallToolResult) -> str | None:
    code = (result.meta or {}).get(CODE_META_KEY)
    return code if isinstance(code, str) else None


Progress = list[tuple[float, float | None, str | None]]


def progress_sink() -> tuple[Progress, Callable[..., Any]]:
    seen: Progress = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    return seen, on_progress


# -- progress ------------------------------------------------------------------------------


async def test_progress_becomes_notifications_for_the_request_token(served: Served) -> None:
    peer = Peer()
    seen, on_progress = progress_sink()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(served.registry, peer) as session:
            result = await session.call_tool("steps", {"n": 3}, progress_callback=on_progress)
    assert _text(result) == "done"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert [log.data for log in peer.logs] == ["step 1", "step 2", "step 3"]


async def test_without_a_progress_token_no_progress_is_sent(served: Served) -> None:
    peer = Peer()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(served.registry, peer) as session:
            await session.call_tool("steps", {"n": 3})
    assert peer.notifications == ["LoggingMessageNotification"] * 3


async def test_progress_that_does_not_increase_is_dropped(served: Served) -> None:
    seen, on_progress = progress_sink()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(served.registry, Peer()) as session:
            await session.call_tool("backwards", {}, progress_callback=on_progress)
    assert [value for value, _, _ in seen] == [1, 3, 4]


async def test_progress_not_yet_sent_coalesces_into_the_latest(served: Served) -> None:
    seen, on_progress = progress_sink()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(served.registry, Peer()) as session:
            await session.call_tool("burst", {"n": 500}, progress_callback=on_progress)
    assert seen == [(500, 500, None)]  # the body never yielded: the sender saw the last one


async def test_a_sync_body_reports_progress_from_its_thread(served: Served) -> None:
    peer = Peer()
    seen, on_progress = progress_sink()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(served.registry, peer) as session:
            result = await session.call_tool("sync_steps", {"n": 3}, progress_callback=on_progress)
    assert _text(result) == "done"
    assert seen == [(1, 3, None), (2, 3, None), (3, 3, None)]
    assert [log.data for log in peer.logs] == [f"thread step {n}" for n in (1, 2, 3)]


async def test_a_nested_call_reports_to_the_client_of_the_outer_call(served: Served) -> None:
    peer = Peer()
    seen, on_progress = progress_sink()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(served.registry, peer) as session:
            result = await session.call_tool("outer", {"n": 2}, progress_callback=on_progress)
    assert _text(result) == "inner: done"
    assert seen == [(1, 2, "step 1"), (2, 2, "step 2")]
    assert [log.data for log in peer.logs] == ["step 1", "step 2"]


# -- logs ----------------------------------------------------------------------------------


async def _levels(session: ClientSession, level: types.LoggingLevel | None) -> None:
    if level is not None:
        request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))
        await session.send_request(request, types.EmptyResult)
    await session.call_tool("levels", {})


@pytest.mark.parametrize(
    ("level", "expected"),
    [(None, LEVELS), ("warning", LEVELS[3:]), ("emergency", LEVELS[-1:]), ("debug", LEVELS)],
)
async def test_logs_honour_the_level_the_client_set(
    served: Served, level: types.LoggingLevel | None, expected: tuple[str, ...]
) -> None:
    peer = Peer()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(served.registry, peer) as session:
            capabilities = session.server_capabilities
            await _levels(session, level)
    assert capabilities is not None
    assert capabilities.logging is not None
    assert [(log.level, log.data, log.logger) for log in peer.logs] == [
        (name, {"level": name}, "levels") for name in expected
    ]


async def test_a_flood_of_logs_is_bounded_and_the_client_is_told(served: Served) -> None:
    peer = Peer()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(served.registry, peer) as session:
            await session.call_tool("flood", {"n": OUTBOX_LIMIT + 500})
    assert [log.data for log in peer.logs[:-1]] == list(range(OUTBOX_LIMIT))
    last = peer.logs[-1]
    assert (last.level, last.logger) == ("warning", "toolseam.mcp")
    assert last.data == "500 log messages of this call were dropped: the client reads too slowly"


async def test_the_call_tag_is_echoed_on_its_logs_and_requests(served: Served) -> None:
    peer = Peer(answer=types.ElicitResult(action="decline"))
    with first_error(), anyio.fail_after(GUARD):
        async with connect(served.registry, peer) as session:
            first: Any = {CALL_META: "t-1"}
            second: Any = {CALL_META: "t-2"}
            await session.call_tool("log_then_ask", {"message": "who?"}, meta=first)
            await session.call_tool("ask_model", {"message": "hi"}, meta=second)
    assert [log.meta for log in peer.logs] == [{CALL_META: "t-1"}]
    assert [context.meta for _, context in peer.asked] == [{CALL_META: "t-1"}]
    assert [params.meta for params in peer.sampled] == [{CALL_META: "t-2"}]


# -- on the wire: what is queued is sent before the answer -----------------------------------


@asynccontextmanager
async def raw(server: Server[Any]) -> AsyncIterator[tuple[Any, Any]]:
    """The server's two streams, with the SDK's client left out (messages as dicts)."""
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](64)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](64)
    async with server_reads, server_writes, from_server, anyio.create_task_group() as tg:
        options = server.create_initialization_options()
        tg.start_soon(server.run, server_reads, server_writes, options)
        async with to_server:  # closed at the end: the server sees the end of its input
            yield to_server, from_server


async def _send(stream: Any, message: dict[str, Any]) -> None:
    parsed = types.jsonrpc_message_adapter.validate_python({"jsonrpc": "2.0", **message})
    await stream.send(SessionMessage(parsed))


async def _receive(stream: Any) -> dict[str, Any]:
    item: SessionMessage = await stream.receive()
    dumped: dict[str, Any] = item.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
    return dumped


async def test_queued_progress_and_logs_precede_the_answer_on_the_wire(served: Served) -> None:
    with first_error(), anyio.fail_after(GUARD):
        async with raw(create_server(served.registry)) as (send, receive):
            await _send(
                send,
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
            assert (await _receive(receive))["id"] == 1
            await _send(send, {"method": "notifications/initialized"})
            params = {"name": "steps", "arguments": {"n": 2}, "_meta": {"progressToken": "p"}}
            await _send(send, {"id": 2, "method": "tools/call", "params": params})
            wire = [await _receive(receive) for _ in range(5)]
    assert [message.get("method", message.get("id")) for message in wire] == [
        "notifications/progress",
        "notifications/message",
        "notifications/progress",
        "notifications/message",
        2,
    ]
    assert [
        m["params"]["progress"] for m in wire if m.get("method") == "notifications/progress"
    ] == [
        1,
        2,
    ]


# -- elicitation and sampling --------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "text"),
    [
        (types.ElicitResult(action="accept", content={"name": "Ada"}), 'accepted {"name": "Ada"}'),
        (types.ElicitResult(action="decline"), "declined"),
        (types.ElicitResult(action="cancel"), "cancelled"),
    ],
)
async def test_elicitation_asks_the_client(
    served: Served, answer: types.ElicitResult, text: str
) -> None:
    peer = Peer(answer=answer)
    with first_error(), anyio.fail_after(GUARD):
        async with connect(served.registry, peer) as session:
            result = await session.call_tool("ask", {"message": "Who are you?"})
    assert _text(result) == text
    [(params, _)] = peer.asked
    assert isinstance(params, types.ElicitRequestFormParams)
    assert params.message == "Who are you?"
    assert params.requested_schema["properties"]["name"]["type"] == "string"
    assert params.requested_schema["required"] == ["name"]


async def test_a_json_schema_form_is_asked_as_written_and_its_answer_checked(
    served: Served,
) -> None:
    fits = Peer(answer=types.ElicitResult(action="accept", content={"colour": "red", "n": 2}))
    misfits = Peer(answer=types.ElicitResult(action="accept", content={"colour": "green"}))
    with first_error(), anyio.fail_after(GUARD):
        async with connect(served.registry, fits) as session:
            good = await session.call_tool("ask_form", {"message": "Pick"})
        async with connect(served.registry, misfits) as session:
            bad = await session.call_tool("ask_form", {"message": "Pick"})
    asked = fits.asked[0][0]
    assert isinstance(asked, types.ElicitRequestFormParams)
    assert asked.requested_schema == FORM
    assert _text(good) == 'accepted {"colour": "red", "n": 2}'
    assert (bad.is_error, _code(bad)) == (True, "CAPABILITY_FAILED")
    assert "does not match its schema: colour" in _text(bad)


async def test_sampling_asks_the_client_model(served: Served) -> None:
    peer = Peer()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(served.registry, peer) as session:
            result = await session.call_tool("ask_model", {"message": "Capital of France?"})
    assert _text(result) == "stub: Paris"
    [params] = peer.sampled
    assert params.max_tokens == 20
    assert params.system_prompt == "be brief"
    assert [(m.role, m.content) for m in params.messages] == [
        ("user", types.TextContent(type="text", text="Capital of France?"))
    ]


@pytest.mark.parametrize(
    ("tool", "capability", "declared"),
    [
        ("ask", "elicitation", {"sample": True, "elicit": False}),
        ("ask_model", "sampling", {"sample": False, "elicit": True}),
    ],
)
async def test_a_capability_the_client_did_not_declare_is_unavailable_and_says_why(
    served: Served, tool: str, capability: str, declared: dict[str, bool]
) -> None:
    peer = Peer()
    callbacks = peer.callbacks(**declared)
    with first_error(), anyio.fail_after(GUARD):
        async with Client(create_server(served.registry), mode="legacy", **callbacks) as client:
            result = await client.session.call_tool(tool, {"message": "?"})
    assert (result.is_error, _code(result)) == (True, "CAPABILITY_UNAVAILABLE")
    why = "(form mode)" if capability == "elicitation" else ""
    assert (
        _text(result)
        == (
            f'Error: tool "{tool}": {capability} is not available: the MCP client did not '
            f"declare the {capability} capability {why}"
        ).rstrip()
    )
    assert (peer.asked, peer.sampled) == ([], [])


async def test_a_2026_client_gets_progress_and_logs_and_is_asked_between_rounds(
    served: Served,
) -> None:
    """The question travels as an InputRequiredResult (test_mcp_input_required.py)."""
    peer = Peer(answer=types.ElicitResult(action="accept", content={"name": "Ada"}))
    seen, on_progress = progress_sink()
    with first_error(), anyio.fail_after(GUARD):
        async with Client(
            create_server(served.registry),
            mode="auto",
            cache=None,
            log_level="info",
            **peer.callbacks(),
        ) as client:
            assert client.session.protocol_version == "2026-07-28"
            stepped = await client.call_tool("steps", {"n": 2}, progress_callback=on_progress)
            asked = await client.call_tool("ask", {"message": "?"})
    assert _text(stepped) == "done"
    assert seen == [(1, 2, "step 1"), (2, 2, "step 2")]
    assert [log.data for log in peer.logs] == ["step 1", "step 2"]
    assert _text(asked) == 'accepted {"name": "Ada"}'
    assert [params.message for params, _ in peer.asked] == ["?"]


# -- withdrawal ----------------------------------------------------------------------------


async def test_the_client_cancelling_the_call_withdraws_its_pending_elicitation(
    served: Served,
) -> None:
    peer = Peer()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(served.registry, peer) as session:
            async with anyio.create_task_group() as tg:
                tg.start_soon(session.call_tool, "ask", {"message": "hold"})
                await peer.pending.wait()
                tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled
            await peer.withdrawn.wait()  # the server withdrew its own request in turn
            await served.any_published.wait()
    assert served.published == [("ask", "ABORTED")]


async def test_a_deadline_withdraws_the_pending_elicitation(served: Served) -> None:
    peer = Peer()
    with first_error(), anyio.fail_after(GUARD):
        async with connect(served.registry, peer) as session:
            result = await session.call_tool("ask_then_time_out", {"message": "hold"})
            await peer.withdrawn.wait()
    assert (result.is_error, _code(result)) == (True, "TOOL_TIMEOUT")


async def test_a_log_before_a_question_reaches_the_client_first(served: Served) -> None:
    peer = Peer(answer=types.ElicitResult(action="decline"))
    with first_error(), anyio.fail_after(GUARD):
        async with connect(served.registry, peer) as session:
            await session.call_tool("log_then_ask", {"message": "who?"})
    assert peer.order == ["log about to ask", "elicit who?"]


async def test_a_request_still_pending_when_the_call_ends_is_withdrawn_before_the_answer(
    served: Served,
) -> None:
    """What a relay does: another task asks through the call while its body returns."""
    peer = Peer()
    handed: list[ToolRunContext] = []
    body_started = anyio.Event()
    body_may_return = anyio.Event()
    answers: list[Elicited[Any] | BaseException] = []

    @define_tool(name="hands_out", description="")
    async def hands_out(args: dict[str, str], exec: ToolRunContext) -> str:
        handed.append(exec)
        body_started.set()
        exec.signal.add_listener(lambda _: body_may_return.set())  # a failing test ends too
        await body_may_return.wait()
        return "returned"

    served.registry.register(hands_out)

    async def ask_through(exec: ToolRunContext) -> None:
        try:
            form: dict[str, Any] = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
            answers.append(await exec.elicit("still there?", form))
        except (AbortError, RuntimeError) as error:
            answers.append(error)

    with first_error(), anyio.fail_after(GUARD):
        async with connect(served.registry, peer) as session, anyio.create_task_group() as tg:
            results: list[types.CallToolResult] = []

            async def run_call() -> None:
                results.append(await session.call_tool("hands_out", {}))

            tg.start_soon(run_call)
            await body_started.wait()
            tg.start_soon(ask_through, handed[0])
            await peer.pending.wait()
            body_may_return.set()
            await peer.withdrawn.wait()
    assert _text(results[0]) == "returned"
    assert [str(answer) for answer in answers] == ["cancelled"]
