"""Peers: one echo through each framework's own tool-execution seam, and scaling tables.

Every contender echoes ``{"text": "hello"}`` through the same ``async def echo(text: str)
-> str``, interleaved round by round in one asyncio process (several peers are asyncio
only). Each is the seam that framework's agent loop calls for one tool call, with what a
call needs built per call, as that loop would:

* ``toolseam``: ``ToolRegistry.execute(ToolExecutionInput(..., signal=AbortController()
  .signal))`` of a ``define_tool`` echo (TypedDict argument, ``-> str``).
* ``autogen-core``: ``FunctionTool(echo).run_json(args, CancellationToken())``.
* ``pydantic-ai``: ``ToolManager.handle_call(ToolCallPart(...))`` of a ``FunctionToolset``,
  the manager prepared once for the run step (``for_run_step``), as an agent run does.
* ``openai-agents``: ``function_tool(echo).on_invoke_tool(ToolContext(...), json_text)``.
* ``langchain-core``: ``StructuredTool.from_function(coroutine=echo).ainvoke(args)``.
* ``mcp``: the MCP SDK server's ``ToolManager.call_tool("echo", args, Context())``.

Then scaling tables for toolseam: listeners (0 to 64, spread over the four kinds), argument
size (10 B to 1 MB, a string and a list of small objects, against autogen), batch size
(``run_tool_calls`` of 1 to 1,000 calls against the same calls one by one) and memory per
in-flight call (100 to 10,000 calls waiting at once).

Run with ``python benchmarks/bench_peers.py``; ``run_all.py`` includes it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import _harness
import bench_overhead
import bench_targets
from _harness import AsyncBatch, Check, Series, perf_ns

import toolseam
from toolseam import AbortController, ToolExecutionInput, ToolRegistry, ToolRunContext, define_tool

ARGS: dict[str, Any] = {"text": "hello"}
ROUNDS = 21
CALLS = 1000


async def echo(text: str) -> str:
    """Echo the text."""
    return text


NOTES = {
    "toolseam": (
        "validates arguments (pydantic) and output, freezes a snapshot of both, a fused "
        "abort signal for the body, one frozen result published to observers; no tracing"
    ),
    "autogen-core": (
        "pydantic model_validate of the arguments, the call, a no-op OpenTelemetry span "
        "and a logged ToolCallEvent; no output validation, no snapshot, no result object"
    ),
    "pydantic-ai": (
        "argument validation, retries bookkeeping, capability hooks, tracing spans; the "
        "raw return value (validated later by the agent)"
    ),
    "openai-agents": (
        "parses the JSON text, validates with pydantic, invokes, wraps errors for the "
        "model; returns the raw value; no cancellation handle"
    ),
    "langchain-core": (
        "input validation via a generated model, callbacks manager and run tree, config "
        "propagation; returns the raw value"
    ),
    "mcp": (
        "pydantic validation of the arguments (FuncMetadata), the call, optional result "
        "conversion (off here); no cancellation handle at this seam"
    ),
}


def toolseam_contender() -> AsyncBatch:
    registry = ToolRegistry()
    registry.register(bench_overhead.echo_definition(toolseam))
    return bench_overhead.registry_batch(registry)


def autogen_contender() -> AsyncBatch:
    return bench_overhead.autogen_batch()


def pydantic_ai_contender() -> Callable[[], Awaitable[AsyncBatch]]:
    async def make() -> AsyncBatch:
        from pydantic_ai import RunContext
        from pydantic_ai.messages import ToolCallPart
        from pydantic_ai.models.test import TestModel
        from pydantic_ai.tool_manager import ToolManager
        from pydantic_ai.toolsets import FunctionToolset
        from pydantic_ai.usage import RunUsage

        context = RunContext(deps=None, model=TestModel(), usage=RunUsage())
        manager = await ToolManager(FunctionToolset([echo])).for_run_step(context)
        handle_call = manager.handle_call

        async def batch(n: int) -> int:
            start = perf_ns()
            for _ in range(n):
                await handle_call(ToolCallPart(tool_name="echo", args=ARGS, tool_call_id="c1"))
            return perf_ns() - start

        probe = ToolCallPart(tool_name="echo", args=ARGS, tool_call_id="c")
        if await handle_call(probe) != "hello":
            raise RuntimeError("the pydantic-ai contender does not echo")
        return batch

    return make


def openai_agents_contender() -> AsyncBatch:
    from agents import function_tool
    from agents.tool_context import ToolContext

    tool = function_tool(echo)
    invoke = tool.on_invoke_tool
    text = json.dumps(ARGS)

    async def batch(n: int) -> int:
        start = perf_ns()
        for _ in range(n):
            context = ToolContext(
                context=None, tool_name="echo", tool_call_id="c1", tool_arguments=text
            )
            await invoke(context, text)
        return perf_ns() - start

    return batch


def langchain_contender() -> AsyncBatch:
    from langchain_core.tools import StructuredTool

    tool = StructuredTool.from_function(coroutine=echo)
    ainvoke = tool.ainvoke

    async def batch(n: int) -> int:
        start = perf_ns()
        for _ in range(n):
            await ainvoke(ARGS)
        return perf_ns() - start

    return batch


def mcp_contender() -> AsyncBatch:
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.tools.tool_manager import ToolManager

    manager = ToolManager()
    manager.add_tool(echo)
    call_tool = manager.call_tool

    async def batch(n: int) -> int:
        start = perf_ns()
        for _ in range(n):
            await call_tool("echo", ARGS, Context())
        return perf_ns() - start

    return batch


async def _peers(rounds: int, calls: int) -> list[Series]:
    contenders: list[tuple[str, AsyncBatch]] = [
        ("toolseam", toolseam_contender()),
        ("autogen-core", autogen_contender()),
        ("pydantic-ai", await pydantic_ai_contender()()),
        ("openai-agents", openai_agents_contender()),
        ("langchain-core", langchain_contender()),
        ("mcp", mcp_contender()),
    ]
    for name, batch in contenders:
        await batch(1)  # each one works (the pydantic-ai one checked its echo already)
        del name
    return await _harness.interleave_async(contenders, rounds=rounds, calls=calls)


# -- scaling ---------------------------------------------------------------------------


def listener_registry(count: int) -> ToolRegistry:
    """``count`` no-op listeners, spread evenly over pre, around, post and observers."""
    registry = ToolRegistry()
    registry.register(bench_overhead.echo_definition(toolseam))
    adders = (
        (registry.on_pre_execute, bench_overhead._pre),
        (registry.on_execute, bench_overhead._around),
        (registry.on_post_execute, bench_overhead._post),
        (registry.on_result, bench_overhead._observe),
    )
    for index in range(count):
        add, listener = adders[index % 4]
        add(listener)  # type: ignore[operator]
    return registry


async def _listeners(rounds: int, calls: int) -> list[Series]:
    contenders = [
        (f"{count} listeners", bench_overhead.registry_batch(listener_registry(count)))
        for count in (0, 4, 16, 64)
    ]
    return await _harness.interleave_async(contenders, rounds=rounds, calls=calls)


SIZES = (10, 1_000, 100_000, 1_000_000)


def _size_label(size: int) -> str:
    if size >= 1_000_000:
        return f"{size // 1_000_000} MB"
    if size >= 1000:
        return f"{size // 1000} KB"
    return f"{size} B"


async def _argument_sizes(rounds: int) -> list[tuple[str, Series, Series]]:
    rows = []
    for size in SIZES:
        string = {"text": "x" * size}
        objects = bench_targets.nested_items(max(size // 62, 1))  # ~62 bytes of JSON each
        for kind, name, arguments in (
            ("string", "text_length", string),
            ("objects", "item_count", objects),
        ):
            calls = max(10, min(1000, 2_000_000 // max(size, 1)))
            series = await _harness.interleave_async(
                bench_targets.large_contenders(name, arguments), rounds=rounds, calls=calls
            )
            rows.append((f"{_size_label(size)} {kind}", series[0], series[1]))
    return rows


async def _batch_sizes(rounds: int) -> list[tuple[int, Series, Series]]:
    rows = []
    for size in (1, 10, 100, 1000):
        series = await _harness.interleave_async(
            bench_targets.batch_contenders(size, max_parallel=10),
            rounds=rounds,
            calls=max(size, 200),
        )
        rows.append((size, series[0], series[1]))
    return rows


async def _memory_sizes() -> list[tuple[int, float, float]]:
    rows = []
    for count in (100, 1000, 10_000):
        bare, call = await bench_targets._memory(count)
        rows.append((count, bare, call))
    return rows


def _check_peers_echo() -> None:
    async def one() -> None:
        registry = ToolRegistry()

        @define_tool(name="echo", description="Echo the text.")
        async def echo_tool(args: bench_overhead.EchoArgs, exec: ToolRunContext) -> str:
            return args["text"]

        registry.register(echo_tool)
        call = ToolExecutionInput(
            call_id="c", name="echo", arguments=ARGS, signal=AbortController().signal
        )
        if (await registry.execute(call)).is_error:
            raise RuntimeError("the toolseam contender does not echo")

    asyncio.run(one())


def run(*, quick: bool = False) -> list[Check]:
    rounds, calls = (3, 200) if quick else (ROUNDS, CALLS)
    _check_peers_echo()
    peers = asyncio.run(_peers(rounds, calls))
    _harness.print_table(
        "[p] one echo through each framework's tool-execution seam (asyncio)",
        peers,
        baselines=["toolseam", "autogen-core"],
        note=f"{rounds} rounds x {calls} calls per contender, order rotating each round",
    )
    print("  what each seam does:")
    for name, note in NOTES.items():
        print(f"    {name}: {note}")

    scale_rounds = 3 if quick else 9
    listeners = asyncio.run(_listeners(scale_rounds, calls))
    _harness.print_table(
        "[p] listeners, spread over pre-execute, around-dispatch, post-execute, observers",
        listeners,
        baselines=["0 listeners"],
        note=f"{scale_rounds} rounds x {calls} calls",
    )

    sizes = asyncio.run(_argument_sizes(scale_rounds))
    print(f"\n[p] argument size: toolseam vs autogen run_json ({scale_rounds} rounds each)")
    print(f"  {'argument':<16}{'toolseam us':>14}{'autogen us':>14}{'ratio':>8}")
    for label, ours, theirs in sizes:
        print(f"  {label:<16}{ours.median:>14.1f}{theirs.median:>14.1f}{ours.ratio(theirs):>8.2f}")

    batches = asyncio.run(_batch_sizes(scale_rounds))
    print("\n[p] batch size: run_tool_calls(max_parallel=10) vs one by one, us per call")
    print(f"  {'calls':<8}{'batch':>10}{'one by one':>12}{'ratio':>8}")
    for size, batch, sequential in batches:
        print(
            f"  {size:<8}{batch.median:>10.2f}{sequential.median:>12.2f}"
            f"{batch.ratio(sequential):>8.2f}"
        )

    memory = asyncio.run(_memory_sizes())
    print("\n[p] memory per in-flight call (tracemalloc, bytes per task, asyncio)")
    print(f"  {'in flight':<10}{'bare task':>11}{'call':>9}{'difference':>12}")
    for count, bare, call in memory:
        print(f"  {count:<10}{bare:>11,.0f}{call:>9,.0f}{call - bare:>12,.0f}")
    return []


def main() -> None:
    options = _harness.parser(__doc__.splitlines()[0]).parse_args()
    print(_harness.machine_summary())
    run(quick=options.quick)


if __name__ == "__main__":
    main()
