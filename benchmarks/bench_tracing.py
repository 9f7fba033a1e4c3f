"""What `toolseam.tracing.instrument` costs per call: off, on a no-op tracer, and recording.

Contenders, all the ``define_tool`` echo of ``bench_overhead`` on a registry of their own:

* ``not instrumented``: a registry ``instrument`` never saw, the baseline;
* ``no-op tracer``: ``instrument(registry, tracer_provider=NoOpTracerProvider())``, the
  OpenTelemetry API's own no-op (what an application that installs no SDK gets);
* ``global, unset``: ``instrument(registry)`` with no global tracer provider set (the API's
  proxy, which falls back to the no-op tracer);
* ``instrumented, removed``: instrumented and the `Registration` removed again;
* ``SDK, recording``: an SDK ``TracerProvider`` with a ``SimpleSpanProcessor`` into an
  ``InMemorySpanExporter`` (cleared every batch): what recording each span costs.

Each call builds its ``ToolExecutionInput`` and a fresh ``AbortController``, as in
``bench_overhead``. The target: a call instrumented with the no-op tracer costs at most
1.15x an uninstrumented one. That an uninstrumented registry costs what it did before the
tracing hook existed is an A/B against a copy of the older source
(``benchmarks/ab_overhead.py``). Run with ``python benchmarks/bench_tracing.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import _harness
import bench_overhead
import trio
from _harness import AsyncBatch, Check, Series
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolseam.tracing import instrument

ROUNDS = 21
CALLS = 1000
TARGET = 1.15

PLAIN = "not instrumented"
NOOP = "no-op tracer"
GLOBAL = "global, unset"
REMOVED = "instrumented, removed"
SDK = "SDK, recording"


def _registry() -> Any:
    return bench_overhead.plain_registry(bench_overhead.echo_definition())


def _recording(exporter: InMemorySpanExporter) -> Any:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = _registry()
    instrument(registry, tracer_provider=provider)
    return registry


def contenders() -> list[tuple[str, AsyncBatch]]:
    noop = _registry()
    instrument(noop, tracer_provider=trace.NoOpTracerProvider())
    global_unset = _registry()
    instrument(global_unset)
    removed = _registry()
    instrument(removed, tracer_provider=trace.NoOpTracerProvider()).remove()
    exporter = InMemorySpanExporter()
    recording = bench_overhead.registry_batch(_recording(exporter))

    async def recording_batch(n: int) -> int:
        exporter.clear()  # keep memory flat: the exporter holds every finished span
        return await recording(n)

    return [
        (PLAIN, bench_overhead.registry_batch(_registry())),
        (NOOP, bench_overhead.registry_batch(noop)),
        (GLOBAL, bench_overhead.registry_batch(global_unset)),
        (REMOVED, bench_overhead.registry_batch(removed)),
        (SDK, recording_batch),
    ]


async def _check_spans() -> None:
    """The recording contender really records: one span per call, or it measures nothing."""
    exporter = InMemorySpanExporter()
    registry = _recording(exporter)
    await bench_overhead.check_echoes(registry)
    names = [span.name for span in exporter.get_finished_spans()]
    if names != ["execute_tool echo"]:
        raise RuntimeError(f"the recording contender does not record one span: {names}")


async def _measure(rounds: int, calls: int) -> list[Series]:
    if trace.get_tracer_provider().__class__ is not trace.ProxyTracerProvider:
        raise RuntimeError("a global tracer provider is set: the 'global, unset' row would lie")
    await _check_spans()
    chosen = contenders()
    for name, batch in chosen:
        if await batch(1) <= 0:  # pragma: no cover - a clock that does not move
            raise RuntimeError(f"{name}: no time measured")
    return await _harness.interleave_async(chosen, rounds=rounds, calls=calls)


def run(*, quick: bool = False) -> list[Check]:
    rounds, calls = (3, 200) if quick else (ROUNDS, CALLS)
    note = f"{rounds} rounds x {calls} calls per contender, order rotating each round"
    checks: list[Check] = []
    for backend, series in (
        ("asyncio", asyncio.run(_measure(rounds, calls))),
        ("trio", trio.run(_measure, rounds, calls)),
    ):
        _harness.print_table(
            f"[f] tracing cost per call, {backend}", series, baselines=[PLAIN], note=note
        )
        by_name = {s.name: s for s in series}
        plain, noop = by_name[PLAIN], by_name[NOOP]
        checks.append(
            Check(
                f"instrumented call, no-op tracer vs not instrumented ({backend})",
                noop.ratio(plain),
                TARGET,
                "x",
                f"{noop.median:.1f} vs {plain.median:.1f} us/call; recording with the SDK: "
                f"{by_name[SDK].ratio(plain):.2f}x",
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
