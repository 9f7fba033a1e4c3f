"""Where one call's time goes: pyinstrument over the ``define_tool`` and four-listener cases.

For each case, runs ``--calls`` calls of the overhead benchmark's echo under pyinstrument
(asyncio) and prints the functions with the most *self* time and with the most *inclusive*
time, each as a percentage of the profiled loop (the loop itself, building the
`ToolExecutionInput` and the `AbortController`, included). Percentages are what to read:
the profiler slows every Python call down, so its absolute times are inflated.

    python benchmarks/profile_hot_path.py                 # both cases
    python benchmarks/profile_hot_path.py --html out/     # and pyinstrument's HTML pages
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _harness
import bench_overhead
from pyinstrument import Profiler

INTERVAL = 0.0002
TOP = 18


def _frames(frame: Any) -> Iterator[Any]:
    stack = [frame]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


def _name(frame: Any) -> str:
    path = Path(frame.file_path or "?")
    folder = f"{path.parent.name}/" if path.parent.name else ""
    where = f"{folder}{path.name}:{frame.line_no}" if frame.file_path else "builtin"
    owner = getattr(frame, "class_name", None)
    function = f"{owner}.{frame.function}" if owner else frame.function
    return f"{function} ({where})"


def _synthetic(frame: Any) -> bool:
    """pyinstrument's ``[self]``/``[await]`` leaves: time spent in the parent itself."""
    return str(frame.function).startswith("[")


def _report(title: str, root: Any, calls: int) -> None:
    total = root.time
    self_time: dict[str, float] = defaultdict(float)
    inclusive: dict[str, float] = defaultdict(float)
    for frame in _frames(root):
        if _synthetic(frame):
            if frame.parent is not None:
                self_time[_name(frame.parent)] += frame.time
            continue
        name = _name(frame)
        self_time[name] += frame.time - sum(child.time for child in frame.children)
        # Count a function once per path even if it recurses (it does not on this path).
        if not any(_name(parent) == name for parent in _ancestors(frame)):
            inclusive[name] += frame.time
    print(f"\n{title}: {calls:,} calls, {total:.2f} s under the profiler")
    print(f"  top {TOP} by self time (% of the loop)")
    for name, seconds in sorted(self_time.items(), key=lambda kv: -kv[1])[:TOP]:
        print(f"    {100 * seconds / total:5.1f}%  {name}")
    print(f"  top {TOP} by inclusive time (% of the loop)")
    ranked = sorted(inclusive.items(), key=lambda kv: -kv[1])
    shown = [(name, seconds) for name, seconds in ranked if seconds < total * 0.999][:TOP]
    for name, seconds in shown:
        print(f"    {100 * seconds / total:5.1f}%  {name}")


def _ancestors(frame: Any) -> Iterator[Any]:
    parent = frame.parent
    while parent is not None:
        yield parent
        parent = parent.parent


async def _profile(case: str, registry: Any, calls: int) -> Profiler:
    batch = bench_overhead.registry_batch(registry)
    await bench_overhead.check_echoes(registry)
    await batch(2000)  # warm pydantic and every cache first
    profiler = Profiler(interval=INTERVAL, async_mode="disabled")
    profiler.start()
    await batch(calls)
    profiler.stop()
    session = profiler.last_session
    assert session is not None
    root = session.root_frame()
    assert root is not None
    # Descend to the benchmark loop: the frames above it are asyncio's and this script's.
    while root.function != "batch" and root.children:
        root = max(root.children, key=lambda child: child.time)
    _report(case, root, calls)
    return profiler


def main() -> None:
    options = _harness.parser(__doc__.splitlines()[0])
    options.add_argument("--calls", type=int, default=30_000)
    options.add_argument("--html", type=Path, default=None, help="also write HTML pages here")
    args = options.parse_args()
    calls = 2000 if args.quick else args.calls
    print(_harness.machine_summary())
    registries = bench_overhead.registries()
    for case in (bench_overhead.DEFINE_TOOL, bench_overhead.FOUR_LISTENERS):
        profiler = asyncio.run(_profile(case, registries[case], calls))
        if args.html is not None:
            args.html.mkdir(parents=True, exist_ok=True)
            target = args.html / f"profile-{case.replace('+', '-plus-')}.html"
            target.write_text(profiler.output_html(), encoding="utf-8")
            print(f"  HTML: {target}")


if __name__ == "__main__":
    main()
