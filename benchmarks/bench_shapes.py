"""Taking in large arguments of every shape: toolseam ÷ autogen-core ``run_json``.

Five shapes, each at about 100 KB and about 1 MB of JSON, each passed to a tool that
returns the length of its one argument (so the figure is what taking the argument in
costs: the snapshot, the validation, the call):

* ``flat list``: a list of small objects (an id, a name, a price, a flag);
* ``nested records``: a list of records, each with two sub-records (an owner, an address),
  a list of line objects and a list of tags;
* ``dict of lists``: an object of 100 keys, each holding a list of numbers;
* ``deep chains``: a list of chains, each 50 objects deep (a level, a label, the next);
* ``wide object``: one object of 10,000 keys (ints at 100 KB, strings at 1 MB);
* ``shared records``: the nested records as a Python caller builds them with
  ``dict(item, id=i)``: every record shares one owner, address, lines and tags with the
  others (the same JSON as unshared records; the C pass copies each occurrence).

Contenders, interleaved round by round in one process (asyncio only: autogen-core is
asyncio-only): ``toolseam`` (`ToolRegistry.execute` of a ``define_tool`` tool, no stage
registered), ``toolseam+pre`` (the same with a pre-execute listener that reads the
arguments, so their snapshot is taken before the body runs; informational) and ``autogen``
(``FunctionTool.run_json`` of a function with the same signature). Targets: toolseam ÷
autogen <= 3x at 100 KB and <= 4x at 1 MB for every shape, and <= 2x at 100 KB for shared
records.

    python benchmarks/bench_shapes.py
    python benchmarks/bench_shapes.py --shape "shared records" --size 100000
    python benchmarks/bench_shapes.py --ab /tmp/base/src   # and another copy, as "B"

``--ab DIR`` imports the toolseam package in ``DIR`` as a second contender (see
``ab_overhead``), so that a change is measured against its base in one process.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, NotRequired

import _harness
from _harness import AsyncBatch, Check, Series, perf_ns
from typing_extensions import TypedDict

import toolseam

LIMITS = {100_000: 3.0, 1_000_000: 4.0}


# -- the shapes ----------------------------------------------------------------------------


class Item(TypedDict):
    id: int
    name: str
    price: float
    in_stock: bool


class Person(TypedDict):
    id: int
    name: str
    email: str


class Address(TypedDict):
    street: str
    city: str
    zip: str


class Line(TypedDict):
    sku: str
    quantity: int
    price: float


class Record(TypedDict):
    id: int
    title: str
    owner: Person
    address: Address
    lines: list[Line]
    tags: list[str]


class Node(TypedDict):
    level: int
    label: str
    next: NotRequired[Node]


def _item(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"item number {i}", "price": i / 4, "in_stock": i % 3 == 0}


def _record(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "title": f"order {i}",
        "owner": {"id": i % 97, "name": f"customer {i % 97}", "email": f"c{i % 97}@example.com"},
        "address": {"street": f"{i} Main Street", "city": "Springfield", "zip": f"{i % 99999:05d}"},
        "lines": [
            {"sku": f"SKU-{i}-{j}", "quantity": j + 1, "price": (i + j) / 8} for j in range(2)
        ],
        "tags": ["new", f"group-{i % 7}", "priority" if i % 5 == 0 else "normal"],
    }


def _chain(i: int, depth: int = 50) -> dict[str, Any]:
    node: dict[str, Any] = {"level": depth - 1, "label": f"chain {i} level {depth - 1}"}
    for level in range(depth - 2, -1, -1):
        node = {"level": level, "label": f"chain {i} level {level}", "next": node}
    return node


def flat_list(size: int) -> dict[str, Any]:
    return {"items": [_item(i) for i in range(size // 62)]}


def nested_records(size: int) -> dict[str, Any]:
    return {"records": [_record(i) for i in range(size // 390)]}


def shared_records(size: int) -> dict[str, Any]:
    item = _record(0)
    return {"records": [dict(item, id=i) for i in range(size // 390)]}


def dict_of_lists(size: int) -> dict[str, Any]:
    per_key = size // 100 // 9
    return {
        "columns": {
            f"column_{k}": [(k * per_key + i) / 4 for i in range(per_key)] for k in range(100)
        }
    }


def deep_chains(size: int) -> dict[str, Any]:
    return {"chains": [_chain(i) for i in range(size // 2200)]}


def wide_object(size: int) -> dict[str, Any]:
    if size <= 200_000:
        return {"fields": {f"k{i:04d}": i for i in range(10_000)}}
    width = size // 10_000 - 14
    return {"fields": {f"k{i:04d}": f"{i:06d}".ljust(width, "v") for i in range(10_000)}}


class FlatArgs(TypedDict):
    items: list[Item]


class RecordArgs(TypedDict):
    records: list[Record]


class ColumnArgs(TypedDict):
    columns: dict[str, list[float]]


class ChainArgs(TypedDict):
    chains: list[Node]


class WideArgs(TypedDict):
    fields: dict[str, int | str]


async def _flat(items: list[Item]) -> int:
    """Count."""
    return len(items)


async def _records(records: list[Record]) -> int:
    """Count."""
    return len(records)


async def _columns(columns: dict[str, list[float]]) -> int:
    """Count."""
    return len(columns)


async def _chains(chains: list[Node]) -> int:
    """Count."""
    return len(chains)


async def _fields(fields: dict[str, int | str]) -> int:
    """Count."""
    return len(fields)


@dataclass(frozen=True)
class Shape:
    name: str
    build: Callable[[int], dict[str, Any]]
    args_type: Any
    function: Callable[..., Awaitable[int]]
    limits: dict[int, float] | None = None  # size -> target, where it differs from LIMITS


SHAPES = (
    Shape("flat list", flat_list, FlatArgs, _flat),
    Shape("nested records", nested_records, RecordArgs, _records),
    Shape("dict of lists", dict_of_lists, ColumnArgs, _columns),
    Shape("deep chains", deep_chains, ChainArgs, _chains),
    Shape("wide object", wide_object, WideArgs, _fields),
    Shape("shared records", shared_records, RecordArgs, _records, {100_000: 2.0}),
)


# -- contenders ----------------------------------------------------------------------------


def _tool(ts: ModuleType, shape: Shape) -> Any:
    """A ``define_tool`` tool over ``shape.function``, with ``shape.args_type``."""
    (key,) = shape.args_type.__annotations__
    function = shape.function

    async def body(args: Any, exec: Any) -> int:
        return await function(args[key])

    body.__annotations__ = {"args": shape.args_type, "exec": ts.ToolRunContext, "return": int}
    return ts.define_tool(name="shape", description="Count.")(body)


async def _reads_arguments(exec: Any, next: Callable[[], Awaitable[Any]]) -> Any:
    exec.arguments  # noqa: B018  # reading them is the point
    return await next()


def toolseam_batch(
    ts: ModuleType, shape: Shape, arguments: dict[str, Any], pre: bool
) -> AsyncBatch:
    registry = ts.ToolRegistry()
    registry.register(_tool(ts, shape))
    if pre:
        registry.on_pre_execute(_reads_arguments)
    execute = registry.execute
    make_input = ts.ToolExecutionInput
    controller = ts.AbortController
    expected = len(next(iter(arguments.values())))

    async def batch(n: int) -> int:
        start = perf_ns()
        for _ in range(n):
            result = await execute(
                make_input(
                    call_id="c", name="shape", arguments=arguments, signal=controller().signal
                )
            )
        elapsed = perf_ns() - start
        if result.is_error or result.value != expected:
            raise RuntimeError(f"the {shape.name} call failed: {result!r}")
        return elapsed

    return batch


def autogen_batch(shape: Shape, arguments: dict[str, Any]) -> AsyncBatch:
    from autogen_core import CancellationToken
    from autogen_core.tools import FunctionTool

    run_json = FunctionTool(shape.function, description="Count.", name="shape").run_json
    expected = len(next(iter(arguments.values())))

    async def batch(n: int) -> int:
        start = perf_ns()
        for _ in range(n):
            value = await run_json(arguments, CancellationToken())
        elapsed = perf_ns() - start
        if value != expected:
            raise RuntimeError(f"the autogen {shape.name} call returned {value!r}")
        return elapsed

    return batch


async def _measure(
    shape: Shape, size: int, rounds: int, calls: int, other: ModuleType | None
) -> tuple[list[Series], int]:
    arguments = shape.build(size)
    contenders: list[tuple[str, AsyncBatch]] = [
        ("toolseam", toolseam_batch(toolseam, shape, arguments, pre=False)),
        ("toolseam+pre", toolseam_batch(toolseam, shape, arguments, pre=True)),
        ("autogen", autogen_batch(shape, arguments)),
    ]
    if other is not None:
        contenders.append(("B toolseam", toolseam_batch(other, shape, arguments, pre=False)))
        contenders.append(("B toolseam+pre", toolseam_batch(other, shape, arguments, pre=True)))
    series = await _harness.interleave_async(
        contenders, rounds=rounds, calls=calls, warmup_calls=max(calls // 2, 1)
    )
    return series, len(json.dumps(arguments))


def _label(size: int) -> str:
    return "100 KB" if size < 500_000 else "1 MB"


def run(
    *,
    quick: bool = False,
    other: ModuleType | None = None,
    shapes: list[str] | None = None,
    sizes: list[int] | None = None,
) -> list[Check]:
    rounds = 3 if quick else 15
    checks: list[Check] = []
    rows: list[str] = []
    for size, default_limit in LIMITS.items():
        if sizes and size not in sizes:
            continue
        calls = (2 if quick else 20) if size < 500_000 else (1 if quick else 3)
        for shape in SHAPES:
            if shapes and shape.name not in shapes:
                continue
            limit = (shape.limits or {}).get(size, default_limit)
            series, length = asyncio.run(_measure(shape, size, rounds, calls, other))
            by_name = {s.name: s for s in series}
            autogen = by_name["autogen"]
            _harness.print_table(
                f"[shapes] {shape.name}, {length / 1000:.0f} KB of JSON, asyncio",
                series,
                baselines=["autogen"] + (["toolseam"] if other is not None else []),
                unit="us/call",
                note=f"{rounds} rounds x {calls} calls per contender, order rotating each round",
            )
            ratio = by_name["toolseam"].ratio(autogen)
            pre = by_name["toolseam+pre"].ratio(autogen)
            checks.append(
                Check(
                    f"{shape.name} at {_label(size)}, toolseam / autogen run_json",
                    ratio,
                    limit,
                    "x",
                    f"{by_name['toolseam'].median:.0f} vs {autogen.median:.0f} us/call; "
                    f"with a pre-execute listener {pre:.2f}x",
                )
            )
            rows.append(
                f"  | {shape.name} | {_label(size)} ({length / 1000:.0f} KB) | {ratio:.2f}x | "
                f"{pre:.2f}x | <= {limit:g}x | {checks[-1].status} |"
            )
    print("\n[shapes] table for docs/performance.md")
    print("  | shape | size | toolseam / autogen | with a pre-execute listener | target | |")
    print("  |---|---|---|---|---|---|")
    print("\n".join(rows))
    return checks


def main() -> None:
    options = _harness.parser(__doc__.splitlines()[0])
    options.add_argument(
        "--ab", type=Path, default=None, help="the directory that holds another toolseam/"
    )
    options.add_argument(
        "--shape", action="append", choices=[s.name for s in SHAPES], help="only these shapes"
    )
    options.add_argument(
        "--size", action="append", type=int, choices=list(LIMITS), help="only these sizes"
    )
    args = options.parse_args()
    other = None
    if args.ab is not None:
        import ab_overhead

        other = ab_overhead.load_copy(args.ab)
    print(_harness.machine_summary())
    checks = run(quick=args.quick, other=other, shapes=args.shape, sizes=args.size)
    print()
    _harness.print_checks(checks)


if __name__ == "__main__":
    main()
