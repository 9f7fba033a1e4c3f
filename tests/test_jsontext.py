"""`toolseam._jsontext.loads`: JSON text at any depth, read exactly as ``json.loads`` reads it.

The iterative decoder runs only where ``json.loads`` gives up (`RecursionError`); the oracle
for it is ``json.loads`` itself, on every text both can read, valid or not.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolseam._jsontext import _loads_iteratively, loads

_leaves = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
)
_values = st.recursive(
    _leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=30,
)
_layouts = st.sampled_from(
    [{}, {"indent": 2}, {"separators": (",", ":")}, {"indent": "\t", "ensure_ascii": False}]
)


def _same(left: Any, right: Any) -> bool:
    return json.dumps(left) == json.dumps(right)


@given(_values, _layouts)
def test_reads_what_json_loads_reads(value: Any, layout: dict[str, Any]) -> None:
    text = json.dumps(value, **layout)
    assert _same(_loads_iteratively(text), json.loads(text))


@given(_values, st.data())
def test_refuses_what_json_loads_refuses(value: Any, data: st.DataObject) -> None:
    text = json.dumps(value)
    cut = data.draw(st.integers(0, len(text) - 1))
    broken = text[:cut] + text[cut + 1 :]  # one character gone: often no longer JSON
    try:
        expected = json.loads(broken)
    except ValueError:
        with pytest.raises(ValueError):
            _loads_iteratively(broken)
    else:
        assert _same(_loads_iteratively(broken), expected)


@pytest.mark.parametrize(
    "text",
    ['{"a": 1, "a": 2}', "[NaN, Infinity, -Infinity]", '"\\ud800"', " [ ] ", "-0.0", "1e400"],
)
def test_the_corners_of_json_loads(text: str) -> None:
    assert _same(_loads_iteratively(text), json.loads(text))


def test_any_depth() -> None:
    depth = 100_000
    text = '{"x": ' + '[{"a": ' * depth + "1" + "}]" * depth + "}"
    with pytest.raises(RecursionError):
        json.loads(text)
    node = loads(text)["x"]
    levels = 0
    while isinstance(node, list):
        node = node[0]["a"]  # pyright: ignore[reportUnknownVariableType]
        levels += 1
    assert (levels, node) == (depth, 1)
    with pytest.raises(ValueError, match="Extra data"):
        loads(text + "]")
