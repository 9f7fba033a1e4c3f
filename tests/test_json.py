"""Lossless, deeply immutable JSON snapshots: materialize, FrozenList, FrozenDict."""

from __future__ import annotations

import collections
import copy
import enum
import json
import math
import pickle
import sys
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolseam import _json
from toolseam._json import FrozenDict, FrozenList, MaterializationError, materialize

DEEP = 100_000
# Deeper than any recursion limit CPython would run at, so only an iterative walk passes, but
# cheaper than DEEP for the tests that only need to show there is no recursion.
BEYOND_RECURSION = 20 * sys.getrecursionlimit()


def detail_of(value: object) -> str:
    with pytest.raises(MaterializationError) as caught:
        materialize(value)
    return str(caught.value)


def deep_list(depth: int, leaf: object = None) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(depth - 1):
        child: list[Any] = []
        node.append(child)
        node = child
    if leaf is not None:
        node.append(leaf)
    return root


def deep_dict(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth - 1):
        child: dict[str, Any] = {}
        node["k"] = child
        node = child
    return root


def containers(value: object) -> Iterator[object]:
    """Every distinct container in ``value``, found iteratively (it can be very deep)."""
    stack = [value]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            yield node
            stack.extend(node)


def assert_deeply_frozen(snapshot: object) -> None:
    for node in containers(snapshot):
        assert type(node) in (FrozenList, FrozenDict), type(node)


def assert_deeply_plain(value: object) -> None:
    for node in containers(value):
        assert type(node) in (list, dict), type(node)


# --- accepted leaves ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "leaf", [None, True, False, 0, -7, 2**64, 1.5, 0.0, -2.5, 1e308, 5e-324, "", "text"]
)
def test_json_leaves_are_returned_as_is(leaf: object) -> None:
    assert materialize(leaf) is leaf


def test_bool_stays_bool_and_int_stays_int() -> None:
    snapshot = materialize([True, 1, False, 0])
    assert [type(item) for item in snapshot] == [bool, int, bool, int]  # type: ignore[union-attr]


def test_int_at_the_digit_limit_is_accepted() -> None:
    limit = sys.get_int_max_str_digits()
    at_limit = 10**limit - 1  # exactly `limit` digits
    snapshot = materialize({"n": at_limit, "m": -at_limit})
    assert snapshot == {"n": at_limit, "m": -at_limit}
    assert json.dumps(snapshot) == json.dumps({"n": at_limit, "m": -at_limit})


def test_huge_int_over_the_digit_limit_is_rejected_with_its_path() -> None:
    limit = sys.get_int_max_str_digits()
    assert detail_of({"a": [1, 10**limit]}) == (
        f"$.a[1]: int with more than {limit} digits is not JSON"
    )
    assert detail_of(-(10**limit)) == f"$: int with more than {limit} digits is not JSON"


def test_digit_limit_is_read_at_call_time() -> None:
    previous = sys.get_int_max_str_digits()
    try:
        sys.set_int_max_str_digits(640)
        assert detail_of([10**700]) == "$[0]: int with more than 640 digits is not JSON"
        sys.set_int_max_str_digits(0)  # no limit
        assert materialize([10**5000]) == [10**5000]
    finally:
        sys.set_int_max_str_digits(previous)


# --- rejected values, each with the path of the first offender ----------------------------


def test_nan_is_rejected_with_its_path() -> None:
    value = {"items": [{"price": 1.0}, {"price": 2}, {"price": math.nan}]}
    assert detail_of(value) == "$.items[2].price: float nan is not JSON"


@pytest.mark.parametrize(
    ("leaf", "problem"),
    [
        (math.inf, "float inf is not JSON"),
        (-math.inf, "float -inf is not JSON"),
        (-0.0, "-0.0 is not losslessly JSON"),
    ],
)
def test_non_finite_floats_and_negative_zero_are_rejected(leaf: float, problem: str) -> None:
    assert detail_of({"n": leaf}) == f"$.n: {problem}"
    assert detail_of([leaf]) == f"$[0]: {problem}"
    assert detail_of(leaf) == f"$: {problem}"


def test_positive_zero_is_accepted() -> None:
    assert materialize({"n": 0.0}) == {"n": 0.0}


class Color(enum.IntEnum):
    RED = 1


class Mode(enum.StrEnum):
    FAST = "fast"


class Text(str):
    __slots__ = ()


class Real(float):
    __slots__ = ()


class Mapping(dict[str, int]):
    pass


class Items(list[int]):
    pass


class Point(NamedTuple):
    x: int
    y: int


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (b"x", "bytes is not JSON"),
        (bytearray(b"x"), "bytearray is not JSON"),
        ({1, 2}, "set is not JSON"),
        (frozenset({1}), "frozenset is not JSON"),
        (object(), "object is not JSON"),
        (1j, "complex is not JSON"),
        (Color.RED, "Color is not JSON (a subclass of int)"),
        (Mode.FAST, "Mode is not JSON (a subclass of str)"),
        (Text("x"), "Text is not JSON (a subclass of str)"),
        (Real(1.0), "Real is not JSON (a subclass of float)"),
        (Mapping(a=1), "Mapping is not JSON (a subclass of dict)"),
        (collections.OrderedDict(a=1), "OrderedDict is not JSON (a subclass of dict)"),
        (collections.defaultdict(int), "defaultdict is not JSON (a subclass of dict)"),
        (Items([1]), "Items is not JSON (a subclass of list)"),
        (Point(1, 2), "Point is not JSON (a subclass of tuple)"),
    ],
)
def test_non_json_kinds_are_rejected_by_type_name(value: object, problem: str) -> None:
    assert detail_of({"v": value}) == f"$.v: {problem}"
    assert detail_of([0, value]) == f"$[1]: {problem}"
    assert detail_of(value) == f"$: {problem}"


def test_int_key_is_rejected_naming_the_key() -> None:
    assert detail_of({"a": {1: "x"}}) == "$.a: dict key 1 (int) is not a string"
    assert detail_of({1: "x"}) == "$: dict key 1 (int) is not a string"


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        (None, "dict key None (NoneType) is not a string"),
        (True, "dict key True (bool) is not a string"),
        (1.5, "dict key 1.5 (float) is not a string"),
        ((1, 2), "dict key of type tuple is not a string"),
        (b"k", "dict key of type bytes is not a string"),
        (Text("k"), "dict key of type Text is not a plain str"),
        (Mode.FAST, "dict key of type Mode is not a plain str"),
        (2**100, "dict key of type int is not a string"),
    ],
)
def test_non_str_keys_are_rejected(key: object, problem: str) -> None:
    assert detail_of({"a": [{key: 1}]}) == f"$.a[0]: {problem}"


def test_cycle_through_a_dict_is_rejected() -> None:
    value: dict[str, Any] = {"a": 1}
    value["x"] = value
    assert detail_of(value) == "$.x: cycle detected"


def test_cycle_through_a_list_is_rejected() -> None:
    value: list[Any] = [1, []]
    value[1].append(value)
    assert detail_of(value) == "$[1][0]: cycle detected"


def test_cycle_through_a_tuple_is_rejected() -> None:
    inner: list[Any] = []
    value = {"t": (1, inner)}
    inner.append(value)
    assert detail_of(value) == "$.t[1][0]: cycle detected"


def test_first_offender_in_document_order_is_reported() -> None:
    value = {"a": [1, {"b": [2, math.nan]}], "c": math.inf}
    assert detail_of(value) == "$.a[1].b[1]: float nan is not JSON"


def test_paths_quote_keys_that_are_not_identifiers() -> None:
    assert detail_of({"a b": {'q"': [math.nan]}}) == '$["a b"]["q\\""][0]: float nan is not JSON'
    assert detail_of({"": math.nan}) == '$[""]: float nan is not JSON'


def test_very_deep_paths_are_shortened() -> None:
    detail = detail_of(deep_list(1_000, leaf=math.nan))
    assert detail.startswith("$[0][0]")
    assert detail.endswith("[0]: float nan is not JSON")
    assert "more)" in detail
    assert len(detail) < 200


def test_long_keys_are_shortened_in_paths() -> None:
    detail = detail_of({"k" * 10_000: math.nan})
    assert detail.endswith(": float nan is not JSON")
    assert len(detail) < 100


class Hostile:
    def __repr__(self) -> str:
        raise RuntimeError("repr")

    def __str__(self) -> str:
        raise RuntimeError("str")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __hash__(self) -> int:
        return 1


def test_hostile_object_gives_a_materialization_error() -> None:
    assert detail_of({"x": Hostile()}) == "$.x: Hostile is not JSON"
    assert detail_of(Hostile()) == "$: Hostile is not JSON"


def test_hostile_key_gives_a_materialization_error() -> None:
    assert detail_of({"a": {Hostile(): 1}}) == "$.a: dict key of type Hostile is not a string"


class _NamelessMeta(type):
    @property
    def __name__(cls) -> str:  # type: ignore[override]
        raise RuntimeError("no name")


class Nameless(metaclass=_NamelessMeta):
    pass


def test_type_whose_name_raises_gives_a_materialization_error() -> None:
    assert detail_of([Nameless()]) == "$[0]: <unnamed type> is not JSON"


def test_error_detail_is_its_str_and_its_detail() -> None:
    with pytest.raises(MaterializationError) as caught:
        materialize({"s": {1}})
    assert caught.value.detail == str(caught.value) == "$.s: set is not JSON"


# --- exceptions raised while reading the value --------------------------------------------


def _raising_fill(
    real: Callable[[Any, Any], None], poisoned: object, error: Exception
) -> Callable[[Any, Any], None]:
    def fill(target: Any, source: Any) -> None:
        if source is poisoned:
            raise error
        real(target, source)

    return fill


def test_error_while_reading_a_nested_dict_becomes_a_materialization_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # With the GIL, copying an exact dict runs no Python code, so a concurrent change cannot
    # be provoked deterministically; stand in for one at the copy step.
    poisoned: dict[str, int] = {"b": 1}
    error = RuntimeError("dictionary changed size during iteration")
    monkeypatch.setattr(_json, "_copy_json", None)  # the C pass runs no Python code
    monkeypatch.setattr(_json, "_fill_dict", _raising_fill(dict.update, poisoned, error))
    with pytest.raises(MaterializationError) as caught:
        materialize({"a": [1, poisoned]})
    assert str(caught.value) == "$.a[1]: RuntimeError: dictionary changed size during iteration"
    assert caught.value.__cause__ is error


def test_error_while_reading_the_root_becomes_a_materialization_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    poisoned = [1, 2]
    error = RuntimeError("list changed")
    monkeypatch.setattr(_json, "_copy_json", None)  # the C pass runs no Python code
    monkeypatch.setattr(_json, "_fill_list", _raising_fill(list.extend, poisoned, error))
    with pytest.raises(MaterializationError, match=r"^\$: RuntimeError: list changed$"):
        materialize(poisoned)


def test_reading_error_with_a_hostile_message_still_gives_a_detail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class UnprintableError(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    poisoned: dict[str, int] = {}
    monkeypatch.setattr(_json, "_copy_json", None)  # the C pass runs no Python code
    monkeypatch.setattr(
        _json, "_fill_dict", _raising_fill(dict.update, poisoned, UnprintableError())
    )
    assert detail_of({"a": poisoned}) == ("$.a: UnprintableError: <unprintable UnprintableError>")


# --- containers, sharing, depth -----------------------------------------------------------


def test_containers_become_frozen_all_the_way_down() -> None:
    value = {"a": [1, {"b": (2, [3])}], "c": {"d": {}}, "e": ()}
    snapshot = materialize(value)
    assert type(snapshot) is FrozenDict
    assert_deeply_frozen(snapshot)


def test_snapshot_equals_the_plain_value() -> None:
    value = {"path": "/tmp/x", "limit": 10, "opts": {"tags": ["a", "b"], "ratio": 0.5}}
    assert materialize(value) == value
    assert materialize([1, [2, None]]) == [1, [2, None]]


def test_tuple_becomes_a_frozen_list_equal_to_a_list() -> None:
    snapshot = materialize((1, 2))
    assert type(snapshot) is FrozenList
    assert snapshot == [1, 2]
    assert materialize({"t": (1, (2,))}) == {"t": [1, [2]]}


def test_shared_references_are_accepted() -> None:
    shared = [1, {"a": 2}]
    value = {"x": shared, "y": shared, "z": [shared, shared]}
    snapshot = materialize(value)
    assert snapshot == {"x": shared, "y": shared, "z": [shared, shared]}
    assert_deeply_frozen(snapshot)


def test_exponential_dag_is_materialized_in_linear_time() -> None:
    # 2**60 paths but 61 distinct containers: each shared container is checked once.
    value: list[Any] = [1]
    for _ in range(60):
        value = [value, value]
    snapshot = materialize(value)
    assert_deeply_frozen(snapshot[0][0][0])  # type: ignore[index]


def test_list_nesting_of_depth_100_000_materializes() -> None:
    snapshot = materialize(deep_list(DEEP, leaf="bottom"))
    depth = 0
    node: object = snapshot
    while type(node) is FrozenList:
        depth += 1
        node = node[0]
    assert depth == DEEP
    assert node == "bottom"


def test_dict_nesting_of_depth_100_000_materializes() -> None:
    snapshot = materialize(deep_dict(DEEP))
    depth = 0
    node: object = snapshot
    while type(node) is FrozenDict:
        depth += 1
        node = node.get("k")
    assert depth == DEEP
    assert node is None


def test_failure_far_beyond_the_recursion_limit_is_reported_not_crashed_on() -> None:
    detail = detail_of(deep_list(BEYOND_RECURSION, leaf=math.nan))
    assert detail.endswith("[0]: float nan is not JSON")


def test_caller_object_is_never_mutated() -> None:
    inner = [1, 2]
    value = {"a": inner, "b": (inner, {"c": 3.5}), "d": {"e": [None, "x"]}}
    before = copy.deepcopy(value)
    materialize(value)
    assert value == before
    assert value["a"] is inner
    assert_deeply_plain({key: node for key, node in value.items() if key != "b"})
    assert type(value["b"]) is tuple


def test_caller_object_is_not_mutated_by_a_failure() -> None:
    value = {"a": [1, [2]], "b": [math.nan]}
    before = copy.deepcopy(value)
    with pytest.raises(MaterializationError):
        materialize(value)
    assert type(value["a"]) is list
    assert type(value["a"][1]) is list
    assert repr(value) == repr(before)


def test_existing_snapshot_is_returned_as_is() -> None:
    snapshot = materialize({"a": [1]})
    assert materialize(snapshot) is snapshot
    inner = snapshot["a"]  # type: ignore[index, call-overload]
    assert materialize(inner) is inner


def test_existing_snapshot_nested_in_new_input_is_reused() -> None:
    snapshot = materialize({"a": [1]})
    wrapped = materialize({"outer": snapshot, "list": [snapshot]})
    assert wrapped["outer"] is snapshot  # type: ignore[index, call-overload]
    assert wrapped["list"][0] is snapshot  # type: ignore[index, call-overload]


# --- serialization ------------------------------------------------------------------------

SAMPLE = {
    "s": 'héllo "quoted" \n',
    "i": -12,
    "big": 2**70,
    "f": 0.1,
    "b": [True, False, None],
    "nested": {"t": (1, 2), "empty": {}, "list": []},
}
SAMPLE_AS_JSON = json.loads(json.dumps(SAMPLE))  # the tuple became a list


def test_json_dumps_gives_the_same_text_as_the_plain_value() -> None:
    snapshot = materialize(SAMPLE)
    assert json.dumps(snapshot) == json.dumps(SAMPLE)  # C encoder
    assert json.dumps(snapshot, indent=2) == json.dumps(SAMPLE, indent=2)  # pure Python
    assert json.dumps(snapshot, sort_keys=True) == json.dumps(SAMPLE, sort_keys=True)


def test_json_dumps_works_on_moderately_deep_snapshots() -> None:
    value = {"d": deep_list(200, leaf=1), "m": deep_dict(200)}
    snapshot = materialize(value)
    assert json.dumps(snapshot) == json.dumps(value)
    assert json.dumps(snapshot, indent=1) == json.dumps(value, indent=1)


def test_repr_is_that_of_the_plain_container() -> None:
    assert repr(materialize([1, "a"])) == "[1, 'a']"
    assert repr(materialize({"a": [1]})) == "{'a': [1]}"


# --- immutability -------------------------------------------------------------------------


def _list_mutators() -> list[tuple[str, Callable[[Any], object]]]:
    def iadd(target: Any) -> None:
        target += [1]

    def imul(target: Any) -> None:
        target *= 2

    return [
        ("__setitem__", lambda s: s.__setitem__(0, 9)),
        ("slice assignment", lambda s: s.__setitem__(slice(0, 1), [9])),
        ("__delitem__", lambda s: s.__delitem__(0)),
        ("__iadd__", iadd),
        ("__imul__", imul),
        ("append", lambda s: s.append(1)),
        ("extend", lambda s: s.extend([1])),
        ("insert", lambda s: s.insert(0, 1)),
        ("pop", lambda s: s.pop()),
        ("remove", lambda s: s.remove(1)),
        ("clear", lambda s: s.clear()),
        ("sort", lambda s: s.sort()),
        ("sort with key", lambda s: s.sort(key=str, reverse=True)),
        ("reverse", lambda s: s.reverse()),
        ("__init__", lambda s: s.__init__([7])),
    ]


def _dict_mutators() -> list[tuple[str, Callable[[Any], object]]]:
    def ior(target: Any) -> None:
        target |= {"z": 1}

    return [
        ("__setitem__", lambda d: d.__setitem__("a", 9)),
        ("__delitem__", lambda d: d.__delitem__("a")),
        ("__ior__", ior),
        ("update", lambda d: d.update({"z": 1})),
        ("update with keywords", lambda d: d.update(z=1)),
        ("pop", lambda d: d.pop("a")),
        ("pop with default", lambda d: d.pop("missing", None)),
        ("popitem", lambda d: d.popitem()),
        ("clear", lambda d: d.clear()),
        ("setdefault", lambda d: d.setdefault("z", 1)),
        ("__init__", lambda d: d.__init__(z=1)),
    ]


@pytest.mark.parametrize(("name", "mutate"), _list_mutators(), ids=lambda p: str(p))
def test_every_list_mutator_raises(name: str, mutate: Callable[[Any], object]) -> None:
    snapshot = materialize([3, 1, 2])
    expected = r"^FrozenList is immutable$" if name != "__init__" else "no public constructor"
    with pytest.raises(TypeError, match=expected):
        mutate(snapshot)
    assert snapshot == [3, 1, 2]


@pytest.mark.parametrize(("name", "mutate"), _dict_mutators(), ids=lambda p: str(p))
def test_every_dict_mutator_raises(name: str, mutate: Callable[[Any], object]) -> None:
    snapshot = materialize({"a": 1, "b": [2]})
    expected = r"^FrozenDict is immutable$" if name != "__init__" else "no public constructor"
    with pytest.raises(TypeError, match=expected):
        mutate(snapshot)
    assert snapshot == {"a": 1, "b": [2]}


def test_reading_methods_keep_working() -> None:
    items = materialize([3, 1, 2, 1])
    assert isinstance(items, FrozenList)
    assert (len(items), items[0], items[-1], items.index(2), items.count(1)) == (4, 3, 1, 2, 2)
    assert 3 in items
    assert list(reversed(items)) == [1, 2, 1, 3]
    assert sorted(items, key=repr) == [1, 1, 2, 3]
    mapping = materialize({"a": 1, "b": [2]})
    assert isinstance(mapping, FrozenDict)
    assert (mapping["a"], mapping.get("z"), len(mapping)) == (1, None, 2)
    assert list(mapping.keys()) == ["a", "b"]
    assert list(mapping.items()) == [("a", 1), ("b", [2])]
    assert "a" in mapping


def test_new_containers_built_from_a_snapshot_are_plain() -> None:
    items = materialize([1, [2]])
    assert isinstance(items, FrozenList)
    for derived in (items[:], items + [3], items * 2, items.copy()):  # noqa: RUF005
        assert type(derived) is list
    mapping = materialize({"a": 1})
    assert isinstance(mapping, FrozenDict)
    for derived_dict in (mapping | {"b": 2}, {"b": 2} | mapping, mapping.copy(), {**mapping}):
        assert type(derived_dict) is dict


def test_snapshots_are_unhashable_like_lists_and_dicts() -> None:
    with pytest.raises(TypeError, match="unhashable"):
        hash(materialize([1]))
    with pytest.raises(TypeError, match="unhashable"):
        hash(materialize({"a": 1}))


# --- no public constructor ----------------------------------------------------------------

LIST_CONSTRUCTOR = r"^toolseam\.FrozenList has no public constructor; use materialize\(\)$"
DICT_CONSTRUCTOR = r"^toolseam\.FrozenDict has no public constructor; use materialize\(\)$"


def test_frozen_list_has_no_public_constructor() -> None:
    with pytest.raises(TypeError, match=LIST_CONSTRUCTOR):
        FrozenList([1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=LIST_CONSTRUCTOR):
        FrozenList()  # type: ignore[call-arg]


def test_frozen_dict_has_no_public_constructor() -> None:
    with pytest.raises(TypeError, match=DICT_CONSTRUCTOR):
        FrozenDict(a=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=DICT_CONSTRUCTOR):
        FrozenDict({"a": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=DICT_CONSTRUCTOR):
        FrozenDict.fromkeys(["a"])


# --- copy and pickle ----------------------------------------------------------------------


def test_copy_gives_a_plain_shallow_copy() -> None:
    items = materialize([1, [2]])
    items_copy = copy.copy(items)
    assert type(items_copy) is list
    assert items_copy == [1, [2]]
    assert items_copy[1] is items[1]  # type: ignore[index]
    mapping = materialize({"a": [1]})
    mapping_copy = copy.copy(mapping)
    assert type(mapping_copy) is dict
    assert mapping_copy == {"a": [1]}


def test_deepcopy_gives_plain_mutable_containers_all_the_way_down() -> None:
    snapshot = materialize(SAMPLE)
    thawed = copy.deepcopy(snapshot)
    assert thawed == SAMPLE_AS_JSON
    assert_deeply_plain(thawed)
    thawed["nested"]["list"].append(1)  # type: ignore[index, call-overload, union-attr]
    assert snapshot == SAMPLE_AS_JSON


def test_deepcopy_preserves_sharing_like_any_deep_copy() -> None:
    inner = materialize([1])
    snapshot = materialize({"a": inner, "b": [inner]})
    thawed = copy.deepcopy(snapshot)
    assert thawed["a"] is thawed["b"][0]  # type: ignore[index, call-overload]
    assert type(thawed["a"]) is list  # type: ignore[index, call-overload]


def test_deepcopy_of_a_snapshot_inside_another_object() -> None:
    snapshot = materialize({"a": [1]})
    holder = {"snap": snapshot, "again": snapshot}
    holder_copy = copy.deepcopy(holder)
    assert holder_copy == holder
    assert holder_copy["snap"] is holder_copy["again"]
    assert type(holder_copy["snap"]) is dict


def test_deepcopy_far_beyond_the_recursion_limit_does_not_recurse() -> None:
    thawed = copy.deepcopy(materialize(deep_list(BEYOND_RECURSION)))
    depth = 0
    node: object = thawed
    while type(node) is list:
        depth += 1
        node = node[0] if node else None
    assert depth == BEYOND_RECURSION


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_round_trip_gives_plain_equal_containers(protocol: int) -> None:
    snapshot = materialize(SAMPLE)
    restored = pickle.loads(pickle.dumps(snapshot, protocol=protocol))
    assert restored == SAMPLE_AS_JSON
    assert_deeply_plain(restored)


# --- properties ---------------------------------------------------------------------------

_finite_floats = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda f: not (f == 0.0 and math.copysign(1.0, f) < 0)
)
_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**3000), max_value=2**3000)
    | _finite_floats
    | st.text()
)
_json_values = st.recursive(
    _leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)
_bad_leaves = st.just(5000).map(lambda digits: 10**digits) | st.sampled_from(
    [
        math.nan,
        math.inf,
        -math.inf,
        -0.0,
        b"bytes",
        bytearray(b"x"),
        {1},
        frozenset(),
        object(),
        1j,
        Color.RED,
        Text("x"),
        {1: "int key"},
        collections.OrderedDict(),
    ]
)
_bad_values = st.recursive(
    _bad_leaves,
    lambda inner: (
        st.tuples(
            st.lists(_json_values, max_size=2), inner, st.lists(_json_values, max_size=2)
        ).map(lambda parts: [*parts[0], parts[1], *parts[2]])
        | st.tuples(st.dictionaries(st.text(), _json_values, max_size=2), st.text(), inner).map(
            lambda parts: {**parts[0], parts[1]: parts[2]}
        )
    ),
    max_leaves=6,
)


@settings(database=None, max_examples=80)
@given(_json_values)
def test_materialize_equals_a_json_round_trip(value: object) -> None:
    snapshot = materialize(value)
    assert snapshot == json.loads(json.dumps(value))
    assert json.dumps(snapshot) == json.dumps(value)
    assert_deeply_frozen(snapshot)


@settings(database=None, max_examples=40)
@given(_bad_values)
def test_any_non_json_leaf_anywhere_is_rejected(value: object) -> None:
    with pytest.raises(MaterializationError, match=r"^\$"):
        materialize(value)
