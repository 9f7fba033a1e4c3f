"""What the tool capabilities cost (contract §5, "Capabilities"; docs/performance.md).

Two targets:

* **A call that reports no progress costs no more than before the capabilities existed**
  (<= 1.03x): the ``define_tool`` echo of ``bench_overhead`` on this source, against the
  same call on a copy of the source at ``BEFORE`` (the last commit without them), imported
  side by side in this process (``ab_overhead.load_copy``) and interleaved round by round.
  Needs a git checkout; elsewhere the figure is n/a.
* **1,000 progress events from one body cost <= 2 us each with no consumer**: the body times
  its own loop of ``exec.progress(i, 1000)`` calls, and the figure is the loop's time per
  event. The same loop with a consumer (a `ToolHost.on_progress` that does nothing, then a
  registry event listener) is shown beside it, not checked.

Run with ``python benchmarks/bench_capabilities.py``; ``nox -s bench`` runs it too.
"""

from __future__ import annotations

import asyncio
import subprocess
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path
from types import ModuleType
from typing import Any

import _harness
import ab_overhead
import bench_overhead
import trio
from _harness import AsyncBatch, Check, Series, perf_ns
from typing_extensions import TypedDict

import toolseam
from toolseam import AbortController, ToolExecutionInput, ToolHost, ToolRunContext, define_tool

BEFORE = "3015439"  # main before the capabilities landed
ROUNDS = 21
CALLS = 2000
EVENTS = 1000
NO_PROGRESS_TARGET = 1.03
PER_EVENT_TARGET = 2.0  # microseconds

ROOT = Path(__file__).resolve().parent.parent


def before_copy() -> ModuleType | None:
    """The package as it was at `BEFORE`, imported as ``toolseam_before``; None if no git."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", BEFORE, "src/toolseam"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    target = Path(tempfile.mkdtemp(prefix="toolseam_before_"))
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return ab_overhead.load_copy(target / "src", "toolseam_before")


async def _no_progress(before: ModuleType, rounds: int, calls: int) -> list[Series]:
    contenders: list[tuple[str, AsyncBatch]] = []
    for label, ts in (("before", before), ("now", toolseam)):
        registry = bench_overhead.plain_registry(bench_overhead.echo_definition(ts), ts)
        await bench_overhead.check_echoes(registry, ts)
        contenders.append((label, bench_overhead.registry_batch(registry, ts)))
    return await _harness.interleave_async(contenders, rounds=rounds, calls=calls)


class Count(TypedDict):
    events: int


def _progress_registry(timings: list[int]) -> Any:
    @define_tool(name="report", description="Reports progress many times.")
    async def report(args: Count, exec: ToolRunContext) -> int:
        events = args["events"]
        start = perf_ns()
        for step in range(events):
            exec.progress(step, events)
        timings.append(perf_ns() - start)
        return events

    registry = toolseam.ToolRegistry()
    registry.register(report)
    return registry


def _ignore(exec: object, event: object) -> None:
    pass


async def _per_event(rounds: int, events: int) -> list[Series]:
    """Per event, in microseconds: the body's own loop, per contender, interleaved."""
    contenders: list[tuple[str, Any, ToolHost | None]] = []
    bare_timings: list[int] = []
    contenders.append(("no consumer", _progress_registry(bare_timings), None))
    host_timings: list[int] = []
    contenders.append(
        ("ToolHost.on_progress", _progress_registry(host_timings), ToolHost(on_progress=_ignore))
    )
    listener_timings: list[int] = []
    with_listener = _progress_registry(listener_timings)
    with_listener.on_event(_ignore)
    contenders.append(("registry.on_event", with_listener, None))
    timings = {"no consumer": bare_timings, "ToolHost.on_progress": host_timings}
    timings["registry.on_event"] = listener_timings

    def batch(name: str, registry: Any, host: ToolHost | None) -> AsyncBatch:
        async def run(n: int) -> int:
            timings[name].clear()
            for _ in range(n):
                await registry.execute(
                    ToolExecutionInput(
                        call_id="c",
                        name="report",
                        arguments={"events": events},
                        signal=AbortController().signal,
                        host=host,
                    )
                )
            # What the loops took, as if that were the batch's time: per "call" below is
            # per loop of `events` events.
            return sum(timings[name])

        return run

    series = await _harness.interleave_async(
        [(name, batch(name, registry, host)) for name, registry, host in contenders],
        rounds=rounds,
        calls=5,
        warmup_calls=2,
    )
    for one in series:
        one.per_round = [loop / events for loop in one.per_round]
    return series


def run(*, quick: bool = False) -> list[Check]:
    rounds, calls = (3, 200) if quick else (ROUNDS, CALLS)
    checks: list[Check] = []
    before = before_copy()
    note = f"{rounds} rounds x {calls} calls per contender, order rotating each round"
    for backend in ("asyncio", "trio"):
        if before is None:
            checks.append(
                Check(f"no-progress call, now vs before ({backend})", None, 1.03, "x", "no git")
            )
            continue
        series = (
            asyncio.run(_no_progress(before, rounds, calls))
            if backend == "asyncio"
            else trio.run(_no_progress, before, rounds, calls)
        )
        _harness.print_table(
            f"[cap] a call that reports no progress, {backend} (before = {BEFORE})",
            series,
            baselines=["before"],
            note=note,
        )
        now, then = series[1], series[0]
        checks.append(
            Check(
                f"no-progress call, now vs before the capabilities ({backend})",
                now.ratio(then),
                NO_PROGRESS_TARGET,
                "x",
                f"{now.median:.2f} vs {then.median:.2f} us",
            )
        )
    event_rounds = 3 if quick else ROUNDS
    for backend in ("asyncio", "trio"):
        series = (
            asyncio.run(_per_event(event_rounds, EVENTS))
            if backend == "asyncio"
            else trio.run(_per_event, event_rounds, EVENTS)
        )
        _harness.print_table(
            f"[cap] exec.progress() per event, {EVENTS} per body, {backend}",
            series,
            baselines=["no consumer"],
            note=f"{event_rounds} rounds x 5 bodies; the body times its own loop",
        )
        checks.append(
            Check(
                f"progress event with no consumer ({backend})",
                series[0].median,
                PER_EVENT_TARGET,
                "us",
            )
        )
    return checks


def main() -> None:
    args = _harness.parser(__doc__.splitlines()[0]).parse_args()
    print(_harness.machine_summary())
    _harness.print_checks(run(quick=args.quick))


if __name__ == "__main__":
    main()
