"""Every figure of the performance targets, each a ratio measured side by side in one process.

* ``define_tool`` echo per call ÷ autogen-core ``FunctionTool.run_json`` (asyncio), and the
  same with four no-op listeners (pre-execute, around-dispatch, post-execute, observer);
* a call of a tool with ``timeout=30`` ÷ the same call untimed: through the registry's
  built-in timeout (``timeouts=True``, the default) and through an explicitly registered
  ``timeout_policy``, against a registry without it and against one with it (asyncio and
  trio);
* ``run_tool_calls`` of 10 parallel-safe calls, per call ÷ the same 10 calls executed one by
  one (asyncio and trio);
* one 1 MB string argument, and a 100 KB nested argument (a list of 1,600 small objects),
  toolseam ÷ autogen (the tools return the argument's length: the figure is what taking
  the argument in costs);
* abort → a waiting tool body resumes ÷ the backend's own ``Event.set()`` → ``wait()``
  (from ``bench_cancel_latency``, both backends);
* memory per in-flight call above a bare task waiting on an event (tracemalloc, 2,000
  calls whose bodies wait on one shared event; the call's ``ToolExecutionInput`` and
  ``AbortController`` are counted).

Run with ``python benchmarks/bench_targets.py``; ``run_all.py`` includes it.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import _harness
import anyio
import bench_cancel_latency
import bench_overhead
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
from toolseam.policies import timeout_policy

ROUNDS = 21
CALLS = 1000


class EchoArgs(TypedDict):
    text: str


# -- timed vs untimed --------------------------------------------------------------------


def _echo_tool(timeout: float | None) -> Any:
    @define_tool(name="echo", description="Echo the text.", timeout=timeout)
    async def echo(args: EchoArgs, exec: ToolRunContext) -> str:
        return args["text"]

    return echo


def timeout_registries() -> dict[str, ToolRegistry]:
    """Timed and untimed: with the built-in timeout, and with ``timeout_policy`` registered.

    The policy's untimed call goes through the policy too (which delegates it untouched),
    so that its ratio is what the deadline costs, not what an around-dispatch wrapper does.
    """
    untimed = ToolRegistry()
    untimed.register(_echo_tool(None))
    built_in = ToolRegistry()
    built_in.register(_echo_tool(30.0))
    policy_untimed = ToolRegistry()
    policy_untimed.register(_echo_tool(None))
    policy_untimed.on_execute(timeout_policy(policy_untimed))
    policy = ToolRegistry()
    policy.register(_echo_tool(30.0))
    policy.on_execute(timeout_policy(policy))
    return {
        "untimed": untimed,
        "timeout=30 built-in": built_in,
        "policy, untimed": policy_untimed,
        "policy, timeout=30": policy,
    }


async def _timeouts(rounds: int, calls: int) -> list[Series]:
    contenders = []
    for name, registry in timeout_registries().items():
        await bench_overhead.check_echoes(registry)
        contenders.append((name, bench_overhead.registry_batch(registry)))
    return await _harness.interleave_async(contenders, rounds=rounds, calls=calls)


# -- batch of 10 -------------------------------------------------------------------------

BATCH_SIZE = 10


@define_tool(name="echo", description="Echo the text.", is_concurrency_safe=lambda args: True)
async def parallel_echo(args: EchoArgs, exec: ToolRunContext) -> str:
    return args["text"]


def batch_registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(parallel_echo)
    return registry


def batch_contenders(size: int, max_parallel: int = 10) -> list[tuple[str, AsyncBatch]]:
    """``run_tool_calls`` of ``size`` calls vs the same calls one by one; per call."""
    registry = batch_registry()
    calls = [ToolCall(f"call_{i}", "echo", {"text": f"hello {i}"}) for i in range(size)]
    execute = registry.execute

    async def batched(n: int) -> int:
        elapsed = 0
        for _ in range(max(n // size, 1)):
            signal = AbortController().signal
            start = perf_ns()
            outcomes = await run_tool_calls(
                registry, calls, signal=signal, max_parallel=max_parallel
            )
            elapsed += perf_ns() - start
            if len(outcomes) != size or outcomes[-1].result.is_error:
                raise RuntimeError(f"unexpected outcomes: {outcomes!r}")
        return elapsed * n // (max(n // size, 1) * size)

    async def sequential(n: int) -> int:
        elapsed = 0
        for _ in range(max(n // size, 1)):
            signal = AbortController().signal
            start = perf_ns()
            for call in calls:
                await execute(
                    ToolExecutionInput(
                        call_id=call.call_id,
                        name=call.name,
                        arguments=call.arguments,
                        signal=signal,
                    )
                )
            elapsed += perf_ns() - start
        return elapsed * n // (max(n // size, 1) * size)

    return [(f"run_tool_calls({size})", batched), (f"{size} x execute", sequential)]


async def _batch(rounds: int, calls: int) -> list[Series]:
    return await _harness.interleave_async(batch_contenders(BATCH_SIZE), rounds=rounds, calls=calls)


# -- large arguments ---------------------------------------------------------------------


class Item(TypedDict):
    id: int
    name: str
    price: float
    in_stock: bool


class TextArgs(TypedDict):
    text: str


class ItemsArgs(TypedDict):
    items: list[Item]


def big_string() -> dict[str, Any]:
    return {"text": "x" * 1_000_000}


def nested_items(count: int = 1600) -> dict[str, Any]:
    """About 100 KB of JSON: ``count`` small objects (an id, a name, a price, a flag)."""
    return {
        "items": [
            {"id": i, "name": f"item number {i}", "price": i / 4, "in_stock": i % 3 == 0}
            for i in range(count)
        ]
    }


def _length_tools() -> tuple[Any, Any]:
    @define_tool(name="text_length", description="Length of the text.")
    async def text_length(args: TextArgs, exec: ToolRunContext) -> int:
        return len(args["text"])

    @define_tool(name="item_count", description="Number of items.")
    async def item_count(args: ItemsArgs, exec: ToolRunContext) -> int:
        return len(args["items"])

    return text_length, item_count


async def autogen_text_length(text: str) -> int:
    """Length of the text."""
    return len(text)


async def autogen_item_count(items: list[Item]) -> int:
    """Number of items."""
    return len(items)


def large_contenders(name: str, arguments: dict[str, Any]) -> list[tuple[str, AsyncBatch]]:
    from autogen_core import CancellationToken
    from autogen_core.tools import FunctionTool

    text_length, item_count = _length_tools()
    registry = ToolRegistry()
    registry.register(text_length)
    registry.register(item_count)
    function = autogen_text_length if name == "text_length" else autogen_item_count
    tool = FunctionTool(function, description="Length.", name=name)
    run_json = tool.run_json
    execute = registry.execute

    async def ours(n: int) -> int:
        start = perf_ns()
        for _ in range(n):
            result = await execute(
                ToolExecutionInput(
                    call_id="c", name=name, arguments=arguments, signal=AbortController().signal
                )
            )
        elapsed = perf_ns() - start
        if result.is_error:
            raise RuntimeError(f"the large-argument call failed: {result!r}")
        return elapsed

    async def theirs(n: int) -> int:
        start = perf_ns()
        for _ in range(n):
            await run_json(arguments, CancellationToken())
        return perf_ns() - start

    return [(f"toolseam {name}", ours), (f"autogen {name}", theirs)]


async def _large(rounds: int, calls: int) -> tuple[list[Series], list[Series]]:
    string = await _harness.interleave_async(
        large_contenders("text_length", big_string()), rounds=rounds, calls=calls
    )
    nested = await _harness.interleave_async(
        large_contenders("item_count", nested_items()), rounds=rounds, calls=max(calls // 10, 1)
    )
    return string, nested


# -- memory per in-flight call -----------------------------------------------------------


class NoArgs(TypedDict):
    pass


async def _in_flight_bytes(count: int, start_one: Callable[[Any, Any], Awaitable[None]]) -> float:
    """Bytes traced per task while ``count`` tasks (each ``start_one(gate, registry)``) wait."""
    gate: list[anyio.Event] = []  # the event the tool body waits on
    registry = ToolRegistry()

    @define_tool(name="wait", description="Wait for the gate.")
    async def wait(args: NoArgs, exec: ToolRunContext) -> None:
        await gate[0].wait()

    registry.register(wait)
    # Warm: one call through, so that caches and lazily built objects exist already.
    gate.append(anyio.Event())
    gate[0].set()
    async with anyio.create_task_group() as group:
        group.start_soon(start_one, gate[0], registry)
    gate[0] = anyio.Event()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        async with anyio.create_task_group() as group:
            for _ in range(count):
                group.start_soon(start_one, gate[0], registry)
            await anyio.wait_all_tasks_blocked()
            gc.collect()
            during = tracemalloc.get_traced_memory()[0]
            gate[0].set()
    finally:
        tracemalloc.stop()
    return (during - before) / count


async def _bare(gate: Any, registry: ToolRegistry) -> None:
    await gate.wait()


async def _call(gate: Any, registry: ToolRegistry) -> None:
    result = await registry.execute(
        ToolExecutionInput(call_id="m", name="wait", arguments={}, signal=AbortController().signal)
    )
    if result.is_error:
        raise RuntimeError(f"the waiting call failed: {result!r}")


async def _memory(count: int) -> tuple[float, float]:
    """Bare task and in-flight call, alternately, three times each: the medians.

    A first untimed pass of each grows the event loop's own containers (sets never shrink),
    so that neither contender pays for that growth.
    """
    await _in_flight_bytes(count, _bare)
    await _in_flight_bytes(count, _call)
    bare, call = [], []
    for _ in range(3):
        bare.append(await _in_flight_bytes(count, _bare))
        call.append(await _in_flight_bytes(count, _call))
    return statistics.median(bare), statistics.median(call)


# -- running -----------------------------------------------------------------------------


def run(*, quick: bool = False) -> list[Check]:
    rounds, calls = (3, 200) if quick else (ROUNDS, CALLS)
    note = f"{rounds} rounds x {calls} calls per contender, order rotating each round"
    checks: list[Check] = []

    # Overhead against autogen (asyncio only: autogen-core is asyncio-only).
    overhead = asyncio.run(bench_overhead._on_asyncio(rounds, calls))
    _harness.print_table(
        "[t1] per-call overhead, asyncio",
        overhead,
        baselines=[bench_overhead.AUTOGEN],
        note=note,
    )
    by_name = {s.name: s for s in overhead}
    autogen = by_name[bench_overhead.AUTOGEN]
    for name, limit, label in (
        (bench_overhead.DEFINE_TOOL, 0.45, "define_tool echo per call / autogen run_json"),
        (bench_overhead.FOUR_LISTENERS, 0.70, "same + 4 no-op listeners / autogen run_json"),
    ):
        checks.append(
            Check(
                label,
                by_name[name].ratio(autogen),
                limit,
                "x",
                f"{by_name[name].median:.2f} vs {autogen.median:.2f} us/call",
            )
        )

    # Timed vs untimed, both backends.
    timed: dict[str, list[Series]] = {
        "asyncio": asyncio.run(_timeouts(rounds, calls)),
        "trio": trio.run(_timeouts, rounds, calls),
    }
    for backend, series in timed.items():
        _harness.print_table(
            f"[t2] a call of a tool with timeout=30 vs untimed, {backend}",
            series,
            baselines=["untimed", "policy, untimed"],
            note=note,
        )
    values = {b: {s.name: s for s in series} for b, series in timed.items()}
    for contender, baseline, label in (
        ("timeout=30 built-in", "untimed", "built-in timeout"),
        ("policy, timeout=30", "untimed", "timeout_policy registered"),
        ("policy, timeout=30", "policy, untimed", "timeout_policy registered, both through it"),
    ):
        ratios = {b: v[contender].ratio(v[baseline]) for b, v in values.items()}
        checks.append(
            Check(
                f"a call of a tool with timeout=30 / the same call untimed ({label})",
                max(ratios.values()),
                1.3,
                "x",
                ", ".join(f"{b} {r:.2f}x" for b, r in ratios.items()),
            )
        )

    # A batch of 10.
    batch: dict[str, list[Series]] = {
        "asyncio": asyncio.run(_batch(rounds, calls)),
        "trio": trio.run(_batch, rounds, calls),
    }
    for backend, series in batch.items():
        _harness.print_table(
            f"[t3] run_tool_calls of {BATCH_SIZE} parallel-safe calls vs one by one, {backend}",
            series,
            baselines=[series[1].name],
            note=note + " (us per call)",
        )
    batch_ratios = {b: series[0].ratio(series[1]) for b, series in batch.items()}
    checks.append(
        Check(
            f"run_tool_calls of {BATCH_SIZE} parallel calls, per call / one by one",
            max(batch_ratios.values()),
            1.5,
            "x",
            ", ".join(f"{b} {r:.2f}x" for b, r in batch_ratios.items()),
        )
    )

    # Large arguments.
    large_rounds, large_calls = (3, 20) if quick else (15, 100)
    string, nested = asyncio.run(_large(large_rounds, large_calls))
    for title, series in (("one 1 MB string", string), ("a 100 KB nested list", nested)):
        _harness.print_table(
            f"[t4] {title} argument, asyncio",
            series,
            baselines=[series[1].name],
            note=f"{large_rounds} rounds, order rotating each round",
        )
    for label, series, limit in (
        ("one 1 MB string argument, toolseam / autogen", string, 1.5),
        ("a 100 KB nested argument, toolseam / autogen", nested, 4.0),
    ):
        checks.append(
            Check(
                label,
                series[0].ratio(series[1]),
                limit,
                "x",
                f"{series[0].median:.1f} vs {series[1].median:.1f} us/call",
            )
        )

    # Abort -> wake.
    checks.extend(bench_cancel_latency.run(quick=quick))

    # Memory.
    count = 200 if quick else 2000
    results = {
        "asyncio": asyncio.run(_memory(count)),
        "trio": trio.run(_memory, count),
    }
    print(f"\n[t5] memory while {count:,} calls wait on one event (tracemalloc, bytes per task)")
    per_call = {}
    for backend, (bare, call) in results.items():
        per_call[backend] = call - bare
        print(
            f"  {backend}: bare task {bare:,.0f} B, in-flight call {call:,.0f} B, "
            f"difference {call - bare:,.0f} B"
        )
    checks.append(
        Check(
            "memory per in-flight call above a bare task waiting on an event",
            max(per_call.values()) / 1000,
            1.2,
            "KB",
            ", ".join(f"{b} {v / 1000:.2f} KB" for b, v in per_call.items()),
        )
    )
    return checks


def main() -> None:
    options = _harness.parser(__doc__.splitlines()[0]).parse_args()
    print(_harness.machine_summary())
    checks = run(quick=options.quick)
    print()
    _harness.print_checks(checks)


if __name__ == "__main__":
    main()
