"""contract §6: the runtime side of what `define_tool`'s types promise.

The static side lives in typetests/test_define_tool.yml (cases named after the same
behaviours): each body kind that type-checks here must also define and run, and the options
typed against the body's arguments must behave as typed.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Generator, Mapping, Sequence
from typing import Any

import anyio
import pytest
from typing_extensions import TypedDict

from support import make_input
from toolseam import (
    INVALID_TOOL_OUTPUT,
    ContentBlock,
    JsonValue,
    ToolDefinition,
    ToolExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    define_tool,
)


class Args(TypedDict):
    text: str


async def _run(definition: ToolDefinition[Any, Any], arguments: object) -> ToolResult:
    registry = ToolRegistry()
    registry.register(definition)
    return await registry.execute(make_input(definition.name, arguments))


class TestPartialBodies:
    """`functools.partial` bodies: annotations are read through the partial."""

    async def test_async_partial_body_is_validated_and_awaited(self) -> None:
        async def shout(args: Args, exec: ToolRunContext, *, suffix: str) -> str:
            return args["text"].upper() + suffix

        tool = define_tool(name="shout", description="")(functools.partial(shout, suffix="!"))
        assert tool.parameters["required"] == ["text"]
        result = await _run(tool, {"text": "hi"})
        assert isinstance(result, ToolSuccess)
        assert result.value == "HI!"

    async def test_sync_partial_body_runs_in_a_worker_thread(self) -> None:
        threads: list[int] = []

        def count(args: Args, exec: ToolRunContext, *, extra: int) -> int:
            threads.append(threading.get_ident())
            return len(args["text"]) + extra

        tool = define_tool(name="count", description="")(functools.partial(count, extra=10))
        result = await _run(tool, {"text": "abc"})
        assert isinstance(result, ToolSuccess)
        assert result.value == 13
        assert threads
        assert threads != [threading.get_ident()]

    async def test_partial_body_output_is_validated_against_its_annotation(self) -> None:
        async def wrong(args: Args, exec: ToolRunContext, *, value: object) -> int:
            return value  # type: ignore[return-value]

        tool = define_tool(name="wrong", description="")(functools.partial(wrong, value="x"))
        result = await _run(tool, {"text": "abc"})
        assert isinstance(result, ToolFailure)
        assert result.error.info is not None
        assert result.error.info.code == INVALID_TOOL_OUTPUT

    async def test_nested_partials_are_unwrapped(self) -> None:
        async def join(args: Args, exec: ToolRunContext, *, a: str, b: str) -> str:
            return a + args["text"] + b

        inner = functools.partial(join, a="<")
        tool = define_tool(name="join", description="")(functools.partial(inner, b=">"))
        result = await _run(tool, {"text": "x"})
        assert isinstance(result, ToolSuccess)
        assert result.value == "<x>"


class TestCallableObjectBodies:
    """Callable objects: annotations are read from the class's ``__call__``."""

    async def test_async_callable_object_body(self) -> None:
        class Greeter:
            def __init__(self, greeting: str) -> None:
                self.greeting = greeting

            async def __call__(self, args: Args, exec: ToolRunContext) -> str:
                return f"{self.greeting}, {args['text']}"

        tool = define_tool(name="greet", description="")(Greeter("hello"))
        assert tool.parameters["required"] == ["text"]
        result = await _run(tool, {"text": "you"})
        assert isinstance(result, ToolSuccess)
        assert result.value == "hello, you"

    async def test_sync_callable_object_body_runs_in_a_worker_thread(self) -> None:
        threads: list[int] = []

        class Counter:
            def __call__(self, args: Args, exec: ToolRunContext) -> int:
                threads.append(threading.get_ident())
                return len(args["text"])

        tool = define_tool(name="count", description="")(Counter())
        result = await _run(tool, {"text": "abcd"})
        assert isinstance(result, ToolSuccess)
        assert result.value == 4
        assert threads
        assert threads != [threading.get_ident()]

    async def test_callable_object_arguments_are_validated(self) -> None:
        class Echo:
            async def __call__(self, args: Args, exec: ToolRunContext) -> str:
                return args["text"]

        tool = define_tool(name="echo", description="")(Echo())
        result = await _run(tool, {"text": 3})
        assert isinstance(result, ToolFailure)
        assert result.error.message.startswith('invalid arguments for tool "echo"')

    def test_callable_object_without_annotations_is_rejected_at_definition(self) -> None:
        class Bare:
            async def __call__(self, args, exec):  # type: ignore[no-untyped-def]
                return ""

        with pytest.raises(TypeError, match=r'^tool "bare": annotate the first parameter `args`'):
            define_tool(name="bare", description="")(Bare())


class TestAwaitableReturningBodies:
    """A ``def`` annotated ``-> Awaitable[R]`` is an async body, as both checkers see it."""

    async def test_def_returning_a_coroutine_is_awaited_on_the_event_loop(self) -> None:
        threads: list[int] = []

        async def shout(text: str) -> str:
            threads.append(threading.get_ident())
            await anyio.lowlevel.checkpoint()
            return text.upper()

        @define_tool(name="shout", description="")
        def tool(args: Args, exec: ToolRunContext) -> Awaitable[str]:
            return shout(args["text"])

        result = await _run(tool, {"text": "hi"})
        assert isinstance(result, ToolSuccess)
        assert result.value == "HI"
        # Called and awaited where the registry runs, not in a worker thread.
        assert threads == [threading.get_ident()]

    async def test_awaited_output_is_validated_against_the_awaited_type(self) -> None:
        async def number() -> object:
            return "not a number"

        @define_tool(name="n", description="")
        def tool(args: Args, exec: ToolRunContext) -> Awaitable[int]:
            return number()  # type: ignore[return-value]

        result = await _run(tool, {"text": "hi"})
        assert isinstance(result, ToolFailure)
        assert result.error.info is not None
        assert result.error.info.code == INVALID_TOOL_OUTPUT

    async def test_def_returning_a_custom_awaitable(self) -> None:
        class Ready:
            def __init__(self, value: str) -> None:
                self.value = value

            def __await__(self) -> Generator[Any, Any, str]:
                yield from anyio.lowlevel.checkpoint().__await__()
                return self.value

        @define_tool(name="ready", description="")
        def tool(args: Args, exec: ToolRunContext) -> Awaitable[str]:
            return Ready(args["text"] * 2)

        result = await _run(tool, {"text": "ab"})
        assert isinstance(result, ToolSuccess)
        assert result.value == "abab"


class _HandWritten:
    """A `ToolDefinition` written by hand whose ``run`` is a plain ``def``."""

    def __init__(self) -> None:
        self.calls = 0

    @property
    def name(self) -> str:
        return "hand"

    @property
    def description(self) -> str:
        return "written by hand"

    @property
    def parameters(self) -> Mapping[str, JsonValue]:
        return {"type": "object"}

    @property
    def timeout(self) -> float | None:
        return None

    def parse_arguments(self, arguments: JsonValue, /) -> JsonValue:
        return arguments

    def run(self, args: JsonValue, exec: ToolRunContext, /) -> Awaitable[str]:
        self.calls += 1
        return _Doubled(str(args))

    def serialize_output(self, output: str, /) -> JsonValue:
        return output

    def render(self, args: JsonValue, value: JsonValue, /) -> Sequence[ContentBlock]:
        return [{"type": "text", "text": str(value)}]

    def is_concurrency_safe(self, args: JsonValue, /) -> bool:
        return False

    def finalize_content(
        self, exec: ToolExecution, result: ToolResult, /
    ) -> Sequence[ContentBlock] | None:
        return None


class _Doubled:
    """An awaitable that is no coroutine: the registry must only await it."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __await__(self) -> Generator[Any, Any, str]:
        yield from anyio.lowlevel.checkpoint().__await__()
        return self.text * 2


async def test_hand_written_definition_whose_run_returns_an_awaitable() -> None:
    definition = _HandWritten()
    registry = ToolRegistry()
    registry.register(definition)
    result = await registry.execute(make_input("hand", {"a": 1}))
    assert isinstance(result, ToolSuccess)
    assert result.value == "{'a': 1}{'a': 1}"
    assert definition.calls == 1


class TestOptionsTypedAgainstTheArguments:
    """The options the body's arguments type checks statically behave as typed."""

    async def test_is_concurrency_safe_and_render_receive_the_parsed_arguments(self) -> None:
        seen: list[object] = []

        def safe(args: Args) -> bool:
            seen.append(args)
            return args["text"] == "parallel"

        def render(args: Args, value: JsonValue) -> list[ContentBlock]:
            return [{"type": "text", "text": f"{args['text']} -> {value}"}]

        @define_tool(name="t", description="", is_concurrency_safe=safe, render=render)
        async def tool(args: Args, exec: ToolRunContext) -> int:
            return len(args["text"])

        registry = ToolRegistry()
        registry.register(tool)
        assert registry.execution_mode(make_input("t", {"text": "parallel"})) == "parallel"
        assert registry.execution_mode(make_input("t", {"text": "alone"})) == "exclusive"
        assert seen == [{"text": "parallel"}, {"text": "alone"}]
        result = await registry.execute(make_input("t", {"text": "abc"}))
        assert [dict(block) for block in result.content] == [{"type": "text", "text": "abc -> 3"}]

    async def test_options_that_take_any_arguments_fit_every_body(self) -> None:
        def always(args: object) -> bool:
            return True

        @define_tool(name="t", description="", is_concurrency_safe=always)
        def tool(args: Args, exec: ToolRunContext) -> str:
            return args["text"]

        registry = ToolRegistry()
        registry.register(tool)
        assert registry.execution_mode(make_input("t", {"text": "x"})) == "parallel"
        result = await registry.execute(make_input("t", {"text": "x"}))
        assert isinstance(result, ToolSuccess)
