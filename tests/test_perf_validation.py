"""Python-mode argument validation is exactly JSON-mode validation, where it is used.

``define_tool`` validates the frozen arguments in JSON mode by reference: the body gets what
validating their JSON text gives. For argument types made only of JSON leaf types, lists,
dicts, unions, literals, TypedDicts, dataclasses and models of those (no ``Any``, no custom
validator, nothing strict, no extra fields kept), it validates the snapshot in Python mode
instead, and falls back to JSON mode whenever Python mode fails (JSON mode then reports the
error, word for word). So the claim to check is: whenever Python mode succeeds, JSON mode
succeeds with an equal value, of the same types all the way down, and no frozen container
reaches the body. Checked here on generated arguments, most of them close to the schema.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, NotRequired

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typing_extensions import TypedDict

from toolseam import FrozenDict, FrozenList, ToolArgsError, ToolRunContext, define_tool
from toolseam._define import DefinedTool
from toolseam._json import MaterializationError, materialize_arguments


class Inner(TypedDict):
    id: int
    label: str | None


class Flat(TypedDict):
    text: str
    count: int
    ratio: float
    flag: bool
    kind: Literal["a", "b", 1, None]
    maybe: NotRequired[int | None]


class Nested(TypedDict):
    items: list[Inner]
    scores: dict[str, float]
    pair: tuple[int, str]
    either: int | str | list[int]


@dataclasses.dataclass
class Point:
    x: int
    y: float = 0.0
    tags: list[str] = dataclasses.field(default_factory=list[str])


class Model(pydantic.BaseModel):
    name: str
    inner: Inner
    values: list[int] = []
    note: str | None = None


class Tree(pydantic.BaseModel):
    value: int
    children: list[Tree] = []


def tool(args_type: Any) -> DefinedTool[Any, Any]:
    async def body(args: Any, exec: ToolRunContext) -> None:
        return None

    body.__annotations__ = {"args": args_type, "exec": ToolRunContext, "return": None}
    definition = define_tool(name="t", description="d")(body)
    assert type(definition) is DefinedTool
    return definition


SWITCHED = [Flat, Nested, Point, Model, Tree]


@pytest.mark.parametrize("args_type", SWITCHED)
def test_these_argument_types_validate_in_python_mode(args_type: Any) -> None:
    assert tool(args_type)._python_mode is True


class WithAny(TypedDict):
    value: Any


class Validated(pydantic.BaseModel):
    name: str

    @pydantic.field_validator("name", mode="before")
    @classmethod
    def strip(cls, value: object) -> object:
        return value


class Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(strict=True)
    name: str


class Extra(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    name: str


class Bytes(TypedDict):
    data: bytes


class Untyped(TypedDict):
    items: list  # type: ignore[type-arg]


@pytest.mark.parametrize("args_type", [WithAny, Validated, Strict, Extra, Bytes, Untyped])
def test_these_keep_json_mode(args_type: Any) -> None:
    assert tool(args_type)._python_mode is False


# -- the property --------------------------------------------------------------------------

text = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["a", "b", "1", "2.5", "true", "null", "é", "\ud800"]),
)
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f or str(f) == "0.0"),
        text,
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(text, children, max_size=3)
    ),
    max_leaves=8,
)


def near(right: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a value of the right shape, sometimes any JSON value."""
    return st.integers(0, 9).flatmap(lambda pick: right if pick else json_values)


inner = st.fixed_dictionaries(
    {"id": near(st.integers()), "label": near(st.one_of(st.none(), text))},
    optional={"extra": json_values},
)
flat = st.fixed_dictionaries(
    {
        "text": near(text),
        "count": near(st.one_of(st.integers(), st.sampled_from([2.0, 2.5, -0.5, "3", "x"]))),
        "ratio": near(st.one_of(st.floats(-1e6, 1e6), st.integers(), st.just("1.5"))),
        "flag": near(st.one_of(st.booleans(), st.sampled_from([0, 1, 2, 1.0, "yes", "off"]))),
        "kind": near(st.sampled_from(["a", "b", 1, None, True, 1.0, "1"])),
    },
    optional={"maybe": near(st.one_of(st.none(), st.integers())), "other": json_values},
)
nested = st.fixed_dictionaries(
    {
        "items": near(st.lists(near(inner), max_size=3)),
        "scores": near(st.dictionaries(text, near(st.floats(-10, 10)), max_size=3)),
        "pair": near(st.tuples(near(st.integers()), near(text)).map(list)),
        "either": near(st.one_of(st.integers(), text, st.lists(st.integers(), max_size=3))),
    }
)
point = st.fixed_dictionaries(
    {"x": near(st.integers())},
    optional={"y": near(st.floats(-5, 5)), "tags": near(st.lists(text, max_size=3))},
)
model = st.fixed_dictionaries(
    {"name": near(text), "inner": near(inner)},
    optional={"values": near(st.lists(st.integers(), max_size=3)), "note": near(text)},
)
tree = st.recursive(
    st.fixed_dictionaries({"value": near(st.integers())}),
    lambda children: st.fixed_dictionaries(
        {"value": near(st.integers()), "children": near(st.lists(children, max_size=3))}
    ),
    max_leaves=6,
)
CASES = {Flat: flat, Nested: nested, Point: point, Model: model, Tree: tree}


def shape(value: object) -> object:
    """The value with every type made visible (``1 == 1.0 == True`` hides differences)."""
    if isinstance(value, FrozenDict | FrozenList):
        raise AssertionError(f"a frozen container reached the body: {value!r}")
    if isinstance(value, dict):
        return ("dict", {key: shape(item) for key, item in value.items()})  # type: ignore[misc]
    if isinstance(value, list | tuple):
        return (type(value).__name__, [shape(item) for item in value])  # type: ignore[misc]
    if isinstance(value, pydantic.BaseModel):
        return (type(value).__name__, shape(dict(value)))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, shape(vars(value)))
    return (type(value).__name__, value)


def outcome(definition: DefinedTool[Any, Any], arguments: object) -> object:
    try:
        snapshot = materialize_arguments(arguments)[0]
    except MaterializationError:
        return ("not JSON",)  # -0.0, say: the call would end before validation
    try:
        return shape(definition.parse_arguments(snapshot))
    except ToolArgsError as error:
        return ("error", str(error))


@pytest.mark.parametrize("args_type", SWITCHED, ids=lambda t: t.__name__)
@given(data=st.data())
def test_python_mode_outcome_is_the_json_mode_outcome(args_type: Any, data: st.DataObject) -> None:
    python_mode = tool(args_type)
    json_mode = tool(args_type)
    json_mode._python_mode = False
    arguments = data.draw(st.one_of(CASES[args_type], CASES[args_type], json_values))
    assert outcome(python_mode, arguments) == outcome(json_mode, arguments)


def test_the_body_gets_fresh_plain_containers() -> None:
    definition = tool(Nested)
    snapshot = materialize_arguments(
        {"items": [{"id": 1, "label": None}], "scores": {"a": 1}, "pair": [1, "x"], "either": [2]}
    )[0]
    args = definition.parse_arguments(snapshot)
    assert type(args["items"]) is list
    assert type(args["items"][0]) is dict
    assert type(args["scores"]) is dict
    assert args["scores"] == {"a": 1.0}
    assert type(args["scores"]["a"]) is float
    assert args["pair"] == (1, "x")
    assert type(args["either"]) is list
    assert args["items"] is not snapshot["items"]  # type: ignore[index, call-overload]


def test_a_lone_surrogate_is_reported_as_before() -> None:
    definition = tool(Flat)
    arguments = {"text": "a\ud800", "count": 1, "ratio": 1.0, "flag": True, "kind": "a"}
    with pytest.raises(ToolArgsError, match="Invalid JSON"):
        definition.parse_arguments(materialize_arguments(arguments)[0])
    assert materialize_arguments(arguments)[1] is False
