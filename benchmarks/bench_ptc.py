"""Programmatic tool calling (toolseam.ptc): what a nested call, a stop and a trivial run cost.

Three figures, on asyncio and trio, each against its target (issue 27):

* **per nested call**: ``run_code`` of a program making 100 calls of a no-op tool (all at once
  with ``asyncio.gather``, and one after another with ``noop_sync``), per nested call, ÷ a
  direct ``registry.execute`` of the same tool; interleaved round by round, the ratio taken
  within each round. Target at most 3x (the sandbox's own host round trip included).
* **abort**: a program fans out 10 nested calls that wait for their signal, then spins; once
  all 10 bodies run, the caller aborts. *told*: from ``abort()`` until the last body resumed
  (target ≤ 5 ms); *gone*: from ``abort()`` until ``run_code`` returned, which is after the
  sandbox process exited (target ≤ grace + 100 ms, grace 100 ms here).
* **trivial run**: ``run_code`` of ``1 + 1`` with a warm pool, per call (target ≤ 1 ms).

The per-nested-call table also shows the floor: the same programs driven by a bare snapshot
loop in one thread, every call answered at once (no registry, no event loop: pydantic-monty's
own host round trip). A sequential nested call cannot cost less than that round trip plus a
direct call; a gathered one can overlap the two (the event loop runs the call while the
driver thread resumes the program). On asyncio it also shows the alternative design's floor:
the same bare loop over pydantic-monty's asyncio bindings (``AsyncMonty``), which would let
the event loop drive the sandbox without a thread of toolseam's. Where the machine has more
than one CPU, the floor is measured a second time with the driving thread and the sandbox's
worker process on one CPU: the round trip is a wake-up of the other side each way, and on a
virtual machine waking another, idle CPU can cost several times the round trip itself.

Run with ``python benchmarks/bench_ptc.py``.
"""

from __future__ import annotations

import functools
import os
import statistics
from collections.abc import Generator
from contextlib import AsyncExitStack, contextmanager, nullcontext, suppress
from typing import Any

import _harness
import anyio
import anyio.to_thread
from _harness import Check, Series, perf_ns
from pydantic_monty import (
    AsyncMonty,
    ExternalFuture,
    ExternalReturnValue,
    FunctionSnapshot,
    FutureSnapshot,
    Monty,
    MontyComplete,
)
from typing_extensions import TypedDict

from toolseam import (
    TOOL_ABORTED,
    AbortController,
    ToolExecutionInput,
    ToolFailure,
    ToolRegistry,
    ToolRunContext,
    ToolSuccess,
    define_tool,
)
from toolseam.ptc import PtcLimits, ptc_tool

GRACE = 0.1
# Pinning needs Linux (per-thread affinity, /proc) and a second CPU to be worth a row.
_PINNABLE = os.path.isdir("/proc/self/task") and len(os.sched_getaffinity(0)) > 1
FANOUT = 10
NESTED = 100
GATHER = f"import asyncio\nr = await asyncio.gather(*[noop(i=i) for i in range({NESTED})])\nlen(r)"
SEQUENTIAL = f"n = 0\nfor i in range({NESTED}):\n    n += noop_sync(i=i)\nn"
ABORTED_PROGRAM = (
    "import asyncio\n"
    "try:\n"
    f"    await asyncio.gather(*[wait(i=i) for i in range({FANOUT})])\n"
    "except RuntimeError:\n"
    "    pass\n"
    "while True:\n"
    "    pass\n"
)


class Index(TypedDict):
    i: int


class _Probe:
    started = 0
    all_started: Any = None
    told_ns: list[int]

    def __init__(self) -> None:
        self.told_ns = []


PROBE = _Probe()


def _parallel(_args: object) -> bool:
    return True


@define_tool(name="noop", description="Do nothing.", is_concurrency_safe=_parallel)
async def noop(args: Index, exec: ToolRunContext) -> int:
    return 1


@define_tool(name="wait", description="Wait until told.", is_concurrency_safe=_parallel)
async def wait(args: Index, exec: ToolRunContext) -> int:
    PROBE.started += 1
    if PROBE.started == FANOUT:
        PROBE.all_started.set()
    await exec.signal.wait()
    PROBE.told_ns.append(perf_ns())
    return 0


def _monty_alone(pool: Monty, code: str, runs: int, *, one_cpu: bool = False) -> int:
    """``runs`` programs driven by a bare snapshot loop, every call answered at once.

    ``one_cpu``: every thread of this process and of the sandbox's worker process on one CPU
    while each program runs, so that no round trip has to wake another CPU.
    """
    answer = ExternalReturnValue(return_value=1)
    future = ExternalFuture(future=...)
    start = perf_ns()
    for _ in range(runs):
        with (
            pool.checkout(limits={"max_suspensions": 1 << 40}) as session,
            _on_one_cpu(session.worker_pid) if one_cpu else nullcontext(),
        ):
            step: Any = session.feed_start(code)
            while not isinstance(step, MontyComplete):
                if isinstance(step, FunctionSnapshot):
                    step = step.resume(future if step.function_name == "noop" else answer)
                elif isinstance(step, FutureSnapshot):
                    step = step.resume(dict.fromkeys(step.pending_call_ids, answer))
                else:
                    step = step.resume()
    return perf_ns() - start


@contextmanager
def _on_one_cpu(worker_pid: int | None) -> Generator[None, None, None]:
    """Every thread of this process and of ``worker_pid`` on one CPU, put back afterwards.

    Every thread, not only the driving one: a round trip also crosses pydantic-monty's own
    threads (a tokio runtime here, a worker thread there).
    """
    processes = ["self"] if worker_pid is None else ["self", str(worker_pid)]
    threads = [int(tid) for proc in processes for tid in os.listdir(f"/proc/{proc}/task")]
    before = {tid: os.sched_getaffinity(tid) for tid in threads}
    cpu = min(os.sched_getaffinity(0))
    try:
        for tid in threads:
            os.sched_setaffinity(tid, {cpu})
        yield
    finally:
        for tid, cpus in before.items():
            with suppress(ProcessLookupError):  # a thread that ended meanwhile
                os.sched_setaffinity(tid, cpus)


async def _async_monty_alone(pool: AsyncMonty, code: str, runs: int) -> int:
    """`_monty_alone` over the asyncio bindings: each step awaited on the event loop."""
    answer = ExternalReturnValue(return_value=1)
    future = ExternalFuture(future=...)
    start = perf_ns()
    for _ in range(runs):
        async with pool.checkout(limits={"max_suspensions": 1 << 40}) as session:
            step: Any = await session.feed_start(code)
            while not isinstance(step, MontyComplete):
                kind = type(step).__name__
                if kind == "AsyncFunctionSnapshot":
                    step = await step.resume(future if step.function_name == "noop" else answer)
                elif kind == "AsyncFutureSnapshot":
                    step = await step.resume(dict.fromkeys(step.pending_call_ids, answer))
                else:
                    step = await step.resume()
    return perf_ns() - start


def _input(name: str, arguments: object, signal: AbortController | None = None) -> Any:
    return ToolExecutionInput(
        call_id="c",
        name=name,
        arguments=arguments,
        signal=(signal or AbortController()).signal,
    )


async def _measure(backend: str, quick: bool) -> list[Check]:
    registry = ToolRegistry()
    for tool in (noop, wait):
        registry.register(tool)
    limits = PtcLimits(nested_calls=None, max_parallel=NESTED, wall_clock=None)
    checks: list[Check] = []
    async with ptc_tool(registry, tools=["noop", "wait"], limits=limits, grace=GRACE) as run:
        registry.register(run)

        async def direct(n: int) -> int:
            start = perf_ns()
            for i in range(n * NESTED):
                await registry.execute(_input("noop", {"i": i}))
            return perf_ns() - start

        def program(code: str) -> Any:
            async def batch(n: int) -> int:
                start = perf_ns()
                for _ in range(n):
                    result = await registry.execute(_input("run_code", {"code": code}))
                    assert isinstance(result, ToolSuccess), result
                return perf_ns() - start

            return batch

        def alone(code: str, *, one_cpu: bool = False) -> Any:
            run = functools.partial(_monty_alone, floor_pool, code, one_cpu=one_cpu)

            async def batch(n: int) -> int:
                return await anyio.to_thread.run_sync(run, n)

            return batch

        rounds = 3 if quick else 11
        runs = 1 if quick else 4
        # Per nested call: each batch is `runs` programs of NESTED calls, or as many direct
        # calls; `interleave_async` divides by `runs`, the row below by NESTED.
        async with AsyncExitStack() as stack:
            floor_pool = stack.enter_context(Monty(min_processes=1))
            contenders = [
                ("direct execute", direct),
                ("run_code gather", program(GATHER)),
                ("run_code sequential", program(SEQUENTIAL)),
                ("monty alone, gather", alone(GATHER)),
                ("monty alone, sequential", alone(SEQUENTIAL)),
            ]
            if _PINNABLE:
                contenders += [
                    ("monty alone, one CPU, gather", alone(GATHER, one_cpu=True)),
                    ("monty alone, one CPU, sequential", alone(SEQUENTIAL, one_cpu=True)),
                ]
            if backend == "asyncio":  # AsyncMonty needs a running asyncio loop
                async_pool = await stack.enter_async_context(AsyncMonty(min_processes=1))

                def async_alone(code: str) -> Any:
                    async def batch(n: int) -> int:
                        return await _async_monty_alone(async_pool, code, n)

                    return batch

                contenders += [
                    ("AsyncMonty alone, gather", async_alone(GATHER)),
                    ("AsyncMonty alone, sequential", async_alone(SEQUENTIAL)),
                ]
            series = await _harness.interleave_async(
                contenders, rounds=rounds, calls=runs, warmup_calls=1
            )
        per_call = [Series(s.name, [v / NESTED for v in s.per_round]) for s in series]
        direct_series, gather, sequential, alone_gather, alone_sequential = per_call[:5]
        _harness.print_table(
            f"ptc: per nested call ({backend}, {NESTED} calls a program, µs)",
            per_call,
            baselines=["direct execute"],
            note="monty alone: the sandbox's own round trip, no registry and no event loop",
        )
        for contender, floor in ((gather, alone_gather), (sequential, alone_sequential)):
            kind = contender.name.split()[-1]
            # The sequential floor: the round trip, then the call (nothing overlaps).
            floor_ratio = Series(
                "floor",
                [
                    (alone + call) / call
                    for alone, call in zip(floor.per_round, direct_series.per_round, strict=True)
                ],
            ).median
            checks.append(
                Check(
                    f"ptc nested call / direct execute, {kind} ({backend})",
                    contender.ratio(direct_series),
                    3.0,
                    "x",
                    f"{contender.median:.1f} µs vs {direct_series.median:.2f} µs; monty's round "
                    f"trip alone {floor.median:.1f} µs: round trip + direct call = "
                    f"{floor_ratio:.2f}x",
                )
            )

        # A trivial program from the warm pool.
        trivial = await _harness.interleave_async(
            [("run_code 1 + 1", program("1 + 1"))],
            rounds=rounds,
            calls=5 if quick else 50,
        )
        checks.append(
            Check(
                f"ptc trivial run_code, warm pool ({backend})",
                trivial[0].median / 1000,
                1.0,
                "ms",
            )
        )

        # Abort: every nested body told, and the sandbox gone.
        told: list[float] = []
        gone: list[float] = []
        for _ in range(3 if quick else 15):
            PROBE.started = 0
            PROBE.told_ns = []
            PROBE.all_started = anyio.Event()
            stop = AbortController()
            ended: list[int] = []
            outcome: list[Any] = []

            async def call(
                stop: AbortController = stop, ended: list[int] = ended, outcome: list[Any] = outcome
            ) -> None:
                result = await registry.execute(_input("run_code", {"code": ABORTED_PROGRAM}, stop))
                ended.append(perf_ns())
                outcome.append(result)

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await PROBE.all_started.wait()
                aborted = perf_ns()
                stop.abort()
            (result,) = outcome
            assert isinstance(result, ToolFailure), result
            assert result.code == TOOL_ABORTED, result
            assert len(PROBE.told_ns) == FANOUT
            told.append((max(PROBE.told_ns) - aborted) / 1e6)
            gone.append((ended[0] - aborted) / 1e6)
        print(
            f"ptc abort ({backend}): told {statistics.median(told):.3f} ms "
            f"(max {max(told):.3f}), gone {statistics.median(gone):.1f} ms "
            f"(max {max(gone):.1f}), grace {GRACE * 1000:.0f} ms"
        )
        checks.append(
            Check(
                f"ptc abort -> every nested body told ({backend})",
                statistics.median(told),
                5.0,
                "ms",
            )
        )
        checks.append(
            Check(
                f"ptc abort -> sandbox gone ({backend})",
                statistics.median(gone),
                GRACE * 1000 + 100,
                "ms",
                f"grace {GRACE * 1000:.0f} ms + 100 ms",
            )
        )
    return checks


def run(*, quick: bool = False) -> list[Check]:
    checks: list[Check] = []
    for backend in ("asyncio", "trio"):
        checks.extend(anyio.run(_measure, backend, quick, backend=backend))
    return checks


def main() -> None:
    options = _harness.parser(__doc__.splitlines()[0]).parse_args()
    print(_harness.machine_summary())
    checks = run(quick=options.quick)
    print()
    _harness.print_checks(checks)


if __name__ == "__main__":
    main()
