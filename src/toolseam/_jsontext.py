"""`loads`: JSON text to plain values at any depth, as ``json.loads`` reads it.

Arguments arrive as JSON text at some entry points (the OpenAI Agents SDK hands a tool its
arguments as a string). ``json.loads`` recurses and gives up with `RecursionError` about a
thousand levels down, while the registry takes arguments of any depth (contract §5.2). Only
then does `loads` fall back to an iterative decoder that reads the same text the same way:
the same values, ``NaN`` and ``Infinity`` accepted, the last of duplicate keys kept, and
`ValueError` (a ``json.JSONDecodeError``) for text that is not JSON.
"""

from __future__ import annotations

import json
import json.decoder
import re
from collections.abc import Callable
from json.scanner import NUMBER_RE
from typing import Any, Final, cast

__all__ = ["loads"]

_SPACE: Final = re.compile(r"[ \t\n\r]*")
# The C string scanner json.loads itself uses (typeshed does not list it): the decoded
# string and the index after its closing quote, for an index after its opening quote.
scanstring: Final[Callable[[str, int], tuple[str, int]]] = getattr(json.decoder, "scanstring")  # noqa: B009
_CONSTANTS: Final[dict[str, Any]] = {
    "null": None,
    "true": True,
    "false": False,
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "-Infinity": float("-inf"),
}


def loads(text: str) -> Any:
    """``json.loads(text)``, at any depth.

    Raises:
        ValueError: ``text`` is not JSON (a ``json.JSONDecodeError``), or holds an int too
            long for Python to read, as ``json.loads`` raises.
    """
    try:
        return json.loads(text)
    except RecursionError:
        return _loads_iteratively(text)


def _skip(text: str, index: int) -> int:
    """The index of the first character from ``index`` on that is not JSON whitespace."""
    match = _SPACE.match(text, index)
    return index if match is None else match.end()


def _error(message: str, text: str, index: int) -> json.JSONDecodeError:
    return json.JSONDecodeError(message, text, index)


def _scalar(text: str, index: int) -> tuple[Any, int]:
    """The string, number or constant at ``index``; raises if there is none."""
    if text.startswith('"', index):
        return scanstring(text, index + 1)
    number = NUMBER_RE.match(text, index)
    if number is not None and number.end() > index:
        integer, fraction, exponent = number.groups()
        if fraction or exponent:
            return float(integer + (fraction or "") + (exponent or "")), number.end()
        return int(integer), number.end()
    for word, value in _CONSTANTS.items():
        if text.startswith(word, index):
            return value, index + len(word)
    raise _error("Expecting value", text, index)


def _key(text: str, index: int) -> tuple[str, int]:
    """An object's key at ``index`` and the index after its ``:``, whitespace skipped."""
    if not text.startswith('"', index):
        raise _error("Expecting property name enclosed in double quotes", text, index)
    key, index = scanstring(text, index + 1)
    index = _skip(text, index)
    if not text.startswith(":", index):
        raise _error("Expecting ':' delimiter", text, index)
    return key, _skip(text, index + 1)


def _loads_iteratively(text: str) -> Any:
    # Each open container on the stack: the container, and for an object the key whose
    # value comes next (None for an array).
    stack: list[tuple[object, str | None]] = []
    container: Any
    key: str | None
    value: Any
    index = _skip(text, 0)
    while True:
        # A value starts at ``index``: open a container, or read a scalar.
        opener = text[index : index + 1]
        if opener == "{":
            index = _skip(text, index + 1)
            if not text.startswith("}", index):
                key, index = _key(text, index)
                stack.append((dict[str, Any](), key))
                continue
            value, index = dict[str, Any](), index + 1
        elif opener == "[":
            index = _skip(text, index + 1)
            if not text.startswith("]", index):
                stack.append((list[Any](), None))
                continue
            value, index = list[Any](), index + 1
        else:
            value, index = _scalar(text, index)
        # ``value`` is complete: store it, and close every container that completes.
        while stack:
            container, key = cast("tuple[Any, str | None]", stack[-1])
            if key is None:
                container.append(value)
            else:
                container[key] = value
            index = _skip(text, index)
            if text.startswith(",", index):
                index = _skip(text, index + 1)
                if key is not None:
                    key, index = _key(text, index)
                    stack[-1] = (container, key)
                break  # the next value starts at ``index``
            if not text.startswith("]" if key is None else "}", index):
                raise _error("Expecting ',' delimiter", text, index)
            stack.pop()
            value, index = container, index + 1
        else:
            break  # ``value`` is the whole document
    index = _skip(text, index)
    if index != len(text):
        raise _error("Extra data", text, index)
    return value
