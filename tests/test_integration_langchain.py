"""toolseam.integrations.langchain against the real langchain-core (contract §10).

`run_ai_message_tool_calls` and a tool's sync ``invoke`` are tested on asyncio and trio
(streaming custom events needs a LangChain run around the call, and a runnable's ``ainvoke``
and ``astream_events`` are asyncio-only, so those tests are too).
A tool's ``ainvoke`` is asyncio-only: langchain-core's ``BaseTool.arun`` calls
``asyncio.gather`` (in its callback manager) and ``asyncio.create_task`` itself, so the
``ainvoke`` tests pin ``anyio_backend`` to asyncio, and `test_ainvoke_needs_asyncio` pins
the trio failure (once langchain-core runs on trio it fails, and the docs must change).
Model turns come from langchain-core's own `GenericFakeChatModel` (its sync ``invoke``
works on either backend; its ``ainvoke`` is asyncio-only too).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import uuid
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import (
    FakeMessagesListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import ToolCall as LangChainToolCall
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field

from support import Published, TextArgs
from toolseam import (
    INVALID_ARGS,
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    AbortController,
    AbortSignal,
    ElicitationRequest,
    Elicited,
    LogEvent,
    Next,
    PreDecision,
    ProgressEvent,
    ToolError,
    ToolEvent,
    ToolExecution,
    ToolFailure,
    ToolHost,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    nested_input,
)
from toolseam.integrations.langchain import (
    CODE_METADATA_KEY,
    LOG_EVENT,
    LOGS_METADATA_KEY,
    PROGRESS_EVENT,
    run_ai_message_tool_calls,
    to_langchain_tools,
)

ASYNCIO_ONLY = pytest.mark.parametrize("anyio_backend", ["asyncio"])


class SearchArgs(BaseModel):
    query: str = Field(description="What to look for.", min_length=1)
    limit: int = Field(default=5, ge=1, le=50)


@define_tool(name="echo", description="Echo the text back.")
async def echo(args: TextArgs, exec: ToolRunContext) -> str:
    return args["text"]


@define_tool(name="search", description="Search the notes.")
async def search(args: SearchArgs, exec: ToolRunContext) -> list[str]:
    return [args.query] * args.limit


@define_tool(name="refuse", description="Always fails with a code.")
async def refuse(args: TextArgs, exec: ToolRunContext) -> str:
    raise ToolError(f"will not {args['text']}", code="REFUSED")


@define_tool(name="shout", description="Echo in a worker thread.")
def shout(args: TextArgs, exec: ToolRunContext) -> str:
    return args["text"].upper()


class Recorder:
    """A registry with tools, its published results and the signals its calls carried."""

    def __init__(self) -> None:
        self.registry = ToolRegistry()
        self.published = Published()
        self.call_ids: list[str] = []
        self.signals: list[AbortSignal] = []
        for tool in (echo, search, refuse, shout):
            self.registry.register(tool)
        self.registry.on_result(self._record)
        self.registry.on_pre_execute(self._pre)

    def _record(self, exec: ToolExecution, result: Any) -> None:
        self.call_ids.append(exec.call_id)
        self.published(exec, result)

    async def _pre(self, exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        self.signals.append(exec.signal)
        return await next()

    def tool(self, name: str) -> BaseTool:
        [tool] = [tool for tool in to_langchain_tools(self.registry) if tool.name == name]
        return tool


def tool_call(name: str, call_id: str, **args: Any) -> LangChainToolCall:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def model_turn(*calls: LangChainToolCall) -> AIMessage:
    """The turn langchain-core's fake chat model gives for a prompt."""
    model = GenericFakeChatModel(messages=iter([AIMessage("", tool_calls=list(calls))]))
    turn = model.invoke([HumanMessage("go")])
    assert isinstance(turn, AIMessage)
    return turn


def assert_balanced(history: Sequence[BaseMessage]) -> None:
    """Each AI turn's calls are answered by the ToolMessages right after it, once, in order."""
    position = 0
    while position < len(history):
        message = history[position]
        position += 1
        if not isinstance(message, AIMessage):
            assert not isinstance(message, ToolMessage), f"unasked-for answer {message!r}"
            continue
        asked = [call["id"] for call in message.tool_calls]
        asked += [call["id"] for call in message.invalid_tool_calls]
        answered: list[str] = []
        while position < len(history) and isinstance(history[position], ToolMessage):
            answer = history[position]
            assert isinstance(answer, ToolMessage)
            answered.append(answer.tool_call_id)
            position += 1
        assert answered == asked


def only_failure(result: object) -> ToolFailure:
    assert isinstance(result, ToolFailure)
    return result


# -- the tools ------------------------------------------------------------------------------


def test_tools_carry_the_registry_names_descriptions_and_schemas() -> None:
    recorder = Recorder()
    tools = to_langchain_tools(recorder.registry)
    schemas = recorder.registry.schemas()

    assert all(isinstance(tool, BaseTool) for tool in tools)
    assert [tool.name for tool in tools] == [schema.name for schema in schemas]
    assert [tool.description for tool in tools] == [schema.description for schema in schemas]
    for tool, schema in zip(tools, schemas, strict=True):
        # The registry's own JSON schema, as a plain dict: not re-derived by LangChain.
        assert type(tool.args_schema) is dict
        assert tool.args_schema == schema.parameters
        assert tool.args == schema.parameters["properties"]
        assert tool.tool_call_schema == {**schema.parameters, "description": schema.description}
    search_tool = tools[1]
    assert search_tool.args["query"]["minLength"] == 1
    assert search_tool.args["limit"] == {
        "default": 5,
        "maximum": 50,
        "minimum": 1,
        "title": "Limit",
        "type": "integer",
    }
    # What a chat model is told (LangChain drops the "title" keys on its way).
    function = convert_to_openai_tool(search_tool)["function"]
    assert function["name"] == "search"
    assert function["description"] == "Search the notes."
    assert function["parameters"]["required"] == ["query"]
    assert function["parameters"]["properties"]["query"] == {
        "description": "What to look for.",
        "minLength": 1,
        "type": "string",
    }


def test_tool_schemas_are_copies_the_registry_does_not_share() -> None:
    recorder = Recorder()
    [tool, *_] = to_langchain_tools(recorder.registry)
    assert isinstance(tool.args_schema, dict)
    tool.args_schema["properties"]["text"]["type"] = "number"
    assert recorder.registry.schemas()[0].parameters["properties"]["text"]["type"] == "string"


def test_to_langchain_tools_rejects_what_is_not_a_registry() -> None:
    with pytest.raises(TypeError, match=r"^registry must be a ToolRegistry, got dict$"):
        to_langchain_tools({})  # type: ignore[arg-type]


@ASYNCIO_ONLY
async def test_ainvoke_with_arguments_returns_the_content_text() -> None:
    recorder = Recorder()
    assert await recorder.tool("echo").ainvoke({"text": "hi"}) == "hi"
    assert await recorder.tool("search").ainvoke({"query": "q", "limit": 2}) == '["q", "q"]'
    assert await recorder.tool("refuse").ainvoke({"text": "jump"}) == "Error: will not jump"

    # Each call got an id of its own and a fresh signal that nothing aborted.
    assert len(set(recorder.call_ids)) == 3
    assert all(call_id.startswith("toolseam_") for call_id in recorder.call_ids)
    assert len({id(signal) for signal in recorder.signals}) == 3
    assert not any(signal.aborted for signal in recorder.signals)


@ASYNCIO_ONLY
async def test_ainvoke_with_a_tool_call_returns_its_tool_message() -> None:
    recorder = Recorder()
    success = await recorder.tool("echo").ainvoke(tool_call("echo", "call_a", text="hi"))
    failure = await recorder.tool("refuse").ainvoke(tool_call("refuse", "call_b", text="jump"))

    assert recorder.call_ids == ["call_a", "call_b"]  # LangChain's id is the call_id
    ok, failed = recorder.published.results
    assert isinstance(success, ToolMessage)
    assert (success.tool_call_id, success.name, success.content) == ("call_a", "echo", "hi")
    assert success.status == "success"
    assert success.response_metadata == {}
    assert success.artifact == ok.to_json()
    assert isinstance(failure, ToolMessage)
    assert (failure.tool_call_id, failure.name) == ("call_b", "refuse")
    assert failure.content == "Error: will not jump"
    assert failure.status == "error"
    assert failure.response_metadata == {CODE_METADATA_KEY: "REFUSED"}
    assert failure.artifact == failed.to_json()
    assert failure.artifact["error"]["info"] == {"name": "ToolError", "code": "REFUSED"}


@ASYNCIO_ONLY
async def test_host_cancelling_ainvoke_aborts_the_body_and_awaits_its_cleanup() -> None:
    """LangGraph stops a node by cancelling its task: the body still stops cooperatively.

    langchain-core runs ``_arun`` in an asyncio task of its own, which an anyio cancel
    scope reaches with repeated bare ``Task.cancel()`` calls; the body's shielded cleanup
    must still run to its end before the cancellation goes on.
    """
    registry = ToolRegistry()
    published = Published()
    registry.on_result(published)
    events: list[str] = []

    @define_tool(name="work", description="Works until stopped, then cleans up.")
    async def work(args: TextArgs, exec: ToolRunContext) -> str:
        try:
            await exec.signal.wait()
        finally:
            events.append("body stopped")
            with anyio.CancelScope(shield=True):
                await anyio.lowlevel.checkpoint()
                await anyio.lowlevel.checkpoint()
                events.append("cleanup finished")
        return "unreachable"

    registry.register(work)
    [tool] = to_langchain_tools(registry)

    async def invoke() -> None:
        try:
            await tool.ainvoke(tool_call("work", "call_1", text="x"))
        finally:
            events.append("cancellation went on")

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(invoke)
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    assert events == ["body stopped", "cleanup finished", "cancellation went on"]
    assert only_failure(published.only).code == TOOL_ABORTED


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_ainvoke_needs_asyncio() -> None:
    """langchain-core's async tool path is asyncio-only (``asyncio.gather``, ``create_task``)."""
    recorder = Recorder()
    with pytest.raises(RuntimeError, match="event loop"):
        await recorder.tool("echo").ainvoke(tool_call("echo", "call_1", text="hi"))
    assert recorder.published.results == []


def test_sync_invoke_runs_the_call_on_a_private_loop() -> None:
    recorder = Recorder()
    assert recorder.tool("echo").invoke({"text": "hi"}) == "hi"
    message = recorder.tool("shout").invoke(tool_call("shout", "call_1", text="hi"))
    assert isinstance(message, ToolMessage)
    assert (message.tool_call_id, message.content, message.status) == ("call_1", "HI", "success")
    failure = recorder.tool("refuse").invoke(tool_call("refuse", "call_2", text="go"))
    assert isinstance(failure, ToolMessage)
    assert failure.status == "error"
    assert failure.response_metadata == {CODE_METADATA_KEY: "REFUSED"}
    assert recorder.call_ids[1:] == ["call_1", "call_2"]
    assert len(recorder.published.results) == 3


def test_sync_invoke_works_in_a_thread_of_its_own() -> None:
    recorder = Recorder()
    answers: list[object] = []
    thread = threading.Thread(
        target=lambda: answers.append(recorder.tool("echo").invoke({"text": "t"}))
    )
    thread.start()
    thread.join()
    assert answers == ["t"]


async def test_sync_invoke_refuses_inside_a_running_loop() -> None:
    recorder = Recorder()
    with pytest.raises(
        RuntimeError,
        match=(
            r'^tool "echo": invoke\(\) cannot run inside a running event loop, which it would '
            r"block; await ainvoke\(\) instead$"
        ),
    ):
        recorder.tool("echo").invoke({"text": "hi"})
    assert recorder.published.results == []


# -- run_ai_message_tool_calls -----------------------------------------------------------


async def test_three_tool_calls_with_one_failing_get_three_tool_messages() -> None:
    recorder = Recorder()
    turn = model_turn(
        tool_call("echo", "call_1", text="a"),
        tool_call("refuse", "call_2", text="b"),
        tool_call("search", "call_3", query="c", limit=1),
    )
    stop = AbortController()
    replies = await run_ai_message_tool_calls(recorder.registry, turn, signal=stop.signal)

    assert [reply.tool_call_id for reply in replies] == ["call_1", "call_2", "call_3"]
    assert [reply.name for reply in replies] == ["echo", "refuse", "search"]
    assert [reply.content for reply in replies] == ["a", "Error: will not b", '["c"]']
    assert [reply.status for reply in replies] == ["success", "error", "success"]
    assert [reply.response_metadata for reply in replies] == [
        {},
        {CODE_METADATA_KEY: "REFUSED"},
        {},
    ]
    by_id = dict(zip(recorder.call_ids, recorder.published.results, strict=True))
    assert [reply.artifact for reply in replies] == [
        by_id[call_id].to_json() for call_id in ("call_1", "call_2", "call_3")
    ]
    assert_balanced([HumanMessage("go"), turn, *replies])


async def test_abort_while_the_first_body_runs_answers_every_call() -> None:
    registry = ToolRegistry()
    published = Published()
    registry.on_result(published)
    started: list[str] = []

    def parallel(args: TextArgs) -> bool:
        return True

    @define_tool(name="wait", description="Waits to be stopped.", is_concurrency_safe=parallel)
    async def wait(args: TextArgs, exec: ToolRunContext) -> str:
        started.append(args["text"])
        await exec.signal.wait()
        exec.signal.raise_if_aborted()
        return args["text"]

    registry.register(wait)
    turn = model_turn(*(tool_call("wait", f"call_{n}", text=str(n)) for n in (1, 2, 3)))
    stop = AbortController()
    replies: list[ToolMessage] = []

    async def run_turn() -> None:
        replies.extend(
            await run_ai_message_tool_calls(registry, turn, signal=stop.signal, max_parallel=1)
        )

    async with anyio.create_task_group() as group:
        group.start_soon(run_turn)
        await anyio.wait_all_tasks_blocked()
        assert started == ["1"]  # the second call waits for the one slot
        stop.abort("user pressed stop")

    assert started == ["1"]
    assert [reply.tool_call_id for reply in replies] == ["call_1", "call_2", "call_3"]
    assert [reply.status for reply in replies] == ["error"] * 3
    codes = [reply.response_metadata[CODE_METADATA_KEY] for reply in replies]
    assert codes == [TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH, TOOL_ABORTED_BEFORE_DISPATCH]
    assert [reply.content for reply in replies] == [
        "Error: tool call aborted",
        "Error: tool call aborted before dispatch",
        "Error: tool call aborted before dispatch",
    ]
    # The skipped calls' results were published too, and are what the artifacts hold.
    assert [reply.artifact for reply in replies] == [r.to_json() for r in published.results]
    assert_balanced([HumanMessage("go"), turn, *replies])


async def test_parallel_calls_answer_in_model_order_whatever_order_they_finish_in() -> None:
    registry = ToolRegistry()
    finished: list[str] = []
    turns = {name: anyio.Event() for name in ("a", "b", "c")}

    def parallel(args: TextArgs) -> bool:
        return True

    @define_tool(name="step", description="Finishes on its turn.", is_concurrency_safe=parallel)
    async def step(args: TextArgs, exec: ToolRunContext) -> str:
        await turns[args["text"]].wait()
        finished.append(args["text"])
        return args["text"]

    registry.register(step)
    turn = model_turn(*(tool_call("step", f"call_{name}", text=name) for name in "abc"))
    replies: list[ToolMessage] = []

    async def run_turn() -> None:
        stop = AbortController()
        replies.extend(await run_ai_message_tool_calls(registry, turn, signal=stop.signal))

    async with anyio.create_task_group() as group:
        group.start_soon(run_turn)
        for name in "cba":
            await anyio.wait_all_tasks_blocked()
            turns[name].set()
    assert finished == ["c", "b", "a"]
    assert [(reply.tool_call_id, reply.content) for reply in replies] == [
        ("call_a", "a"),
        ("call_b", "b"),
        ("call_c", "c"),
    ]


async def test_invalid_tool_calls_are_answered_without_reaching_the_registry() -> None:
    recorder = Recorder()
    turn = AIMessage(
        "",
        tool_calls=[tool_call("echo", "call_1", text="a")],
        invalid_tool_calls=[
            {
                "type": "invalid_tool_call",
                "id": "call_2",
                "name": "echo",
                "args": '{"text": ',
                "error": "arguments are not valid JSON",
            },
            {
                "type": "invalid_tool_call",
                "id": "call_3",
                "name": None,
                "args": None,
                "error": None,
            },
        ],
    )
    stop = AbortController()
    replies = await run_ai_message_tool_calls(recorder.registry, turn, signal=stop.signal)

    assert recorder.call_ids == ["call_1"]
    assert [reply.tool_call_id for reply in replies] == ["call_1", "call_2", "call_3"]
    assert [reply.status for reply in replies] == ["success", "error", "error"]
    assert [reply.content for reply in replies[1:]] == [
        "Error: invalid tool call: arguments are not valid JSON",
        "Error: invalid tool call: its arguments could not be parsed",
    ]
    assert [reply.name for reply in replies] == ["echo", "echo", None]
    assert replies[1].response_metadata == {CODE_METADATA_KEY: INVALID_ARGS}
    assert replies[1].artifact["error"] == {
        "message": "invalid tool call: arguments are not valid JSON",
        "info": {"name": "ToolArgsError", "code": INVALID_ARGS},
    }
    assert_balanced([turn, *replies])


@pytest.mark.parametrize(
    ("calls", "invalid", "message"),
    [
        ([tool_call("echo", "a", text="x"), {**tool_call("echo", "b", text="y"), "id": None}],
         [], r"^tool call 1 of the message has no id to answer it by$"),
        ([tool_call("echo", "a", text="x"), tool_call("echo", "a", text="y")],
         [], r"^duplicate tool call id 'a' in one message$"),
        ([tool_call("echo", "a", text="x")],
         [{"type": "invalid_tool_call", "id": "a", "name": "echo", "args": "{", "error": None}],
         r"^duplicate tool call id 'a' in one message$"),
    ],
)  # fmt: skip
async def test_calls_that_cannot_be_answered_by_id_are_refused_before_anything_runs(
    calls: list[LangChainToolCall], invalid: list[Any], message: str
) -> None:
    recorder = Recorder()
    turn = AIMessage("", tool_calls=calls, invalid_tool_calls=invalid)
    stop = AbortController()
    with pytest.raises(ValueError, match=message):
        await run_ai_message_tool_calls(recorder.registry, turn, signal=stop.signal)
    assert recorder.published.results == []


async def test_run_ai_message_tool_calls_rejects_what_is_not_an_ai_message() -> None:
    recorder = Recorder()
    stop = AbortController()
    with pytest.raises(TypeError, match=r"^message must be an AIMessage, got HumanMessage$"):
        await run_ai_message_tool_calls(
            recorder.registry,
            HumanMessage("hi"),  # type: ignore[arg-type]
            signal=stop.signal,
        )


async def test_content_is_the_text_or_else_the_blocks() -> None:
    registry = ToolRegistry()

    def two_texts(args: TextArgs, value: str) -> list[dict[str, str]]:
        return [{"type": "text", "text": value}, {"type": "text", "text": "second"}]

    def with_image(args: TextArgs, value: str) -> list[dict[str, str]]:
        return [{"type": "text", "text": value}, {"type": "image", "url": "https://x/y.png"}]

    @define_tool(name="texts", description="Two text blocks.", render=two_texts)
    async def texts(args: TextArgs, exec: ToolRunContext) -> str:
        return args["text"]

    @define_tool(name="picture", description="Text and an image.", render=with_image)
    async def picture(args: TextArgs, exec: ToolRunContext) -> str:
        return args["text"]

    registry.register(texts)
    registry.register(picture)
    turn = model_turn(tool_call("texts", "t", text="first"), tool_call("picture", "p", text="a"))
    stop = AbortController()
    joined, blocks = await run_ai_message_tool_calls(registry, turn, signal=stop.signal)

    assert joined.content == "first\nsecond"
    assert blocks.content == [
        {"type": "text", "text": "a"},
        {"type": "image", "url": "https://x/y.png"},
    ]
    assert isinstance(blocks.content[1], dict)
    blocks.content[1]["url"] = "edited"  # plain containers: LangChain may edit them
    assert blocks.artifact["content"][1]["url"] == "https://x/y.png"


async def test_host_cancellation_publishes_the_started_call_and_goes_on() -> None:
    registry = ToolRegistry()
    published = Published()
    registry.on_result(published)

    @define_tool(name="wait", description="Waits to be stopped.")
    async def wait(args: TextArgs, exec: ToolRunContext) -> str:
        await exec.signal.wait()
        return "stopped"

    registry.register(wait)
    turn = model_turn(tool_call("wait", "call_1", text="1"), tool_call("wait", "call_2", text="2"))
    stop = AbortController()
    returned: list[list[ToolMessage]] = []

    async def run_turn() -> None:
        returned.append(await run_ai_message_tool_calls(registry, turn, signal=stop.signal))

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(run_turn)
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    assert returned == []
    assert only_failure(published.only).code == TOOL_ABORTED


async def test_a_message_without_tool_calls_still_checkpoints() -> None:
    recorder = Recorder()
    stop = AbortController()
    reached = False
    with anyio.CancelScope() as scope:
        scope.cancel()
        await run_ai_message_tool_calls(recorder.registry, AIMessage("done"), signal=stop.signal)
        reached = True
    assert not reached
    assert scope.cancelled_caught


@ASYNCIO_ONLY
async def test_an_agent_turn_with_the_fake_chat_model() -> None:
    """The loop a LangChain agent runs: model, tools, model — through `ainvoke` (asyncio)."""
    recorder = Recorder()
    model = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage("", tool_calls=[tool_call("echo", "call_1", text="ping")]),
                AIMessage("The tool said ping."),
            ]
        )
    )
    history: list[BaseMessage] = [HumanMessage("Say ping through the tool.")]
    turn = await model.ainvoke(history)
    assert isinstance(turn, AIMessage)
    history.append(turn)
    stop = AbortController()
    history.extend(await run_ai_message_tool_calls(recorder.registry, turn, signal=stop.signal))
    final = await model.ainvoke(history)

    assert_balanced(history)
    assert [type(message).__name__ for message in history] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
    ]
    assert history[-1].content == "ping"
    assert final.content == "The tool said ping."


def test_import_toolseam_never_imports_langchain() -> None:
    probe = (
        "import sys, toolseam, toolseam.integrations; "
        "assert 'langchain_core' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)


# -- progress and logs: LangChain custom events, and the ToolMessage for logs -----------------


@define_tool(name="report", description="Reports progress and a log.")
async def report(args: TextArgs, exec: ToolRunContext) -> str:
    exec.progress(1, 3, "one")
    exec.log("info", {"step": [1]}, logger="report")
    exec.progress(3, 3)
    return "reported"


def reported(
    tool_call_id: str, call_id: str | None = None, tool: str = "report"
) -> list[tuple[str, dict[str, Any]]]:
    """The custom events of one run of ``report``: (name, data)."""
    head = {"tool_call_id": tool_call_id, "call_id": call_id or tool_call_id, "tool": tool}
    return [
        (PROGRESS_EVENT, {**head, "progress": 1, "total": 3, "message": "one"}),
        (LOG_EVENT, {**head, "level": "info", "data": {"step": [1]}, "logger": "report"}),
        (PROGRESS_EVENT, {**head, "progress": 3, "total": 3, "message": None}),
    ]


def logs_of(events: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [data for name, data in events if name == LOG_EVENT]


class Handler(AsyncCallbackHandler):
    """A callback handler that keeps the custom events and the tool ends it saw."""

    def __init__(self, *, fail: bool = False) -> None:
        self.seen: list[tuple[str, Any]] = []
        self.fail = fail
        self.raise_error = fail  # LangChain re-raises a handler's error only when asked

    async def on_custom_event(
        self,
        name: str,
        data: Any,
        *,
        run_id: uuid.UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if self.fail:
            raise RuntimeError("the UI went away")
        self.seen.append((name, data))

    async def on_tool_end(self, output: Any, **kwargs: Any) -> None:
        self.seen.append(("tool end", output))


class HostSink:
    """A caller's own progress and log consumer."""

    def __init__(self) -> None:
        self.events: list[tuple[str, ToolEvent]] = []

    def __call__(self, exec: ToolExecution, event: ToolEvent) -> None:
        self.events.append((exec.call_id, event))

    def host(self) -> ToolHost:
        return ToolHost(on_progress=self, on_log=self)


@ASYNCIO_ONLY
async def test_ainvoke_streams_progress_and_logs_between_tool_start_and_end() -> None:
    registry = ToolRegistry()
    registry.register(report)
    [tool] = to_langchain_tools(registry)

    told = [
        (event["event"], event["name"], event["data"])
        async for event in tool.astream_events(tool_call("report", "call_1", text="x"))
    ]

    assert [(kind, name) for kind, name, _ in told] == [
        ("on_tool_start", "report"),
        ("on_custom_event", PROGRESS_EVENT),
        ("on_custom_event", LOG_EVENT),
        ("on_custom_event", PROGRESS_EVENT),
        ("on_tool_end", "report"),
    ]
    assert [(name, data) for _, name, data in told[1:4]] == reported("call_1")
    message = told[-1][2]["output"]
    assert isinstance(message, ToolMessage)
    assert message.response_metadata == {LOGS_METADATA_KEY: logs_of(reported("call_1"))}


@ASYNCIO_ONLY
async def test_a_callback_handler_sees_them_and_a_plain_call_streams_them_too() -> None:
    registry = ToolRegistry()
    registry.register(report)
    [tool] = to_langchain_tools(registry)
    handler = Handler()

    assert await tool.ainvoke({"text": "x"}, config={"callbacks": [handler]}) == "reported"

    *custom, (end, output) = handler.seen
    assert (end, output) == ("tool end", "reported")
    [call_id] = {data["call_id"] for _, data in custom}
    assert call_id.startswith("toolseam_")  # a plain call's generated id
    assert custom == reported(call_id)


@ASYNCIO_ONLY
async def test_a_raising_handler_is_contained_and_the_message_keeps_the_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry()
    registry.register(report)
    [tool] = to_langchain_tools(registry)

    message = await tool.ainvoke(
        tool_call("report", "call_1", text="x"), config={"callbacks": [Handler(fail=True)]}
    )

    assert isinstance(message, ToolMessage)
    assert message.content == "reported"
    assert message.response_metadata == {LOGS_METADATA_KEY: logs_of(reported("call_1"))}
    (logged,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert logged.getMessage().startswith("delivering tool 'report''s ProgressEvent")


def test_sync_invoke_dispatches_to_a_sync_handler() -> None:
    seen: list[tuple[str, Any]] = []

    class SyncHandler(BaseCallbackHandler):
        def on_custom_event(
            self,
            name: str,
            data: Any,
            *,
            run_id: uuid.UUID,
            tags: list[str] | None = None,
            metadata: dict[str, Any] | None = None,
            **kwargs: Any,
        ) -> None:
            seen.append((name, data))

    registry = ToolRegistry()
    registry.register(report)
    [tool] = to_langchain_tools(registry)
    message = tool.invoke(tool_call("report", "call_1", text="x"), {"callbacks": [SyncHandler()]})

    assert isinstance(message, ToolMessage)
    assert seen == reported("call_1")


@ASYNCIO_ONLY
async def test_a_sync_body_and_a_nested_call_report_in_order() -> None:
    registry = ToolRegistry()

    @define_tool(name="count", description="Counts in a worker thread, then calls report.")
    def count(args: TextArgs, exec: ToolRunContext) -> str:
        for step in range(50):
            exec.progress(step, 50)
        anyio.from_thread.run(
            registry.execute,
            nested_input(exec, call_id="inner_1", name="report", arguments=args),
        )
        return "counted"

    registry.register(count)
    registry.register(report)
    tool = next(tool for tool in to_langchain_tools(registry) if tool.name == "count")
    handler = Handler()

    message = await tool.ainvoke(
        tool_call("count", "call_1", text="x"), config={"callbacks": [handler]}
    )

    head = {"tool_call_id": "call_1", "call_id": "call_1", "tool": "count"}
    assert handler.seen == [
        *(
            (PROGRESS_EVENT, {**head, "progress": step, "total": 50, "message": None})
            for step in range(50)
        ),
        *reported("call_1", "inner_1"),
        ("tool end", message),
    ]
    assert isinstance(message, ToolMessage)
    assert message.response_metadata == {LOGS_METADATA_KEY: logs_of(reported("call_1", "inner_1"))}


@ASYNCIO_ONLY
async def test_an_agent_step_streams_its_tool_calls_events() -> None:
    """The loop of a LangGraph node: model, then the turn's tools, inside one runnable."""
    registry = ToolRegistry()
    registry.register(report)
    # FakeMessagesListChatModel: GenericFakeChatModel streams no tool calls (astream_events
    # streams the model).
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[
                    tool_call("report", "call_1", text="a"),
                    tool_call("report", "call_2", text="b"),
                ],
            )
        ]
    )

    async def step(history: list[BaseMessage]) -> list[BaseMessage]:
        turn = await model.ainvoke(history)
        assert isinstance(turn, AIMessage)
        stop = AbortController()
        return [turn, *await run_ai_message_tool_calls(registry, turn, signal=stop.signal)]

    told: list[tuple[str, Any]] = []
    output: list[BaseMessage] = []
    async for event in RunnableLambda(step).astream_events([HumanMessage("go")]):
        if event["event"] == "on_custom_event":
            told.append((event["name"], event["data"]))
        elif event["event"] == "on_chain_end":
            output = event["data"]["output"]

    # The two calls are exclusive (report has no is_concurrency_safe): one after the other.
    assert told == [*reported("call_1"), *reported("call_2")]
    _, first, second = output
    assert_balanced([HumanMessage("go"), *output])
    assert isinstance(first, ToolMessage)
    assert isinstance(second, ToolMessage)
    assert first.response_metadata == {LOGS_METADATA_KEY: logs_of(reported("call_1"))}
    assert second.response_metadata == {LOGS_METADATA_KEY: logs_of(reported("call_2"))}


async def test_outside_a_run_the_host_sees_them_and_the_messages_keep_the_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry()
    registry.register(report)
    sink = HostSink()
    turn = model_turn(tool_call("report", "call_1", text="a"))
    stop = AbortController()

    [reply] = await run_ai_message_tool_calls(registry, turn, signal=stop.signal, host=sink.host())

    assert sink.events == [
        ("call_1", ProgressEvent(1, 3, "one")),
        ("call_1", LogEvent("info", {"step": [1]}, "report")),
        ("call_1", ProgressEvent(3, 3)),
    ]
    assert reply.response_metadata == {LOGS_METADATA_KEY: logs_of(reported("call_1"))}
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_a_sync_bodys_events_reach_the_host_and_its_message_outside_a_run() -> None:
    """A `def` body's events arrive in loop callbacks, where the first one starts the drain."""
    registry = ToolRegistry()

    @define_tool(name="count", description="Counts in a worker thread.")
    def count(args: TextArgs, exec: ToolRunContext) -> str:
        for step in range(20):
            exec.progress(step, 20)
        exec.log("debug", step)
        return "counted"

    registry.register(count)
    sink = HostSink()
    turn = model_turn(
        tool_call("count", "call_1", text="a"), tool_call("count", "call_2", text="b")
    )
    stop = AbortController()

    replies = await run_ai_message_tool_calls(registry, turn, signal=stop.signal, host=sink.host())

    for call_id in ("call_1", "call_2"):
        assert [event for seen, event in sink.events if seen == call_id] == [
            *(ProgressEvent(step, 20) for step in range(20)),
            LogEvent("debug", 19),
        ]
    assert [reply.response_metadata[LOGS_METADATA_KEY][0]["data"] for reply in replies] == [19, 19]


async def test_a_stop_mid_call_answers_every_call_once_after_what_was_reported() -> None:
    registry = ToolRegistry()
    started = anyio.Event()

    @define_tool(name="work", description="Reports, logs, then waits for its signal.")
    async def work(args: TextArgs, exec: ToolRunContext) -> str:
        exec.progress(1, 10)
        exec.log("notice", "working")
        started.set()
        await exec.signal.wait()
        exec.signal.raise_if_aborted()
        return "unreachable"

    registry.register(work)
    published = Published()
    registry.on_result(published)
    sink = HostSink()
    turn = model_turn(tool_call("work", "call_1", text="a"), tool_call("work", "call_2", text="b"))
    stop = AbortController()
    replies: list[ToolMessage] = []

    async def run_turn() -> None:
        replies.extend(
            await run_ai_message_tool_calls(registry, turn, signal=stop.signal, host=sink.host())
        )

    async with anyio.create_task_group() as group:
        group.start_soon(run_turn)
        await started.wait()
        stop.abort("user pressed stop")

    assert [r.tool_call_id for r in replies] == ["call_1", "call_2"]
    codes = [r.response_metadata[CODE_METADATA_KEY] for r in replies]
    assert codes == [TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH]
    assert len(published.results) == 2
    assert sink.events == [
        ("call_1", ProgressEvent(1, 10)),
        ("call_1", LogEvent("notice", "working")),
    ]
    assert replies[0].response_metadata[LOGS_METADATA_KEY] == [
        {
            "tool_call_id": "call_1",
            "call_id": "call_1",
            "tool": "work",
            "level": "notice",
            "data": "working",
            "logger": None,
        }
    ]
    assert LOGS_METADATA_KEY not in replies[1].response_metadata


@ASYNCIO_ONLY
async def test_host_cancelling_a_streaming_ainvoke_still_publishes_one_result() -> None:
    registry = ToolRegistry()
    published = Published()
    registry.on_result(published)
    handler = Handler()
    events: list[str] = []

    @define_tool(name="work", description="Reports, then works until stopped.")
    async def work(args: TextArgs, exec: ToolRunContext) -> str:
        exec.progress(1, 2)
        try:
            await exec.signal.wait()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.lowlevel.checkpoint()
                events.append("cleanup finished")
        return "unreachable"

    registry.register(work)
    [tool] = to_langchain_tools(registry)

    async def invoke() -> None:
        try:
            await tool.ainvoke(tool_call("work", "call_1", text="x"), {"callbacks": [handler]})
        finally:
            events.append("cancellation went on")

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(invoke)
            while not handler.seen:
                await anyio.wait_all_tasks_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    assert events == ["cleanup finished", "cancellation went on"]
    assert only_failure(published.only).code == TOOL_ABORTED
    assert [name for name, _ in handler.seen] == [PROGRESS_EVENT]


@ASYNCIO_ONLY
async def test_a_host_factory_gets_the_runs_config() -> None:
    asked: list[tuple[str, str]] = []

    def host(config: RunnableConfig) -> ToolHost:
        user = config.get("configurable", {})["user"]

        async def elicit(
            exec: ToolExecution, request: ElicitationRequest, signal: AbortSignal
        ) -> Elicited[Any]:
            asked.append((user, request.message))
            return Elicited("accept", {"ok": True})

        return ToolHost(elicit=elicit)

    @define_tool(name="confirm", description="Asks the user.")
    async def confirm(args: TextArgs, exec: ToolRunContext) -> str:
        return str(await exec.elicit(args["text"], {"type": "object", "properties": {}}))

    registry = ToolRegistry()
    registry.register(confirm)
    [tool] = to_langchain_tools(registry, host=host)
    answer = await tool.ainvoke({"text": "Go on?"}, config={"configurable": {"user": "ada"}})

    assert answer == 'accepted {"ok": true}'
    assert asked == [("ada", "Go on?")]


def test_to_langchain_tools_checks_the_host() -> None:
    with pytest.raises(
        TypeError,
        match=r"^host must be a ToolHost, a callable making one per call, or None, got int$",
    ):
        to_langchain_tools(ToolRegistry(), host=1)  # type: ignore[arg-type]
