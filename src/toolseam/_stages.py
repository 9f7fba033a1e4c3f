"""Stage signatures, and the ordered listener lists the registry chains them from."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Generic, TypeAlias, TypeVar, final

from ._capabilities import ToolEvent
from ._decisions import PostDecision, PreDecision
from ._registration import Registration
from ._results import ToolResult
from ._views import ToolDispatchExecution, ToolExecution

__all__ = [
    "AroundDispatch",
    "EventListener",
    "Guard",
    "Listeners",
    "Next",
    "PostExecuteListener",
    "PreExecuteListener",
    "ResultObserver",
]

T = TypeVar("T")
L = TypeVar("L")

Next: TypeAlias = Callable[[], Awaitable[T]]
"""Call the rest of the chain; await it for the inner outcome."""

PreExecuteListener: TypeAlias = Callable[[ToolExecution, Next[PreDecision]], Awaitable[PreDecision]]
"""``async (exec, next) -> PreDecision``; the innermost ``next`` answers `Allow`."""

Guard: TypeAlias = Callable[[ToolExecution], "str | None"]
"""``(exec) -> str | None``: a string denies the call, final."""

AroundDispatch: TypeAlias = Callable[
    [ToolDispatchExecution, Next[ToolResult]], Awaitable[ToolResult]
]
"""``async (exec, next) -> ToolResult``; the innermost ``next`` dispatches the body."""

PostExecuteListener: TypeAlias = Callable[
    [ToolExecution, ToolResult, Next[PostDecision]], Awaitable[PostDecision]
]
"""``async (exec, result, next) -> PostDecision``; the innermost ``next`` answers `Accept`."""

ResultObserver: TypeAlias = Callable[[ToolExecution, ToolResult], None]
"""``(exec, result) -> None``: sees every published result exactly once."""

EventListener: TypeAlias = Callable[[ToolExecution, ToolEvent], None]
"""``(exec, event) -> None``: sees each progress and log event a body reports, in the event
loop's thread, synchronously (it must not block)."""


@final
class Listeners(Generic[L]):
    """An ordered, copy-on-write list of listeners: the first is outermost.

    Each call snapshots the tuple once, so a listener added or removed while calls run
    affects only later calls.
    """

    __slots__ = ("_keys", "items", "kind")

    items: tuple[L, ...]

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.items = ()
        # One key per entry, parallel to `items`: the same callable may be added twice,
        # and each registration removes its own entry, wherever it now is.
        self._keys: tuple[object, ...] = ()

    def add(self, listener: L, *, prepend: bool = False) -> Registration:
        if not callable(listener):
            raise TypeError(f"{self.kind} must be callable, got {type(listener).__name__}")
        key = object()
        if prepend:
            self.items, self._keys = (listener, *self.items), (key, *self._keys)
        else:
            self.items, self._keys = (*self.items, listener), (*self._keys, key)

        def detach() -> None:
            keys = self._keys
            for index, existing in enumerate(keys):
                if existing is key:
                    self.items = self.items[:index] + self.items[index + 1 :]
                    self._keys = keys[:index] + keys[index + 1 :]
                    return

        return Registration(detach)
