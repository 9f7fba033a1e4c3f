"""Loop timers: run a callback after a delay, without a task per timer.

A deadline needs no task of its own: asyncio has ``loop.call_later``; trio has no timer
callbacks, so one system task per trio run serves every timer from a heap. Both cost a
few microseconds to arm and cancel, where a task group and a sleeping task cost tens
(contract §7: the timeout policy only *asks* the body to stop, so a timer that aborts a
signal is all it needs).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
from collections.abc import Callable
from typing import Any, Protocol, final

import anyio.lowlevel

__all__ = ["TimerHandle", "call_later"]

logger = logging.getLogger("toolseam")


class TimerHandle(Protocol):
    """What `call_later` returns: ``cancel()`` stops a timer that has not fired yet."""

    def cancel(self) -> None:
        """Stop the timer; idempotent, and harmless once it has fired."""
        ...


def call_later(delay: float, callback: Callable[[], object]) -> TimerHandle:
    """Call ``callback()`` in this event loop's thread after ``delay`` seconds.

    Must be called from inside a running asyncio or trio event loop.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return _trio_timers().call_later(delay, callback)
    return loop.call_later(delay, callback)


_service: anyio.lowlevel.RunVar[_TrioTimers] = anyio.lowlevel.RunVar("toolseam_trio_timers")


def _trio_timers() -> _TrioTimers:
    try:
        return _service.get()
    except LookupError:
        service = _TrioTimers()
        _service.set(service)
        return service


@final
class _Entry:
    __slots__ = ("callback", "owner", "seq", "when")

    def __init__(
        self, when: float, seq: int, callback: Callable[[], object], owner: _TrioTimers
    ) -> None:
        self.when = when
        self.seq = seq
        self.callback: Callable[[], object] | None = callback
        self.owner = owner

    def __lt__(self, other: _Entry) -> bool:
        return (self.when, self.seq) < (other.when, other.seq)

    def cancel(self) -> None:
        if self.callback is not None:
            self.callback = None
            self.owner._cancelled()


@final
class _TrioTimers:
    """Every timer of one trio run, served by one system task sleeping until the next."""

    __slots__ = ("_heap", "_live", "_seq", "_trio", "_wake")

    def __init__(self) -> None:
        import trio  # optional: only a trio run gets here

        self._trio: Any = trio
        self._heap: list[_Entry] = []
        self._live = 0
        self._seq = itertools.count()
        self._wake: Any = trio.Event()
        trio.lowlevel.spawn_system_task(self._serve, name="toolseam timers")

    def call_later(self, delay: float, callback: Callable[[], object]) -> _Entry:
        entry = _Entry(self._trio.current_time() + delay, next(self._seq), callback, self)
        heap = self._heap
        heapq.heappush(heap, entry)
        self._live += 1
        if heap[0] is entry:
            self._wake.set()  # the serving task sleeps until a later time: wake it
        return entry

    def _cancelled(self) -> None:
        self._live -= 1
        heap = self._heap
        # Cancelled entries stay in the heap until their time; drop them in bulk once
        # they are the majority, so memory follows the live timers.
        if len(heap) > 64 and self._live < len(heap) // 2:
            heap[:] = [entry for entry in heap if entry.callback is not None]
            heapq.heapify(heap)

    async def _serve(self) -> None:
        trio = self._trio
        heap = self._heap
        while True:
            now = trio.current_time()
            while heap and heap[0].when <= now:
                entry = heapq.heappop(heap)
                callback = entry.callback
                if callback is None:
                    continue
                entry.callback = None
                self._live -= 1
                try:
                    callback()
                except Exception:
                    logger.exception("timer callback %r raised; contained", callback)
            self._wake = trio.Event()
            with trio.move_on_at(heap[0].when if heap else math.inf):
                await self._wake.wait()
