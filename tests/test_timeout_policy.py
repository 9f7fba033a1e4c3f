"""Contract §7: the timeout policy owns only its own deadline."""

from __future__ import annotations

import threading

import anyio
import anyio.from_thread
import pytest

from support import Published, TextArgs, code_of, make_input
from toolseam import (
    TOOL_ABORTED,
    TOOL_TIMEOUT,
    AbortController,
    AbortSignal,
    ErrorInfo,
    Next,
    PostDecision,
    ToolDispatchExecution,
    ToolExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    define_tool,
)
from toolseam.policies import timeout_policy

TIMEOUT = 0.01  # tiny: the body waits for the deadline, nothing asserts how long it took


def _registry(body: object, *, timeout: float | None = TIMEOUT) -> tuple[ToolRegistry, Published]:
    registry = ToolRegistry()
    registry.register(define_tool(name="t", description="", timeout=timeout)(body))  # type: ignore[call-overload]
    registry.on_execute(timeout_policy(registry))
    published = Published()
    registry.on_result(published)
    return registry, published


class TestTimeoutPolicy:
    async def test_own_deadline_first_is_tool_timeout(self) -> None:
        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            await exec.signal.wait()
            exec.defer_context("partial progress")
            exec.signal.raise_if_aborted()
            return "unreachable"

        registry, published = _registry(body)
        result = await registry.execute(make_input("t"))
        assert isinstance(result, ToolFailure)
        assert result.error.message == f"tool call timed out after {TIMEOUT:g}s"
        assert result.error.info == ErrorInfo("ToolTimeoutError", TOOL_TIMEOUT)
        assert list(result.additional_contexts) == ["partial progress"]
        assert published.only is result

    async def test_deadline_replaces_even_a_success_the_body_returned_late(self) -> None:
        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            await exec.signal.wait()
            return "finished after the deadline"

        registry, _ = _registry(body)
        result = await registry.execute(make_input("t"))
        assert code_of(result) == TOOL_TIMEOUT

    async def test_caller_abort_first_stays_aborted(self) -> None:
        caller = AbortController()

        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            caller.abort("user pressed stop")
            await anyio.sleep(TIMEOUT * 2)  # the deadline passes too, but second
            exec.signal.raise_if_aborted()
            return ""

        registry, _ = _registry(body)
        result = await registry.execute(make_input("t", signal=caller.signal))
        assert code_of(result) == TOOL_ABORTED

    async def test_deadline_first_then_caller_stays_tool_timeout(self) -> None:
        caller = AbortController()

        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            await exec.signal.wait()  # the deadline
            caller.abort("user pressed stop, too late")
            exec.signal.raise_if_aborted()
            return ""

        registry, _ = _registry(body)
        result = await registry.execute(make_input("t", signal=caller.signal))
        assert code_of(result) == TOOL_TIMEOUT

    async def test_tool_without_timeout_is_delegated_untouched(self) -> None:
        caller = AbortController()
        seen: list[AbortSignal] = []

        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            return "ok"

        async def inner(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            seen.append(exec.signal)  # what the policy handed down
            return await next()

        registry, _ = _registry(body, timeout=None)
        registry.on_execute(inner)
        result = await registry.execute(make_input("t", signal=caller.signal))
        assert isinstance(result, ToolSuccess)
        assert seen == [caller.signal]

    async def test_inner_wrapper_sees_the_deadline_fusion(self) -> None:
        caller = AbortController()
        seen: list[AbortSignal] = []

        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            return "ok"

        async def inner(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            seen.append(exec.signal)
            return await next()

        registry, _ = _registry(body, timeout=60)
        registry.on_execute(inner)
        await registry.execute(make_input("t", signal=caller.signal))
        [handed] = seen
        assert handed is not caller.signal
        assert not handed.aborted

    async def test_upstream_signal_is_restored_for_post_execute(self) -> None:
        caller = AbortController()
        post_saw: list[AbortSignal] = []

        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            return "fast"

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            post_saw.append(exec.signal)
            return await next()

        registry, _ = _registry(body, timeout=60)
        registry.on_post_execute(post)
        result = await registry.execute(make_input("t", signal=caller.signal))
        assert isinstance(result, ToolSuccess)
        assert post_saw == [caller.signal]

    async def test_no_timer_task_or_listener_is_left_behind(self) -> None:
        caller = AbortController()

        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            return "fast"

        registry, _ = _registry(body, timeout=3600)
        tasks_before = len(anyio.get_running_tasks())
        for _ in range(20):
            await registry.execute(make_input("t", signal=caller.signal))
        assert caller.signal._listener_count() == 0
        # Deadlines are loop timers, not tasks (on trio, one timer service per run) ...
        assert len(anyio.get_running_tasks()) - tasks_before <= 1
        # ... and an hour-long timer that outlived its call would still be armed here.
        assert _armed_timers() == 0


def _armed_timers() -> int:
    """Deadline timers armed in this event loop right now (neither fired nor cancelled).

    Counted by the loop's timer service: it keeps one native wake-up for all of them, which
    may stay set, harmlessly, for a timer already cancelled.
    """
    from toolseam._timers import live_timers

    return live_timers()


class TestDeadlineThenHostCancellation:
    """Contract §5, §7: the deadline came first, then the host cancelled; same answer whether
    the registry's built-in timeout or a registered ``timeout_policy`` enforced it."""

    @pytest.mark.parametrize("explicit", [False, True], ids=["built-in", "timeout_policy"])
    @pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
    async def test_stays_tool_timeout(self, explicit: bool, sync: bool) -> None:
        registry = ToolRegistry(timeouts=not explicit)
        if explicit:
            registry.on_execute(timeout_policy(registry))
        published = Published()
        registry.on_result(published)
        timed_out = anyio.Event()
        finish = threading.Event()

        if sync:

            def body(args: TextArgs, exec: ToolRunContext) -> str:
                exec.signal.wait_sync()  # the deadline
                anyio.from_thread.run_sync(timed_out.set)
                finish.wait()  # still cleaning up when the host cancels
                return "late"
        else:

            async def body(args: TextArgs, exec: ToolRunContext) -> str:  # type: ignore[misc]
                await exec.signal.wait()  # the deadline
                timed_out.set()
                await anyio.sleep_forever()  # torn down by the host's cancellation
                return "late"

        registry.register(define_tool(name="t", description="", timeout=TIMEOUT)(body))
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(registry.execute, make_input("t"))
                await timed_out.wait()
                scope.cancel()
                finish.set()
        assert code_of(published.only) == TOOL_TIMEOUT


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
async def test_an_abort_listener_interrupt_at_the_deadline_is_contained(
    interrupt: type[BaseException], caplog: pytest.LogCaptureFixture
) -> None:
    """Contract §2, §7: the deadline's abort runs in the loop's timer callback, where an
    interrupt would crash the loop (trio: ``TrioInternalError``); it is logged instead."""
    registry = ToolRegistry()
    published = Published()
    registry.on_result(published)

    def raising(signal: AbortSignal) -> None:
        raise interrupt

    @define_tool(name="t", description="", timeout=TIMEOUT)
    async def body(args: TextArgs, exec: ToolRunContext) -> str:
        exec.signal.add_listener(raising)
        await exec.signal.wait()
        return "after the deadline"

    registry.register(body)
    result = await registry.execute(make_input("t"))
    assert code_of(result) == TOOL_TIMEOUT
    assert published.only is result
    [record] = [r for r in caplog.records if "when a deadline passed" in r.getMessage()]
    assert record.exc_info is not None
    assert record.exc_info[0] is interrupt
