"""What the lean engine does lazily still behaves as if it were done eagerly (contract §5).

The body's signal is fused from its sources when the body first reads ``exec.signal``, the
execution token is minted when first read, a deadline makes its controller only when
needed, and ``run_tool_calls`` adds a task only as a body blocks. Each of these must be
unobservable: the tests pin the observable contract on both backends.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import anyio
import pytest

from support import TextArgs, code_of, make_input
from toolseam import (
    TOOL_ABORTED,
    TOOL_TIMEOUT,
    AbortController,
    AbortError,
    AbortSignal,
    CallOutcome,
    ExecutionToken,
    Next,
    Principal,
    ToolCall,
    ToolDispatchExecution,
    ToolExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolTimeoutError,
    define_tool,
    run_tool_calls,
)
from toolseam._batch import _input
from toolseam._run import CallState
from toolseam._timeouts import Deadline
from toolseam._views import _INPUT_FIELDS, ToolExecutionInput, ToolHost
from toolseam.policies import timeout_policy


class TestLazyBodySignal:
    async def test_a_body_that_never_looks_attaches_nothing_to_the_callers_signal(self) -> None:
        caller = AbortController()
        gate = anyio.Event()
        counts: list[int] = []

        @define_tool(name="t", description="")
        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            counts.append(caller.signal._listener_count())
            await gate.wait()
            return "done"

        registry = ToolRegistry()
        registry.register(body)
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("t", signal=caller.signal))
            await anyio.wait_all_tasks_blocked()
            assert counts == [0]
            gate.set()
        assert caller.signal._listener_count() == 0

    async def test_a_body_that_looks_gets_one_fusion_detached_afterwards(self) -> None:
        caller = AbortController()
        seen: list[tuple[AbortSignal, AbortSignal, int]] = []

        @define_tool(name="t", description="")
        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            first = exec.signal
            seen.append((first, exec.signal, caller.signal._listener_count()))
            return "done"

        registry = ToolRegistry()
        registry.register(body)
        result = await registry.execute(make_input("t", signal=caller.signal))
        assert not result.is_error
        [(first, again, count)] = seen
        assert first is again  # one signal for the whole body
        assert first is not caller.signal
        assert count == 1
        assert caller.signal._listener_count() == 0

    async def test_host_cancellation_reaches_what_the_body_handed_its_signal_to(self) -> None:
        caller = AbortController()
        handed: list[AbortSignal] = []
        published: list[ToolResult] = []

        @define_tool(name="t", description="")
        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            handed.append(exec.signal)  # e.g. given to a helper that outlives this await
            await anyio.Event().wait()
            return "never"

        registry = ToolRegistry()
        registry.register(body)
        registry.on_result(lambda exec, result: published.append(result))
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(registry.execute, make_input("t", signal=caller.signal))
                await anyio.wait_all_tasks_blocked()
                scope.cancel()
        assert scope.cancelled_caught
        [signal] = handed
        assert signal.aborted
        assert type(signal.reason) is AbortError
        assert not caller.signal.aborted  # the caller's own signal is never aborted
        assert [code_of(r) for r in published] == [TOOL_ABORTED]

    async def test_host_cancellation_of_a_body_that_never_looked_still_publishes(self) -> None:
        caller = AbortController()
        published: list[ToolResult] = []

        @define_tool(name="t", description="")
        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            await anyio.Event().wait()
            return "never"

        registry = ToolRegistry()
        registry.register(body)
        registry.on_result(lambda exec, result: published.append(result))
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(registry.execute, make_input("t", signal=caller.signal))
                await anyio.wait_all_tasks_blocked()
                scope.cancel()
        assert scope.cancelled_caught
        assert [code_of(r) for r in published] == [TOOL_ABORTED]
        assert caller.signal._listener_count() == 0

    async def test_a_wrapper_setting_the_signal_while_the_body_runs_wins_as_before(
        self,
    ) -> None:
        replacement = AbortController()
        views: list[ToolDispatchExecution] = []
        seen: list[AbortSignal] = []
        body_started = anyio.Event()
        go_on = anyio.Event()

        async def keep_view(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            views.append(exec)
            return await next()

        @define_tool(name="t", description="")
        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            body_started.set()
            await go_on.wait()
            seen.append(exec.signal)
            return "done"

        registry = ToolRegistry()
        registry.register(body)
        registry.on_execute(keep_view)
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("t"))
            await body_started.wait()
            views[0].signal = replacement.signal
            go_on.set()
        assert seen == [replacement.signal]


class TestDeadlineBeforeTheFirstRead:
    """A deadline that passes before the body fused its signal decides as if it had been."""

    @staticmethod
    def _registry(body_steps: list[str], caller: AbortController) -> ToolRegistry:
        @define_tool(name="t", description="", timeout=3600)
        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            assert isinstance(exec, CallState)
            deadline = exec._deadline
            assert isinstance(deadline, Deadline)
            for step in body_steps:
                if step == "caller aborts":
                    caller.abort()
                elif step == "deadline passes":
                    deadline()  # the timer's callback, as the timer service would call it
            signal = exec.signal  # the first read: the fusion is made now
            assert signal.aborted
            reasons.append(signal.reason)
            return "done"

        reasons.clear()
        registry = ToolRegistry()
        registry.register(body)
        return registry

    async def test_the_deadline_first_is_a_timeout(self) -> None:
        caller = AbortController()
        registry = self._registry(["deadline passes", "caller aborts"], caller)
        result = await registry.execute(make_input("t", signal=caller.signal))
        assert code_of(result) == TOOL_TIMEOUT
        assert isinstance(result, ToolFailure)
        assert result.error.message == "tool call timed out after 3600.0s"
        assert [type(reason) for reason in reasons] == [ToolTimeoutError]

    async def test_the_caller_first_is_aborted(self) -> None:
        caller = AbortController()
        registry = self._registry(["caller aborts", "deadline passes"], caller)
        result = await registry.execute(make_input("t", signal=caller.signal))
        assert code_of(result) == TOOL_ABORTED
        assert reasons == [caller.signal.reason]

    async def test_the_explicit_policy_innermost_decides_the_same_way(self) -> None:
        caller = AbortController()
        registry = self._registry(["deadline passes", "caller aborts"], caller)
        registry.on_execute(timeout_policy(registry))
        result = await registry.execute(make_input("t", signal=caller.signal))
        assert code_of(result) == TOOL_TIMEOUT
        assert isinstance(result, ToolFailure)
        assert result.error.message == "tool call timed out after 3600.0s"

    async def test_a_sole_policy_takes_the_built_in_path(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The policy as the only wrapper is innermost, where it is the built-in timeout:
        # the registry runs no chain for it (bench_targets "timeout_policy registered").
        caller = AbortController()
        registry = self._registry(["deadline passes", "caller aborts"], caller)
        registry.on_execute(timeout_policy(registry))
        chains: list[CallState] = []
        dispatch = ToolRegistry._dispatch

        async def counted(self: ToolRegistry, run: CallState) -> None:
            chains.append(run)
            await dispatch(self, run)

        monkeypatch.setattr(ToolRegistry, "_dispatch", counted)
        result = await registry.execute(make_input("t", signal=caller.signal))
        assert code_of(result) == TOOL_TIMEOUT
        assert chains == []

    @pytest.mark.parametrize("case", ["second wrapper", "other registry", "timeouts off"])
    async def test_otherwise_the_policy_runs_in_the_chain(
        self, case: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        caller = AbortController()
        registry = self._registry(["deadline passes", "caller aborts"], caller)
        if case == "timeouts off":
            off = ToolRegistry(timeouts=False)
            off.register(cast("Any", registry.get("t")))
            registry = off
        if case == "other registry":
            other = ToolRegistry()
            other.register(cast("Any", registry.get("t")))
            registry.on_execute(timeout_policy(other))
        else:
            registry.on_execute(timeout_policy(registry))
        if case == "second wrapper":

            async def around(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
                return await next()

            registry.on_execute(around, prepend=True)  # the policy stays innermost
        chains: list[CallState] = []
        dispatch = ToolRegistry._dispatch

        async def counted(self: ToolRegistry, run: CallState) -> None:
            chains.append(run)
            await dispatch(self, run)

        monkeypatch.setattr(ToolRegistry, "_dispatch", counted)
        result = await registry.execute(make_input("t", signal=caller.signal))
        assert code_of(result) == TOOL_TIMEOUT
        assert len(chains) == 1


reasons: list[object] = []


class TestLazyToken:
    async def test_the_token_is_one_object_for_every_stage(self) -> None:
        tokens: list[ExecutionToken] = []

        @define_tool(name="t", description="")
        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            tokens.append(exec.token)
            tokens.append(exec.token)
            return "done"

        async def around(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            tokens.append(exec.token)
            return await next()

        def observe(exec: ToolExecution, result: ToolResult) -> None:
            tokens.append(exec.token)

        registry = ToolRegistry()
        registry.register(body)
        registry.on_execute(around)
        registry.on_result(observe)
        await registry.execute(make_input("t"))
        await registry.execute(make_input("t"))
        first, second = tokens[:4], tokens[4:]
        assert all(token is first[0] for token in first)
        assert all(token is second[0] for token in second)
        assert first[0] is not second[0]

    async def test_an_observer_reading_it_late_gets_a_token_too(self) -> None:
        kept: list[ToolExecution] = []

        @define_tool(name="t", description="")
        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            return "done"

        registry = ToolRegistry()
        registry.register(body)
        registry.on_result(lambda exec, result: kept.append(exec))
        await registry.execute(make_input("t"))
        [exec] = kept
        assert type(exec.token) is ExecutionToken
        assert exec.token is exec.token


def _token() -> ExecutionToken:
    """A token as the registry mints one (no public constructor)."""
    token = object.__new__(ExecutionToken)
    token._thread_level = 0
    return token


class TestBatchPool:
    def test_the_batch_builds_each_input_as_its_constructor_would(self) -> None:
        assert tuple(f.name for f in dataclasses.fields(ToolExecutionInput)) == _INPUT_FIELDS
        signal = AbortController().signal
        values = (
            "c1",
            "p",
            {"text": "x"},
            signal,
            "root",
            object(),
            _token(),
            ToolHost(),
            Principal("alice", ["read"]),
        )
        built = _input(*values)
        assert built == ToolExecutionInput(**dict(zip(_INPUT_FIELDS, values, strict=True)))
        assert type(built) is ToolExecutionInput

    def test_the_constructor_keeps_the_dataclass_behaviour(self) -> None:
        signal = AbortController().signal
        made = ToolExecutionInput(call_id="c1", name="p", arguments=[1], signal=signal)
        assert (made.root_call_id, made.agent, made.parent, made.host, made.principal) == (
            None,
        ) * 5
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.name = "q"  # type: ignore[misc]
        again = dataclasses.replace(made, name="q")
        assert (again.call_id, again.name, again.signal) == ("c1", "q", signal)
        assert "name='p'" in repr(made)
        with pytest.raises(TypeError):
            ToolExecutionInput(call_id="c1", name="p", arguments=[1])  # type: ignore[call-arg]

    async def test_bodies_that_never_block_run_in_the_callers_task(self) -> None:
        tasks: list[int] = []

        @define_tool(name="p", description="", is_concurrency_safe=lambda args: True)
        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            tasks.append(len(anyio.get_running_tasks()))
            return args["text"]

        registry = ToolRegistry()
        registry.register(body)
        before = len(anyio.get_running_tasks())
        outcomes = await run_tool_calls(
            registry,
            [ToolCall(f"c{i}", "p", {"text": str(i)}) for i in range(10)],
            signal=AbortController().signal,
            max_parallel=10,
        )
        assert [o.result.value for o in outcomes if not o.result.is_error] == [
            str(i) for i in range(10)
        ]
        assert tasks == [before] * 10  # no task but the caller's

    async def test_a_blocking_body_resumes_in_the_task_it_started_in(self) -> None:
        gates = {str(i): anyio.Event() for i in range(4)}
        tasks: dict[str, tuple[int, int]] = {}

        @define_tool(name="p", description="", is_concurrency_safe=lambda args: True)
        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            before = anyio.get_current_task().id
            if args["text"] != "1":  # call 1 never blocks; the others do, in turn
                await gates[args["text"]].wait()
            tasks[args["text"]] = (before, anyio.get_current_task().id)
            return args["text"]

        registry = ToolRegistry()
        registry.register(body)
        outcomes: list[list[CallOutcome]] = []

        async def batch() -> None:
            outcomes.append(
                await run_tool_calls(
                    registry,
                    [ToolCall(f"c{i}", "p", {"text": str(i)}) for i in range(4)],
                    signal=AbortController().signal,
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(batch)
            await anyio.wait_all_tasks_blocked()
            assert sorted(tasks) == ["1"]  # the others are all waiting, at once
            for key in ("3", "0", "2"):
                gates[key].set()
                await anyio.wait_all_tasks_blocked()
        assert [o.result.value for o in outcomes[0]] == ["0", "1", "2", "3"]
        assert all(before == after for before, after in tasks.values())
        # Each blocking body kept its own task: three tasks for three waits at once.
        assert len({before for key, (before, _) in tasks.items() if key != "1"}) == 3

    @pytest.mark.parametrize("max_parallel", [1, 3, 8])
    async def test_blocking_bodies_get_a_worker_each_up_to_max_parallel(
        self, max_parallel: int
    ) -> None:
        gate = anyio.Event()
        running = 0
        peak = 0

        @define_tool(name="p", description="", is_concurrency_safe=lambda args: True)
        async def body(args: TextArgs, exec: ToolRunContext) -> str:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await gate.wait()
            running -= 1
            return args["text"]

        registry = ToolRegistry()
        registry.register(body)
        outcomes: list[list[CallOutcome]] = []

        async def batch() -> None:
            outcomes.append(
                await run_tool_calls(
                    registry,
                    [ToolCall(f"c{i}", "p", {"text": str(i)}) for i in range(6)],
                    signal=AbortController().signal,
                    max_parallel=max_parallel,
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(batch)
            await anyio.wait_all_tasks_blocked()
            assert running == min(max_parallel, 6)
            gate.set()
        assert peak == min(max_parallel, 6)
        assert [o.call.call_id for o in outcomes[0]] == [f"c{i}" for i in range(6)]
        assert all(o.dispatched and not o.result.is_error for o in outcomes[0])
