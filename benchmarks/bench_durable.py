"""toolseam.durable on DBOS: what a durable call costs, and how soon a cancel reaches a body.

Two figures, each measured interleaved in this process (see ``_harness``):

* **[d1] a durable no-op call / a bare DBOS step of the same function**, SQLite in a
  temporary folder (DBOS's embedded default). Each contender is a workflow that makes
  ``calls`` calls one after the other and times its own loop: ``DBOS.run_step_async`` of
  the no-op function; `DurableTools.execute` of a tool whose body awaits that function,
  the tool idempotent (one step: its outcome); and the same tool not idempotent (two: its
  dispatch marker, written before the body may start, then its outcome — the price of
  never running a side effect twice after a crash, which a bare step does not offer; so
  two bare DBOS steps, a marker and the call, are shown beside it, as that by hand).
* **[d1] a batch of four calls of a tool that is not idempotent / four bare DBOS steps**
  (per call): the batch's four dispatch markers are recorded in one commit, then each
  call's outcome in its own, so five commits where four bare steps take four. A single
  such call keeps its floor of two commits (its marker, then its outcome: the row above).
* **[d2] cancel -> body told**: from the call of ``DBOS.cancel_workflow_async`` until a
  waiting tool body resumes (its signal aborted); on SQLite and, when Postgres binaries are
  found (tests/local_postgres.py), on a throwaway Postgres server on loopback. Beside it,
  DBOS's own ``preemptible=True`` step: cancel until its task is cancelled (DBOS polls once
  a second and tears the step down; a plain DBOS step is never told at all and runs on to
  its end).

Run with ``python benchmarks/bench_durable.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import _harness
from _harness import Check, Series, perf_ns
from dbos import DBOS, SetWorkflowID
from dbos._error import DBOSAwaitedWorkflowCancelledError
from typing_extensions import TypedDict

from toolseam import (
    AbortController,
    ToolCall,
    ToolExecutionInput,
    ToolRegistry,
    ToolRunContext,
    define_tool,
)
from toolseam.durable import DurableTools

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from local_postgres import LocalPostgres, find_binaries

ROUNDS, CALLS = 7, 20
LATENCY_ROUNDS, SAMPLES = 3, 5
POLL_INTERVAL = 0.1  # DurableTools' default
BATCH = 4  # calls in a batch of [d1]


class ValueArgs(TypedDict):
    value: int


class NoArgs(TypedDict):
    pass


async def noop(value: int) -> int:
    """The function every contender of [d1] runs once per call."""
    return value


@define_tool(name="noop_idempotent", description="No-op.", idempotent=True)
async def noop_idempotent(args: ValueArgs, exec: ToolRunContext) -> int:
    return await noop(args["value"])


@define_tool(name="noop", description="No-op (not idempotent).")
async def noop_tool(args: ValueArgs, exec: ToolRunContext) -> int:
    return await noop(args["value"])


@define_tool(
    name="noop_parallel",
    description="No-op (not idempotent), run in parallel with its batch.",
    is_concurrency_safe=lambda _: True,
)
async def noop_parallel(args: ValueArgs, exec: ToolRunContext) -> int:
    return await noop(args["value"])


class Probe:
    """Where a waiting body reports; set up before each sample."""

    started: asyncio.Event
    told: asyncio.Event
    told_ns = 0

    def reset(self) -> None:
        self.started = asyncio.Event()
        self.told = asyncio.Event()
        self.told_ns = 0

    def tell(self) -> None:
        self.told_ns = perf_ns()
        self.told.set()


PROBE = Probe()


@define_tool(name="wait", description="Wait until told.")
async def wait_tool(args: NoArgs, exec: ToolRunContext) -> str:
    PROBE.started.set()
    await exec.signal.wait()
    PROBE.tell()
    exec.signal.raise_if_aborted()
    return "unreachable"


REGISTRY = ToolRegistry()
for _tool in (noop_idempotent, noop_tool, noop_parallel, wait_tool):
    REGISTRY.register(_tool)
DURABLE = DurableTools(REGISTRY, poll_interval=POLL_INTERVAL)


@DBOS.workflow()
async def bare_steps(calls: int) -> int:
    start = perf_ns()
    for index in range(calls):
        await DBOS.run_step_async({"name": "noop"}, noop, index)
    return perf_ns() - start


@DBOS.workflow()
async def bare_step_pairs(calls: int) -> int:
    """At-most-once by hand: a marker step before each call's step (no recovery logic)."""
    start = perf_ns()
    for index in range(calls):
        await DBOS.run_step_async({"name": "marker"}, noop, index)
        await DBOS.run_step_async({"name": "noop"}, noop, index)
    return perf_ns() - start


@DBOS.workflow()
async def durable_calls(calls: int, tool: str) -> int:
    signal = AbortController().signal
    start = perf_ns()
    for index in range(calls):
        await DURABLE.execute(
            ToolExecutionInput(
                call_id=f"c{index}", name=tool, arguments={"value": index}, signal=signal
            )
        )
    return perf_ns() - start


@DBOS.workflow()
async def durable_batches(calls: int) -> int:
    """``calls`` batches of four parallel calls; the time of one batch, over four."""
    signal = AbortController().signal
    start = perf_ns()
    for index in range(calls):
        await DURABLE.run_tool_calls(
            [ToolCall(f"b{index}.{n}", "noop_parallel", {"value": n}) for n in range(BATCH)],
            signal=signal,
        )
    return (perf_ns() - start) // BATCH


@DBOS.workflow()
async def durable_wait() -> None:
    signal = AbortController().signal
    await DURABLE.execute(ToolExecutionInput(call_id="w", name="wait", arguments={}, signal=signal))


async def _preemptible_body() -> None:
    PROBE.started.set()
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        PROBE.tell()
        raise


@DBOS.workflow()
async def preemptible_wait() -> None:
    await DBOS.run_step_async({"name": "wait", "preemptible": True}, _preemptible_body)


_ids = itertools.count()


async def _workflow(function: Callable[..., Awaitable[Any]], *args: object) -> Any:
    with SetWorkflowID(f"bench-{next(_ids)}"):
        handle = await DBOS.start_workflow_async(function, *args)
    return await handle.get_result()


async def _ratio(rounds: int, calls: int) -> list[Series]:
    async def bare(n: int) -> int:
        return int(await _workflow(bare_steps, n))

    async def pairs(n: int) -> int:
        return int(await _workflow(bare_step_pairs, n))

    async def idempotent(n: int) -> int:
        return int(await _workflow(durable_calls, n, "noop_idempotent"))

    async def marked(n: int) -> int:
        return int(await _workflow(durable_calls, n, "noop"))

    async def batched(n: int) -> int:
        return int(await _workflow(durable_batches, n))

    return await _harness.interleave_async(
        [
            ("bare DBOS step", bare),
            ("durable call, idempotent tool", idempotent),
            ("durable call, not idempotent", marked),
            ("two bare DBOS steps", pairs),
            (f"durable batch of {BATCH}, not idempotent (a batch / {BATCH})", batched),
        ],
        rounds=rounds,
        calls=calls,
        warmup_calls=2,
    )


async def _cancel_sample(function: Callable[[], Awaitable[None]]) -> int:
    PROBE.reset()
    workflow_id = f"bench-{next(_ids)}"
    with SetWorkflowID(workflow_id):
        handle = await DBOS.start_workflow_async(function)
    await PROBE.started.wait()
    start = perf_ns()
    await DBOS.cancel_workflow_async(workflow_id)
    await PROBE.told.wait()
    with contextlib.suppress(DBOSAwaitedWorkflowCancelledError):
        await handle.get_result()
    return PROBE.told_ns - start


async def _latency(rounds: int, samples: int) -> list[Series]:
    async def durable() -> int:
        return await _cancel_sample(durable_wait)

    async def preemptible() -> int:
        return await _cancel_sample(preemptible_wait)

    return await _harness.interleave_samples(
        [
            ("toolseam.durable: cancel -> body told", durable),
            ("DBOS preemptible step: cancel -> task cancelled", preemptible),
        ],
        rounds=rounds,
        samples=samples,
    )


def _launch(url: str) -> None:
    DBOS(config={"name": "toolseam_bench", "system_database_url": url, "log_level": "CRITICAL"})
    DBOS.launch()


def _on(url: str, job: Callable[[], Awaitable[Any]]) -> Any:
    _launch(url)
    try:
        return asyncio.run(job())
    finally:
        DBOS.destroy()


def run(*, quick: bool = False) -> list[Check]:
    rounds, calls = (2, 4) if quick else (ROUNDS, CALLS)
    latency_rounds, samples = (1, 2) if quick else (LATENCY_ROUNDS, SAMPLES)
    checks: list[Check] = []
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'system.sqlite'}"

        async def sqlite_job() -> tuple[list[Series], list[Series]]:
            return await _ratio(rounds, calls), await _latency(latency_rounds, samples)

        ratio, latency = _on(url, sqlite_job)
    bare, idempotent, marked, pairs, batched = ratio
    _harness.print_table(
        "[d1] a no-op call in a DBOS workflow, SQLite (temporary folder)",
        ratio,
        baselines=["bare DBOS step", "two bare DBOS steps"],
        unit="us/call",
        note=f"{rounds} rounds x {calls} calls per contender, order rotating each round",
    )
    _harness.print_table(
        "[d2] cancel -> the body is told, SQLite",
        latency,
        baselines=[],
        unit="us",
        note=(
            f"{latency_rounds} rounds x {samples} samples (a round's figure is the median of "
            f"its samples); poll interval {POLL_INTERVAL}s; a plain DBOS step: never told"
        ),
    )
    checks.append(
        Check(
            "durable no-op call (idempotent tool) / bare DBOS step, SQLite",
            idempotent.ratio(bare),
            1.5,
            "x",
            f"{idempotent.median / 1000:.1f} vs {bare.median / 1000:.1f} ms a call",
        )
    )
    checks.append(
        Check(
            "durable no-op call (not idempotent: + dispatch marker) / bare DBOS step, SQLite",
            marked.ratio(bare),
            1.5,
            "x",
            f"{marked.median / 1000:.1f} vs {bare.median / 1000:.1f} ms: two commits, not one; "
            f"{marked.ratio(pairs):.2f}x two bare steps (marker + call by hand)",
        )
    )
    checks.append(
        Check(
            "durable no-op call (not idempotent) / its floor, two bare DBOS steps, SQLite",
            marked.ratio(pairs),
            1.5,
            "x",
            f"{marked.median / 1000:.1f} vs {pairs.median / 1000:.1f} ms: a lone call's "
            "marker and outcome are two commits, which no batching can share",
        )
    )
    checks.append(
        Check(
            f"durable batch of {BATCH} calls (not idempotent) / {BATCH} bare DBOS steps, SQLite",
            batched.ratio(bare),
            1.5,
            "x",
            f"{batched.median / 1000:.1f} vs {bare.median / 1000:.1f} ms a call: "
            f"{BATCH} markers in one commit, then {BATCH} outcomes",
        )
    )
    durable, preemptible = latency
    checks.append(
        Check(
            "cancel -> body told, SQLite",
            durable.median / 1000,
            250,
            "ms",
            f"DBOS preemptible step: torn down after {preemptible.median / 1000:.0f} ms",
        )
    )
    binaries = find_binaries()
    if binaries is None:
        print("\n[d2] on Postgres: skipped (no Postgres binaries found)")
        checks.append(Check("cancel -> body told, Postgres", None, 250, "ms", "no Postgres"))
        return checks
    server = LocalPostgres(binaries).start()
    try:

        async def postgres_job() -> list[Series]:
            return await _latency(latency_rounds, samples)

        latency = _on(server.url, postgres_job)
    finally:
        server.stop()
    _harness.print_table(
        "[d2] cancel -> the body is told, Postgres (loopback)",
        latency,
        baselines=[],
        unit="us",
        note=f"{latency_rounds} rounds x {samples} samples; poll interval {POLL_INTERVAL}s",
    )
    durable, preemptible = latency
    checks.append(
        Check(
            "cancel -> body told, Postgres",
            durable.median / 1000,
            250,
            "ms",
            f"DBOS preemptible step: torn down after {preemptible.median / 1000:.0f} ms",
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
