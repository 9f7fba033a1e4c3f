"""Load: 10k calls from 200 concurrent callers with random aborts, failures and durations.

Asserts counts only — every call has exactly one result, no caller signal keeps a
listener, no task is left — never how long anything took.
"""

from __future__ import annotations

import random
from collections import Counter

import anyio
from typing_extensions import TypedDict

from toolseam import (
    AbortController,
    ToolCall,
    ToolError,
    ToolExecution,
    ToolExecutionInput,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)

CALLERS = 200
CALLS_PER_CALLER = 50  # 10 000 calls in all
BATCH = 5


class WorkArgs(TypedDict):
    millis: float
    fail: bool


def _registry(published: Counter[str]) -> ToolRegistry:
    registry = ToolRegistry()

    @define_tool(name="work", description="", is_concurrency_safe=lambda a: True)
    async def work(args: WorkArgs, exec: ToolRunContext) -> str:
        # The tool's own bounded wait, stopped early by its signal (cooperative).
        with anyio.move_on_after(args["millis"] / 1000):
            await exec.signal.wait()
        exec.signal.raise_if_aborted()
        if args["fail"]:
            raise ToolError("random failure", code="RANDOM")
        return "done"

    @define_tool(name="blocking", description="")
    def blocking(args: WorkArgs, exec: ToolRunContext) -> str:
        exec.signal.wait_sync(args["millis"] / 1000)
        exec.signal.raise_if_aborted()
        return "done"

    registry.register(work)
    registry.register(blocking)

    def count(exec: ToolExecution, result: ToolResult) -> None:
        published[exec.call_id] += 1

    registry.on_result(count)
    return registry


def _arguments(rng: random.Random) -> dict[str, object]:
    return {"millis": rng.uniform(0, 2), "fail": rng.random() < 0.1}


async def test_ten_thousand_calls_from_two_hundred_callers() -> None:
    published: Counter[str] = Counter()
    returned: Counter[str] = Counter()
    registry = _registry(published)
    controllers: list[AbortController] = []
    tasks_before = len(anyio.get_running_tasks())

    async def abort_later(controller: AbortController, rng: random.Random) -> None:
        await anyio.sleep(rng.uniform(0, 0.002))
        controller.abort("random stop")

    async def caller(index: int) -> None:
        rng = random.Random(index)
        async with anyio.create_task_group() as aborters:
            if index % 2 == 0:  # an agent loop: batches of tool calls
                for batch in range(CALLS_PER_CALLER // BATCH):
                    controller = AbortController()
                    controllers.append(controller)
                    if rng.random() < 0.3:
                        aborters.start_soon(abort_later, controller, rng)
                    calls = [
                        ToolCall(
                            f"{index}-{batch}-{i}",
                            "blocking" if rng.random() < 0.05 else "work",
                            _arguments(rng),
                        )
                        for i in range(BATCH)
                    ]
                    outcomes = await run_tool_calls(
                        registry, calls, signal=controller.signal, max_parallel=3
                    )
                    returned.update(o.call.call_id for o in outcomes)
            else:  # a direct caller
                for n in range(CALLS_PER_CALLER):
                    controller = AbortController()
                    controllers.append(controller)
                    if rng.random() < 0.3:
                        aborters.start_soon(abort_later, controller, rng)
                    call = ToolExecutionInput(
                        call_id=f"{index}-{n}",
                        name="work",
                        arguments=_arguments(rng),
                        signal=controller.signal,
                    )
                    await registry.execute(call)
                    returned[call.call_id] += 1

    async with anyio.create_task_group() as tg:
        for index in range(CALLERS):
            tg.start_soon(caller, index)

    total = CALLERS * CALLS_PER_CALLER
    assert len(returned) == total
    assert set(returned.values()) == {1}
    assert published == returned  # exactly one published result per call
    assert all(c.signal._listener_count() == 0 for c in controllers)
    assert len(anyio.get_running_tasks()) == tasks_before
