"""The checks a durable batch passes before anything is recorded, on either engine."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from .._batch import ToolCall
from .._errors import type_name
from .._signals import AbortSignal

__all__ = ["checked_batch"]


def checked_batch(
    calls: Iterable[ToolCall], signal: AbortSignal, max_parallel: int, *, keyed_by: str
) -> list[ToolCall]:
    """The calls as a list, checked before the engine records anything for them.

    ``keyed_by`` says in the error what keys a call by its id and name (DBOS's journal, or
    Temporal's history), since that is why both must be strings.
    """
    if type(signal) is not AbortSignal:
        raise TypeError(f"signal must be an AbortSignal, got {type_name(type(signal))}")
    given = cast("object", max_parallel)
    if isinstance(given, bool) or not isinstance(given, int):
        raise TypeError(f"max_parallel must be an int, got {type_name(type(given))}")
    if max_parallel < 1:
        raise ValueError(f"max_parallel must be at least 1, got {max_parallel}")
    batch = list(calls)
    seen: set[str] = set()
    for position, call in enumerate(batch):
        if type(call) is not ToolCall:
            raise TypeError(
                f"run_tool_calls() expects ToolCall items, got {type_name(type(call))} at "
                f"index {position}: build each one as ToolCall(call_id, name, arguments)"
            )
        for field, value in (("call_id", call.call_id), ("name", call.name)):
            if type(value) is not str:
                raise TypeError(
                    f"a durable call's {field} must be a str ({keyed_by} by it), "
                    f"got {type_name(type(value))} at index {position}"
                )
        if call.call_id in seen:
            raise ValueError(f"duplicate call_id {call.call_id!r} in one batch")
        seen.add(call.call_id)
    return batch
