"""Stage signatures, and the ordered listener lists the registry chains them from."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Generic, TypeAlias, TypeVar, final

from ._decisions import PostDecision, PreDecision
from ._registration import Registration
from ._results import ToolResult
from ._views import ToolDispatchExecution, ToolExecution

__all__ = [
    "AroundDispatch",
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


@final
class Listeners(Generic[L]):
    """An ordered, copy-on-write list of listeners: the first is outermost.

    Each call snapshots the tuple once, so a listener added or removed while calls run
    affects only later calls.
    """

    __slots__ = ("items", "kind")

    items: tuple[L, ...]

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.items = ()

    def add(self, listener: L, *, prepend: bool = False) -> Registration:
        if not callable(listener):
            raise TypeError(f"{self.kind} must be callable, got {type(listener).__name__}")
        item = listener
        self.items = (item, *self.items) if prepend else (*self.items, item)

        def detach() -> None:
            # Remove this registration's entry only (the same callable may be added twice).
            items = list(self.items)
            for index, existing in enumerate(items):
                if existing is item:
                    del items[index]
                    self.items = tuple(items)
                    return

        return Registration(detach)
