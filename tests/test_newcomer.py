"""Errors that explain: the mistakes a newcomer makes in the first hour, each with the exact
message that says what went wrong and how to fix it (contract §8)."""

from __future__ import annotations

from typing import Any

import pytest

from support import TextArgs, make_input, registry_with_echo
from toolseam import (
    AbortController,
    ErrorInfo,
    Next,
    PreDecision,
    ToolCall,
    ToolDispatchExecution,
    ToolError,
    ToolExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)


class TestRegisterWithoutDefineTool:
    def test_a_plain_function(self) -> None:
        async def read_file(args: TextArgs, exec: ToolRunContext) -> str:
            return ""

        with pytest.raises(TypeError) as info:
            ToolRegistry().register(read_file)  # type: ignore[arg-type]
        assert str(info.value) == (
            "register() expects a ToolDefinition, got the plain callable 'read_file': "
            'decorate it with @define_tool(name="...", description="...") first'
        )

    def test_a_lambda(self) -> None:
        with pytest.raises(TypeError, match=r"got the plain callable '<lambda>': decorate it"):
            ToolRegistry().register(lambda args, exec: "")  # type: ignore[arg-type]

    def test_something_else(self) -> None:
        with pytest.raises(TypeError) as info:
            ToolRegistry().register(42)  # type: ignore[arg-type]
        assert str(info.value) == (
            "register() expects a ToolDefinition (from @define_tool, or written by hand) "
            "with a non-empty str `name`, got int"
        )


class TestBareDefineTool:
    def test_says_it_needs_its_options(self) -> None:
        with pytest.raises(TypeError) as info:

            @define_tool  # type: ignore[call-overload]
            async def read_file(args: TextArgs, exec: ToolRunContext) -> str:
                return ""

        assert str(info.value) == (
            "bare @define_tool above read_file(): it needs its options, as in "
            '@define_tool(name="...", description="...")'
        )

    def test_a_missing_description(self) -> None:
        with pytest.raises(
            TypeError, match=r'^tool "t": `description` must be a string, got None$'
        ):
            define_tool(name="t")  # type: ignore[call-overload]


class QuotaExceeded(ToolError):
    code = "QUOTA_EXCEEDED"


class TestToolErrorCodes:
    def test_a_class_attribute_code(self) -> None:
        error = QuotaExceeded("daily quota used up")
        assert (error.code, error.message) == ("QUOTA_EXCEEDED", "daily quota used up")
        assert QuotaExceeded("x", code="OTHER").code == "OTHER"

    async def test_reaches_the_result(self) -> None:
        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            raise QuotaExceeded("daily quota used up")

        registry = ToolRegistry()
        registry.register(tool)
        result = await registry.execute(make_input("t"))
        assert isinstance(result, ToolFailure)
        assert result.error.message == "daily quota used up"
        assert result.error.info == ErrorInfo("QuotaExceeded", "QUOTA_EXCEEDED")

    def test_a_subclass_without_any_code_fails_where_it_is_defined(self) -> None:
        with pytest.raises(TypeError) as info:

            class NoCode(ToolError):
                pass

        assert str(info.value) == (
            'ToolError subclass NoCode needs a code: set a class attribute (code = "...") '
            "or define __init__ passing code= to ToolError.__init__"
        )

    def test_the_base_without_a_code(self) -> None:
        with pytest.raises(TypeError) as info:
            ToolError("disk full")
        assert str(info.value) == (
            "ToolError('disk full') needs a code: pass code=\"...\" or set a class attribute `code`"
        )


class TestRunToolCallsInput:
    @pytest.mark.parametrize(
        ("call", "kind"),
        [({"call_id": "a", "name": "echo", "arguments": {}}, "dict"), (("a", "echo", {}), "tuple")],
    )
    async def test_names_tool_call(self, call: Any, kind: str) -> None:
        registry, _, _ = registry_with_echo()
        with pytest.raises(TypeError) as info:
            await run_tool_calls(registry, [call], signal=AbortController().signal)
        assert str(info.value) == (
            f"run_tool_calls() expects ToolCall items, got {kind} at index 0: build each one "
            "as ToolCall(call_id, name, arguments)"
        )

    async def test_tool_calls_are_fine(self) -> None:
        registry, _, _ = registry_with_echo()
        [outcome] = await run_tool_calls(
            registry, [ToolCall("a", "echo", {"text": "hi"})], signal=AbortController().signal
        )
        assert not outcome.result.is_error


SIGNAL_READ_ONLY = (
    "exec.signal is read-only in ToolExecution and ToolRunContext (pre-execute, guards, "
    "approval, post-execute, observers and the tool body borrow it); only an "
    "around-dispatch wrapper's ToolDispatchExecution may replace it"
)


class TestWritingAViewNamesTheView:
    async def test_a_pre_execute_listener_assigning_the_signal(self) -> None:
        registry, _, trace = registry_with_echo()

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            exec.signal = AbortController().signal  # type: ignore[misc]
            return await next()

        registry.on_pre_execute(pre)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolFailure)
        assert result.error.message == SIGNAL_READ_ONLY
        assert trace == []

    async def test_a_body_assigning_the_signal_or_another_field(self) -> None:
        messages: list[str] = []

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            for attempt in ("signal", "name"):
                try:
                    setattr(exec, attempt, None)
                except AttributeError as error:
                    messages.append(str(error))
            return "ok"

        registry = ToolRegistry()
        registry.register(tool)
        await registry.execute(make_input("t"))
        assert messages == [SIGNAL_READ_ONLY, "ToolExecution.name is read-only"]

    async def test_a_wrapper_deleting_the_signal(self) -> None:
        registry, _, _ = registry_with_echo()

        async def wrapper(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            del exec.signal  # type: ignore[misc]
            return await next()

        registry.on_execute(wrapper)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolFailure)
        assert result.error.message == (
            "ToolDispatchExecution.signal cannot be deleted: every call keeps a signal"
        )
