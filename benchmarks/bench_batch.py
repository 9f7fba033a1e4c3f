"""Batch throughput: 10k parallel-safe calls through `run_tool_calls` vs one by one.

Both contenders run the same 10,000 calls of a ``define_tool`` echo whose
``is_concurrency_safe`` is ``lambda args: True``, under one turn signal:

* ``run_tool_calls``: one ``run_tool_calls(registry, calls, signal=..., max_parallel=64)``;
* ``sequential execute``: ``await registry.execute(...)`` for each call in turn.

The bodies never block, so overlap cannot pay off here: the figure is what the batch
executor's bookkeeping (mode checks, tasks, slots, post-execute in model order) costs per
call on top of ``execute``. Run with ``python benchmarks/bench_batch.py``.
"""

from __future__ import annotations

import asyncio

import _harness
import trio
from _harness import AsyncBatch, Check, Series, perf_ns
from typing_extensions import TypedDict

from toolseam import (
    AbortController,
    ToolCall,
    ToolExecutionInput,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)

CALLS = 10_000
ROUNDS = 7
MAX_PARALLEL = 64
BATCH = f"run_tool_calls({MAX_PARALLEL})"
SEQUENTIAL = "sequential execute"


class EchoArgs(TypedDict):
    text: str


@define_tool(name="echo", description="Echo the text.", is_concurrency_safe=lambda args: True)
async def echo_tool(args: EchoArgs, exec: ToolRunContext) -> str:
    return args["text"]


def _registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(echo_tool)
    return registry


def _calls(n: int) -> list[ToolCall]:
    return [ToolCall(f"call_{i}", "echo", {"text": f"hello {i}"}) for i in range(n)]


def batch_contender(registry: ToolRegistry, calls: list[ToolCall]) -> AsyncBatch:
    async def batch(n: int) -> int:
        signal = AbortController().signal
        start = perf_ns()
        outcomes = await run_tool_calls(
            registry, calls[:n], signal=signal, max_parallel=MAX_PARALLEL
        )
        elapsed = perf_ns() - start
        for call, outcome in zip(calls, outcomes, strict=False):
            if outcome.call is not call or not outcome.dispatched or outcome.result.is_error:
                raise RuntimeError(f"unexpected outcome in the batch: {outcome!r}")
        return elapsed

    return batch


def sequential_contender(registry: ToolRegistry, calls: list[ToolCall]) -> AsyncBatch:
    execute = registry.execute

    async def batch(n: int) -> int:
        signal = AbortController().signal
        start = perf_ns()
        for call in calls[:n]:
            await execute(
                ToolExecutionInput(
                    call_id=call.call_id, name=call.name, arguments=call.arguments, signal=signal
                )
            )
        return perf_ns() - start

    return batch


async def _measure(rounds: int, calls: int) -> list[Series]:
    registry = _registry()
    batch = _calls(calls)
    probe = ToolExecutionInput(
        call_id="p", name="echo", arguments={"text": "x"}, signal=AbortController().signal
    )
    if registry.execution_mode(probe) != "parallel":
        raise RuntimeError("the echo tool should be parallel-safe")
    return await _harness.interleave_async(
        [
            (BATCH, batch_contender(registry, batch)),
            (SEQUENTIAL, sequential_contender(registry, batch)),
        ],
        rounds=rounds,
        calls=calls,
        warmup_calls=min(calls, 2000),
    )


def run(*, quick: bool = False) -> list[Check]:
    rounds, calls = (3, 1000) if quick else (ROUNDS, CALLS)
    note = f"{rounds} rounds x {calls:,} calls per contender, order rotating each round"
    ratios = []
    for backend, series in (
        ("asyncio", asyncio.run(_measure(rounds, calls))),
        ("trio", trio.run(_measure, rounds, calls)),
    ):
        _harness.print_table(
            f"[d] batch throughput, {backend}: {calls:,} parallel-safe calls",
            series,
            baselines=[SEQUENTIAL],
            note=note,
        )
        batch, sequential = series
        ratios.append(
            f"{backend}: {batch.median:.1f} us/call in run_tool_calls vs "
            f"{sequential.median:.1f} sequential ({batch.ratio(sequential):.2f}x)"
        )
    print("  " + "\n  ".join(ratios))
    return []


def main() -> None:
    options = _harness.parser(__doc__.splitlines()[0]).parse_args()
    print(_harness.machine_summary())
    run(quick=options.quick)


if __name__ == "__main__":
    main()
