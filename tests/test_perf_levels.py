"""The level walk builds what the full walk builds, for every shape of bench_shapes (§5.2).

Large arguments take `_levels.level_walk`, frozen (a snapshot) or plain (a private copy a
registry freezes when the arguments are first read). On generated values of each shape the
benchmark measures (lists of same-keyed objects, nested records, dicts of lists, deep
chains, wide objects), with odd leaves, odd keys and shared containers mixed in, these
tests check that both give the full walk's outcome: the same snapshot with the same frozen
container types everywhere (the plain copy once frozen), or the same error, and the same
text flag.
"""

from __future__ import annotations

import copy
import itertools
import math
from typing import Any, cast

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typing_extensions import TypedDict

from support import WALKS, make_input, walk
from test_perf_snapshot import full, outcome, shape
from toolseam import (
    FrozenDict,
    FrozenList,
    Next,
    PreDecision,
    ToolDispatchExecution,
    ToolExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
)
from toolseam._json import (
    _FROZEN,
    _PLAIN,
    MaterializationError,
    materialize,
    materialize_arguments,
    text_is_utf8,
)
from toolseam._levels import MAX_LEVELS, LevelFallback, level_walk
from toolseam.policies import timeout_policy

text = st.one_of(
    st.sampled_from(["id", "name", "tags", "é", "日本", "plain", ""]),
    st.text(max_size=6),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=2),
)
good_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False, allow_infinity=False).filter(
        lambda x: x != 0 or math.copysign(1, x) > 0
    ),
    text,
)


class _Str(str):
    pass


class _Int(int):
    pass


def _huge() -> int:
    return 10**5000  # too long to print: built, so that no repr of the strategy shows it


odd_leaves = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, b"x", _Str("s"), _Int(3)]),
    st.builds(_huge),
    st.builds(set),
    st.just(materialize({"snap": "\ud800"})),
    st.just(materialize(["snap"])),
)
leaves = st.one_of(good_leaves, good_leaves, good_leaves, odd_leaves)
keys = st.one_of(text, text, text, st.sampled_from([3, None, _Str("id")]))


def records(children: st.SearchStrategy[Any]) -> st.SearchStrategy[list[dict[Any, Any]]]:
    """Lists of objects with the same keys in the same order, now and then one that is not."""
    return st.lists(keys, min_size=1, max_size=5, unique_by=lambda k: (type(k), k)).flatmap(
        lambda names: st.lists(
            st.one_of(
                st.fixed_dictionaries(dict.fromkeys(names, children)),
                st.dictionaries(keys, children, max_size=3),
            ),
            min_size=2,
            max_size=12,
        )
    )


nested = st.recursive(
    leaves,
    lambda children: st.one_of(
        records(children),
        st.lists(children, max_size=5),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(keys, children, max_size=5),
    ),
    max_leaves=60,
)


@st.composite
def chains(draw: st.DrawFn) -> dict[str, Any]:
    depth = draw(st.integers(1, MAX_LEVELS + 3))
    count = draw(st.integers(1, 4))
    made = []
    for _ in range(count):
        node: dict[Any, Any] = {"level": depth, "label": draw(leaves)}
        for level in range(depth - 1, 0, -1):
            node = {"level": level, "label": "x", "next": node}
        made.append(node)
    return {"chains": made}


shapes = st.one_of(
    st.builds(lambda items: {"items": items}, records(leaves)),
    st.builds(lambda items: {"records": items}, records(nested)),
    st.builds(lambda d: {"columns": d}, st.dictionaries(text, st.lists(leaves, max_size=20))),
    chains(),
    st.builds(lambda d: {"fields": d}, st.dictionaries(keys, leaves, min_size=0, max_size=80)),
    st.dictionaries(keys, nested, max_size=4),
)


def _shared(value: dict[str, Any]) -> dict[str, Any]:
    """The value with one of its containers in it twice (a DAG), when it has one."""
    for item in value.values():
        if type(item) is list and item:
            return {**value, "again": item}
    return value


def _walk(value: object, plain: bool) -> object:
    wide: list[str] = []
    kind = type(value)
    if kind not in (dict, list, tuple):
        return outcome(full, value)
    try:
        copy = level_walk(value, kind, _PLAIN if plain else _FROZEN, wide)
    except LevelFallback:
        return outcome(full, value)  # what the callers do
    if plain:
        assert not any(
            type(c) in (FrozenDict, FrozenList) for c in _containers(copy, skip_kept=True)
        )
        copy = materialize(copy)
    return shape(copy)


def _containers(value: object, *, skip_kept: bool = False) -> list[object]:
    found: list[object] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if type(item) in (dict, list, FrozenDict, FrozenList):
            if skip_kept and type(item) in (FrozenDict, FrozenList):
                continue  # existing snapshots in the input are kept as they are
            found.append(item)
            pending.extend(item.values() if isinstance(item, dict) else item)  # type: ignore[arg-type]
    return found


@settings(max_examples=300)
@given(shapes)
def test_the_level_walk_builds_or_gives_up_as_the_full_walk_does(value: dict[str, Any]) -> None:
    expected = outcome(full, value)
    assert _walk(value, plain=False) == expected
    assert _walk(value, plain=True) == expected
    assert _walk(_shared(value), plain=False) == outcome(full, _shared(value))


@settings(max_examples=300)
@given(shapes)
def test_arguments_of_every_shape_match_the_full_walk_and_flag_text_exactly(
    value: dict[str, Any],
) -> None:
    # Large enough for the level walk (materialize_arguments decides by size).
    value = {**value, "padding": list(range(40))}
    expected = outcome(full, value)
    for name, plain in itertools.product(WALKS, (False, True)):
        try:
            with walk(name):
                taken, utf8 = materialize_arguments(value, plain)
        except MaterializationError as error:
            failed = ("error", str(error))
            assert expected == failed
            continue
        if plain and type(taken) is dict:
            taken = materialize(taken)
        assert shape(taken) == expected
        assert utf8 is text_is_utf8(cast("Any", full(value)))


@pytest.mark.parametrize("name", WALKS)
def test_a_container_met_twice_is_left_to_the_recursive_path(name: str) -> None:
    record = {"id": 1, "tags": ["a"]}
    value = {"items": [record] * 40}
    with pytest.raises(LevelFallback):
        level_walk(value, dict, _FROZEN, [])
    with walk(name):
        snapshot, utf8 = materialize_arguments(value, True)
    assert utf8 is True
    if name == "C":
        # The C pass copies each occurrence (tests/test_speedups.py): a private plain copy.
        assert type(snapshot) is dict
        assert snapshot == value
        return
    assert type(snapshot) is FrozenDict  # the recursive path freezes it once, shared
    items = snapshot["items"]
    assert type(items) is FrozenList
    assert items[0] is items[39]


@pytest.mark.parametrize("name", WALKS)
def test_a_cycle_is_reported_with_its_path_from_a_large_argument(name: str) -> None:
    cyclic: list[object] = []
    cyclic.append({"again": cyclic})
    value = {"items": [{"n": i} for i in range(40)], "loop": cyclic}
    with (
        walk(name),
        pytest.raises(MaterializationError, match=r"^\$\.loop\[0\]\.again: cycle detected$"),
    ):
        materialize_arguments(value, True)


@pytest.mark.parametrize("name", WALKS)
def test_deeper_than_the_level_walk_goes_is_still_snapshotted(name: str) -> None:
    node: dict[str, Any] = {"end": True}
    for _ in range(MAX_LEVELS + 10):
        node = {"next": node}
    value = {"chains": [node] + [{"end": i} for i in range(40)]}
    with walk(name):
        snapshot, _ = materialize_arguments(value, True)
    # The Python walks give up on the level walk and freeze it whole; the C pass goes
    # deeper and makes the private plain copy.
    assert type(snapshot) is (dict if name == "C" else FrozenDict)
    assert materialize(snapshot) == value


# -- the registry: a large argument only the body reads is frozen when first read ----------


class Line(TypedDict):
    sku: str
    tags: list[str]


class Order(TypedDict):
    lines: list[Line]


def _order() -> dict[str, Any]:
    return {"lines": [{"sku": f"s{i}", "tags": ["a", "b"]} for i in range(40)]}


class TestDeferredSnapshot:
    async def test_the_body_reads_what_was_submitted_though_the_caller_changed_it(self) -> None:
        gate = anyio.Event()
        seen: list[object] = []

        @define_tool(name="t", description="")
        async def body(args: Order, exec: ToolRunContext) -> int:
            await gate.wait()
            seen.append(exec.arguments)
            seen.append(args)
            return len(args["lines"])

        registry = ToolRegistry()
        registry.register(body)
        assert registry._only_the_tool_reads
        observed: list[object] = []
        registry.on_result(lambda exec, result: observed.append(exec.arguments))
        submitted = _order()
        expected = copy.deepcopy(submitted)
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("t", submitted))
            await anyio.wait_all_tasks_blocked()
            submitted["lines"][0]["tags"].append("changed by the caller")
            submitted["lines"].pop()
            gate.set()
        frozen, args = seen
        assert type(frozen) is FrozenDict
        assert frozen == expected
        assert args == expected
        assert observed == [frozen]
        assert observed[0] is frozen  # one snapshot, whoever reads it

    @pytest.mark.parametrize("name", WALKS)
    @pytest.mark.parametrize("size", [1, 40])
    async def test_no_container_of_the_private_copy_reaches_the_body(
        self, name: str, size: int
    ) -> None:
        # The private copy's containers are left out of the cycle collector (C pass) and
        # frozen later: the body must only ever get what validating it built.
        held: list[object] = []

        @define_tool(name="t", description="")
        async def body(args: Order, exec: ToolRunContext) -> int:
            private = cast("Any", exec)._arguments
            held.append(type(private))
            ours = {id(c) for c in _containers(private)}
            assert ours.isdisjoint(id(c) for c in _containers(args))
            args["lines"].append(cast("Line", {"sku": "added", "tags": []}))
            return len(exec.arguments["lines"])  # type: ignore[arg-type,index]

        registry = ToolRegistry()
        registry.register(body)
        value = {"lines": [{"sku": f"s{i}", "tags": ["a"]} for i in range(size)]}
        with walk(name):
            result = await registry.execute(make_input("t", value))
        assert not result.is_error, result
        assert result.value == size
        # The C pass defers any size; the Python walks only large ones.
        assert held == [dict if name == "C" or size >= 32 else FrozenDict]

    async def test_what_the_body_does_to_its_arguments_no_stage_sees(self) -> None:
        @define_tool(name="t", description="")
        async def body(args: Order, exec: ToolRunContext) -> int:
            args["lines"][0]["tags"].append("changed by the body")
            args["lines"].pop()
            return 0

        registry = ToolRegistry()
        registry.register(body)
        observed: list[object] = []
        registry.on_result(lambda exec, result: observed.append(exec.arguments))
        result = await registry.execute(make_input("t", _order()))
        assert not result.is_error
        assert observed == [_order()]

    async def test_a_stage_before_the_body_sees_the_snapshot_the_body_reads(self) -> None:
        seen: list[object] = []

        @define_tool(name="t", description="")
        async def body(args: Order, exec: ToolRunContext) -> int:
            seen.append(exec.arguments)
            return 0

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            seen.append(exec.arguments)
            return await next()

        registry = ToolRegistry()
        registry.register(body)
        registration = registry.on_pre_execute(pre)
        assert not registry._only_the_tool_reads
        await registry.execute(make_input("t", _order()))
        assert type(seen[0]) is FrozenDict
        assert seen[0] is seen[1]
        registration.remove()
        assert registry._only_the_tool_reads

    async def test_a_non_json_leaf_deep_in_a_large_argument_fails_with_its_path(self) -> None:
        @define_tool(name="t", description="")
        async def body(args: Order, exec: ToolRunContext) -> int:
            raise AssertionError("never invoked")

        registry = ToolRegistry()
        registry.register(body)
        arguments = _order()
        arguments["lines"][7]["tags"].append(math.nan)
        result = await registry.execute(make_input("t", arguments))
        assert isinstance(result, ToolFailure)
        assert result.error.message == (
            "tool execution arguments must be losslessly JSON-serializable "
            "($.lines[7].tags[2]: float nan is not JSON)"
        )

    def test_which_stages_count_as_reading_before_the_body(self) -> None:
        registry = ToolRegistry()
        policy = registry.on_execute(timeout_policy(registry))
        assert registry._only_the_tool_reads  # a timeout policy never reads them

        async def around(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            return await next()

        wrapper = registry.on_execute(around)
        assert not registry._only_the_tool_reads
        wrapper.remove()
        assert registry._only_the_tool_reads
        guard = registry.add_guard(lambda exec: None)
        assert not registry._only_the_tool_reads
        guard.remove()
        policy.remove()
        assert registry._only_the_tool_reads
