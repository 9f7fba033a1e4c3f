"""A/B the per-call overhead of the installed toolseam against another copy of its source.

For trying a change to the hot path without trusting two runs minutes apart on a noisy
machine: the other copy is imported in the same process under the name ``toolseam_b``
(the package uses relative imports only), and both are interleaved round by round::

    cp -r src /tmp/exp && $EDITOR /tmp/exp/toolseam/_engine.py
    python benchmarks/ab_overhead.py /tmp/exp            # the dir that holds toolseam/

The ratio column is B / A per round (median): below 1.00 means the copy is faster.
``--a DIR`` takes A from another copy too (imported as ``toolseam_a``), to A/B two commits.
"""

from __future__ import annotations

import asyncio
import importlib
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import _harness
import bench_overhead
import trio

import toolseam


def load_copy(source_root: Path, name: str = "toolseam_b") -> ModuleType:
    """Import ``source_root/toolseam`` as the package ``name``."""
    package = source_root / "toolseam"
    if not (package / "__init__.py").is_file():
        raise SystemExit(f"{package} is not a toolseam package directory")
    target = Path(tempfile.mkdtemp(prefix="toolseam_ab_"))
    shutil.copytree(package, target / name, ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, str(target))
    return importlib.import_module(name)


async def _measure(
    base: ModuleType, copy: ModuleType, rounds: int, calls: int, with_autogen: bool
) -> None:
    contenders = []
    for label, ts in (("A", base), ("B", copy)):
        for name, registry in bench_overhead.registries(ts).items():
            await bench_overhead.check_echoes(registry, ts)
            contenders.append((f"{label} {name}", bench_overhead.registry_batch(registry, ts)))
    if with_autogen:
        contenders.append((bench_overhead.AUTOGEN, bench_overhead.autogen_batch()))
    series = await _harness.interleave_async(contenders, rounds=rounds, calls=calls)
    by_name = {s.name: s for s in series}
    print(f"\n{'contender':<20}{'A us/call':>12}{'B us/call':>12}{'B / A':>8}", end="")
    print(f"{'A x autogen':>14}{'B x autogen':>14}" if with_autogen else "")
    for name in bench_overhead.registries():
        a, b = by_name[f"A {name}"], by_name[f"B {name}"]
        line = f"{name:<20}{a.median:>12.2f}{b.median:>12.2f}{b.ratio(a):>8.3f}"
        if with_autogen:
            autogen = by_name[bench_overhead.AUTOGEN]
            line += f"{a.ratio(autogen):>14.2f}{b.ratio(autogen):>14.2f}"
        print(line)


def main() -> None:
    options = _harness.parser(__doc__.splitlines()[0])
    options.add_argument("source_root", type=Path, help="the directory that holds toolseam/")
    options.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    options.add_argument("--rounds", type=int, default=21)
    options.add_argument("--calls", type=int, default=2000)
    options.add_argument("--a", type=Path, default=None, help="take A from this copy too")
    args = options.parse_args()
    copy = load_copy(args.source_root)
    base = toolseam if args.a is None else load_copy(args.a, "toolseam_a")
    rounds, calls = (3, 200) if args.quick else (args.rounds, args.calls)
    print(f"A: {Path(base.__file__).parent}\nB: {Path(copy.__file__).parent}")
    print(f"{args.backend}, {rounds} rounds x {calls} calls, order rotating each round")
    if args.backend == "asyncio":
        asyncio.run(_measure(base, copy, rounds, calls, True))
    else:
        trio.run(_measure, base, copy, rounds, calls, False)


if __name__ == "__main__":
    main()
