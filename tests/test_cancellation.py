"""Contract §5: cancellation classification and precedence, quiescence, host cancellation."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from typing import Any

import anyio
import pytest

from support import Published, TextArgs, code_of, make_input, registry_with_echo
from toolseam import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    AbortController,
    AbortSignal,
    Accept,
    Allow,
    ApprovalAnswer,
    ApprovalRequest,
    Ask,
    Deny,
    ErrorInfo,
    Next,
    PostDecision,
    PreDecision,
    ToolDispatchExecution,
    ToolExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    define_tool,
)


def stage_recorder(registry: ToolRegistry, trace: list[str]) -> None:
    async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        trace.append("pre")
        return await next()

    async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
        trace.append("wrap")
        return await next()

    async def post(
        exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
    ) -> PostDecision:
        trace.append("post")
        return await next()

    registry.on_pre_execute(pre)
    registry.on_execute(wrap)
    registry.on_post_execute(post)
    registry.add_guard(lambda exec: trace.append("guard") or None)


class TestAbortResults:
    @pytest.mark.parametrize(
        ("body_invoked", "code", "message"),
        [
            (True, TOOL_ABORTED, "tool call aborted"),
            (False, TOOL_ABORTED_BEFORE_DISPATCH, "tool call aborted before dispatch"),
        ],
    )
    async def test_abort_results_are_exactly_as_specified(
        self, body_invoked: bool, code: str, message: str
    ) -> None:
        registry = ToolRegistry()
        controller = AbortController()

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            controller.abort()
            return "done"

        registry.register(tool)
        if not body_invoked:
            controller.abort()
        result = await registry.execute(make_input("t", signal=controller.signal))
        assert isinstance(result, ToolFailure)
        assert result.error.message == message
        assert result.error.info == ErrorInfo("AbortError", code)
        assert [dict(b) for b in result.content] == [{"type": "text", "text": f"Error: {message}"}]
        assert result.to_json()["error"] == {
            "message": message,
            "info": {"name": "AbortError", "code": code},
        }


class TestBeforeDispatch:
    async def test_pre_aborted_call_skips_every_stage(self) -> None:
        registry, published, trace = registry_with_echo()
        stage_recorder(registry, trace)
        result = await registry.execute(make_input(signal=AbortSignal.aborted_signal()))
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert trace == []
        assert published.only is result

    async def test_abort_during_pre_execute_is_awaited_then_before_dispatch(self) -> None:
        registry, published, trace = registry_with_echo()
        controller = AbortController()
        finished: list[bool] = []

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            controller.abort()
            await anyio.lowlevel.checkpoint()
            finished.append(True)  # not interrupted by the caller's abort
            return await next()

        registry.on_pre_execute(pre)
        result = await registry.execute(make_input(signal=controller.signal))
        assert finished == [True]
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert trace == []
        assert published.only is result

    async def test_abort_while_approval_waits(self) -> None:
        controller = AbortController()

        class Approver:
            async def request(self, request: ApprovalRequest, /) -> ApprovalAnswer:
                controller.abort()
                await request.signal.wait()
                return "cancelled"

        registry = ToolRegistry(approval=Approver())
        trace: list[str] = []

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            trace.append("body")
            return ""

        async def ask(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            return Ask()

        registry.register(tool)
        registry.on_pre_execute(ask)
        result = await registry.execute(make_input("t", signal=controller.signal))
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert trace == []

    async def test_abort_after_ask_skips_approval(self) -> None:
        controller = AbortController()
        requests: list[object] = []

        class Approver:
            async def request(self, request: ApprovalRequest, /) -> ApprovalAnswer:
                requests.append(request)
                return "allowed-once"

        registry = ToolRegistry(approval=Approver())

        async def ask(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            controller.abort()
            return Ask()

        registry.on_pre_execute(ask)
        result = await registry.execute(make_input("t", signal=controller.signal))
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert requests == []

    async def test_wrapper_handing_down_an_aborted_signal(self) -> None:
        registry, published, trace = registry_with_echo()
        seen: list[str | None] = []

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            exec.signal = AbortSignal.aborted_signal("deadline passed")
            result = await next()
            seen.append(code_of(result))
            return result

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            trace.append("post")
            return await next()

        registry.on_execute(wrap)
        registry.on_post_execute(post)
        result = await registry.execute(make_input())
        assert seen == [TOOL_ABORTED_BEFORE_DISPATCH]
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert trace == ["post"]  # post-execute runs for results out of the dispatch chain
        assert published.only is result

    async def test_caller_abort_before_the_wrapper_delegates(self) -> None:
        registry, _, trace = registry_with_echo()
        controller = AbortController()

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            controller.abort()
            return await next()

        registry.on_execute(wrap)
        result = await registry.execute(make_input(signal=controller.signal))
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert trace == []

    async def test_wrapper_short_circuit_success_overtaken_by_caller_cancellation(
        self,
    ) -> None:
        registry, _, trace = registry_with_echo()
        controller = AbortController()

        async def cache(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            controller.abort()
            return ToolSuccess(value="cached")

        registry.on_execute(cache)
        result = await registry.execute(make_input(signal=controller.signal))
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert trace == []


class TestAfterDispatch:
    async def test_successful_body_overtaken_by_cancellation_is_aborted(self) -> None:
        registry = ToolRegistry()
        controller = AbortController()

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            controller.abort()
            assert exec.signal.aborted
            return "finished anyway"

        registry.register(tool)
        result = await registry.execute(make_input("t", signal=controller.signal))
        assert code_of(result) == TOOL_ABORTED

    async def test_body_raising_its_abort_is_aborted_not_a_failure(self) -> None:
        registry = ToolRegistry()
        controller = AbortController()

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            controller.abort("user pressed stop")
            exec.signal.raise_if_aborted()
            return "unreachable"

        registry.register(tool)
        result = await registry.execute(make_input("t", signal=controller.signal))
        assert code_of(result) == TOOL_ABORTED

    async def test_abort_while_the_wrapper_waits_after_the_body(self) -> None:
        registry, _, trace = registry_with_echo()
        controller = AbortController()

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            result = await next()
            controller.abort()
            await anyio.lowlevel.checkpoint()
            return result

        registry.on_execute(wrap)
        result = await registry.execute(make_input(signal=controller.signal))
        assert trace == ["body"]
        assert code_of(result) == TOOL_ABORTED

    async def test_abort_while_post_execute_waits(self) -> None:
        registry, _, _ = registry_with_echo()
        controller = AbortController()

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            controller.abort()
            await anyio.lowlevel.checkpoint()
            return await next()

        registry.on_post_execute(post)
        result = await registry.execute(make_input(signal=controller.signal))
        assert code_of(result) == TOOL_ABORTED

    async def test_short_circuit_overtaken_during_post_execute_is_before_dispatch(self) -> None:
        registry, _, _ = registry_with_echo()
        controller = AbortController()

        async def cache(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            return ToolSuccess(value="cached")

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            controller.abort()
            return await next()

        registry.on_execute(cache)
        registry.on_post_execute(post)
        result = await registry.execute(make_input(signal=controller.signal))
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH


class TestStageRaisedAbort:
    """Contract §5: a stage that raises the caller's abort is cancelled like a body.

    Each stage honours its signal the idiomatic way (``await exec.signal.wait();
    exec.signal.raise_if_aborted()``) while the caller aborts from outside: the call ends
    ``ABORTED_BEFORE_DISPATCH`` before the body, ``ABORTED`` after it, never the stage's
    failure, and post-execute still runs when it has not.
    """

    @staticmethod
    async def aborted_while_waiting(
        registry: ToolRegistry, entered: anyio.Event, *, tool: str = "echo"
    ) -> ToolResult:
        controller = AbortController()
        results: list[ToolResult] = []

        async def call() -> None:
            results.append(await registry.execute(make_input(tool, signal=controller.signal)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await entered.wait()
            controller.abort("stop")
        return results[0]

    @staticmethod
    def post_recorder(registry: ToolRegistry, trace: list[str]) -> None:
        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            trace.append("post")
            return Accept(additional_contexts=[{"from": "post"}])

        registry.on_post_execute(post)

    @pytest.mark.parametrize("where", ["before next", "after next"])
    async def test_pre_execute_listener(self, where: str) -> None:
        registry, published, trace = registry_with_echo()
        entered = anyio.Event()

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            decision = await next() if where == "after next" else None
            entered.set()
            await exec.signal.wait()
            exec.signal.raise_if_aborted()
            return decision or Allow()

        registry.on_pre_execute(pre)
        self.post_recorder(registry, trace)
        result = await self.aborted_while_waiting(registry, entered)
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert trace == ["post"]
        assert list(result.additional_contexts) == [{"from": "post"}]
        assert published.only is result

    async def test_approval_service(self) -> None:
        entered = anyio.Event()

        class Service:
            async def request(self, request: ApprovalRequest, /) -> ApprovalAnswer:
                entered.set()
                await request.signal.wait()
                request.signal.raise_if_aborted()
                return "allowed-once"

        registry = ToolRegistry(approval=Service())
        trace: list[str] = []

        @define_tool(name="echo", description="")
        async def echo(args: TextArgs, exec: ToolRunContext) -> str:
            trace.append("body")
            return args["text"]

        async def ask(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            return Ask("check")

        registry.register(echo)
        registry.on_pre_execute(ask)
        self.post_recorder(registry, trace)
        result = await self.aborted_while_waiting(registry, entered)
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert trace == ["post"]

    async def test_guard(self) -> None:
        registry, published, trace = registry_with_echo()
        entered = anyio.Event()

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            entered.set()
            await exec.signal.wait()  # the abort lands here; the guard then honours it
            return await next()

        def guard(exec: ToolExecution) -> str | None:
            trace.append("guard")
            exec.signal.raise_if_aborted()
            return None

        registry.on_pre_execute(pre)
        registry.add_guard(guard)
        registry.add_guard(lambda exec: trace.append("second guard") or None)
        self.post_recorder(registry, trace)
        result = await self.aborted_while_waiting(registry, entered)
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert trace == ["guard", "post"]
        assert published.only is result

    async def test_wrapper_before_delegating(self) -> None:
        registry, published, trace = registry_with_echo()
        entered = anyio.Event()

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            entered.set()
            await exec.signal.wait()
            exec.signal.raise_if_aborted()
            return await next()

        registry.on_execute(wrap)
        self.post_recorder(registry, trace)
        result = await self.aborted_while_waiting(registry, entered)
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert trace == ["post"]
        assert published.only is result

    async def test_wrapper_after_the_body(self) -> None:
        registry = ToolRegistry()
        trace: list[str] = []
        entered = anyio.Event()

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            trace.append("body")
            exec.defer_context({"from": "body"})
            return "v"

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            result = await next()
            entered.set()
            await exec.signal.wait()
            exec.signal.raise_if_aborted()
            return result

        registry.register(tool)
        registry.on_execute(wrap)
        self.post_recorder(registry, trace)
        result = await self.aborted_while_waiting(registry, entered, tool="t")
        assert code_of(result) == TOOL_ABORTED
        assert trace == ["body", "post"]
        assert list(result.additional_contexts) == [{"from": "body"}, {"from": "post"}]

    async def test_wrapper_holding_the_body_s_failure_keeps_it(self) -> None:
        registry = ToolRegistry()
        entered = anyio.Event()

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            raise OSError("disk full")

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            result = await next()
            entered.set()
            await exec.signal.wait()
            exec.signal.raise_if_aborted()
            return result

        registry.register(tool)
        registry.on_execute(wrap)
        result = await self.aborted_while_waiting(registry, entered, tool="t")
        assert isinstance(result, ToolFailure)
        assert result.error.message == "disk full"

    async def test_post_execute_listener(self) -> None:
        registry, published, trace = registry_with_echo()
        entered = anyio.Event()

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            entered.set()
            await exec.signal.wait()
            exec.signal.raise_if_aborted()
            return await next()

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            result = await next()
            return replace(result, additional_contexts=[{"from": "wrapper"}])

        registry.on_execute(wrap)
        registry.on_post_execute(post)
        result = await self.aborted_while_waiting(registry, entered)
        assert code_of(result) == TOOL_ABORTED
        assert trace == ["body"]
        assert list(result.additional_contexts) == [{"from": "wrapper"}]
        assert published.only is result

    async def test_post_execute_listener_after_a_denial_keeps_the_denial(self) -> None:
        registry, _, trace = registry_with_echo()
        entered = anyio.Event()

        async def deny(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            return Deny("no")

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            entered.set()
            await exec.signal.wait()
            exec.signal.raise_if_aborted()
            return await next()

        registry.on_pre_execute(deny)
        registry.on_post_execute(post)
        result = await self.aborted_while_waiting(registry, entered)
        assert isinstance(result, ToolFailure)
        assert result.error.message == "tool call denied: no"
        assert trace == []

    async def test_a_wrapper_s_own_signal_is_not_the_caller_s_abort(self) -> None:
        """The caller's signal decides: a replaced signal's abort raised is a failure."""
        registry, published, trace = registry_with_echo()
        own = AbortController()

        async def outer(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            own.abort("my deadline")
            exec.signal = own.signal
            return await next()

        async def inner(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            exec.signal.raise_if_aborted()
            return await next()

        registry.on_execute(outer)
        registry.on_execute(inner)
        self.post_recorder(registry, trace)
        result = await registry.execute(make_input(signal=AbortController().signal))
        assert isinstance(result, ToolFailure)
        assert code_of(result) is None
        assert result.error.message == "operation aborted: my deadline"
        assert trace == []  # a stage's failure is final: no post-execute
        assert published.only is result


class TestFailuresAreNeverReplaced:
    async def test_denial_stays_when_the_caller_aborts(self) -> None:
        registry, _, _ = registry_with_echo()
        controller = AbortController()

        async def deny(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            controller.abort()
            return Deny("no")

        registry.on_pre_execute(deny)
        result = await registry.execute(make_input(signal=controller.signal))
        assert isinstance(result, ToolFailure)
        assert result.error.message == "tool call denied: no"

    async def test_tool_failure_stays(self) -> None:
        registry = ToolRegistry()
        controller = AbortController()

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            controller.abort()
            raise OSError("disk full")

        registry.register(tool)
        result = await registry.execute(make_input("t", signal=controller.signal))
        assert isinstance(result, ToolFailure)
        assert result.error.message == "disk full"

    async def test_wrapper_failure_stays(self) -> None:
        registry, _, _ = registry_with_echo()
        controller = AbortController()

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            await next()
            controller.abort()
            return ToolFailure.from_message("wrapper says no")

        registry.on_execute(wrap)
        result = await registry.execute(make_input(signal=controller.signal))
        assert isinstance(result, ToolFailure)
        assert result.error.message == "wrapper says no"

    async def test_post_execute_failure_stays(self) -> None:
        registry, _, _ = registry_with_echo()
        controller = AbortController()

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            controller.abort()
            raise RuntimeError("post broke")

        registry.on_post_execute(post)
        result = await registry.execute(make_input(signal=controller.signal))
        assert isinstance(result, ToolFailure)
        assert result.error.message == "post broke"

    async def test_invalid_output_stays(self) -> None:
        registry = ToolRegistry()
        controller = AbortController()

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> int:
            controller.abort()
            return "not an int"  # type: ignore[return-value]

        registry.register(tool)
        result = await registry.execute(make_input("t", signal=controller.signal))
        assert code_of(result) == "INVALID_TOOL_OUTPUT"


class TestContextsSurviveCancellation:
    async def test_aborted_result_keeps_body_wrapper_and_post_contexts_in_order(self) -> None:
        registry = ToolRegistry()
        controller = AbortController()

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            exec.defer_context({"from": "body"})
            return "v"

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            result = await next()
            assert not result.is_error
            return ToolSuccess(
                value=result.value,
                content=result.content,
                meta={"m": 1},
                additional_contexts=[{"from": "wrapper"}],
            )

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            controller.abort()
            return Accept(additional_contexts=[{"from": "post"}])

        registry.register(tool)
        registry.on_execute(wrap)
        registry.on_post_execute(post)
        result = await registry.execute(make_input("t", signal=controller.signal))
        assert isinstance(result, ToolFailure)
        assert code_of(result) == TOOL_ABORTED
        assert list(result.additional_contexts) == [
            {"from": "body"},
            {"from": "wrapper"},
            {"from": "post"},
        ]
        assert result.meta is None
        assert [dict(b) for b in result.content] == [
            {"type": "text", "text": "Error: tool call aborted"}
        ]
        assert "value" not in result.to_json()

    async def test_defer_context_outside_the_body_raises(self) -> None:
        registry, _, _ = registry_with_echo()
        errors: list[str] = []

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            try:
                exec.defer_context("sneaky")  # type: ignore[attr-defined]
            except RuntimeError as error:
                errors.append(str(error))
            return await next()

        registry.on_pre_execute(pre)
        result = await registry.execute(make_input())
        assert errors == ["defer_context() is only available while the tool body runs"]
        assert list(result.additional_contexts) == []


class TestCallerSignalIsCaptured:
    async def test_wrapper_that_swaps_the_signal_cannot_detach_the_caller(self) -> None:
        registry = ToolRegistry()
        controller = AbortController()
        body_saw: list[bool] = []
        post_saw: list[AbortSignal] = []

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            await exec.signal.wait()  # woken by the caller through the fusion
            body_saw.append(exec.signal.aborted)
            return "v"

        async def detach(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            exec.signal = AbortController().signal  # never aborts, never restored
            return await next()

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            post_saw.append(exec.signal)
            return await next()

        registry.register(tool)
        registry.on_execute(detach)
        registry.on_post_execute(post)
        async with anyio.create_task_group() as tg:
            results: list[ToolResult] = []

            async def call() -> None:
                results.append(await registry.execute(make_input("t", signal=controller.signal)))

            tg.start_soon(call)
            await anyio.wait_all_tasks_blocked()
            controller.abort()
        assert body_saw == [True]
        assert post_saw == [controller.signal]  # restored unconditionally
        assert code_of(results[0]) == TOOL_ABORTED
        assert controller.signal._listener_count() == 0

    async def test_body_sees_a_fusion_and_the_wrapper_gets_its_own_signal_back(self) -> None:
        registry = ToolRegistry()
        caller = AbortController()
        body_signals: list[AbortSignal] = []
        after_next: list[bool] = []

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            body_signals.append(exec.signal)
            return "v"

        async def scoped(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            mine = AbortController().signal
            exec.signal = mine
            result = await next()
            after_next.append(exec.signal is mine)
            return result

        registry.register(tool)
        registry.on_execute(scoped)
        await registry.execute(make_input("t", signal=caller.signal))
        [body_signal] = body_signals
        assert body_signal is not caller.signal
        assert after_next == [True]
        assert caller.signal._listener_count() == 0

    async def test_body_signal_follows_the_caller_without_being_the_callers(self) -> None:
        registry = ToolRegistry()
        caller = AbortController()
        seen: list[tuple[bool, object]] = []

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            # A registry-owned fusion (so host cancellation can abort it), never the
            # caller's own signal (which the registry must never abort).
            seen.append((exec.signal is caller.signal, None))
            caller.abort("stop")
            seen.append((exec.signal.aborted, exec.signal.reason))
            return "v"

        registry.register(tool)
        await registry.execute(make_input("t", signal=caller.signal))
        assert seen == [(False, None), (True, "stop")]
        assert caller.signal._listener_count() == 0

    async def test_wrapper_deadline_reaches_the_body_but_is_not_a_caller_abort(self) -> None:
        registry = ToolRegistry()

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            await exec.signal.wait()
            return "stopped early"

        async def deadline(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            own = AbortController()
            upstream = exec.signal
            exec.signal = own.signal
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_abort_when_blocked, own)
                    return await next()
            finally:
                exec.signal = upstream

        registry.register(tool)
        registry.on_execute(deadline)
        result = await registry.execute(make_input("t"))
        # The caller never aborted: the body's success stands (the wrapper owns the rest).
        assert isinstance(result, ToolSuccess)
        assert result.value == "stopped early"


async def _abort_when_blocked(controller: AbortController) -> None:
    await anyio.wait_all_tasks_blocked()
    controller.abort("deadline")


class TestQuiescence:
    async def test_body_that_ignores_its_signal_keeps_execute_pending(self) -> None:
        registry = ToolRegistry()
        controller = AbortController()
        release = anyio.Event()
        done: list[ToolResult] = []

        @define_tool(name="t", description="")
        async def stubborn(args: TextArgs, exec: ToolRunContext) -> str:
            await release.wait()
            return "finally"

        registry.register(stubborn)
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                done.append(await registry.execute(make_input("t", signal=controller.signal)))

            tg.start_soon(call)
            await anyio.wait_all_tasks_blocked()
            controller.abort()
            await anyio.wait_all_tasks_blocked()
            assert done == []  # still pending: never raced, never abandoned
            release.set()
        assert code_of(done[0]) == TOOL_ABORTED

    async def test_sync_body_runs_in_a_thread_and_is_awaited_until_it_returns(self) -> None:
        registry = ToolRegistry()
        controller = AbortController()
        loop_thread = threading.get_ident()
        body_threads: list[int] = []
        entered = threading.Event()

        @define_tool(name="t", description="")
        def blocking(args: TextArgs, exec: ToolRunContext) -> str:
            body_threads.append(threading.get_ident())
            entered.set()
            assert exec.signal.wait_sync()
            return "returned after abort"

        registry.register(blocking)
        async with anyio.create_task_group() as tg:
            results: list[ToolResult] = []

            async def call() -> None:
                results.append(await registry.execute(make_input("t", signal=controller.signal)))

            tg.start_soon(call)
            await anyio.to_thread.run_sync(entered.wait)
            controller.abort()
        assert body_threads
        assert body_threads[0] != loop_thread
        assert code_of(results[0]) == TOOL_ABORTED


class TestHostCancellation:
    async def test_host_cancel_during_the_body_publishes_aborted_and_reraises(self) -> None:
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)
        cleaned: list[bool] = []
        caller = AbortController()

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            try:
                await anyio.sleep_forever()
            finally:
                cleaned.append(True)
            return ""

        registry.register(tool)
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(registry.execute, make_input("t", signal=caller.signal))
                await anyio.wait_all_tasks_blocked()
                scope.cancel()
        assert scope.cancelled_caught  # the cancellation propagated out of execute()
        assert cleaned == [True]
        assert code_of(published.only) == TOOL_ABORTED
        assert not caller.signal.aborted  # the registry never aborts the caller's signal
        assert caller.signal._listener_count() == 0

    async def test_host_cancel_before_dispatch_is_aborted_before_dispatch(self) -> None:
        registry, published, trace = registry_with_echo()

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            await anyio.sleep_forever()
            raise AssertionError

        registry.on_pre_execute(pre)
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(registry.execute, make_input())
                await anyio.wait_all_tasks_blocked()
                scope.cancel()
        assert scope.cancelled_caught
        assert code_of(published.only) == TOOL_ABORTED_BEFORE_DISPATCH
        assert trace == []

    async def test_host_cancel_aborts_a_thread_body_and_waits_for_it(self) -> None:
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)
        entered = threading.Event()
        thread_returned: list[str] = []

        @define_tool(name="t", description="")
        def blocking(args: TextArgs, exec: ToolRunContext) -> str:
            entered.set()
            exec.signal.wait_sync()
            thread_returned.append(f"saw abort: {exec.signal.aborted}")
            return "late"

        registry.register(blocking)
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(registry.execute, make_input("t"))
                await anyio.to_thread.run_sync(entered.wait)
                scope.cancel()
        # execute() re-raised only after the thread returned.
        assert thread_returned == ["saw abort: True"]
        assert code_of(published.only) == TOOL_ABORTED

    async def test_host_cancel_keeps_an_established_failure(self) -> None:
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            raise RuntimeError("tool failed first")

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            await anyio.sleep_forever()
            raise AssertionError

        registry.register(tool)
        registry.on_post_execute(post)
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(registry.execute, make_input("t"))
                await anyio.wait_all_tasks_blocked()
                scope.cancel()
        assert scope.cancelled_caught
        result = published.only
        assert isinstance(result, ToolFailure)
        assert result.error.message == "tool failed first"

    @pytest.mark.parametrize("anyio_backend", ["asyncio"])
    async def test_asyncio_task_cancel_is_reraised_unchanged(self) -> None:
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)
        started = asyncio.Event()

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            started.set()
            await asyncio.sleep(3600)
            return ""

        registry.register(tool)
        task = asyncio.ensure_future(registry.execute(make_input("t")))
        await started.wait()
        task.cancel("user closed the tab")
        with pytest.raises(asyncio.CancelledError, match="user closed the tab"):
            await task
        assert code_of(published.only) == TOOL_ABORTED


class TestHostileWrapperSignal:
    @pytest.mark.parametrize("garbage", [None, 42, "signal", object()])
    async def test_wrapper_assigning_a_non_signal_yields_one_clear_failure(
        self, garbage: Any
    ) -> None:
        registry, published, trace = registry_with_echo()

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            exec.signal = garbage
            return await next()

        registry.on_execute(wrap)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolFailure)
        assert result.error.message == (
            f"around-dispatch wrapper set exec.signal to {type(garbage).__name__}, "
            "not an AbortSignal"
        )
        assert trace == []
        assert published.only is result
