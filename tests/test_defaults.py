"""Defaults that do what they say: timeouts enforced out of the box, and wait_idle()
(contract §5, §7)."""

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
    Next,
    ToolDefinition,
    ToolDispatchExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
)
from toolseam.policies import timeout_policy


def _armed_timers() -> int:
    """Deadline timers armed in this event loop right now (neither fired nor cancelled).

    Counted by the loop's timer service: it keeps one native wake-up for all of them, which
    may stay set, harmlessly, for a timer already cancelled.
    """
    from toolseam._timers import live_timers

    return live_timers()


def _waiting_tool(
    timeout: float | None, timers: list[int], signals: list[AbortSignal]
) -> ToolDefinition[TextArgs, str]:
    @define_tool(name="wait", description="", timeout=timeout)
    async def wait(args: TextArgs, exec: ToolRunContext) -> str:
        timers.append(_armed_timers())
        signals.append(exec.signal)
        await exec.signal.wait()
        exec.signal.raise_if_aborted()
        return "never"

    return wait


class TestTimeoutsByDefault:
    async def test_a_tool_timeout_is_enforced_without_any_policy(self) -> None:
        registry = ToolRegistry()
        timers: list[int] = []
        registry.register(_waiting_tool(0.01, timers, []))
        result = await registry.execute(make_input("wait"))
        assert isinstance(result, ToolFailure)
        assert result.code == TOOL_TIMEOUT
        assert result.error.message == "tool call timed out after 0.01s"
        assert timers == [1]
        assert _armed_timers() == 0

    async def test_timeouts_false_leaves_them_to_you(self) -> None:
        registry = ToolRegistry(timeouts=False)
        timers: list[int] = []
        signals: list[AbortSignal] = []
        registry.register(_waiting_tool(0.01, timers, signals))
        caller = AbortController()
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("wait", signal=caller.signal))
            await anyio.wait_all_tasks_blocked()
            assert timers == [0]  # no deadline armed for the call
            assert not signals[0].aborted
            caller.abort()

    async def test_a_registered_policy_sits_where_it_is_registered_and_enforces_once(
        self,
    ) -> None:
        registry = ToolRegistry()
        timers: list[int] = []
        registry.register(_waiting_tool(0.01, timers, []))
        seen_by_inner: list[AbortSignal] = []

        async def inner(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            seen_by_inner.append(exec.signal)
            return await next()

        registry.on_execute(timeout_policy(registry))
        registry.on_execute(timeout_policy(registry))  # a second one delegates untouched
        registry.on_execute(inner)
        caller = AbortController()
        result = await registry.execute(make_input("wait", signal=caller.signal))
        assert code_of(result) == TOOL_TIMEOUT
        # The policy, outside `inner`, had already replaced the signal it hands down ...
        [signal] = seen_by_inner
        assert signal is not caller.signal
        # ... and only one deadline was ever armed for the call.
        assert timers == [1]

    async def test_a_caller_abort_first_stays_aborted(self) -> None:
        registry = ToolRegistry()
        registry.register(_waiting_tool(3600, [], []))
        caller = AbortController()
        results: list[ToolResult] = []

        async def run() -> None:
            results.append(await registry.execute(make_input("wait", signal=caller.signal)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await anyio.wait_all_tasks_blocked()
            caller.abort()
        assert [code_of(r) for r in results] == [TOOL_ABORTED]
        assert _armed_timers() == 0

    def test_timeouts_must_be_a_bool(self) -> None:
        with pytest.raises(TypeError, match=r"^ToolRegistry\(timeouts=\.\.\.\) must be a bool"):
            ToolRegistry(timeouts="yes")  # type: ignore[arg-type]


class TestWaitIdle:
    async def test_returns_at_once_when_nothing_runs(self) -> None:
        registry = ToolRegistry()
        await registry.wait_idle()
        await registry.wait_idle()

    async def test_waits_for_a_host_cancelled_call_and_its_thread_body(self) -> None:
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)
        entered = anyio.Event()
        returned = threading.Event()

        @define_tool(name="t", description="")
        def slow(args: TextArgs, exec: ToolRunContext) -> str:
            anyio.from_thread.run_sync(entered.set)
            exec.signal.wait_sync()
            returned.set()
            return "done"

        registry.register(slow)
        abandoned = anyio.CancelScope()

        async def abandon_me() -> None:
            with abandoned:
                await registry.execute(make_input("t"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(abandon_me)
            await entered.wait()
            # The host cancels the task and, like the OpenAI Agents SDK, does not wait.
            abandoned.cancel()
            await registry.wait_idle()
            assert returned.is_set()
            assert code_of(published.only) == TOOL_ABORTED

    async def test_calls_started_later_are_not_waited_for(self) -> None:
        registry = ToolRegistry()
        gates = {"first": anyio.Event(), "later": anyio.Event()}

        @define_tool(name="gate", description="")
        async def gate(args: TextArgs, exec: ToolRunContext) -> str:
            await gates[args["text"]].wait()
            return args["text"]

        registry.register(gate)
        idle = anyio.Event()

        async def wait_idle() -> None:
            await registry.wait_idle()
            idle.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("gate", {"text": "first"}))
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(wait_idle)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(registry.execute, make_input("gate", {"text": "later"}))
            await anyio.wait_all_tasks_blocked()
            assert not idle.is_set()
            gates["first"].set()
            await idle.wait()  # returns although "later" still runs
            gates["later"].set()
        await registry.wait_idle()
        assert registry._in_flight == {registry._epoch: 0}

    async def test_waits_for_a_call_running_on_another_threads_event_loop(self) -> None:
        """A registry may serve several loops (a LangChain tool's sync ``invoke`` runs one).

        The call publishing on another thread wakes this loop's ``wait_idle()``.
        """
        registry = ToolRegistry()
        entered = threading.Event()
        release = threading.Event()

        @define_tool(name="t", description="")
        async def slow(args: TextArgs, exec: ToolRunContext) -> str:
            entered.set()
            await anyio.to_thread.run_sync(release.wait)
            return "done"

        registry.register(slow)
        published = Published()
        registry.on_result(published)

        def other_loop() -> None:
            anyio.run(registry.execute, make_input("t"))

        thread = threading.Thread(target=other_loop)
        thread.start()
        try:
            await anyio.to_thread.run_sync(entered.wait)
            idle = anyio.Event()

            async def wait_idle() -> None:
                await registry.wait_idle()
                idle.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_idle)
                await anyio.wait_all_tasks_blocked()
                assert not idle.is_set()
                release.set()
            assert idle.is_set()
            assert published.only  # published before wait_idle() returned
        finally:
            release.set()
            await anyio.to_thread.run_sync(thread.join)

    async def test_a_cancelled_wait_idle_leaves_nothing_behind(self) -> None:
        registry = ToolRegistry()
        gate = anyio.Event()

        @define_tool(name="t", description="")
        async def held(args: TextArgs, exec: ToolRunContext) -> str:
            await gate.wait()
            return "done"

        registry.register(held)
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("t"))
            await anyio.wait_all_tasks_blocked()
            for _ in range(100):
                with anyio.CancelScope() as scope:
                    scope.cancel()
                    await registry.wait_idle()
            assert registry._idle_waiters == []  # a host polling with a timeout leaks nothing
            assert len(registry._in_flight) == 2  # the running call's generation, and now
            gate.set()
        await registry.wait_idle()
        assert registry._in_flight == {registry._epoch: 0}
