"""The order of one agent run's tool calls: parallel ones together, exclusive ones alone.

Frameworks start every tool call of a model turn at once; toolseam's per-call
`ToolRegistry.execution_mode` says which of them may overlap. `Gate` applies it.
"""

from __future__ import annotations

from collections import deque
from typing import final

import anyio

__all__ = ["Gate"]


@final
class Gate:
    """Admits a run's tool calls in arrival order: parallel ones together, exclusive alone.

    It carries toolseam's per-call `ToolRegistry.execution_mode` into a framework whose own
    ordering is per tool (pydantic-ai's ``sequential``) or absent (Google ADK): an exclusive
    call waits until every call admitted before it has finished and holds back every call
    that arrives after it, as a barrier.
    """

    __slots__ = ("_exclusive", "_queue", "_running")

    def __init__(self) -> None:
        self._running = 0
        self._exclusive = False
        self._queue: deque[tuple[bool, anyio.Event]] = deque()

    def _admits(self, exclusive: bool) -> bool:
        return self._running == 0 or not (exclusive or self._exclusive)

    def _take(self, exclusive: bool) -> None:
        self._running += 1
        self._exclusive = exclusive

    async def enter(self, exclusive: bool) -> None:
        """Wait for the call's turn; on cancellation, give up the place (or the turn)."""
        if not self._queue and self._admits(exclusive):
            self._take(exclusive)
            return
        entry = (exclusive, anyio.Event())
        self._queue.append(entry)
        try:
            await entry[1].wait()
        except anyio.get_cancelled_exc_class():
            if entry[1].is_set():
                self.leave()  # admitted as the cancellation arrived: hand the turn on
            else:
                self._queue.remove(entry)
                self._wake()
            raise

    @property
    def idle(self) -> bool:
        """No call is admitted and none is waiting."""
        return self._running == 0 and not self._queue

    def leave(self) -> None:
        """A call admitted by `enter` has finished."""
        self._running -= 1
        self._wake()

    def _wake(self) -> None:
        queue = self._queue
        while queue and self._admits(queue[0][0]):
            exclusive, event = queue.popleft()
            self._take(exclusive)
            event.set()
