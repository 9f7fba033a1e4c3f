"""The fast snapshot path builds exactly what the full walk builds (contract §5.2).

`materialize` takes a recursive fast path for valid, shallow, acyclic values and leaves
everything else (a problem, depth beyond its limit, a cycle) to the full walk. These tests
check, on generated values, that both give the same snapshot (equal, with the same frozen
container types at every position) or the same error, and that the text flag of
`materialize_arguments` says exactly whether every string is UTF-8.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support import WALKS, walk
from toolseam import FrozenDict, FrozenList
from toolseam._json import (
    _FAST_DEPTH,
    MaterializationError,
    _materialize_fully,
    materialize,
    materialize_arguments,
    text_is_utf8,
)

# Text with lone surrogates now and then: the one thing UTF-8 cannot encode.
text = st.one_of(
    st.text(max_size=8),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=2),
    st.sampled_from(["é", "ü", "日本", "\U0001f600", "plain"]),
)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    text,
)
# Mostly JSON, with the odd non-JSON leaf or key (bytes, a set, an int key).
odd_leaves = st.one_of(leaves, st.just(b"x"), st.just(frozenset()), st.just(math.nan))
values = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(text, children, max_size=4),
    ),
    max_leaves=30,
)
odd_values = st.recursive(
    odd_leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(text, st.integers(0, 3)), children, max_size=4),
    ),
    max_leaves=20,
)

# Lists of objects only: the shape `_fast_objects` takes on its own (flat objects, objects
# holding containers, odd keys and leaves, the same object twice).
object_lists = st.lists(
    st.dictionaries(st.one_of(text, st.integers(0, 3)), st.one_of(odd_leaves, values), max_size=4),
    min_size=2,
    max_size=6,
).flatmap(lambda items: st.sampled_from([items, [*items, items[0]], tuple(items)]))


def shape(value: object) -> object:
    """The value with the exact type of every container made visible."""
    if type(value) in (FrozenDict, dict):
        return (type(value).__name__, {key: shape(item) for key, item in value.items()})  # type: ignore[attr-defined]
    if type(value) in (FrozenList, list, tuple):
        return (type(value).__name__, [shape(item) for item in value])  # type: ignore[attr-defined]
    return (type(value).__name__, value)


def outcome(build: Any, value: object) -> object:
    try:
        return shape(build(value))
    except MaterializationError as error:
        return ("error", str(error))


def each_walk(build: Any, value: object) -> list[object]:
    """`outcome` under each of `support.WALKS`."""
    found = []
    for name in WALKS:
        with walk(name):
            found.append(outcome(build, value))
    return found


def full(value: object) -> object:
    if type(value) in (dict, list, tuple):
        return _materialize_fully(value)
    return materialize(value)


def all_utf8(value: object) -> bool:
    if type(value) is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if type(value) is dict:
        return all(all_utf8(k) and all_utf8(v) for k, v in value.items())
    if type(value) in (list, tuple):
        return all(all_utf8(item) for item in value)  # type: ignore[attr-defined]
    return True


@given(values)
def test_fast_path_builds_what_the_full_walk_builds(value: object) -> None:
    assert each_walk(materialize, value) == [outcome(full, value)] * len(WALKS)


@given(odd_values)
def test_fast_path_reports_what_the_full_walk_reports(value: object) -> None:
    assert each_walk(materialize, value) == [outcome(full, value)] * len(WALKS)


@given(object_lists)
def test_lists_of_objects_build_or_report_what_the_full_walk_does(value: object) -> None:
    expected = outcome(full, {"items": value})
    assert each_walk(materialize, {"items": value}) == [expected] * len(WALKS)


@given(object_lists)
def test_lists_of_objects_set_the_text_flag_exactly(value: object) -> None:
    for name in WALKS:
        try:
            with walk(name):
                snapshot, utf8 = materialize_arguments({"items": value})
        except MaterializationError:
            return
        assert utf8 is all_utf8(value)
        assert text_is_utf8(snapshot) is utf8


class _Key(str):
    pass


@pytest.mark.parametrize(
    "odd",
    [
        {"n": 10**5000},
        {"n": math.nan},
        {"n": math.inf},
        {"n": -0.0},
        {"n": True, 3: "int key"},
        {_Key("n"): 1},
        {"n": _Key("str subclass")},
        {"n": b"bytes"},
        {"n": [1, {"deep": math.nan}]},
    ],
)
def test_an_odd_object_in_a_list_of_objects_is_reported_as_the_full_walk_does(
    odd: dict[object, object],
) -> None:
    items = [{"id": 1, "name": "a", "price": 0.5, "in_stock": True}, odd]
    expected = outcome(full, {"items": items})
    assert each_walk(materialize, {"items": items}) == [expected] * len(WALKS)
    assert expected[0] == "error"  # type: ignore[index]


@pytest.mark.parametrize("name", WALKS)
def test_lone_surrogates_in_a_list_of_objects_clear_the_text_flag(name: str) -> None:
    with walk(name):
        for odd in ({"\ud800": 1}, {"n": "\udfff"}, {"n": "ok \U0001f600 \udbff"}):
            snapshot, utf8 = materialize_arguments({"items": [{"id": 1}, odd]})
            assert utf8 is False
            assert snapshot == {"items": [{"id": 1}, odd]}
        wide = {"items": [{"é": "ü"}, {"日本": None}, {"n": "\U0001f600"}]}
        assert materialize_arguments(wide)[1] is True


@given(values)
def test_text_flag_says_whether_every_string_is_utf8(value: object) -> None:
    for name in WALKS:
        try:
            with walk(name):
                snapshot, utf8 = materialize_arguments(value)
        except MaterializationError:
            return
        assert utf8 is all_utf8(value)
        assert text_is_utf8(snapshot) is utf8


@pytest.mark.parametrize("name", WALKS)
def test_existing_snapshots_inside_a_value_count_for_the_text_flag(name: str) -> None:
    with walk(name):
        _existing_snapshots_count()


def _existing_snapshots_count() -> None:
    inner = materialize({"k": "\ud800"})
    assert materialize_arguments({"a": [inner]}) == ({"a": [inner]}, False)
    assert materialize_arguments({"a": [materialize(["fine"])]})[1] is True


@pytest.mark.parametrize("name", WALKS)
def test_shared_containers_are_frozen_once_and_dags_stay_linear(name: str) -> None:
    shared: list[object] = [1, 2]
    value: object = shared
    for _ in range(200):  # 2**200 paths: only linear work can finish
        value = [value, value]
    with walk(name):
        snapshot = materialize({"v": value})
    assert type(snapshot) is FrozenDict
    top = snapshot["v"]
    assert type(top) is FrozenList
    assert top[0] is top[1]


@pytest.mark.parametrize("depth", [_FAST_DEPTH - 1, _FAST_DEPTH, _FAST_DEPTH + 1, 5000])
@pytest.mark.parametrize("name", WALKS)
def test_depth_beyond_the_fast_path_takes_the_full_walk(depth: int, name: str) -> None:
    value: object = "leaf"
    for _ in range(depth):
        value = {"n": [value]}
    with walk(name):
        snapshot = materialize(value)
    for _ in range(depth):
        assert type(snapshot) is FrozenDict
        inner = snapshot["n"]
        assert type(inner) is FrozenList
        snapshot = inner[0]
    assert snapshot == "leaf"


@pytest.mark.parametrize("name", WALKS)
def test_a_cycle_is_reported_with_its_path(name: str) -> None:
    cyclic: list[object] = []
    cyclic.append({"again": cyclic})
    with walk(name), pytest.raises(MaterializationError, match=r"^\$\[0\]\.again: cycle detected$"):
        materialize(cyclic)
