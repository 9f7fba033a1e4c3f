"""What each Python snapshot walk earns in a build without the C pass (issue 38, item 4).

A pure-Python build (a wheel made without a C compiler) takes an argument's snapshot with
the Python walks alone. Besides the full walk (the reference, which reports every problem
with its path) there are two faster walks, the recursive fast path (`_json._fast`) and the
level walk (`_levels`), and a flat check of a flat object written inline. This script
measures `materialize_arguments(value, plain=True)` (what the registry calls when only a
``define_tool`` body reads the arguments) and `materialize(value)` (the snapshot a stage
reads) under three configurations, interleaved round by round in one process:

* ``all walks``: the pure-Python build as it is;
* ``no level walk``: `_levels` left out (the recursive fast path and the full walk);
* ``full walk``: the flat check and the full walk only.

The shapes are benchmarks/bench_shapes.py's at 100 KB, a flat argument of three keys (the
common call) and a small nested one. The ratio column is the configuration over ``all
walks``, per round (median)::

    python benchmarks/bench_python_walks.py [--quick]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import _harness
import bench_shapes
from _harness import perf_ns

from toolseam import _json

CONFIGS = ("all walks", "no level walk", "full walk")


def _no_level_walk(*args: object) -> Any:
    raise _json.LevelFallback


def _no_fast(*args: object) -> Any:
    raise _json._Fallback


def _configure(name: str) -> None:
    _json.level_walk = _ORIGINAL_LEVEL if name == "all walks" else _no_level_walk  # type: ignore[assignment]
    _json._fast = _ORIGINAL_FAST if name != "full walk" else _no_fast  # type: ignore[assignment]


_ORIGINAL_LEVEL = _json.level_walk
_ORIGINAL_FAST = _json._fast


def _batch(config: str, function: Callable[[], object]) -> _harness.SyncBatch:
    def batch(n: int) -> int:
        _configure(config)
        try:
            start = perf_ns()
            for _ in range(n):
                function()
            return perf_ns() - start
        finally:
            _configure("all walks")

    return batch


def cases() -> dict[str, object]:
    found: dict[str, object] = {
        "flat, 3 keys": {"path": "/tmp/a.txt", "limit": 10, "follow": True},
        "small nested": {"query": "x", "filters": [{"field": "a", "op": "=", "value": 1}]},
    }
    for shape in bench_shapes.SHAPES:
        found[f"{shape.name}, 100 KB"] = shape.build(100_000)
    return found


def main() -> None:
    options = _harness.parser(__doc__.splitlines()[0])
    options.add_argument("--rounds", type=int, default=11)
    options.add_argument("--calls", type=int, default=10, help="per round, 100 KB shapes")
    options.add_argument("--small-calls", type=int, default=20_000, help="per round, small")
    options.add_argument("--only-arguments", action="store_true", help="no `materialize` rows")
    args = options.parse_args()
    print(_harness.machine_summary())
    saved = _json._copy_json
    _json._copy_json = None  # type: ignore[misc]  # the pure-Python build
    rounds = 3 if args.quick else args.rounds
    rows = []
    try:
        for label, value in cases().items():
            small = label.startswith(("flat", "small"))
            calls = args.small_calls if small else args.calls
            if args.quick:
                calls = max(calls // 20, 1)
            for what, function in (
                ("materialize_arguments", lambda v=value: _json.materialize_arguments(v, True)),
                ("materialize", lambda v=value: _json.materialize(v)),
            )[: 1 if args.only_arguments else 2]:
                contenders = [(config, _batch(config, function)) for config in CONFIGS]
                series = _harness.interleave_sync(contenders, rounds=rounds, calls=calls)
                by_name = {s.name: s for s in series}
                base = by_name["all walks"]
                cells = [
                    f"{by_name[c].median:.2f} ({by_name[c].ratio(base):.2f}x)" for c in CONFIGS
                ]
                rows.append(f"| {label} | `{what}` | " + " | ".join(cells) + " |")
                print(rows[-1], flush=True)
    finally:
        _json._copy_json = saved  # type: ignore[misc]
    print("\n| argument | call | " + " | ".join(f"{c} (us)" for c in CONFIGS) + " |")
    print("|---|---|" + "---:|" * len(CONFIGS))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
