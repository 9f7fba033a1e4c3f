"""Materialization fuzz through ``execute()``: a frozen lossless snapshot, or the failure.

Values mix JSON leaves with non-JSON ones (NaN, infinities, -0.0, bytes, sets, objects,
huge ints, subclasses), tuples, unicode keys, non-str keys and shared references. The
oracle is written independently of the materializer: ``_is_json`` decides by the rules of
contract §5.2, and accepted values must equal ``json.loads(json.dumps(value))``.
"""

from __future__ import annotations

import enum
import json
import math
import sys
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import Published, make_input
from toolseam import (
    AbortController,
    Next,
    PreDecision,
    ToolExecution,
    ToolExecutionInput,
    ToolFailure,
    ToolRegistry,
    ToolRunContext,
    define_tool,
)

ARGS_MESSAGE = "tool execution arguments must be losslessly JSON-serializable"
DIGIT_LIMIT = sys.get_int_max_str_digits() or 10**9


class Color(enum.IntEnum):
    RED = 1


class Text(str):
    pass


json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**200, max_value=10**300),
    st.floats(allow_nan=False, allow_infinity=False).filter(
        lambda f: not (f == 0.0 and math.copysign(1.0, f) < 0)
    ),
    st.text(),
)
bad_leaves = st.one_of(
    st.just(math.nan),
    st.just(math.inf),
    st.just(-math.inf),
    st.just(-0.0),
    st.binary(max_size=4),
    st.frozensets(st.integers(), max_size=2),
    st.sets(st.integers(), max_size=2),
    st.builds(object),
    st.just(Color.RED),
    st.builds(Text, st.text(max_size=3)),
    st.just(DIGIT_LIMIT + 1).map(lambda digits: 10**digits),  # too long for json.dumps
)
keys = st.one_of(st.text(), st.text(alphabet="äöü漢字🙂", max_size=4))


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(keys, children, max_size=4),
        st.dictionaries(st.integers(), children, min_size=1, max_size=2),  # non-str keys
    )


values = st.recursive(st.one_of(json_leaves, bad_leaves), _containers, max_leaves=25)


def _is_json(value: object) -> bool:
    """Contract §5.2, written out plainly (values here are shallow: recursion is fine)."""
    kind = type(value)
    if value is None or kind in (bool, str):
        return True
    if kind is int:
        try:  # json.dumps writes ints with repr(), which CPython caps at DIGIT_LIMIT digits
            repr(value)
        except ValueError:
            return False
        return True
    if kind is float:
        return math.isfinite(value) and not (  # type: ignore[arg-type]
            value == 0.0 and math.copysign(1.0, value) < 0  # type: ignore[arg-type]
        )
    if kind in (list, tuple):
        return all(_is_json(item) for item in value)  # type: ignore[attr-defined]
    if kind is dict:
        return all(type(k) is str and _is_json(v) for k, v in value.items())  # type: ignore[attr-defined]
    return False


def _registry() -> tuple[ToolRegistry, list[object], Published]:
    registry = ToolRegistry()
    seen: list[object] = []

    @define_tool(name="echo", description="")
    async def echo(args: Any, exec: ToolRunContext) -> str:
        return "ok"

    async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        seen.append(exec.arguments)
        return await next()

    registry.register(echo)
    registry.on_pre_execute(pre)
    published = Published()
    registry.on_result(published)
    return registry, seen, published


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(value=values)
async def test_arguments_are_a_lossless_snapshot_or_the_materialization_failure(
    value: object,
) -> None:
    registry, seen, published = _registry()
    call = ToolExecutionInput(
        call_id="c", name="echo", arguments=value, signal=AbortController().signal
    )
    result = await registry.execute(call)  # never raises
    assert published.only is result
    if _is_json(value):
        [snapshot] = seen
        expected = json.loads(json.dumps(value))
        assert snapshot == expected
        assert json.dumps(snapshot) == json.dumps(expected)
        assert not result.is_error
    else:
        assert seen == []
        assert isinstance(result, ToolFailure)
        assert result.error.message.startswith(f"{ARGS_MESSAGE} ($")


def _nest(depth: int, leaf: object, *, as_dict: bool) -> object:
    value: object = leaf
    for _ in range(depth):
        value = {"k": value} if as_dict else [value]
    return value


@settings(max_examples=6, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(as_dict=st.booleans(), bad=st.booleans())
async def test_depth_50k_is_accepted_or_rejected_without_recursion_error(
    as_dict: bool, bad: bool
) -> None:
    registry, seen, published = _registry()
    value = _nest(50_000, math.nan if bad else "leaf", as_dict=as_dict)
    result = await registry.execute(
        make_input(arguments={"v": value}, signal=AbortController().signal)
    )
    assert published.only is result
    if bad:
        assert isinstance(result, ToolFailure)
        assert result.error.message.startswith(f"{ARGS_MESSAGE} ($")
    else:
        [snapshot] = seen
        node: Any = snapshot["v"]  # type: ignore[index]
        depth = 0
        while isinstance(node, (dict, list)):
            node = node["k"] if as_dict else node[0]
            depth += 1
        assert (depth, node) == (50_000, "leaf")


async def test_cycles_and_shared_references() -> None:
    registry, seen, _ = _registry()
    shared = {"a": [1, 2]}
    result = await registry.execute(make_input(arguments={"x": shared, "y": shared}))
    assert not result.is_error
    assert seen == [{"x": {"a": [1, 2]}, "y": {"a": [1, 2]}}]
    cyclic: list[object] = [1]
    cyclic.append({"back": cyclic})
    result = await registry.execute(make_input(arguments={"c": cyclic}))
    assert isinstance(result, ToolFailure)
    assert result.error.message.startswith(f"{ARGS_MESSAGE} ($")
