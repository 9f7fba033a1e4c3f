"""What the model is shown of a run, each part bounded by ``PtcLimits.output_chars``.

Four parts of a ``run_code`` result can grow with the program: what it printed, its output
value, a traceback, and the list of its tool calls. Each is cut to about ``output_chars``
characters, keeping its head and its tail around a marker that says how much was cut, so the
model reads that something is missing and how much. The host keeps the whole list of tool
calls (the result's context); printed text past the bound is never kept, so a program that
prints without end costs the host no memory.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, final

from .._errors import TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH
from .._json import JsonValue, MaterializationError, dumps, materialize

__all__ = ["Printed", "bounded", "bounded_output", "listing"]

_ARGUMENT_CHARS: Final = 200  # a nested call's arguments on its line of the listing


def _marker(cut: int) -> str:
    return f"\n... ({cut} characters cut) ...\n"


def bounded(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its head and its tail."""
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    return f"{text[:head]}{_marker(len(text) - limit)}{text[-tail:]}"


def bounded_output(value: object, limit: int) -> JsonValue:
    """The program's last value as the result shows it.

    Its JSON value when that is at most ``limit`` characters of JSON; otherwise a string:
    the value's text (a string's own, else its JSON) cut by `bounded`. A value with no JSON
    form is its ``repr``, cut the same way.
    """
    try:
        value = materialize(value)
    except (MaterializationError, RecursionError):
        return bounded(repr(value), limit)
    if isinstance(value, str):
        return bounded(value, limit)
    text = dumps(value)
    return value if len(text) <= limit else bounded(text, limit)


@final
class Printed:
    """The sandbox's ``print_callback``: what the program printed, bounded.

    Keeps the first and the last characters (at most ``limit`` in all, the head a third)
    and counts the rest, so printing never fails the program and never grows the host's
    memory. Called in the driver thread; read in the event loop.
    """

    __slots__ = ("_head", "_limit", "_lock", "_tail", "_total")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._head = ""  # the first `limit // 3` characters
        self._tail = ""  # the last `limit` characters
        self._total = 0
        self._lock = threading.Lock()

    def __call__(self, stream: str, text: str) -> None:
        """Take one chunk of printed text (stdout and stderr alike, in order)."""
        with self._lock:
            self._total += len(text)
            head = self._limit // 3
            if len(self._head) < head:
                self._head += text[: head - len(self._head)]
            self._tail = (self._tail + text)[-self._limit :]

    @property
    def text(self) -> str:
        """Everything printed if it fits in ``limit``; else its head, a marker, its tail."""
        with self._lock:
            if self._total <= self._limit:
                return self._tail
            head = self._limit // 3
            return f"{self._head}{_marker(self._total - self._limit)}{self._tail[head:]}"


def _line(index: int, entry: Mapping[str, Any]) -> str:
    arguments = json.dumps(entry.get("arguments"), ensure_ascii=False, sort_keys=True)
    code = entry.get("code")
    line = f"{index}. {entry.get('name')} {bounded(arguments, _ARGUMENT_CHARS)} -> {code}"
    if code == TOOL_ABORTED_BEFORE_DISPATCH:
        line += " (never ran)"
    elif code == TOOL_ABORTED:
        line += " (stopped while it ran)"
    elif "error" in entry:
        line += f": {entry['error']}"
    return line


def _take(lines: Iterable[str], budget: int) -> list[str]:
    """The first lines that fit in ``budget`` characters; the first line always."""
    taken: list[str] = []
    used = 0
    for line in lines:
        if taken and used + len(line) > budget:
            break
        taken.append(line)
        used += len(line) + 1
    return taken


def listing(nested: Sequence[Mapping[str, Any]], limit: int) -> str:
    """The tool calls as the content lists them: one line each, about ``limit`` characters.

    Past the bound, the first and the last calls are listed (half the bound each, at least
    one call each) around a line that counts the calls left out by outcome code; the host
    has the whole list in the result's context.
    """
    count = len(nested)
    header = f"tool calls ({count}):"
    head = _take((_line(i, nested[i - 1]) for i in range(1, count + 1)), limit // 2)
    shown = len(head)
    tail = _take((_line(i, nested[i - 1]) for i in range(count, shown, -1)), limit // 2)
    tail.reverse()
    left_out = nested[shown : count - len(tail)]
    if not left_out:
        return "\n".join([header, *head, *tail])
    counts = Counter(str(entry.get("code")) for entry in left_out)
    by_code = ", ".join(f"{number} {code}" for code, number in counts.most_common())
    calls = "1 call" if len(left_out) == 1 else f"{len(left_out)} calls"
    middle = f"... ({calls} not listed: {by_code}) ..."
    return "\n".join([header, *head, middle, *tail])
