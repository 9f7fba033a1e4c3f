"""Errors that explain: the mistakes a newcomer makes in the first hour, each with the exact
message that says what went wrong and how to fix it (contract §8)."""

from __future__ import annotations

from typing import Any

import pytest

from support import Published, TextArgs, make_input, registry_with_echo
from toolseam import (
    TOOL_ERROR_WITHOUT_CODE,
    AbortController,
    ErrorInfo,
    Next,
    PreDecision,
    ToolCall,
    ToolDispatchExecution,
    ToolError,
    ToolErrorDetail,
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

    def test_a_subclass_without_a_class_code_is_definable(self) -> None:
        """Regression (issue 25): defining one raised TypeError at class definition."""

        class DiskFull(ToolError):
            pass

        error = DiskFull("disk full", code="ENOSPC")
        assert (error.code, error.message, str(error)) == ("ENOSPC", "disk full", "disk full")

    async def test_a_subclass_raised_with_its_code_reaches_the_result(self) -> None:
        class DiskFull(ToolError):
            pass

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            raise DiskFull("disk full", code="ENOSPC")

        registry = ToolRegistry()
        registry.register(tool)
        result = await registry.execute(make_input("t"))
        assert isinstance(result, ToolFailure)
        assert result.error == ToolErrorDetail("disk full", ErrorInfo("DiskFull", "ENOSPC"))
        assert result.content == ({"type": "text", "text": "Error: disk full"},)

    @pytest.mark.parametrize("sync", [False, True])
    async def test_raised_without_any_code_is_one_coded_failure(self, sync: bool) -> None:
        """No TypeError replaces the tool's error: the result names the class and its message."""

        class DiskFull(ToolError):
            pass

        if sync:

            @define_tool(name="t", description="")
            def sync_tool(args: TextArgs, exec: ToolRunContext) -> str:
                raise DiskFull("disk full")

            tool = sync_tool
        else:

            @define_tool(name="t", description="")
            async def async_tool(args: TextArgs, exec: ToolRunContext) -> str:
                raise DiskFull("disk full")

            tool = async_tool
        registry = ToolRegistry()
        registry.register(tool)
        published = Published()
        registry.on_result(published)
        result = await registry.execute(make_input("t"))
        assert published.only is result
        assert isinstance(result, ToolFailure)
        assert result.error == ToolErrorDetail(
            "disk full", ErrorInfo("DiskFull", TOOL_ERROR_WITHOUT_CODE)
        )
        assert result.code == "TOOL_ERROR_WITHOUT_CODE"

    def test_the_base_without_a_code(self) -> None:
        error = ToolError("disk full")
        assert (error.code, error.message) == (TOOL_ERROR_WITHOUT_CODE, "disk full")

    def test_a_class_code_that_is_not_a_string_is_no_code(self) -> None:
        class Odd(ToolError):
            code = 5  # type: ignore[assignment]

        code: object = Odd("x").code
        assert code == TOOL_ERROR_WITHOUT_CODE

    async def test_a_subclass_that_skips_the_base_init(self) -> None:
        class Bare(ToolError):
            def __init__(self) -> None:  # no super().__init__: no message, no code
                pass

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            raise Bare

        registry = ToolRegistry()
        registry.register(tool)
        result = await registry.execute(make_input("t"))
        assert isinstance(result, ToolFailure)
        assert result.error.info == ErrorInfo("Bare", TOOL_ERROR_WITHOUT_CODE)


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
