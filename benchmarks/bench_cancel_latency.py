"""Cancellation latency: from ``abort()`` until a waiting tool body runs again.

One sample: a waiter task parks, the main task takes ``perf_counter_ns()``, fires, and
parks on the waiter's completion; the waiter takes ``perf_counter_ns()`` as soon as it
resumes. Same loop, same thread, so the figure is the library's wake-up path plus one
scheduler turn. Contenders, per backend:

* ``asyncio.Event`` / ``trio.Event``: ``set()`` wakes a task in ``event.wait()``, the floor.
* ``AbortSignal.wait``: ``AbortController.abort()`` wakes a task in ``signal.wait()``.
* ``tool body``: ``abort()`` of a call's signal wakes a ``define_tool`` body that awaits
  ``exec.signal.wait()`` inside `ToolRegistry.execute` (the call then ends ``ABORTED``).

Run with ``python benchmarks/bench_cancel_latency.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import _harness
import trio
from _harness import Check, Series, perf_ns
from typing_extensions import TypedDict

from toolseam import (
    TOOL_ABORTED,
    AbortController,
    ToolExecutionInput,
    ToolRegistry,
    ToolRunContext,
    define_tool,
)

ROUNDS = 15
SAMPLES = 200

Spawn = Callable[[Callable[[], Awaitable[None]]], Awaitable[Any]]
"""Start ``fn()`` as a task now; return an awaitable that waits for it to finish."""


class NoArgs(TypedDict):
    pass


class _Probe:
    """Where the waiting tool body reports: set before each sample."""

    ready: Any = None
    resumed_ns = 0


PROBE = _Probe()


@define_tool(name="wait_for_abort", description="Wait until the call is aborted.")
async def wait_for_abort(args: NoArgs, exec: ToolRunContext) -> str:
    PROBE.ready.set()
    await exec.signal.wait()
    PROBE.resumed_ns = perf_ns()
    return "woken"


def _contenders(
    native_name: str, new_event: Callable[[], Any], spawn: Spawn
) -> list[tuple[str, Callable[[], Awaitable[int]]]]:
    registry = ToolRegistry()
    registry.register(wait_for_abort)

    async def native() -> int:
        event, ready = new_event(), new_event()
        resumed = 0

        async def waiter() -> None:
            nonlocal resumed
            ready.set()
            await event.wait()
            resumed = perf_ns()

        finished = spawn(waiter)
        await ready.wait()
        start = perf_ns()
        event.set()
        await finished
        return resumed - start

    async def signal_wait() -> int:
        controller, ready = AbortController(), new_event()
        signal = controller.signal
        resumed = 0

        async def waiter() -> None:
            nonlocal resumed
            ready.set()
            await signal.wait()
            resumed = perf_ns()

        finished = spawn(waiter)
        await ready.wait()
        start = perf_ns()
        controller.abort()
        await finished
        return resumed - start

    outcome: list[Any] = []

    async def tool_body() -> int:
        controller = AbortController()
        PROBE.ready = new_event()
        call = ToolExecutionInput(
            call_id="wait", name="wait_for_abort", arguments={}, signal=controller.signal
        )

        async def execute() -> None:
            outcome.append(await registry.execute(call))

        finished = spawn(execute)
        await PROBE.ready.wait()
        start = perf_ns()
        controller.abort()
        await finished
        return PROBE.resumed_ns - start

    async def checked_tool_body() -> int:
        outcome.clear()
        elapsed = await tool_body()
        [result] = outcome
        if not result.is_error or result.code != TOOL_ABORTED:
            raise RuntimeError(f"the waiting tool did not end ABORTED: {result!r}")
        return elapsed

    return [
        (native_name, native),
        ("AbortSignal.wait", signal_wait),
        ("tool body exec.signal.wait", checked_tool_body),
    ]


async def _on_asyncio(rounds: int, samples: int) -> list[Series]:
    loop = asyncio.get_running_loop()

    def spawn(fn: Callable[[], Awaitable[None]]) -> Awaitable[Any]:
        return loop.create_task(fn())  # type: ignore[arg-type]

    contenders = _contenders("asyncio.Event", asyncio.Event, spawn)
    return await _harness.interleave_samples(contenders, rounds=rounds, samples=samples)


async def _on_trio(rounds: int, samples: int) -> list[Series]:
    async with trio.open_nursery() as nursery:

        def spawn(fn: Callable[[], Awaitable[None]]) -> Awaitable[Any]:
            done = trio.Event()

            async def task() -> None:
                try:
                    await fn()
                finally:
                    done.set()

            nursery.start_soon(task)
            return done.wait()

        contenders = _contenders("trio.Event", trio.Event, spawn)
        return await _harness.interleave_samples(contenders, rounds=rounds, samples=samples)


def run(*, quick: bool = False) -> list[Check]:
    rounds, samples = (3, 30) if quick else (ROUNDS, SAMPLES)
    note = (
        f"{rounds} rounds x {samples} samples per contender (a round's figure is the median "
        "of its samples), order rotating each round"
    )
    on_asyncio = asyncio.run(_on_asyncio(rounds, samples))
    _harness.print_table(
        "[b] abort -> waiter resumes, asyncio",
        on_asyncio,
        baselines=["asyncio.Event"],
        unit="us",
        note=note,
    )
    on_trio = trio.run(_on_trio, rounds, samples)
    _harness.print_table(
        "[b] abort -> waiter resumes, trio", on_trio, baselines=["trio.Event"], unit="us", note=note
    )
    native, _, body = on_asyncio
    trio_native, _, trio_body = on_trio
    return [
        Check(
            "abort -> tool body wakes / the backend's Event.set() -> wait()",
            max(body.ratio(native), trio_body.ratio(trio_native)),
            1.5,
            "x",
            f"asyncio {body.ratio(native):.2f}x ({body.median:.1f} vs {native.median:.1f} us), "
            f"trio {trio_body.ratio(trio_native):.2f}x",
        )
    ]


def main() -> None:
    options = _harness.parser(__doc__.splitlines()[0]).parse_args()
    print(_harness.machine_summary())
    checks = run(quick=options.quick)
    print()
    _harness.print_checks(checks)


if __name__ == "__main__":
    main()
