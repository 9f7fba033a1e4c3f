"""Per-call overhead of the registry pipeline against a direct await and autogen-core.

Contenders, all echoing ``{"text": "hello"}`` through the same ``async def echo``:

* ``direct await``: ``await echo("hello")``, the floor.
* ``hand-written``: `ToolRegistry.execute` of a `ToolDefinition` implemented by hand
  (no pydantic: a type check of the one argument, the output passed through).
* ``define_tool``: ``define_tool`` with a TypedDict argument type and a ``-> str`` output,
  both validated by pydantic.
* ``define_tool+4``: the same with one no-op pre-execute listener, around-dispatch wrapper,
  post-execute listener and result observer.
* ``autogen run_json``: autogen-core's ``FunctionTool(echo).run_json(args,
  CancellationToken())`` (asyncio only: autogen-core is asyncio-only).

Each toolseam call builds its `ToolExecutionInput` and a fresh `AbortController`, as the
autogen call builds a fresh ``CancellationToken``. Run with ``python
benchmarks/bench_overhead.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

import _harness
import trio
from _harness import AsyncBatch, Check, Series, perf_ns
from typing_extensions import TypedDict

import toolseam
from toolseam import ToolArgsError, ToolExecution, ToolResult, ToolRunContext

ARGS: dict[str, Any] = {"text": "hello"}
ROUNDS = 21
CALLS = 1000

DEFINE_TOOL = "define_tool"
FOUR_LISTENERS = "define_tool+4"
AUTOGEN = "autogen run_json"
DIRECT = "direct await"
HAND_WRITTEN = "hand-written"


async def echo(text: str) -> str:
    """Echo the text."""
    return text


# -- the three toolseam definitions --------------------------------------------------------


class EchoArgs(TypedDict):
    text: str


def echo_definition(ts: ModuleType = toolseam) -> Any:
    """``define_tool`` over ``echo``, built with the given toolseam package."""

    @ts.define_tool(name="echo", description="Echo the text.")
    async def echo_tool(args: EchoArgs, exec: ToolRunContext) -> str:
        return await echo(args["text"])

    return echo_tool


class HandWrittenEcho:
    """The `ToolDefinition` protocol by hand: what another registry might register."""

    name = "echo"
    description = "Echo the text."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }
    timeout = None

    def parse_arguments(self, arguments: Any, /) -> str:
        text = arguments.get("text") if isinstance(arguments, Mapping) else None
        if type(text) is not str:
            raise ToolArgsError('invalid arguments for tool "echo": text must be a string')
        return text

    async def run(self, args: str, exec: ToolRunContext, /) -> str:
        return await echo(args)

    def serialize_output(self, output: str, /) -> Any:
        return output

    def render(self, args: str, value: Any, /) -> Sequence[Mapping[str, Any]]:
        return ({"type": "text", "text": value},)

    def is_concurrency_safe(self, args: str, /) -> bool:
        return True

    def finalize_content(self, exec: ToolExecution, result: ToolResult, /) -> None:
        return None


async def _pre(exec: Any, next: Callable[[], Awaitable[Any]]) -> Any:
    return await next()


async def _around(exec: Any, next: Callable[[], Awaitable[Any]]) -> Any:
    return await next()


async def _post(exec: Any, result: Any, next: Callable[[], Awaitable[Any]]) -> Any:
    return await next()


def _observe(exec: Any, result: Any) -> None:
    return None


def plain_registry(definition: Any, ts: ModuleType = toolseam) -> Any:
    registry = ts.ToolRegistry()
    registry.register(definition)
    return registry


def four_listener_registry(ts: ModuleType = toolseam) -> Any:
    registry = plain_registry(echo_definition(ts), ts)
    registry.on_pre_execute(_pre)
    registry.on_execute(_around)
    registry.on_post_execute(_post)
    registry.on_result(_observe)
    return registry


def registries(ts: ModuleType = toolseam) -> dict[str, Any]:
    """The three registries under test, by contender name."""
    return {
        HAND_WRITTEN: plain_registry(HandWrittenEcho(), ts),
        DEFINE_TOOL: plain_registry(echo_definition(ts), ts),
        FOUR_LISTENERS: four_listener_registry(ts),
    }


# -- batches ---------------------------------------------------------------------------


def direct_batch() -> AsyncBatch:
    async def batch(n: int) -> int:
        start = perf_ns()
        for _ in range(n):
            await echo("hello")
        return perf_ns() - start

    return batch


def registry_batch(registry: Any, ts: ModuleType = toolseam) -> AsyncBatch:
    execute = registry.execute
    make_input = ts.ToolExecutionInput
    controller = ts.AbortController

    async def batch(n: int) -> int:
        start = perf_ns()
        for _ in range(n):
            await execute(
                make_input(
                    call_id="call_1", name="echo", arguments=ARGS, signal=controller().signal
                )
            )
        return perf_ns() - start

    return batch


def autogen_batch() -> AsyncBatch:
    from autogen_core import CancellationToken
    from autogen_core.tools import FunctionTool

    tool = FunctionTool(echo, description="Echo the text.", name="echo")
    run_json = tool.run_json

    async def batch(n: int) -> int:
        start = perf_ns()
        for _ in range(n):
            await run_json(ARGS, CancellationToken())
        return perf_ns() - start

    return batch


async def check_autogen_echoes() -> None:
    from autogen_core import CancellationToken
    from autogen_core.tools import FunctionTool

    tool = FunctionTool(echo, description="Echo the text.", name="echo")
    value = await tool.run_json(ARGS, CancellationToken())
    if value != "hello":
        raise RuntimeError(f"the autogen contender does not echo: {value!r}")


def toolseam_contenders() -> list[tuple[str, AsyncBatch]]:
    return [
        (DIRECT, direct_batch()),
        *((name, registry_batch(registry)) for name, registry in registries().items()),
    ]


async def check_echoes(registry: Any, ts: ModuleType = toolseam) -> None:
    """A contender really echoes: a benchmark of a failing call would measure nothing."""
    call = ts.ToolExecutionInput(
        call_id="c", name="echo", arguments=ARGS, signal=ts.AbortController().signal
    )
    result = await registry.execute(call)
    if result.is_error or result.value != "hello":
        raise RuntimeError(f"the echo contender does not echo: {result!r}")


async def _sanity() -> None:
    for registry in registries().values():
        await check_echoes(registry)


async def _on_asyncio(rounds: int, calls: int) -> list[Series]:
    await _sanity()
    await check_autogen_echoes()
    contenders = [*toolseam_contenders(), (AUTOGEN, autogen_batch())]
    return await _harness.interleave_async(contenders, rounds=rounds, calls=calls)


async def _on_trio(rounds: int, calls: int) -> list[Series]:
    await _sanity()
    return await _harness.interleave_async(toolseam_contenders(), rounds=rounds, calls=calls)


def run(*, quick: bool = False) -> list[Check]:
    rounds, calls = (3, 200) if quick else (ROUNDS, CALLS)
    note = f"{rounds} rounds x {calls} calls per contender, order rotating each round"
    on_asyncio = asyncio.run(_on_asyncio(rounds, calls))
    _harness.print_table(
        "[a] per-call overhead, asyncio",
        on_asyncio,
        baselines=[DIRECT, AUTOGEN],
        note=note,
    )
    on_trio = trio.run(_on_trio, rounds, calls)
    _harness.print_table(
        "[a] per-call overhead, trio (autogen-core is asyncio-only)",
        on_trio,
        baselines=[DIRECT, DEFINE_TOOL],
        note=note,
    )
    by_name = {s.name: s for s in on_asyncio}
    autogen = by_name[AUTOGEN]
    return [
        Check(
            "define_tool per call vs autogen run_json (asyncio)",
            by_name[DEFINE_TOOL].ratio(autogen),
            0.45,
            "x",
            f"{by_name[DEFINE_TOOL].median:.1f} vs {autogen.median:.1f} us/call",
        ),
        Check(
            "define_tool + 4 no-op listeners vs autogen run_json (asyncio)",
            by_name[FOUR_LISTENERS].ratio(autogen),
            0.70,
            "x",
            f"{by_name[FOUR_LISTENERS].median:.1f} vs {autogen.median:.1f} us/call",
        ),
    ]


def main() -> None:
    options = _harness.parser(__doc__.splitlines()[0]).parse_args()
    print(_harness.machine_summary())
    checks = run(quick=options.quick)
    print()
    _harness.print_checks(checks)


if __name__ == "__main__":
    main()
