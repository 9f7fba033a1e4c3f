"""Hostile results and listeners at the MCP server's boundary.

What the MCP server answers must survive the wire: any result, any depth, any text.

`call_tool_result` maps a toolseam result to the ``CallToolResult`` the SDK sends. The SDK
encodes it as UTF-8 JSON (pydantic's serializer, which stops a few hundred levels down) and
an SDK client parses it back (jiter, which stops at about 200 levels). A result the wire
cannot carry cost the call its answer: a deep value made the handler raise (the client got
an internal error instead of the result), and a lone surrogate anywhere in it could not be
encoded, so the stdio server stopped answering for good. Each case here round-trips the
answer exactly as the transports do; the in-process tests run a real SDK client against
`create_server` on both backends.

The server also aborts calls, on the client's behalf (a cancelled request) and its own (a
shutdown): an abort listener's ``KeyboardInterrupt`` must not stop either half-way.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import types
from mcp.client import Client
from typing_extensions import TypedDict

from mcp_fixtures.support import GUARD
from support import code_of
from toolseam import (
    TOOL_ABORTED,
    AbortController,
    ContentBlock,
    JsonValue,
    ToolExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    define_tool,
)
from toolseam._results import render_value
from toolseam.mcp import CODE_META_KEY, call_tool_result, create_server
from toolseam.mcp._server import RunningCalls
from toolseam.mcp._wire import CONTEXTS_META_KEY, MESSAGE_META_KEY, VALUE_META_KEY

DEEP = 100_000
DEEPER_THAN_JSON = 5_000  # past json's and pydantic's recursion, cheaper to send in process


def _deep(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth - 1):
        child: dict[str, Any] = {}
        node["a"] = child
        node = child
    node["a"] = "leaf"
    return root


def _nested_list(depth: int) -> list[Any]:
    root: list[Any] = []
    for _ in range(depth - 1):
        root = [root]
    return root


def _over_the_wire(result: types.CallToolResult) -> types.CallToolResult:
    """Encode the answer as a server transport does, and parse it as an SDK client does."""
    response = types.JSONRPCResponse(
        jsonrpc="2.0",
        id=1,
        result=result.model_dump(by_alias=True, mode="json", exclude_none=True),
    )
    line = response.model_dump_json(by_alias=True, exclude_unset=True)
    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    assert isinstance(message, types.JSONRPCResponse)
    return types.CallToolResult.model_validate(message.result)


def _success(value: JsonValue, **fields: Any) -> ToolSuccess:
    """A success as the registry builds it: its content is the value's default rendering."""
    fields.setdefault("content", render_value(value))
    return ToolSuccess(value=value, **fields)


def _texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def _meta(result: types.CallToolResult) -> dict[str, Any]:
    return dict(result.meta or {})


RESULTS: dict[str, ToolResult] = {
    "a value 100 000 levels deep": _success(_deep(DEEP)),
    "a list 300 levels deep": _success(_nested_list(300)),
    "a deep context": _success("ok", additional_contexts=[_deep(DEEPER_THAN_JSON)]),
    "a failure with a deep context": ToolFailure.from_message(
        "boom", additional_contexts=[_deep(DEEPER_THAN_JSON)]
    ),
    "a deep content block": _success(
        "ok", content=[{"type": "report", "data": _deep(DEEPER_THAN_JSON)}]
    ),
    "a lone surrogate in a text value": _success("a\ud800b"),
    "a lone surrogate in a key": _success({"k\udfff": 1}),
    "a lone surrogate in a failure's message": ToolFailure.from_message("bad \ud800 input"),
}


class TestEveryResultTravels:
    """Contract §13, mcp.md: whatever the registry published, the client gets an answer."""

    @pytest.mark.parametrize("case", list(RESULTS))
    def test_the_answer_survives_encoding_and_parsing(self, case: str) -> None:
        result = RESULTS[case]
        received = _over_the_wire(call_tool_result(result))
        assert received.is_error is result.is_error
        meta = _meta(received)
        if isinstance(result, ToolFailure):
            assert meta[CODE_META_KEY if result.code else MESSAGE_META_KEY]
            assert meta[MESSAGE_META_KEY] == result.error.message.replace("\ud800", "\ufffd")
        # The model-facing text always arrives (a lone surrogate as U+FFFD).
        assert _texts(received)
        for text in _texts(received):
            text.encode("utf-8")

    def test_a_deep_value_travels_as_its_content_text(self) -> None:
        result = RESULTS["a value 100 000 levels deep"]
        received = _over_the_wire(call_tool_result(result))
        assert received.structured_content is None  # deeper than the wire carries
        [text] = _texts(received)
        assert text.startswith('{"a": {"a": ')
        assert text.endswith('"leaf"' + "}" * DEEP)

    def test_values_within_the_wire_depth_travel_exactly(self) -> None:
        value = _deep(100)
        received = _over_the_wire(call_tool_result(_success(value, additional_contexts=[[1, [2]]])))
        assert received.structured_content == value
        assert _meta(received)[CONTEXTS_META_KEY] == [[1, [2]]]
        listed = _over_the_wire(call_tool_result(_success([1, "x", None])))
        assert _meta(listed)[VALUE_META_KEY] == [1, "x", None]

    def test_a_lone_surrogate_arrives_as_the_replacement_character(self) -> None:
        received = _over_the_wire(call_tool_result(RESULTS["a lone surrogate in a text value"]))
        assert _texts(received) == ["a\ufffdb"]
        assert _meta(received)[VALUE_META_KEY] == "a\ufffdb"
        keyed = _over_the_wire(call_tool_result(RESULTS["a lone surrogate in a key"]))
        assert keyed.structured_content == {"k\ufffd": 1}


class AnyArgs(TypedDict, total=False):
    kind: str


@pytest.mark.parametrize("kind", ["deep value", "deep context", "deep block"])
async def test_a_client_gets_the_result_of_a_deep_output(kind: str) -> None:
    """In process, a real SDK client: the handler answered an internal error before."""
    registry = ToolRegistry()
    published: list[ToolResult] = []

    def observe(exec: ToolExecution, result: ToolResult) -> None:
        published.append(result)

    def render(args: AnyArgs, value: JsonValue) -> list[ContentBlock]:
        return [{"type": "report", "data": _deep(DEEPER_THAN_JSON)}]

    @define_tool(name="t", description="", render=render if kind == "deep block" else None)
    async def tool(args: AnyArgs, exec: ToolRunContext) -> Any:
        if kind == "deep context":
            exec.defer_context(_deep(DEEPER_THAN_JSON))
            return "ok"
        return _deep(DEEPER_THAN_JSON)

    registry.register(tool)
    registry.on_result(observe)
    with anyio.fail_after(GUARD):
        async with Client(create_server(registry), mode="legacy") as client:
            received = await client.call_tool("t", {})
            assert (await client.list_tools()).tools[0].name == "t"
    [result] = published
    assert isinstance(result, ToolSuccess)
    assert received.is_error is False
    if kind != "deep block":
        assert _texts(received) == [block["text"] for block in result.content]


class _Interrupted(Exception):
    """Raised by the test in place of a propagating interrupt: pytest must see a plain error."""


async def test_a_listener_interrupt_on_a_cancelled_request_is_contained() -> None:
    """The client cancels; the body's abort listener raises an interrupt as the server aborts
    the call. Before, it escaped the server's watcher task and brought the server down (the
    loop on asyncio, the session in a group on trio); now it is logged, the call ends
    ``ABORTED`` once the body stopped, and the server goes on serving.

    ``SystemExit`` stands for both interrupts (the signal module treats them alike): a
    ``KeyboardInterrupt`` escaping an asyncio loop would stop the test session itself.
    """
    interrupt = SystemExit
    registry = ToolRegistry()
    published: list[ToolResult] = []
    settled = anyio.Event()

    def observe(exec: ToolExecution, result: ToolResult) -> None:
        published.append(result)
        settled.set()

    registry.on_result(observe)
    entered = anyio.Event()

    @define_tool(name="t", description="")
    async def tool(args: AnyArgs, exec: ToolRunContext) -> str:
        def interrupting(signal: object) -> None:
            raise interrupt

        exec.signal.add_listener(interrupting)
        entered.set()
        await exec.signal.wait()
        return "stopped"

    registry.register(tool)
    try:
        with anyio.fail_after(GUARD):
            async with Client(create_server(registry), mode="legacy") as client:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(client.call_tool, "t", {})
                    await entered.wait()
                    tg.cancel_scope.cancel()  # the client sends notifications/cancelled
                await settled.wait()
                assert (await client.list_tools()).tools[0].name == "t"
    except BaseException as error:  # an interrupt in nested groups can crash pytest on 3.11
        raise _Interrupted(f"{type(error).__name__} escaped the server") from None
    assert [code_of(result) for result in published] == [TOOL_ABORTED]


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_shutdown_aborts_every_call_whatever_a_listener_raises(
    interrupt: type[BaseException],
) -> None:
    """`RunningCalls.close` (the server's shutdown) aborts every running call; an interrupt
    from the first call's listener left the others running, their bodies never told."""
    calls = RunningCalls()
    controllers = [AbortController() for _ in range(3)]
    for controller in controllers:
        calls.enter(controller)

    def interrupting(signal: object) -> None:
        raise interrupt

    controllers[0].signal.add_listener(interrupting)
    try:
        calls.close("shutting down")
    except BaseException as error:
        raise _Interrupted(f"close() raised {type(error).__name__}") from None
    assert [controller.signal.aborted for controller in controllers] == [True, True, True]
