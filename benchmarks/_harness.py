"""Shared helpers of the benchmark scripts: interleaved rounds, medians, ratios, targets.

The machine these run on is small and shared, so absolute timings drift while a script
runs. Every script therefore measures its contenders in one process, round by round: each
round runs every contender for the same number of calls, in an order that rotates from
round to round, so that a burst of noise lands on all of them alike. A figure is the median
over rounds of the per-call time, and a ratio is the median over rounds of the per-round
quotient (contender / baseline in the *same* round), which cancels most of the drift.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib.metadata
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

AsyncBatch = Callable[[int], Awaitable[int]]
"""``async (n) -> elapsed ns`` for ``n`` calls; the contender times only its own calls."""
SyncBatch = Callable[[int], int]
"""``(n) -> elapsed ns`` for ``n`` calls."""

perf_ns = time.perf_counter_ns


# -- results -----------------------------------------------------------------------------


@dataclass
class Series:
    """Per-round measurements of one contender, in microseconds per call."""

    name: str
    per_round: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.per_round)

    def quartiles(self) -> tuple[float, float]:
        if len(self.per_round) < 2:
            return self.per_round[0], self.per_round[0]
        q = statistics.quantiles(self.per_round, n=4, method="inclusive")
        return q[0], q[2]

    def ratio(self, baseline: Series) -> float:
        """Median over rounds of this round's value / the baseline's value in that round."""
        quotients = [
            mine / theirs
            for mine, theirs in zip(self.per_round, baseline.per_round, strict=True)
            if theirs > 0
        ]
        return statistics.median(quotients) if quotients else float("nan")


@dataclass
class Check:
    """One target: a measured figure compared with its limit."""

    label: str
    value: float | None
    limit: float
    unit: str
    detail: str = ""
    at_least: bool = False
    """The target is a floor (``value >= limit``), not a ceiling."""

    @property
    def status(self) -> str:
        if self.value is None:
            return "N/A "
        met = self.value >= self.limit if self.at_least else self.value <= self.limit
        return "PASS" if met else "MISS"

    def line(self) -> str:
        shown = "n/a" if self.value is None else _fmt(self.value, self.unit)
        limit = _fmt(self.limit, self.unit)
        extra = f"  ({self.detail})" if self.detail else ""
        sign = ">=" if self.at_least else "<="
        return f"  [{self.status}] {self.label}: {shown} (target {sign} {limit}){extra}"


def _fmt(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "MB":
        return f"{value:.3f} MB"
    if unit == "KB":
        return f"{value:.2f} KB"
    if unit == "s":
        return f"{value:.1f} s"
    if unit == "":
        return f"{value:g}"
    return f"{value:g} {unit}"


# -- interleaving ------------------------------------------------------------------------


def _rotation(items: Sequence[object], round_index: int) -> list[int]:
    shift = round_index % len(items)
    order = list(range(len(items)))
    return order[shift:] + order[:shift]


async def interleave_async(
    contenders: Sequence[tuple[str, AsyncBatch]],
    *,
    rounds: int,
    calls: int,
    warmup_calls: int | None = None,
) -> list[Series]:
    """Run every contender ``calls`` times per round, in rotating order.

    One warm-up round (not recorded) first fills caches, pydantic's included.
    """
    series = [Series(name) for name, _ in contenders]
    warm = calls // 4 if warmup_calls is None else warmup_calls
    for _, batch in contenders:
        await batch(max(warm, 1))
    for round_index in range(rounds):
        for index in _rotation(contenders, round_index):
            gc.collect()
            elapsed = await contenders[index][1](calls)
            series[index].per_round.append(elapsed / calls / 1000)
    return series


async def interleave_samples(
    contenders: Sequence[tuple[str, Callable[[], Awaitable[int]]]],
    *,
    rounds: int,
    samples: int,
) -> list[Series]:
    """Latencies: ``samples`` one-shot measurements per contender and round, rotating.

    Each contender is ``async () -> ns`` and times one event itself. A round's figure is
    the median of its samples, in microseconds.
    """
    series = [Series(name) for name, _ in contenders]
    for _, sample in contenders:
        for _ in range(max(samples // 4, 1)):
            await sample()
    for round_index in range(rounds):
        for index in _rotation(contenders, round_index):
            gc.collect()
            sample = contenders[index][1]
            taken = [await sample() for _ in range(samples)]
            series[index].per_round.append(statistics.median(taken) / 1000)
    return series


def interleave_sync(
    contenders: Sequence[tuple[str, SyncBatch]],
    *,
    rounds: int,
    calls: int,
    warmup_calls: int | None = None,
) -> list[Series]:
    """The synchronous twin of `interleave_async`."""
    series = [Series(name) for name, _ in contenders]
    warm = calls // 4 if warmup_calls is None else warmup_calls
    for _, batch in contenders:
        batch(max(warm, 1))
    for round_index in range(rounds):
        for index in _rotation(contenders, round_index):
            gc.collect()
            elapsed = contenders[index][1](calls)
            series[index].per_round.append(elapsed / calls / 1000)
    return series


# -- printing ----------------------------------------------------------------------------


def print_table(
    title: str,
    series: Sequence[Series],
    *,
    baselines: Sequence[str],
    unit: str = "us/call",
    note: str = "",
) -> None:
    """Print medians, the interquartile range over rounds and ratios vs each baseline."""
    by_name = {s.name: s for s in series}
    width = max(len(s.name) for s in series) + 2
    print(f"\n{title}")
    if note:
        print(f"  {note}")
    head = f"  {'contender':<{width}}{'median ' + unit:>16}{'IQR over rounds':>22}"
    for name in baselines:
        head += f"{'x ' + name:>{max(len(name) + 4, 12)}}"
    print(head)
    for s in series:
        low, high = s.quartiles()
        row = f"  {s.name:<{width}}{_num(s.median):>16}{_num(low) + ' - ' + _num(high):>22}"
        for name in baselines:
            row += f"{s.ratio(by_name[name]):>{max(len(name) + 4, 12)}.2f}"
        print(row)


def _num(value: float) -> str:
    if value >= 100:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def print_checks(checks: Sequence[Check]) -> None:
    for check in checks:
        print(check.line())


# -- machine and options -----------------------------------------------------------------


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _load() -> str:
    """The load averages (1, 5, 15 minutes), as ``uptime`` prints them."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f}, {five:.2f}, {fifteen:.2f}"


def machine_summary() -> str:
    versions = ", ".join(
        f"{name} {_version(name)}"
        for name in (
            "toolseam",
            "anyio",
            "pydantic",
            "trio",
            "autogen-core",
            "pydantic-ai-slim",
            "openai-agents",
            "langchain-core",
            "mcp",
        )
    )
    return (
        f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}\n"
        f"machine: {os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), "
        f"{cpu_model()}, {platform.system()} {platform.release()}\n"
        f"python: {platform.python_implementation()} {sys.version.split()[0]}\n"
        f"load: {_load()}\n"
        f"packages: {versions}\n"
        f"toolseam._speedups (the C pass over arguments): {_speedups()}"
    )


def _speedups() -> str:
    from toolseam import _json

    # getattr: a toolseam from before the C pass (PYTHONPATH=/old/src) has no such name.
    built = getattr(_json, "_copy_json", None) is not None
    return "built" if built else "absent (a pure-Python build, or a toolseam without it)"


def parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with the options every script shares."""
    result = argparse.ArgumentParser(description=description)
    result.add_argument(
        "--quick", action="store_true", help="few rounds and calls: a smoke run, not figures"
    )
    return result
