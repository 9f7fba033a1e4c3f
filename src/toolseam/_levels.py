"""The level walk: a large JSON argument checked and copied one nesting level at a time.

`_json`'s recursive fast path checks each container with a Python loop over its items. For
a large argument that loop is the cost, and most of its work is the same for every item of
a level (every record of a list has the same keys, every tag is a ``str``). This walk takes
all the containers of one level together and does the work with C loops over them all:
one ``map`` makes every copy (each still one C call per container, so a container another
thread changes is seen in one consistent state), keys are checked once per column when the
objects of a level share them, and the leaves of a column are checked by type in bulk
(``str.isascii`` for the text flag, ``min``/``max`` for ints, a sum for floats).

It only accepts what the fast path accepts, and gives up with `LevelFallback` on anything
else (a problem, a container met twice, which also catches a cycle, or more than
`MAX_LEVELS` levels): the caller then takes the full walk, which builds the snapshot or
reports the first problem with its path. tests/test_perf_snapshot.py pins its outcome to the
full walk's for every shape of benchmarks/bench_shapes.py.

It makes plain copies or frozen ones, as its `Copier` says; it knows nothing else of
snapshots. Where the build has the C pass (``toolseam._speedups``), `_json` asks it first;
this walk then serves a pure-Python build.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain, compress, filterfalse, repeat
from operator import is_
from typing import TYPE_CHECKING, Any, Final

__all__ = ["MAX_LEVELS", "Copier", "LevelFallback", "level_walk"]

MAX_LEVELS: Final = 128
"""Deeper than this, the walk gives up (the full walk and the recursive path go further)."""

_chain = chain.from_iterable
_copysign = math.copysign
# The base classes' own C methods, typed for the checkers: items are Any until checked.
if TYPE_CHECKING:

    def _set_dict(target: Any, key: Any, value: Any, /) -> None: ...
    def _set_list(target: Any, key: Any, value: Any, /) -> None: ...
    def _values(target: Any, /) -> Iterable[Any]: ...

else:
    _set_dict = dict.__setitem__
    _set_list = list.__setitem__
    _values = dict.values
_LEAVES: Final = frozenset((str, int, float, bool, type(None)))


class LevelFallback(Exception):
    """The walk met something it leaves to the full walk."""


@dataclass(frozen=True, slots=True)
class Copier:
    """How the walk copies containers, and what it accepts in place of one.

    Attributes:
        dicts: Copies of exact ``dict`` objects, in order.
        lists: Copies of exact ``list`` and ``tuple`` objects, in order.
        kept: Types kept as they are, not copied (existing snapshots).
        kept_utf8: Whether every string in such a kept value is UTF-8.
        int_bounds: Ints strictly between these two print under any digit limit.
    """

    dicts: Callable[[list[Any]], list[Any]]
    lists: Callable[[list[Any]], list[Any]]
    kept: tuple[type, ...]
    kept_utf8: Callable[[Any], bool]
    int_bounds: tuple[int, int]


def _consume(iterator: Iterable[object]) -> None:
    deque(iterator, 0)


def level_walk(value: object, kind: type, copier: Copier, wide: list[str]) -> Any:
    """The checked copy of ``value`` (an exact ``dict``, ``list`` or ``tuple``: ``kind``).

    Appends every string that is not ASCII (keys included) to ``wide``, for the text flag.

    Raises:
        LevelFallback: ``value`` holds something the walk leaves to the full walk.
    """
    holder: list[Any] = [None]  # the root's parent: its copy ends up in holder[0]
    level = _Level()
    group = level.dicts_in_lists if kind is dict else level.lists_in_lists
    group.sources.append(value)
    group.parents.append(holder)
    group.keys.append(0)
    # Every container met so far, by id (one met twice is shared, or a cycle), and the
    # sources themselves, so that no id is reused while this runs.
    seen: set[int] = {id(value)}
    keep: list[object] = [value]
    try:
        for _ in range(MAX_LEVELS):
            level = _step(level, copier, wide)
            fresh = level.sources()
            if not fresh:
                return holder[0]
            before = len(seen)
            seen.update(map(id, fresh))
            if len(seen) != before + len(fresh):
                raise LevelFallback  # shared, or a cycle: the recursive path memoizes
            keep.append(fresh)
    except LevelFallback:
        raise
    except Exception as error:  # reading the value raised (changed by another thread, say)
        raise LevelFallback from error
    raise LevelFallback  # too deep for this walk


class _Group:
    """Containers of one kind whose parents are of one kind: the sources and their homes."""

    __slots__ = ("keys", "parents", "sources", "whole")

    def __init__(self) -> None:
        self.sources: list[Any] = []
        self.parents: list[Any] = []  # the parent copy each source's copy goes into
        self.keys: list[Any] = []  # under this key or index
        # The one list copy whose every item, in order, is a source here, if that is so.
        self.whole: list[Any] | None = None

    def add(self, sources: list[Any], parents: Iterable[Any], keys: Iterable[Any]) -> None:
        self.sources.extend(sources)
        self.parents.extend(parents)
        self.keys.extend(keys)


class _Level:
    """The containers of one level, grouped by their own kind and their parent's."""

    __slots__ = ("dicts_in_dicts", "dicts_in_lists", "lists_in_dicts", "lists_in_lists")

    def __init__(self) -> None:
        self.dicts_in_dicts = _Group()
        self.dicts_in_lists = _Group()
        self.lists_in_dicts = _Group()
        self.lists_in_lists = _Group()

    def sources(self) -> list[Any]:
        return [
            *self.dicts_in_dicts.sources,
            *self.dicts_in_lists.sources,
            *self.lists_in_dicts.sources,
            *self.lists_in_lists.sources,
        ]


def _step(level: _Level, copier: Copier, wide: list[str]) -> _Level:
    """Copy one level's containers into their parents; check them; the next level."""
    following = _Level()
    dicts: list[Any] = []
    for group, store in ((level.dicts_in_dicts, _set_dict), (level.dicts_in_lists, _set_list)):
        if group.sources:
            copies = copier.dicts(group.sources)
            _place(group, store, copies)
            dicts.extend(copies)
    lists: list[Any] = []
    for group, store in ((level.lists_in_dicts, _set_dict), (level.lists_in_lists, _set_list)):
        if group.sources:
            copies = copier.lists(group.sources)
            _place(group, store, copies)
            lists.extend(copies)
    if dicts:
        _check_dicts(dicts, following, copier, wide)
    if lists:
        _check_lists(lists, following, copier, wide)
    return following


def _place(group: _Group, store: Callable[..., object], copies: list[Any]) -> None:
    """Put each copy in its parent copy, over its source."""
    parents = group.parents
    if store is _set_list and group.whole is not None and len(copies) == len(group.whole):
        # Every item of one list (a list of records, say): one slice assignment.
        _set_list(group.whole, slice(None), copies)
        return
    _consume(map(store, parents, group.keys, copies))


def _check_dicts(copies: list[Any], following: _Level, copier: Copier, wide: list[str]) -> None:
    count = len(copies)
    lengths = list(map(len, copies))
    width = lengths[0]
    keys: list[Any] = list(_chain(copies))
    values: list[Any] = list(_chain(map(_values, copies)))
    if count > 1 and width and lengths.count(width) == count:
        first = keys[:width]
        if all(all(map(is_, keys[column::width], repeat(key))) for column, key in enumerate(first)):
            # Every object has the very same keys in the same order (as json.loads and
            # literals make them): check one object's, then the values column by column.
            _check_keys(first, wide)
            for column, key in enumerate(first):
                _check_column(
                    values[column::width], copies, [key] * count, following, True, copier, wide
                )
            return
    _check_keys(keys, wide)
    parents = list(_chain(map(repeat, copies, lengths)))
    _check_column(values, parents, keys, following, True, copier, wide)


def _check_lists(copies: list[Any], following: _Level, copier: Copier, wide: list[str]) -> None:
    if len(copies) == 1:
        (only,) = copies
        kinds = set(map(type, only))
        if len(kinds) == 1 and (dict in kinds or list in kinds):
            # One list of containers of one kind: they all go back into it, in order.
            group = following.dicts_in_lists if dict in kinds else following.lists_in_lists
            group.add(only, repeat(only, len(only)), range(len(only)))
            group.whole = only
            return
    lengths = list(map(len, copies))
    values: list[Any] = list(_chain(copies))
    parents = _Lazy(lambda: list(_chain(map(repeat, copies, lengths))))
    indexes = _Lazy(lambda: list(_chain(map(range, lengths))))
    _check_column(values, parents, indexes, following, False, copier, wide)


class _Lazy:
    """A list made only if a container needs it (a list of leaves never does)."""

    __slots__ = ("_made", "_make")

    def __init__(self, make: Callable[[], list[Any]]) -> None:
        self._make = make
        self._made: list[Any] | None = None

    def get(self) -> list[Any]:
        if self._made is None:
            self._made = self._make()
        return self._made


def _check_keys(keys: list[Any], wide: list[str]) -> None:
    if not set(map(type, keys)) <= _STR_ONLY:
        raise LevelFallback
    if not all(map(str.isascii, keys)):
        wide.extend(filterfalse(str.isascii, keys))


_STR_ONLY: Final = {str}


def _check_column(
    values: list[Any],
    parents: Any,
    keys: Any,
    following: _Level,
    in_dicts: bool,
    copier: Copier,
    wide: list[str],
) -> None:
    """Check the leaves of a column in bulk; queue its containers for the next level.

    ``parents`` and ``keys``: where each value sits (lists, or `_Lazy` ones), read only
    for containers.
    """
    types = set(map(type, values))
    if len(types) == 1:
        (kind,) = types
        _check_leaves(kind, values, values, parents, keys, following, in_dicts, copier, wide)
        return
    each = list(map(type, values))
    for kind in types:
        mask = list(map(is_, each, repeat(kind)))
        _check_leaves(kind, values, mask, parents, keys, following, in_dicts, copier, wide)


def _check_leaves(
    kind: type,
    values: list[Any],
    mask: list[Any],
    parents: Any,
    keys: Any,
    following: _Level,
    in_dicts: bool,
    copier: Copier,
    wide: list[str],
) -> None:
    """The values of type ``kind`` (``mask is values``: all of them)."""
    everything = mask is values
    if kind is bool or kind is type(None):
        return
    selected = values if everything else list(compress(values, mask))
    if kind is str:
        if not all(map(str.isascii, selected)):
            wide.extend(filterfalse(str.isascii, selected))
        return
    if kind is int:
        low, high = copier.int_bounds
        if not (low < min(selected) and max(selected) < high):
            raise LevelFallback
        return
    if kind is float:
        total = sum(selected, 0.0)
        # Any NaN or infinity makes the sum one too (so may an overflow: then the full walk).
        if total - total != 0.0:
            raise LevelFallback
        # -0.0 == 0.0, so this finds both; only -0.0 has a negative sign.
        if 0.0 in selected and -1.0 in map(_copysign, repeat(1.0), filterfalse(None, selected)):
            raise LevelFallback
        return
    if kind is dict or kind is list or kind is tuple:
        if type(parents) is _Lazy:
            parents = parents.get()
        if type(keys) is _Lazy:
            keys = keys.get()
        if not everything:
            parents = compress(parents, mask)
            keys = compress(keys, mask)
        _queue(kind, selected, parents, keys, following, in_dicts)
        return
    if kind in copier.kept:
        if not all(map(copier.kept_utf8, selected)):
            wide.append("\ud800")  # a snapshot taken elsewhere holds a lone surrogate
        return
    raise LevelFallback  # not JSON, or a subclass: the full walk says which


def _queue(
    kind: type,
    sources: list[Any],
    parents: Iterable[Any],
    keys: Iterable[Any],
    following: _Level,
    in_dicts: bool,
) -> None:
    if in_dicts:
        group = following.dicts_in_dicts if kind is dict else following.lists_in_dicts
    else:
        group = following.dicts_in_lists if kind is dict else following.lists_in_lists
    group.add(sources, parents, keys)
