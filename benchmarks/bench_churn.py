"""Listener churn: a million fusions on one long-lived signal leave nothing behind.

An agent session keeps one signal for its whole life and fuses it with each call's own
signal (``with fuse(session, call): ...``). This measures, on one long-lived signal:

* the time of one ``with fuse(long_lived, fresh): pass`` cycle (``fresh`` is a new
  controller's signal each time), interleaved with ``long_lived.add_listener(cb).remove()``
  on a fresh controller too, as the baseline of attaching and detaching one callback;
* ``long_lived._listener_count()`` afterwards (callbacks plus fused dependents): must be 0;
* memory growth over one further million cycles, traced by ``tracemalloc`` (with a full
  ``gc.collect()`` before and after): must stay under 1 MB.

Run with ``python benchmarks/bench_churn.py``.
"""

from __future__ import annotations

import gc
import tracemalloc

import _harness
from _harness import Check, perf_ns

from toolseam import AbortController, AbortSignal, fuse

CYCLES = 1_000_000
ROUNDS = 15
FUSE = "with fuse(long, fresh)"
LISTENER = "add_listener + remove"


def _callback(signal: AbortSignal) -> None:
    return None


def fuse_cycles(long_lived: AbortSignal, n: int) -> int:
    start = perf_ns()
    for _ in range(n):
        with fuse(long_lived, AbortController().signal):
            pass
    return perf_ns() - start


def listener_cycles(long_lived: AbortSignal, n: int) -> int:
    start = perf_ns()
    for _ in range(n):
        AbortController()
        long_lived.add_listener(_callback).remove()
    return perf_ns() - start


def memory_growth(long_lived: AbortSignal, cycles: int) -> tuple[float, float, int]:
    """(growth MB, peak above the start MB, listeners left) over ``cycles`` fusions."""
    fuse_cycles(long_lived, 1000)  # allocator pools and caches settle first
    gc.collect()
    tracemalloc.start()
    try:
        gc.collect()
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        fuse_cycles(long_lived, cycles)
        gc.collect()
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return (after - before) / 1e6, (peak - before) / 1e6, long_lived._listener_count()


def run(*, quick: bool = False) -> list[Check]:
    cycles = 20_000 if quick else CYCLES
    rounds = 3 if quick else ROUNDS
    per_round = -(-cycles // rounds)  # rounds x per_round >= cycles fusions in all
    long_lived = AbortController().signal
    series = _harness.interleave_sync(
        [
            (FUSE, lambda n: fuse_cycles(long_lived, n)),
            (LISTENER, lambda n: listener_cycles(long_lived, n)),
        ],
        rounds=rounds,
        calls=per_round,
        warmup_calls=1000,
    )
    left_after_timing = long_lived._listener_count()
    _harness.print_table(
        f"[c] listener churn on one long-lived signal ({rounds * per_round:,} fusions timed)",
        series,
        baselines=[LISTENER],
        unit="us/cycle",
        note=f"{rounds} rounds x {per_round:,} cycles per contender, order rotating each round",
    )
    growth, peak, left = memory_growth(long_lived, cycles)
    print(
        f"  listeners left on the long-lived signal: {left_after_timing} after the timed "
        f"cycles, {left} after {cycles:,} more under tracemalloc\n"
        f"  memory growth over {cycles:,} fusions (tracemalloc, gc before and after): "
        f"{growth * 1000:.1f} kB (peak {peak * 1000:.1f} kB above the start)"
    )
    return [
        Check(
            f"listeners left after {rounds * per_round + cycles:,} fusions",
            float(max(left, left_after_timing)),
            0,
            "",
            f"{series[0].median:.2f} us per fuse+exit cycle",
        ),
        Check(
            f"memory growth over {cycles:,} fusions",
            growth,
            1.0,
            "MB",
            f"{growth * 1000:.1f} kB; peak {peak * 1000:.1f} kB above the start",
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
