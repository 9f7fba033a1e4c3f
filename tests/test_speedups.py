"""toolseam._speedups.copy_json, the C pass over large arguments (contract §5.2).

It copies what the Python fast path accepts, shared (acyclic) containers copied at each
occurrence within a budget, and returns ``None`` for everything else, so that the Python
walks decide. These tests pin it to the full walk: on generated values of
every shape (tests/test_perf_levels.py's strategies, odd leaves and keys included) it
either builds exactly the full walk's snapshot, with the same container types and the
exact text flag, or gives up; it never accepts a value the full walk refuses. They also
check that it leaks no reference on any path, and that CI really runs it:
``TOOLSEAM_REQUIRE_SPEEDUPS=1`` (set by .ci/run) fails the first test when the build left
the extension out.
"""

from __future__ import annotations

import collections
import gc
import math
import os
import sys
import warnings
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import walk
from test_perf_levels import shapes
from test_perf_snapshot import full, object_lists, odd_values, outcome, shape, values
from toolseam import FrozenDict, FrozenList, _json
from toolseam._json import materialize, materialize_arguments, text_is_utf8

copy_json = _json._copy_json


def test_the_extension_is_built_when_required() -> None:
    if os.environ.get("TOOLSEAM_REQUIRE_SPEEDUPS") == "1":
        assert copy_json is not None, "toolseam._speedups is missing from this build"
    elif copy_json is None:
        pytest.skip("this build has no toolseam._speedups (no C compiler when it was built)")


needs_c = pytest.mark.skipif(copy_json is None, reason="this build has no toolseam._speedups")


def _c(value: object, frozen: bool = True) -> tuple[Any, bool] | None:
    assert copy_json is not None
    if frozen:
        return copy_json(value, FrozenDict, FrozenList)
    return copy_json(value, dict, list)


def _check(value: object) -> bool:
    """Whether the C pass took ``value``; if so, that it built the full walk's snapshot."""
    expected = outcome(full, value)
    taken = _c(value)
    plain = _c(value, frozen=False)
    assert (taken is None) is (plain is None)
    if taken is None or plain is None:
        return False
    assert shape(taken[0]) == expected  # never an error where the full walk reports one
    assert taken[1] is text_is_utf8(cast("Any", full(value)))
    assert plain[1] is taken[1]
    assert all(type(c) in (dict, list) for c in _containers(plain[0]))
    assert shape(materialize(plain[0])) == expected
    return True


def _containers(value: object) -> list[object]:
    found: list[object] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, (dict, list)):
            found.append(item)
            pending.extend(item.values() if isinstance(item, dict) else item)
    return found


@needs_c
@settings(max_examples=300)
@given(shapes)
def test_every_shape_is_copied_as_the_full_walk_builds_it(value: dict[str, Any]) -> None:
    _check(value)


@needs_c
@given(values)
def test_json_values_are_copied_as_the_full_walk_builds_them(value: object) -> None:
    _check(value)


@needs_c
@given(odd_values)
def test_odd_values_are_left_to_the_python_walk(value: object) -> None:
    if _check(value):
        assert outcome(full, value)[0] != "error"  # type: ignore[index]


@needs_c
@given(object_lists)
def test_lists_of_objects_are_copied_or_left_alone(value: object) -> None:
    _check({"items": value})


def _share(parts: tuple[object, object, int]) -> object:
    """A DAG: ``shared`` in several places of one value, at several depths."""
    shared, other, times = parts
    return {"a": shared, "b": [shared] * times, "c": {"d": [other, shared], "e": (shared,)}}


shared_values = st.tuples(
    st.one_of(st.lists(values, max_size=4), st.dictionaries(st.text(max_size=4), values)),
    values,
    st.integers(1, 5),
).map(_share)


@needs_c
@given(shared_values)
def test_shared_containers_are_copied_as_the_full_walk_builds_them(value: object) -> None:
    _check(value)


@needs_c
@given(st.lists(st.integers(-100, 100), max_size=5), st.integers(2, 50))
def test_shared_containers_of_plain_json_are_taken(tags: list[int], count: int) -> None:
    item = {"id": 0, "tags": tags, "owner": {"name": "x", "tags": tags}}
    assert _check({"records": [dict(item, id=i) for i in range(count)]})


def repr_type(value: object) -> str:
    return type(value).__name__


class _Str(str):
    pass


class _Int(int):
    pass


class _Dict(dict[str, object]):
    pass


class _List(list[object]):
    pass


@needs_c
@pytest.mark.parametrize(
    "odd",
    [
        math.nan,
        math.inf,
        -math.inf,
        -0.0,
        2**63,
        -(2**63) - 1,
        10**5000,
        _Str("s"),
        _Int(1),
        _Dict(),
        _List(),
        materialize({"already": "frozen"}),
        materialize(["frozen"]),
        b"bytes",
        {1, 2},
        object(),
    ],
    ids=repr_type,
)
def test_anything_but_plain_json_is_left_to_the_python_walk(odd: object) -> None:
    for value in ({"n": odd}, [1, odd], {"deep": [{"n": odd}]}, (odd,)):
        assert _c(value) is None
        assert _c(value, frozen=False) is None
    # ... which then takes it or reports it, as it always has.
    outcome(materialize, {"n": odd})


@needs_c
def test_non_str_keys_are_left_to_the_python_walk() -> None:
    for key in (1, None, True, 1.5, _Str("k"), (1,)):
        assert _c({"ok": [{key: 1}]}) is None
        with pytest.raises(_json.MaterializationError, match="key"):
            materialize({"ok": [{key: 1}]})


@needs_c
def test_the_largest_ints_of_64_bits_are_taken() -> None:
    value = {"n": [2**63 - 1, -(2**63), 0, -1, True, False]}
    assert _c(value) == (value, True)


@needs_c
def test_a_container_met_twice_is_copied_at_each_occurrence() -> None:
    shared = {"x": [1, "é"]}
    for frozen in (True, False):
        copied = _c({"a": shared, "b": [shared, (shared,)]}, frozen)
        assert copied is not None
        value, utf8 = copied
        assert value == {"a": shared, "b": [shared, [shared]]}
        assert utf8 is True
        assert value["a"] is not value["b"][0]  # separate copies, equal (snapshots: immutable)
        assert value["a"] is not shared
        assert not any(gc.is_tracked(c) for c in _containers(value))
    records = [dict({"id": 0, "tags": ["a", "b"]}, id=i) for i in range(100)]
    assert _check({"records": records})


@needs_c
def test_a_cycle_is_left_to_the_python_walk() -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    looped: dict[str, object] = {}
    looped["inner"] = [{"back": looped}]
    shared: list[object] = [1]
    behind: list[object] = [shared, shared]
    shared.append({"up": behind})  # a cycle through a container met twice
    for value in ({"loop": cyclic}, looped, {"a": behind}):
        assert _c(value) is None
        assert _c(value, frozen=False) is None
        with pytest.raises(_json.MaterializationError, match=r": cycle detected$"):
            materialize(value)


def _repeated(count: int, size: int) -> list[list[int]]:
    """A list of ``count`` references to one list of ``size`` items."""
    inner = list(range(size))
    return [inner] * count


@needs_c
def test_sharing_is_copied_within_its_budget() -> None:
    # 721 repeats of 100 items = 72,100 <= 65,536 + 8 x (722 + 100) first-time items; one
    # more is past the budget (_speedups.c, REPEAT_BASE and REPEAT_FACTOR).
    assert _check(_repeated(722, 100))
    assert _c(_repeated(723, 100)) is None
    assert _c(_repeated(723, 100), frozen=False) is None
    assert materialize(_repeated(723, 100)) == _repeated(723, 100)  # the Python walk


@needs_c
@pytest.mark.parametrize(("levels", "taken"), [(10, True), (14, True), (40, False), (400, False)])
def test_an_exponential_dag_is_refused_within_the_budget(levels: int, taken: bool) -> None:
    # Each level holds the one below twice: 2**levels occurrences of the innermost list.
    # The C pass copies each occurrence until the budget runs out, then gives up, and the
    # Python walk, which copies each container once, builds the snapshot.
    value: object = ["leaf"]
    for _ in range(levels):
        value = [value, value]
    assert (_c(value) is not None) is taken
    snapshot = materialize(value)
    node = snapshot
    for _ in range(levels):
        assert type(node) is FrozenList
        assert len(node) == 2
        node = node[0]
    assert node == ["leaf"]


@needs_c
@pytest.mark.parametrize(("depth", "taken"), [(500, True), (512, True), (513, False)])
def test_deeper_than_the_c_pass_goes_is_left_to_the_python_walk(depth: int, taken: bool) -> None:
    value: object = "leaf"
    for _ in range(depth):
        value = [value]
    copied = _c(value)
    assert (copied is not None) is taken
    assert materialize(value) == value


@needs_c
def test_the_text_flag_is_exact() -> None:
    assert _c({"é": ["日本", "\U0001f600"]}) == ({"é": ["日本", "\U0001f600"]}, True)
    for odd in ({"\ud800": 1}, ["\udfff"], {"k": ["x\udbff"]}, {"k": "\U0001f600\ud800"}):
        copied = _c(odd)
        assert copied is not None
        assert copied[1] is False


@needs_c
def test_the_copy_is_its_own() -> None:
    inner = [1, 2]
    value = {"a": inner, "t": (1, [2])}
    copied = _c(value, frozen=False)
    assert copied is not None
    plain = copied[0]
    inner.append(3)
    assert plain == {"a": [1, 2], "t": [1, [2]]}
    assert type(plain["t"]) is list
    plain["a"].append(9)
    assert inner == [1, 2, 3]
    frozen = _c(value)
    assert frozen is not None
    assert type(frozen[0]) is FrozenDict
    assert type(frozen[0]["t"]) is FrozenList
    with pytest.raises(TypeError):
        frozen[0]["a"] = 1


@needs_c
def test_roots_that_are_not_containers_and_bad_types_are_refused() -> None:
    assert copy_json is not None
    for leaf in ("s", 1, None, 1.5):
        assert copy_json(leaf, dict, list) is None
    with pytest.raises(TypeError):
        copy_json({}, list, list)
    with pytest.raises(TypeError):
        copy_json({}, dict, dict)
    with pytest.raises(TypeError):
        copy_json({})  # type: ignore[call-arg]


@needs_c
def test_no_reference_is_leaked_on_any_path() -> None:
    leaf = "a leaf of its own " + str(id(object()))
    key = "a key of its own " + str(id(object()))
    good = {key: [leaf, {key: leaf}], "n": [leaf] * 10}
    shared = {"x": leaf, key: [leaf]}
    good_shared = {key: [shared, shared, {key: shared}]}
    cyclic: list[object] = [leaf]
    cyclic.append({key: cyclic})
    dag: object = [leaf]
    for _ in range(30):
        dag = [dag, {key: dag}]
    bad = [
        {key: [leaf, {key: math.nan}]},
        {key: [leaf, leaf, _Str("x")]},
        {key: leaf, "again": [shared, shared, {key: math.nan}]},
        {key: [shared, cyclic]},
        {key: dag},
    ]
    gc.collect()
    before = sys.getrefcount(leaf), sys.getrefcount(key)
    for _ in range(200):
        for frozen in (True, False):
            assert _c(good, frozen) is not None
            assert _c(good_shared, frozen) is not None
            for value in bad:
                assert _c(value, frozen) is None
    gc.collect()
    assert (sys.getrefcount(leaf), sys.getrefcount(key)) == before


@needs_c
def test_large_arguments_of_every_benchmark_shape_take_the_c_pass() -> None:
    # The point of the pass: none of the shapes benchmarks/bench_shapes.py measures may fall
    # back to the Python walk.
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    try:
        import bench_shapes
    finally:
        sys.path.pop(0)
    for case in bench_shapes.SHAPES:
        value = case.build(100_000)
        assert _c(value) is not None, case.name
        plain, utf8 = materialize_arguments(value, plain=True)
        assert type(plain) is dict, case.name
        assert utf8 is True
        assert materialize(plain) == value


@needs_c
def test_finished_copies_are_left_out_of_the_cycle_collector() -> None:
    # They hold only leaves and other copies, so they cannot be in a cycle; tracked, every
    # collection during a large call traversed them (half of its time for nested records).
    value = {"records": [{"tags": ["a"], "owner": {"id": 1}}], "n": 1}
    for frozen in (True, False):
        copied = _c(value, frozen)
        assert copied is not None
        assert not any(gc.is_tracked(c) for c in _containers(copied[0]))
        assert copied[0] == value
    assert gc.is_tracked(value["records"])  # the caller's value is left as it was


@needs_c
def test_the_collector_is_left_as_it_was() -> None:
    value = {"items": [{"n": [i]} for i in range(2000)]}
    assert gc.isenabled()
    assert _c(value) is not None
    assert gc.isenabled()
    gc.disable()
    try:
        assert _c(value) is not None
        assert _c({"bad": [math.nan]}) is None
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert _c({"bad": [math.nan]}) is None
    assert gc.isenabled()


class _Colliding:
    """A key whose ``__eq__`` would run if a dict copy compared it with another key."""

    armed = False
    compared = 0

    def __hash__(self) -> int:
        return 1

    def __eq__(self, other: object) -> bool:
        if not _Colliding.armed:
            return self is other
        _Colliding.compared += 1
        raise ValueError("__eq__ ran")


@pytest.mark.parametrize("name", ["C", "Python"])
def test_a_key_whose_eq_raises_is_a_materialization_error_and_never_compared(name: str) -> None:
    # After a deletion a dict cannot be cloned, so copying it compares colliding keys: the
    # C pass must refuse such keys before it copies anything.
    if name == "C" and copy_json is None:
        pytest.skip("this build has no toolseam._speedups")
    first, second = _Colliding(), _Colliding()
    value: dict[object, int] = {first: 1, "x": 0}
    value[second] = 2
    del value["x"]
    _Colliding.armed, _Colliding.compared = True, 0
    if name == "C":
        assert _c({"a": value}) is None
        assert _c({"a": value}, frozen=False) is None
        assert _Colliding.compared == 0
    with walk(name), pytest.raises(_json.MaterializationError, match=r"^\$\.a: ValueError"):
        materialize({"a": value})
    with walk(name), pytest.raises(_json.MaterializationError):
        materialize_arguments({"a": [value]}, True)
    _Colliding.armed = False
    assert gc.isenabled()


@needs_c
def test_only_the_base_types_or_stateless_subclasses_are_built() -> None:
    assert copy_json is not None
    for dict_type in (collections.OrderedDict, collections.defaultdict, collections.Counter):
        with pytest.raises(TypeError):
            copy_json({"a": 1}, dict_type, list)
    with pytest.raises(TypeError):
        copy_json({"a": 1}, dict, collections.UserList)
    assert copy_json({"a": [1]}, FrozenDict, FrozenList) == ({"a": [1]}, True)


@needs_c
def test_empty_tuples_are_not_containers_met_twice() -> None:
    value = {"a": (), "b": [(), ()]}
    assert _c(value) == ({"a": [], "b": [[], []]}, True)


@needs_c
@pytest.mark.skipif(sys.version_info >= (3, 12), reason="PyUnicode_FromUnicode is gone in 3.12")
def test_a_string_not_yet_ready_is_left_to_the_python_walk() -> None:
    import ctypes

    api = ctypes.pythonapi
    api.PyUnicode_FromUnicode.restype = ctypes.py_object
    api.PyUnicode_FromUnicode.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t]
    api.PyUnicode_AsUnicode.restype = ctypes.POINTER(ctypes.c_uint32)
    api.PyUnicode_AsUnicode.argtypes = [ctypes.py_object]

    def legacy(codes: list[int]) -> str:
        text = api.PyUnicode_FromUnicode(None, len(codes))
        units = api.PyUnicode_AsUnicode(text)
        for index, code in enumerate(codes):
            units[index] = code
        return cast("str", text)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert _c([legacy([0x61, 0xD800])]) is None  # (a key is made ready by its hash)
        snapshot, utf8 = materialize_arguments({"k": [legacy([0x61, 0xD800])]})
    assert utf8 is False
    assert snapshot == {"k": ["a\ud800"]}
