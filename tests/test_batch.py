"""Contract §7: run_tool_calls, the batch executor of one model turn."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from typing_extensions import TypedDict

from support import Published, code_of
from toolseam import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    AbortController,
    AbortSignal,
    CallOutcome,
    Next,
    PostDecision,
    PreDecision,
    ToolCall,
    ToolExecution,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    define_tool,
    run_tool_calls,
)


class StepArgs(TypedDict):
    id: str


class Harness:
    """Tools whose bodies block on a per-call gate the test opens."""

    def __init__(self) -> None:
        self.registry = ToolRegistry()
        self.gates: dict[str, anyio.Event] = {}
        self.trace: list[str] = []
        self.running = 0
        self.max_running = 0
        self.published = Published()
        self.registry.on_result(self.published)

        async def body(args: StepArgs, exec: ToolRunContext) -> str:
            call = args["id"]
            self.trace.append(f"start {call}")
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            try:
                gate = self.gates.setdefault(call, anyio.Event())
                async with anyio.create_task_group() as tg:
                    # Cooperative: stop waiting when the call's signal aborts.
                    async def on_abort() -> None:
                        await exec.signal.wait()
                        gate.set()

                    tg.start_soon(on_abort)
                    await gate.wait()
                    tg.cancel_scope.cancel()
                exec.signal.raise_if_aborted()
                return call
            finally:
                self.running -= 1
                self.trace.append(f"end {call}")

        self.registry.register(
            define_tool(name="p", description="parallel-safe", is_concurrency_safe=lambda a: True)(
                body
            )
        )
        self.registry.register(define_tool(name="x", description="exclusive")(body))

    def gate(self, call_id: str) -> anyio.Event:
        return self.gates.setdefault(call_id, anyio.Event())

    def started(self) -> list[str]:
        return [step.split()[1] for step in self.trace if step.startswith("start")]


def calls(*specs: str) -> list[ToolCall]:
    """``"p1"`` is call id p1 on tool p; ``"x2"`` call x2 on tool x."""
    return [ToolCall(spec, spec[0], {"id": spec}) for spec in specs]


async def _run(harness: Harness, batch: list[ToolCall], signal: AbortSignal, **kw: Any) -> Any:
    outcomes: list[list[CallOutcome]] = []

    async def go() -> None:
        outcomes.append(await run_tool_calls(harness.registry, batch, signal=signal, **kw))

    return outcomes, go


class TestOrderAndOverlap:
    async def test_outcomes_are_in_model_order_under_out_of_order_completion(self) -> None:
        harness = Harness()
        batch = calls("p1", "p2", "p3")
        outcomes, go = await _run(harness, batch, AbortController().signal)
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await anyio.wait_all_tasks_blocked()
            for call_id in ("p3", "p2", "p1"):
                harness.gate(call_id).set()
                await anyio.wait_all_tasks_blocked()
        [result] = outcomes
        assert [o.call for o in result] == batch
        assert [o.result.value for o in result if isinstance(o.result, ToolSuccess)] == [
            "p1",
            "p2",
            "p3",
        ]
        assert all(o.dispatched for o in result)
        assert harness.trace[3:] == ["end p3", "end p2", "end p1"]

    async def test_all_parallel_calls_start_before_any_finishes(self) -> None:
        harness = Harness()
        outcomes, go = await _run(harness, calls("p1", "p2", "p3"), AbortController().signal)
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await anyio.wait_all_tasks_blocked()
            assert harness.started() == ["p1", "p2", "p3"]
            assert not any(step.startswith("end") for step in harness.trace)
            for gate in ("p1", "p2", "p3"):
                harness.gate(gate).set()
        assert len(outcomes[0]) == 3

    async def test_max_parallel_caps_calls_in_flight_as_a_rolling_pool(self) -> None:
        harness = Harness()
        outcomes, go = await _run(
            harness, calls("p1", "p2", "p3", "p4", "p5"), AbortController().signal, max_parallel=2
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await anyio.wait_all_tasks_blocked()
            assert harness.started() == ["p1", "p2"]
            harness.gate("p2").set()  # a slot frees: p3 starts without waiting for p1
            await anyio.wait_all_tasks_blocked()
            assert harness.started() == ["p1", "p2", "p3"]
            for gate in ("p1", "p3", "p4", "p5"):
                harness.gate(gate).set()
                await anyio.wait_all_tasks_blocked()
        assert harness.max_running == 2
        assert [o.call.call_id for o in outcomes[0]] == ["p1", "p2", "p3", "p4", "p5"]

    async def test_exclusive_call_is_a_barrier(self) -> None:
        harness = Harness()
        for call_id in ("p1", "p2", "x3", "p4"):
            harness.gate(call_id).set()
        outcomes, go = await _run(harness, calls("p1", "p2", "x3", "p4"), AbortController().signal)
        await go()
        trace = harness.trace
        assert trace.index("start x3") > max(trace.index("end p1"), trace.index("end p2"))
        assert trace.index("start p4") > trace.index("end x3")
        assert [o.call.call_id for o in outcomes[0]] == ["p1", "p2", "x3", "p4"]

    async def test_pre_and_post_execute_run_in_model_order(self) -> None:
        harness = Harness()
        order: list[str] = []

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            order.append(f"pre {exec.call_id}")
            return await next()

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            order.append(f"post {exec.call_id}")
            return await next()

        harness.registry.on_pre_execute(pre)
        harness.registry.on_post_execute(post)
        _outcomes, go = await _run(harness, calls("p1", "p2", "p3"), AbortController().signal)
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await anyio.wait_all_tasks_blocked()
            for call_id in ("p3", "p2", "p1"):  # bodies finish in reverse order
                harness.gate(call_id).set()
                await anyio.wait_all_tasks_blocked()
        assert order == ["pre p1", "pre p2", "pre p3", "post p1", "post p2", "post p3"]

    async def test_pre_and_post_execute_never_overlap(self) -> None:
        harness = Harness()
        order: list[str] = []
        release_pre_p2 = anyio.Event()

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            order.append(f"pre {exec.call_id}>")
            if exec.call_id == "p2":
                await release_pre_p2.wait()  # e.g. a human answering an approval prompt
            order.append(f"<pre {exec.call_id}")
            return await next()

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            order.append(f"post {exec.call_id}")
            return await next()

        harness.registry.on_pre_execute(pre)
        harness.registry.on_post_execute(post)
        harness.gate("p1").set()  # p1's body finishes at once
        harness.gate("p2").set()
        outcomes, go = await _run(harness, calls("p1", "p2"), AbortController().signal)
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await anyio.wait_all_tasks_blocked()
            # p1's body is done, but its post-execute waits for p2's pre-execute to end.
            assert order == ["pre p1>", "<pre p1", "pre p2>"]
            assert "end p1" in harness.trace
            release_pre_p2.set()
        assert order == ["pre p1>", "<pre p1", "pre p2>", "<pre p2", "post p1", "post p2"]
        assert len(outcomes[0]) == 2


class TestAbort:
    async def test_abort_mid_group_drains_started_and_skips_the_rest(self) -> None:
        harness = Harness()
        controller = AbortController()
        batch = calls("p1", "p2", "p3", "p4", "x5", "p6")
        outcomes, go = await _run(harness, batch, controller.signal, max_parallel=2)
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await anyio.wait_all_tasks_blocked()
            assert harness.started() == ["p1", "p2"]
            controller.abort("user pressed stop")
        [result] = outcomes
        assert [o.call.call_id for o in result] == [c.call_id for c in batch]
        assert [code_of(o.result) for o in result] == [TOOL_ABORTED] * 2 + [
            TOOL_ABORTED_BEFORE_DISPATCH
        ] * 4
        assert [o.dispatched for o in result] == [True, True, False, False, False, False]
        assert harness.started() == ["p1", "p2"]
        # Every call, skipped ones included, was published exactly once.
        assert len(harness.published.results) == 6
        assert controller.signal._listener_count() == 0

    async def test_pre_aborted_batch_starts_nothing(self) -> None:
        harness = Harness()
        seen: list[str] = []

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            seen.append(exec.call_id)
            return await next()

        harness.registry.on_pre_execute(pre)
        result = await run_tool_calls(
            harness.registry, calls("p1", "x2"), signal=AbortSignal.aborted_signal()
        )
        assert [(code_of(o.result), o.dispatched) for o in result] == [
            (TOOL_ABORTED_BEFORE_DISPATCH, False),
            (TOOL_ABORTED_BEFORE_DISPATCH, False),
        ]
        assert seen == []
        assert harness.trace == []
        assert list(harness.published.results) == [o.result for o in result]

    async def test_host_cancellation_drains_started_calls_and_reraises(self) -> None:
        harness = Harness()
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    lambda: run_tool_calls(
                        harness.registry, calls("p1", "p2"), signal=AbortController().signal
                    )
                )
                await anyio.wait_all_tasks_blocked()
                assert harness.started() == ["p1", "p2"]
                scope.cancel()
        assert scope.cancelled_caught
        assert harness.running == 0
        assert sorted(code_of(r) for r in harness.published.results) == [TOOL_ABORTED] * 2


class TestBadInput:
    async def test_duplicate_call_ids_are_rejected_before_anything_runs(self) -> None:
        harness = Harness()
        with pytest.raises(ValueError, match=r"^duplicate call_id 'p1' in one batch$"):
            await run_tool_calls(
                harness.registry,
                [ToolCall("p1", "p", {"id": "a"}), ToolCall("p1", "p", {"id": "b"})],
                signal=AbortController().signal,
            )
        assert harness.trace == []
        assert harness.published.results == []

    @pytest.mark.parametrize("bad", [0, -3])
    async def test_max_parallel_below_one_is_rejected(self, bad: int) -> None:
        harness = Harness()
        with pytest.raises(ValueError, match=r"^max_parallel must be at least 1, got "):
            await run_tool_calls(
                harness.registry, calls("p1"), signal=AbortController().signal, max_parallel=bad
            )
        assert harness.trace == []

    async def test_empty_batch_returns_no_outcomes(self) -> None:
        harness = Harness()
        assert await run_tool_calls(harness.registry, [], signal=AbortController().signal) == []
