"""Lossless, deeply immutable JSON snapshots: `materialize`, `FrozenList`, `FrozenDict`.

`materialize` is the only way to build a snapshot. It copies every container of its input
into a `FrozenList` or `FrozenDict` and checks every leaf, so a snapshot can be handed to any
number of stages without one of them changing what the others see, and serializes to the
JSON text its input would have.

Two choices shape the implementation:

* Each container of the input is first copied whole into a fresh frozen container by one C
  call (``list.extend`` or ``dict.update``), and only that private copy is then checked and
  descended into. A container another thread mutates meanwhile is therefore seen in one
  consistent state, and the checks look at exactly what ends up in the snapshot.
* The walk is iterative, with an explicit stack, so depth is bounded only by memory.

Flat containers of plain leaves, the common shape of tool arguments, take a fast path that
never builds the stack.

Where the build has it, a C pass (``toolseam._speedups``, compiled by hatch_build.py) comes
first: it makes the same copies under the same rule (each container copied by one C call,
then read from the copy) for every value of exact JSON types, and gives up on anything
else, which the Python walks then take or report. tests/test_speedups.py pins it to the
full walk; a build without a C compiler runs the Python walks alone.
"""

from __future__ import annotations

import functools
import json
import math
import sys
from collections import deque as _consume
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from itertools import islice as _islice
from itertools import repeat as _repeat
from typing import TYPE_CHECKING, Any, Final, NoReturn, SupportsIndex, cast, final, overload

from typing_extensions import TypeAliasType

from ._errors import safe_str
from ._errors import type_name as _type_name
from ._levels import Copier, LevelFallback, level_walk


def _speedups() -> Callable[[object, type[Any], type[Any]], tuple[Any, bool] | None] | None:
    """toolseam._speedups.copy_json, the C pass, if this build has it.

    hatch_build.py compiles it; a wheel built without a C compiler takes the Python walks
    below instead, which build the same snapshots.
    """
    try:
        from ._speedups import copy_json
    except ImportError:  # pragma: no cover - a pure-Python build
        return None
    return copy_json


_copy_json: Final = _speedups()

__all__ = [
    "FrozenDict",
    "FrozenList",
    "JsonValue",
    "MaterializationError",
    "dumps",
    "materialize",
    "materialize_arguments",
    "text_is_utf8",
]

if TYPE_CHECKING:
    # mypy cannot resolve a self-reference inside a TypeAliasType value unless the whole
    # value is one string (python/mypy#18252); both type checkers accept this form.
    JsonValue = TypeAliasType(
        "JsonValue",
        "bool | int | float | str | Sequence[JsonValue] | Mapping[str, JsonValue] | None",
    )
else:
    # At runtime the value is a real expression, so pydantic and other introspection can
    # resolve it whatever module the alias is re-exported from.
    JsonValue = TypeAliasType(
        "JsonValue",
        bool | int | float | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None,
    )
"""A JSON value: ``None``, ``bool``, ``int``, ``float``, ``str``, or an array or object of them.

`materialize` returns the narrower, checked form: arrays are `FrozenList` and objects are
`FrozenDict`.
"""

_LIST_IMMUTABLE: Final = "FrozenList is immutable"
_DICT_IMMUTABLE: Final = "FrozenDict is immutable"

# CPython refuses to convert an int of more than sys.get_int_max_str_digits() decimal digits
# to text, so json.dumps would fail on it. That limit is never below 640 digits, and an int
# under 2**2000 has at most 603, so only larger ints pay for the exact check.
_ALWAYS_PRINTABLE_BITS: Final = 2000
_PRINTABLE_BOUND: Final = 1 << _ALWAYS_PRINTABLE_BITS
_NEGATIVE_BOUND: Final = -_PRINTABLE_BOUND  # precomputed: negating it allocates

# Path segments and quoted error texts are cut to these lengths so a detail stays short.
_MAX_KEY_CHARS: Final = 40
_MAX_PATH_SEGMENTS: Final = 16
_MAX_ERROR_CHARS: Final = 200

_copysign = math.copysign


class _Sealed:
    """A type with no instances: the constructor signature type checkers see."""

    __slots__ = ()


class MaterializationError(Exception):
    """A value is not a lossless JSON value, so `materialize` cannot snapshot it.

    ``str(error)`` is a short detail that names the JSON path of the first offending value,
    such as ``"$.items[2].price: float nan is not JSON"`` or ``"$.x: cycle detected"``.
    When reading the value itself raised (a dict changed size in another thread, say), that
    exception is chained as ``__cause__`` and its text is part of the detail.

    Args:
        detail: What is wrong, and where.
    """

    detail: str
    """The detail, as given; the same as ``str(error)``."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@final
class FrozenList(list[JsonValue]):
    """An immutable JSON array, built only by `materialize`.

    A real ``list`` subclass, so ``json.dumps``, ``==`` against plain lists, ``repr`` and
    every reading method work as for a list, and it stays unhashable like one. Every method
    that would mutate it raises ``TypeError("FrozenList is immutable")``. Operations that
    build a new container (slicing, ``+``, ``*``, ``copy()``) return a plain ``list``, as
    they do for any list subclass; its items are still frozen.

    ``copy.copy``, ``copy.deepcopy`` and ``pickle`` produce plain, mutable copies:
    ``copy.copy`` a shallow ``list``, ``copy.deepcopy`` a fully thawed tree of plain lists
    and dicts (built without recursion), and pickling a ``list`` of the items. Deep copying
    is thus the way to get an editable version of a snapshot.

    It has no public constructor: calling ``FrozenList(...)`` raises `TypeError`.
    """

    __slots__ = ()

    if TYPE_CHECKING:

        def __init__(self, sealed: _Sealed, /) -> None: ...

    else:

        def __init__(self, *args, **kwargs):
            raise TypeError("toolseam.FrozenList has no public constructor; use materialize()")

    def __setitem__(self, key: SupportsIndex | slice, value: object, /) -> NoReturn:
        raise TypeError(_LIST_IMMUTABLE)

    def __delitem__(self, key: SupportsIndex | slice, /) -> NoReturn:
        raise TypeError(_LIST_IMMUTABLE)

    def __iadd__(self, value: object, /) -> NoReturn:  # type: ignore[misc]  # as typeshed's
        raise TypeError(_LIST_IMMUTABLE)

    def __imul__(self, value: SupportsIndex, /) -> NoReturn:
        raise TypeError(_LIST_IMMUTABLE)

    def append(self, object: object, /) -> NoReturn:
        """Refuse: a `FrozenList` is immutable.

        Raises:
            TypeError: Always.
        """
        raise TypeError(_LIST_IMMUTABLE)

    def extend(self, iterable: object, /) -> NoReturn:
        """Refuse: a `FrozenList` is immutable.

        Raises:
            TypeError: Always.
        """
        raise TypeError(_LIST_IMMUTABLE)

    def insert(self, index: SupportsIndex, object: object, /) -> NoReturn:
        """Refuse: a `FrozenList` is immutable.

        Raises:
            TypeError: Always.
        """
        raise TypeError(_LIST_IMMUTABLE)

    def pop(self, index: SupportsIndex = -1, /) -> NoReturn:
        """Refuse: a `FrozenList` is immutable.

        Raises:
            TypeError: Always.
        """
        raise TypeError(_LIST_IMMUTABLE)

    def remove(self, value: object, /) -> NoReturn:
        """Refuse: a `FrozenList` is immutable.

        Raises:
            TypeError: Always.
        """
        raise TypeError(_LIST_IMMUTABLE)

    def clear(self) -> NoReturn:
        """Refuse: a `FrozenList` is immutable.

        Raises:
            TypeError: Always.
        """
        raise TypeError(_LIST_IMMUTABLE)

    def sort(self, *, key: object = None, reverse: bool = False) -> NoReturn:
        """Refuse: a `FrozenList` is immutable; use ``sorted()`` for a sorted copy.

        Raises:
            TypeError: Always.
        """
        raise TypeError(_LIST_IMMUTABLE)

    def reverse(self) -> NoReturn:
        """Refuse: a `FrozenList` is immutable; use ``reversed()`` to read backwards.

        Raises:
            TypeError: Always.
        """
        raise TypeError(_LIST_IMMUTABLE)

    def __copy__(self) -> list[JsonValue]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, object], /) -> list[JsonValue]:
        return _thaw(self, memo)

    def __reduce__(self) -> tuple[type[list[JsonValue]], tuple[()], None, Iterator[JsonValue]]:
        # The default reduction would rebuild a FrozenList through extend(), which refuses.
        return (list, (), None, iter(self))


@final
class FrozenDict(dict[str, JsonValue]):
    """An immutable JSON object with string keys, built only by `materialize`.

    A real ``dict`` subclass, so ``json.dumps``, ``==`` against plain dicts, ``repr`` and
    every reading method work as for a dict, and it stays unhashable like one. Every method
    that would mutate it raises ``TypeError("FrozenDict is immutable")``. Operations that
    build a new container (``|``, ``copy()``) return a plain ``dict``; its values are still
    frozen.

    ``copy.copy``, ``copy.deepcopy`` and ``pickle`` produce plain, mutable copies:
    ``copy.copy`` a shallow ``dict``, ``copy.deepcopy`` a fully thawed tree of plain dicts
    and lists (built without recursion), and pickling a ``dict`` of the items.

    It has no public constructor: calling ``FrozenDict(...)`` raises `TypeError`.
    """

    __slots__ = ()

    if TYPE_CHECKING:

        def __init__(self, sealed: _Sealed, /) -> None: ...

    else:

        def __init__(self, *args, **kwargs):
            raise TypeError("toolseam.FrozenDict has no public constructor; use materialize()")

    def __setitem__(self, key: str, value: object, /) -> NoReturn:
        raise TypeError(_DICT_IMMUTABLE)

    def __delitem__(self, key: str, /) -> NoReturn:
        raise TypeError(_DICT_IMMUTABLE)

    def __ior__(self, value: object, /) -> NoReturn:  # type: ignore[misc]  # as typeshed's
        raise TypeError(_DICT_IMMUTABLE)

    def update(self, *args: object, **kwargs: object) -> NoReturn:
        """Refuse: a `FrozenDict` is immutable; use ``{**snapshot, ...}`` for a changed copy.

        Raises:
            TypeError: Always.
        """
        raise TypeError(_DICT_IMMUTABLE)

    def pop(self, key: str, /, *default: object) -> NoReturn:
        """Refuse: a `FrozenDict` is immutable.

        Raises:
            TypeError: Always.
        """
        raise TypeError(_DICT_IMMUTABLE)

    def popitem(self) -> NoReturn:
        """Refuse: a `FrozenDict` is immutable.

        Raises:
            TypeError: Always.
        """
        raise TypeError(_DICT_IMMUTABLE)

    def clear(self) -> NoReturn:
        """Refuse: a `FrozenDict` is immutable.

        Raises:
            TypeError: Always.
        """
        raise TypeError(_DICT_IMMUTABLE)

    def setdefault(self, key: str, default: object = None, /) -> NoReturn:
        """Refuse: a `FrozenDict` is immutable.

        Raises:
            TypeError: Always.
        """
        raise TypeError(_DICT_IMMUTABLE)

    def __copy__(self) -> dict[str, JsonValue]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, object], /) -> dict[str, JsonValue]:
        return _thaw(self, memo)

    def __reduce__(
        self,
    ) -> tuple[type[dict[str, JsonValue]], tuple[()], None, None, Iterator[tuple[str, JsonValue]]]:
        # The default reduction would rebuild a FrozenDict through __setitem__, which refuses.
        return (dict, (), None, None, iter(self.items()))


# The base classes' own C methods build and fill the frozen containers, bypassing the
# overrides above. Type checkers see them taking any object, which is what they accept at
# runtime (they raise TypeError on anything else, which materialize never passes).
if TYPE_CHECKING:

    def _new_frozen_list() -> FrozenList: ...
    def _new_frozen_dict() -> FrozenDict: ...
    # Any: the fast path reads items it has not narrowed yet.
    def _list_new(cls: type[FrozenList], /) -> Any: ...
    def _dict_new(cls: type[FrozenDict], /) -> Any: ...
    def _fill_list(target: FrozenList, source: object, /) -> None: ...
    def _fill_dict(target: FrozenDict, source: object, /) -> None: ...
    def _set_list_item(target: FrozenList, index: int, value: JsonValue, /) -> None: ...
    def _set_dict_item(target: FrozenDict, key: str, value: JsonValue, /) -> None: ...

else:
    _new_frozen_list = functools.partial(list.__new__, FrozenList)
    _new_frozen_dict = functools.partial(dict.__new__, FrozenDict)
    # Called directly on the class: a partial costs another 40 ns per container.
    _list_new = list.__new__
    _dict_new = dict.__new__
    _fill_list = list.extend
    _fill_dict = dict.update
    _set_list_item = list.__setitem__
    _set_dict_item = dict.__setitem__


def materialize(value: object) -> JsonValue:
    """Take a lossless, deeply immutable JSON snapshot of ``value``.

    Accepts ``None``, ``bool``, ``int``, finite ``float`` other than ``-0.0``, ``str``,
    ``list`` and ``tuple`` (both become `FrozenList`) and ``dict`` with ``str`` keys (becomes
    `FrozenDict`), nested to any depth. Only these exact types are accepted: a subclass such
    as an ``IntEnum``, a ``str`` subclass or a ``dict`` subclass could carry behaviour, so it
    would not round-trip losslessly. An ``int`` too long for CPython to print
    (``sys.get_int_max_str_digits()``, checked at call time) is refused too.

    An existing `FrozenList` or `FrozenDict` is already a snapshot and is returned as is,
    wherever it appears. Shared references are fine; their snapshots may be shared too,
    which is harmless because snapshots are immutable. The input is never mutated.

    Args:
        value: Any object.

    Returns:
        The snapshot: ``value`` itself for a leaf or an existing snapshot, otherwise a new
        `FrozenList` or `FrozenDict` that compares equal to ``value`` (a tuple compares equal
        to the list of its items) and serializes with ``json.dumps`` to the same text.

    Raises:
        MaterializationError: ``value`` holds something that is not losslessly JSON (NaN,
            an infinity, ``-0.0``, bytes, a set, any other object, a subclass of an accepted
            type, a non-``str`` key, a cycle), or reading it raised.
    """
    # Compared through a variable, which (unlike type(value) is dict) does not narrow value to
    # a dict of unknown items for the type checkers; value stays an object here.
    kind = type(value)
    if _copy_json is not None and (kind is dict or kind is list or kind is tuple):
        # The C pass (toolseam._speedups): what the Python walks below build, at C speed.
        copied = _copy_json(value, FrozenDict, FrozenList)
        if copied is not None:
            return cast("JsonValue", copied[0])
    if kind is dict:
        root = _new_frozen_dict()
        try:
            _fill_dict(root, value)
        except Exception as error:
            raise _unreadable([], None, error) from error
        # A flat object of plain leaves, the common shape of arguments, is complete once
        # checked; anything nested takes the fast path, and anything odd the full walk.
        if _flat_object(root):
            return root
    if kind is dict or kind is list or kind is tuple:
        try:
            return _fast(value, kind, [])  # the text flag is not wanted here
        except _Fallback:
            return _materialize_fully(value)
    return _leaf(value)


def materialize_arguments(value: object, plain: bool = False) -> tuple[JsonValue, bool]:
    """`materialize`, and whether every string of the snapshot (keys included) is UTF-8.

    A lone surrogate is the one thing a ``str`` may hold that UTF-8 (and so JSON text)
    cannot: ``define_tool`` validates in Python mode only arguments without one. Tracked
    during the snapshot walk at the cost of an ``isascii()`` per string (constant time).

    With ``plain``, an object may come back as a plain ``dict`` of plain containers instead:
    a private copy, checked exactly as the snapshot would be, that `materialize` turns into
    that snapshot when it is needed. The registry asks for one when nothing can read the
    arguments before the tool body (see `toolseam._run.CallState`). The C pass makes one of any
    object it takes; the Python walks only of a large one (see `_large`).
    """
    kind = type(value)
    tried = False
    if _copy_json is not None and (kind is dict or kind is list or kind is tuple):
        # The C pass (toolseam._speedups): what the Python walks below build, at C speed.
        # It gives up on anything odd, which the Python walks then take or report.
        if plain and kind is dict:
            copied = _copy_json(value, dict, list)
        else:
            copied = _copy_json(value, FrozenDict, FrozenList)
        if copied is not None:
            return cast("tuple[JsonValue, bool]", copied)
        tried = True
    if kind is dict:
        root = _dict_new(FrozenDict)
        try:
            _fill_dict(root, value)
        except Exception as error:
            raise _unreadable([], None, error) from error
        # _flat_object with the text check in the same pass: the hot path of every call.
        pairs: Iterable[tuple[object, Any]] = root.items()
        ascii_only = True
        for key, item in pairs:
            if type(key) is not str:
                break
            if not key.isascii():
                ascii_only = False
            kind = _type_of(item)
            if kind is str:
                if not item.isascii():
                    ascii_only = False
            elif kind is int:
                if not _NEGATIVE_BOUND < item < _PRINTABLE_BOUND:
                    break
            elif kind is float:
                if item - item != 0.0 or not (item or _copysign(1.0, item) > 0):
                    break
            elif not (item is None or kind is bool):
                break  # a container, a snapshot or something odd: the general path
        else:
            return root, ascii_only or text_is_utf8(root)
        if not tried and _large(root) and (plain or not _flat_below(root)):
            wide: list[str] = []
            try:
                copy = level_walk(value, dict, _PLAIN if plain else _FROZEN, wide)
            except LevelFallback:
                pass  # the recursive path or the full walk: it decides, or reports
            else:
                return copy, _utf8(wide)
        kind = dict
    if kind is dict or kind is list or kind is tuple:
        wide = []
        try:
            snapshot = _fast(value, kind, wide)
        except _Fallback:
            fully = _materialize_fully(value)
            return fully, text_is_utf8(fully)
        return snapshot, _utf8(wide)
    leaf = _leaf(value)
    return leaf, text_is_utf8(leaf)


# Containers directly in the root object from which its copy is large enough for the level
# walk (whose every level costs a few microseconds) to beat the recursive fast path.
_LARGE: Final = 32


def _large(root: FrozenDict) -> bool:
    """Whether the root object's containers hold `_LARGE` items or more between them."""
    total = 0
    values: Iterable[object] = root.values()
    for item in values:
        kind = type(item)
        if kind is dict or kind is list or kind is tuple:
            total += len(cast("Sized", item))
    return total >= _LARGE


def _flat_below(root: FrozenDict) -> bool:
    """Whether the root object's containers look flat: lists of flat objects, flat objects.

    Only a guess from each container's first item (a wide object's first values), to choose
    between two walks that build the same snapshot: for such shapes the recursive fast
    path's lists-of-objects loop makes frozen copies faster than the level walk does
    (bench_shapes.py "with a pre-execute listener": flat list and wide object); the level
    walk wins for anything deeper.
    """
    values: Iterable[object] = root.values()
    for item in values:
        kind = type(item)
        if kind is list or kind is tuple:
            if not item:
                continue
            item = cast("Sequence[object]", item)[0]
            kind = type(item)
            if kind is not dict:
                return False
        elif kind is not dict:
            continue
        obj = cast("dict[str, object]", item)
        inner: Iterable[object] = obj.values()
        if len(obj) > _LARGE:  # a wide object: its first values decide
            inner = _islice(inner, _LARGE)
        for leaf in inner:
            kind = type(leaf)
            if kind is dict or kind is list or kind is tuple:
                return False
    return True


def _frozen_dicts(sources: list[Any]) -> list[Any]:
    copies = list(map(_dict_new, _repeat(FrozenDict, len(sources))))
    _consume(map(_fill_dict, copies, sources), 0)
    return copies


def _frozen_lists(sources: list[Any]) -> list[Any]:
    copies = list(map(_list_new, _repeat(FrozenList, len(sources))))
    _consume(map(_fill_list, copies, sources), 0)
    return copies


if TYPE_CHECKING:

    def _copy_dict(source: Any, /) -> Any: ...

else:
    _copy_dict = dict.copy


def _plain_dicts(sources: list[Any]) -> list[Any]:
    return list(map(_copy_dict, sources))  # every source is an exact dict


def _plain_lists(sources: list[Any]) -> list[Any]:
    return list(map(list, sources))  # tuples too, as a snapshot makes them FrozenList


def text_is_utf8(value: JsonValue) -> bool:
    """Whether every string in a snapshot (keys included) can be encoded as UTF-8."""
    wide: list[str] = []
    pending: list[object] = [value]
    while pending:
        item = pending.pop()
        if type(item) is str:
            if not item.isascii():
                wide.append(item)
        elif type(item) is FrozenDict:
            pairs: Iterable[tuple[object, object]] = item.items()
            for key, child in pairs:
                pending.append(key)
                pending.append(child)
        elif type(item) is FrozenList:
            pending.extend(item)
    return _utf8(wide)


def _utf8(wide: list[str]) -> bool:
    for text in wide:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


def _leaf(value: object) -> JsonValue:
    """`materialize` of anything but a ``dict``, ``list`` or ``tuple``."""
    if (
        type(value) is str
        or value is None
        or type(value) is bool
        or type(value) is FrozenDict
        or type(value) is FrozenList
    ):
        return cast("JsonValue", value)
    if type(value) is int and (_NEGATIVE_BOUND < value < _PRINTABLE_BOUND or _int_printable(value)):
        return value
    if type(value) is float and value - value == 0.0 and (value or _copysign(1.0, value) > 0):
        return value
    raise MaterializationError(f"$: {_problem(value)}")


class _Fallback(Exception):
    """The fast path met something it leaves to the full walk: a problem, depth, a cycle."""


# type() with a known result type: the fast path's items are Any to the type checkers.
_type_of: Callable[[object], type[object]] = type

# Containers nested deeper than this (or a cycle, which nests for ever) go to the full walk.
_FAST_DEPTH: Final = 48


def _fast(value: object, kind: type, wide: list[str]) -> FrozenList | FrozenDict:
    """The common case at a fraction of the walk's cost: valid, shallow, acyclic JSON.

    Recursive (to `_FAST_DEPTH` levels) rather than driven by an explicit stack, and with no
    path kept for error messages: anything it does not accept raises `_Fallback`, and the
    full walk then builds the snapshot or reports the first problem. Each container is still
    copied whole by one C call before it is checked, and shared containers are frozen once
    (``keep`` holds their sources, so no id is reused while this runs).
    """
    memo: dict[int, FrozenList | FrozenDict] = {}
    keep: list[object] = []
    try:
        if kind is dict:
            return _fast_dict(value, 0, memo, keep, wide)
        return _fast_list(value, 0, memo, keep, wide)
    except _Fallback:
        raise
    except Exception as error:  # reading the value raised (changed by another thread, say)
        raise _Fallback from error


def _fast_dict(
    source: object,
    depth: int,
    memo: dict[int, FrozenList | FrozenDict],
    keep: list[object],
    wide: list[str],
) -> FrozenDict:
    target = _dict_new(FrozenDict)
    _fill_dict(target, source)
    pairs: Iterable[tuple[object, Any]] = target.items()
    # Values are replaced during the iteration, never keys: the dict does not change size.
    for key, item in pairs:
        if type(key) is not str:
            raise _Fallback
        if not key.isascii():
            wide.append(key)
        # The leaf checks of _leaves_only, inline: a call per leaf would double the cost.
        kind = _type_of(item)
        if kind is str:
            if not item.isascii():
                wide.append(item)
        elif kind is int:
            if not _NEGATIVE_BOUND < item < _PRINTABLE_BOUND:
                raise _Fallback
        elif kind is float:
            if item - item != 0.0 or not (item or _copysign(1.0, item) > 0):
                raise _Fallback
        elif kind is dict or kind is list or kind is tuple:
            if depth >= _FAST_DEPTH:
                raise _Fallback
            child = memo.get(id(item))
            if child is None:
                if kind is dict:
                    child = _fast_dict(item, depth + 1, memo, keep, wide)
                else:
                    child = _fast_list(item, depth + 1, memo, keep, wide)
                memo[id(item)] = child
                keep.append(item)
            _set_dict_item(target, key, child)
        elif kind is FrozenDict or kind is FrozenList:
            if not text_is_utf8(item):
                wide.append("\ud800")  # a snapshot taken elsewhere holds a lone surrogate
        elif not (item is None or kind is bool):
            raise _Fallback
    return target  # type: ignore[no-any-return]


def _fast_list(
    source: object,
    depth: int,
    memo: dict[int, FrozenList | FrozenDict],
    keep: list[object],
    wide: list[str],
) -> FrozenList:
    target = _list_new(FrozenList)
    _fill_list(target, source)
    if len(target) > 1 and set(map(_type_of, target)) == _ONLY_OBJECTS:
        return _fast_objects(target, depth, memo, keep, wide)
    items: Iterable[Any] = target
    for index, item in enumerate(items):
        kind = _type_of(item)
        if kind is str:
            if not item.isascii():
                wide.append(item)
        elif kind is int:
            if not _NEGATIVE_BOUND < item < _PRINTABLE_BOUND:
                raise _Fallback
        elif kind is float:
            if item - item != 0.0 or not (item or _copysign(1.0, item) > 0):
                raise _Fallback
        elif kind is dict:
            # A list of flat objects is the common nested shape: each is checked here,
            # without a call, and needs no memo (a flat object met twice is merely
            # copied twice). One with a container in it takes the general path.
            child = _dict_new(FrozenDict)
            _fill_dict(child, item)
            pairs: Iterable[tuple[object, Any]] = child.items()
            for key, value in pairs:
                if type(key) is not str:
                    raise _Fallback
                if not key.isascii():
                    wide.append(key)
                kind = _type_of(value)
                if kind is str:
                    if not value.isascii():
                        wide.append(value)
                elif kind is int:
                    if not _NEGATIVE_BOUND < value < _PRINTABLE_BOUND:
                        raise _Fallback
                elif kind is float:
                    if value - value != 0.0 or not (value or _copysign(1.0, value) > 0):
                        raise _Fallback
                elif not (value is None or kind is bool):
                    break
            else:
                _set_list_item(target, index, child)
                continue
            # Not flat: shared ones are frozen once (memo), like every other container.
            if depth >= _FAST_DEPTH:
                raise _Fallback
            known = memo.get(id(item))
            if known is None:
                known = _fast_dict(item, depth + 1, memo, keep, wide)
                memo[id(item)] = known
                keep.append(item)
            _set_list_item(target, index, known)
        elif kind is list or kind is tuple:
            if depth >= _FAST_DEPTH:
                raise _Fallback
            child = memo.get(id(item))
            if child is None:
                child = _fast_list(item, depth + 1, memo, keep, wide)
                memo[id(item)] = child
                keep.append(item)
            _set_list_item(target, index, child)
        elif kind is FrozenDict or kind is FrozenList:
            if not text_is_utf8(item):
                wide.append("\ud800")
        elif not (item is None or kind is bool):
            raise _Fallback
    return target  # type: ignore[no-any-return]


_ONLY_OBJECTS: Final = {dict}
_LARGEST: Final = sys.float_info.max
_LOWEST: Final = -_LARGEST  # precomputed: negating it allocates


def _fast_objects(
    items: list[Any],
    depth: int,
    memo: dict[int, FrozenList | FrozenDict],
    keep: list[object],
    wide: list[str],
) -> FrozenList:
    """`_fast_list` of a list of objects only, the common nested shape.

    The copies are made and filled by C loops first, then checked; a flat one (plain
    leaves only) needs no call and no memo (a flat object met twice is merely copied
    twice). One with a container in it takes the general path, where shared ones are
    frozen once, like every other container.
    """
    children: list[Any] = list(map(_dict_new, _repeat(FrozenDict, len(items))))
    _consume(map(_fill_dict, children, items), 0)
    # Locals: this loop runs once per key of every object.
    type_of, low, high, text = _type_of, _NEGATIVE_BOUND, _PRINTABLE_BOUND, str
    lowest, largest = _LOWEST, _LARGEST
    for index, child in enumerate(children):
        pairs: Iterable[tuple[Any, Any]] = child.items()  # keys checked below
        for key, value in pairs:
            if type_of(key) is not text or not key.isascii():
                if type_of(key) is not text:
                    raise _Fallback
                wide.append(key)
            kind = type_of(value)
            if kind is text:
                if not value.isascii():
                    wide.append(value)
            elif kind is int:
                if not low < value < high:
                    raise _Fallback
            elif kind is float:
                # Finite (NaN compares false) and not -0.0, without allocating a float.
                if not lowest <= value <= largest or not (value or _copysign(1.0, value) > 0):
                    raise _Fallback
            elif not (value is None or kind is bool):
                break
        else:
            continue
        if depth >= _FAST_DEPTH:
            raise _Fallback
        item = items[index]
        known = memo.get(id(item))
        if known is None:
            known = _fast_dict(item, depth + 1, memo, keep, wide)
            memo[id(item)] = known
            keep.append(item)
        children[index] = known
    target = _list_new(FrozenList)
    _fill_list(target, children)
    return target  # type: ignore[no-any-return]


def _materialize_fully(value: object) -> FrozenList | FrozenDict:
    """The full walk of a ``dict``, ``list`` or ``tuple``: every check, with its path."""
    kind = type(value)  # compared through a variable: see materialize
    if kind is dict:
        root_dict = _new_frozen_dict()
        try:
            _fill_dict(root_dict, value)
        except Exception as error:
            raise _unreadable([], None, error) from error
        if _flat_object(root_dict):
            return root_dict
        _check_keys(root_dict, [], None)
        return _walk(root_dict, value)
    root_list = _new_frozen_list()
    try:
        _fill_list(root_list, value)
    except Exception as error:
        raise _unreadable([], None, error) from error
    if _leaves_only(root_list):
        return root_list
    return _walk(root_list, value)


def _walk(root: FrozenList | FrozenDict, source: object) -> FrozenList | FrozenDict:
    """Check ``root``, a fresh shallow copy of ``source``, and freeze what it contains.

    Depth-first and in order, so the first problem reported is the first in document order.
    Each nested container is copied whole into a frozen one; unless it holds only leaves,
    it is pushed, and once checked, stored over its source in its parent's copy. The keys
    of ``root`` have been checked already.
    """
    # The stack of containers being checked, as parallel lists rather than a tuple per
    # frame: at depth, every tracked allocation brings the next garbage collection closer.
    # targets: the frozen copies; iterators: over their (key, item) pairs; keys: of each
    # container in its parent (a placeholder for the root); sources: the originals, kept
    # alive so that their ids stay unique while they are on the path.
    pairs: Iterator[tuple[int | str, object]]
    pairs = enumerate(root) if type(root) is FrozenList else iter(root.items())
    targets: list[FrozenList | FrozenDict] = [root]
    iterators = [pairs]
    keys: list[int | str] = [0]
    sources = [source]
    # Ids of the source containers on the current path: meeting one again is a cycle.
    on_path = {id(source)}
    # Finished containers by source id, so a shared one is checked once and a DAG with
    # exponentially many paths stays linear. `finished` keeps their sources alive, so that
    # no new object can take one of those ids.
    done: dict[int, FrozenList | FrozenDict] = {}
    finished: list[object] = []
    key: int | str | None = None
    try:
        while targets:
            target = targets[-1]
            for key, item in iterators[-1]:
                # The leaf checks of _leaves_only, repeated inline: a call per leaf would
                # double the cost of the walk.
                if type(item) is str:
                    continue
                if type(item) is int:
                    if _NEGATIVE_BOUND < item < _PRINTABLE_BOUND or _int_printable(item):
                        continue
                    raise _invalid(keys, key, _int_problem())
                if item is None or type(item) is bool:
                    continue
                if type(item) is float:
                    if item - item == 0.0 and (item or _copysign(1.0, item) > 0):
                        continue
                    raise _invalid(keys, key, _float_problem(item))
                kind = type(item)
                if kind is FrozenDict or kind is FrozenList:
                    continue
                if kind is not dict and kind is not list and kind is not tuple:
                    raise _invalid(keys, key, _problem(item))
                item_id = id(item)
                if item_id in on_path:
                    raise _invalid(keys, key, "cycle detected")
                snapshot = done.get(item_id)
                if snapshot is not None:
                    _store(target, key, snapshot)
                    continue
                child: FrozenList | FrozenDict
                if kind is dict:
                    child = _new_frozen_dict()
                    _fill_dict(child, item)
                    if _flat_object(child):
                        _store(target, key, child)
                        continue
                    _check_keys(child, keys, key)
                    pairs = iter(child.items())
                else:
                    child = _new_frozen_list()
                    _fill_list(child, item)
                    if _leaves_only(child):
                        _store(target, key, child)
                        continue
                    pairs = enumerate(child)
                targets.append(child)
                iterators.append(pairs)
                keys.append(key)
                sources.append(item)
                on_path.add(item_id)
                break
            else:
                targets.pop()
                iterators.pop()
                target_key = keys.pop()
                target_source = sources.pop()
                source_id = id(target_source)
                on_path.discard(source_id)
                done[source_id] = target
                finished.append(target_source)
                if targets:
                    _store(targets[-1], target_key, target)
                key = None
    except MaterializationError:
        raise
    except Exception as error:
        # Reading the value raised: a container changed while it was copied, say.
        raise _unreadable(keys, key, error) from error
    return root


def _flat_object(target: FrozenDict) -> bool:
    """Whether a copied dict has only ``str`` keys and only leaves or snapshots as values.

    `_leaves_only` for objects, in one pass over keys and values: this is the hot path.
    """
    pairs: Iterable[tuple[object, object]] = target.items()
    for key, item in pairs:
        if type(key) is not str:
            return False
        if type(item) is str:
            continue
        if type(item) is int:
            if _NEGATIVE_BOUND < item < _PRINTABLE_BOUND:
                continue
            return False
        if item is None or type(item) is bool:
            continue
        if type(item) is float:
            if item - item == 0.0 and (item or _copysign(1.0, item) > 0):
                continue
            return False
        if type(item) is FrozenDict or type(item) is FrozenList:
            continue
        return False
    return True


def _leaves_only(items: Iterable[object]) -> bool:
    """Whether every item is a valid JSON leaf or an existing snapshot.

    ``False`` does not mean invalid: a container needs the walk, which also finds out what
    exactly is wrong with an invalid item.
    """
    for item in items:
        if type(item) is str:
            continue
        if type(item) is int:
            if _NEGATIVE_BOUND < item < _PRINTABLE_BOUND:
                continue
            return False
        if item is None or type(item) is bool:
            continue
        if type(item) is float:
            if item - item == 0.0 and (item or _copysign(1.0, item) > 0):
                continue
            return False
        if type(item) is FrozenDict or type(item) is FrozenList:
            continue
        return False
    return True


def _store(target: FrozenList | FrozenDict, key: int | str, value: JsonValue) -> None:
    """Put a finished frozen child over its source in its parent's copy."""
    if type(target) is FrozenList:
        if type(key) is int:
            _set_list_item(target, key, value)
    elif type(key) is str:
        _set_dict_item(target, key, value)


def _check_keys(target: FrozenDict, keys: list[int | str], key: int | str | None) -> None:
    """Refuse a copied dict with a key that is not an exact ``str``."""
    dict_keys: Iterable[object] = target
    for dict_key in dict_keys:
        if type(dict_key) is not str:
            raise _invalid(keys, key, _key_problem(dict_key))


def _int_printable(value: int) -> bool:
    """Whether CPython can convert ``value`` to decimal text under the current limit."""
    limit = sys.get_int_max_str_digits()
    return limit == 0 or abs(value) < _power_of_ten(limit)


@functools.lru_cache(maxsize=4)
def _power_of_ten(exponent: int) -> int:
    power: int = 10**exponent
    return power


def _int_problem() -> str:
    return f"int with more than {sys.get_int_max_str_digits()} digits is not JSON"


def _float_problem(value: float) -> str:
    if value != value:
        return "float nan is not JSON"
    if value == math.inf:
        return "float inf is not JSON"
    if value == -math.inf:
        return "float -inf is not JSON"
    return "-0.0 is not losslessly JSON"


_SUBCLASSABLE: Final = (int, float, str, list, tuple, dict)


def _problem(value: object) -> str:
    """Why ``value``, which the checks refused, is not JSON.

    Looks only at the type (never at ``repr`` or ``str``), so it cannot raise. Names the
    fix for the two objects most often passed by mistake: a pydantic model and a dataclass.
    """
    kind = type(value)
    if kind is int:
        return _int_problem()
    if type(value) is float:
        return _float_problem(value)
    name = _type_name(kind)
    for base in _SUBCLASSABLE:
        try:
            is_subclass = issubclass(kind, base)
        except Exception:
            is_subclass = False
        if is_subclass:
            return f"{name} is not JSON (a subclass of {base.__name__})"
    return f"{name} is not JSON{_object_hint(kind)}"


def _object_hint(kind: type) -> str:
    try:
        if any(
            base.__name__ == "BaseModel" and base.__module__ == "pydantic.main"
            for base in kind.__mro__
        ):
            return ' (a pydantic model instance: pass model.model_dump(mode="json"))'
        if "__dataclass_fields__" in kind.__dict__:
            return " (a dataclass instance: pass dataclasses.asdict(instance))"
    except Exception:
        pass
    return ""


def _key_problem(key: object) -> str:
    kind = type(key)
    name = _type_name(kind)
    if key is None or kind is bool or kind is float:
        return f"dict key {key!r} ({name}) is not a string"
    if type(key) is int and key.bit_length() <= 64:
        return f"dict key {key!r} ({name}) is not a string"
    try:
        is_str = issubclass(kind, str)
    except Exception:
        is_str = False
    if is_str:
        return f"dict key of type {name} is not a plain str"
    return f"dict key of type {name} is not a string"


def _invalid(keys: list[int | str], key: int | str | None, problem: str) -> MaterializationError:
    return MaterializationError(f"{_path(keys, key)}: {problem}")


def _unreadable(
    keys: list[int | str], key: int | str | None, error: Exception
) -> MaterializationError:
    text = safe_str(error)
    if len(text) > _MAX_ERROR_CHARS:
        text = text[: _MAX_ERROR_CHARS - 3] + "..."
    return MaterializationError(f"{_path(keys, key)}: {_type_name(type(error))}: {text}")


def _path(stack_keys: list[int | str], key: int | str | None) -> str:
    """Render a JSON path such as ``$.items[2].price``.

    Args:
        stack_keys: The keys of the containers on the walk's stack; the first, the root's,
            is a placeholder.
        key: The key in the innermost container, or ``None`` for the container itself.

    Very deep paths keep their first and last segments, so the detail stays short.
    """
    keys = stack_keys[1:]
    if key is not None:
        keys.append(key)
    half = _MAX_PATH_SEGMENTS // 2
    if len(keys) > _MAX_PATH_SEGMENTS:
        skipped = len(keys) - 2 * half
        middle = f"...({skipped} more)..."
        return (
            "$"
            + "".join(map(_segment, keys[:half]))
            + middle
            + "".join(map(_segment, keys[-half:]))
        )
    return "$" + "".join(map(_segment, keys))


def _segment(key: int | str) -> str:
    if type(key) is int:
        return f"[{key}]"
    text = str(key)
    if len(text) > _MAX_KEY_CHARS:
        text = text[: _MAX_KEY_CHARS - 3] + "..."
    if text.isidentifier():
        return f".{text}"
    return f"[{json.dumps(text)}]"


@overload
def _thaw(root: FrozenList, memo: dict[int, object]) -> list[JsonValue]: ...
@overload
def _thaw(root: FrozenDict, memo: dict[int, object]) -> dict[str, JsonValue]: ...
def _thaw(
    root: FrozenList | FrozenDict, memo: dict[int, object]
) -> list[JsonValue] | dict[str, JsonValue]:
    """Copy a snapshot into plain, mutable lists and dicts, without recursion.

    Honours ``copy.deepcopy``'s ``memo``: a frozen container met twice becomes one plain
    container met twice, as deep copies preserve sharing.
    """
    pending: list[tuple[FrozenList | FrozenDict, list[JsonValue] | dict[str, JsonValue]]] = []

    def plain(node: FrozenList | FrozenDict) -> list[JsonValue] | dict[str, JsonValue]:
        known = memo.get(id(node))
        if known is not None:
            # Only copies of snapshot containers are stored under their ids.
            return cast("list[JsonValue] | dict[str, JsonValue]", known)
        fresh: list[JsonValue] | dict[str, JsonValue] = [] if type(node) is FrozenList else {}
        memo[id(node)] = fresh
        pending.append((node, fresh))
        return fresh

    result = plain(root)
    while pending:
        node, fresh = pending.pop()
        if type(node) is FrozenList and type(fresh) is list:
            for item in node:
                if type(item) is FrozenList or type(item) is FrozenDict:
                    fresh.append(plain(item))
                else:
                    fresh.append(item)
        elif type(node) is FrozenDict and type(fresh) is dict:
            for dict_key, item in node.items():
                if type(item) is FrozenList or type(item) is FrozenDict:
                    fresh[dict_key] = plain(item)
                else:
                    fresh[dict_key] = item
    return result


_encode_str: Callable[[str], str] = json.encoder.encode_basestring
_LITERALS: Final = {True: "true", False: "false"}


def dumps(value: JsonValue) -> str:
    """``json.dumps(value, ensure_ascii=False)`` of a JSON value, at any depth.

    The C encoder recurses and gives up with `RecursionError` a few hundred levels down;
    only then does this fall back to an iterative encoder that writes the same text.
    """
    try:
        return json.dumps(value, ensure_ascii=False)
    except RecursionError:
        return _dumps_iteratively(value)


def _dumps_iteratively(value: JsonValue) -> str:
    parts: list[str] = []
    # Each entry: an iterator over a container's remaining items, and whether it is an
    # object (its items are (key, value) pairs), and whether an item was written yet.
    stack: list[tuple[Iterator[Any], bool]] = []
    first: list[bool] = []
    current: object = value
    while True:
        if isinstance(current, dict):
            parts.append("{")
            stack.append((iter(cast("dict[str, object]", current).items()), True))
            first.append(True)
        elif isinstance(current, list):
            parts.append("[")
            stack.append((iter(cast("list[object]", current)), False))
            first.append(True)
        else:
            parts.append(_leaf_text(current))
        # Find the next value to write, closing every container that is done.
        while stack:
            items, is_object = stack[-1]
            item: Any = next(items, _END)
            if item is _END:
                stack.pop()
                first.pop()
                parts.append("}" if is_object else "]")
                continue
            if not first[-1]:
                parts.append(", ")
            first[-1] = False
            if is_object:
                key, current = item
                parts.append(_encode_str(key))
                parts.append(": ")
            else:
                current = item
            break
        else:
            return "".join(parts)


_END: Final = object()


def _leaf_text(value: object) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return _LITERALS[value]
    if isinstance(value, str):
        return _encode_str(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return float.__repr__(value)
    raise TypeError(f"Object of type {_type_name(type(value))} is not JSON serializable")


# The level walk's two ways of copying (see _levels): into snapshots, or into the private
# plain copy of `materialize_arguments(plain=True)`.
_FROZEN: Final = Copier(
    _frozen_dicts,
    _frozen_lists,
    (FrozenDict, FrozenList),
    text_is_utf8,
    (_NEGATIVE_BOUND, _PRINTABLE_BOUND),
)
_PLAIN: Final = Copier(
    _plain_dicts,
    _plain_lists,
    (FrozenDict, FrozenList),
    text_is_utf8,
    (_NEGATIVE_BOUND, _PRINTABLE_BOUND),
)
