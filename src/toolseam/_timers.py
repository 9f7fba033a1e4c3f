"""Loop timers: run a callback after a delay, without a task or a loop timer per call.

A deadline needs no task of its own, and most deadlines never fire: a call ends long before
its timeout. So each event loop gets one timer service that keeps its timers in a deque per
delay (timers of one delay are armed in the order they expire, so each deque stays sorted
with no heap) and one native wake-up, for the earliest: ``loop.call_at`` on asyncio, a
system task sleeping until then on trio. Arming a timer appends to a deque; cancelling one
marks it and drops it if it is at the front, as it is when calls end in order; the
wake-up is moved only when a new timer expires before it (contract §7: the timeout policy
only *asks* the body to stop, so a timer that aborts a signal is all it needs).
"""

from __future__ import annotations

import asyncio
import logging
import math
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, final

__all__ = ["Timer", "arm", "live_timers"]

logger = logging.getLogger("toolseam")


def arm(timer: Timer, delay: float) -> None:
    """Arm ``timer`` (whose ``callback`` is set) to fire after ``delay`` seconds.

    The timer is its own entry in the service: one allocation per timer. Must be called
    from inside a running asyncio or trio event loop.
    """
    _service().arm(timer, delay)


def live_timers() -> int:
    """Timers armed in this event loop and neither fired nor cancelled (for tests)."""
    return _service()._live


_last: tuple[object, _Timers] | None = None
_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Timers] = (
    weakref.WeakKeyDictionary()
)


def _service() -> _Timers:
    global _last
    # Not get_running_loop(): under trio its RuntimeError would cost more than the timer.
    loop = asyncio._get_running_loop()  # pyright: ignore[reportPrivateUsage]
    if loop is None:
        return _trio_timers()
    last = _last
    if last is not None and last[0] is loop:
        return last[1]
    service = _by_loop.get(loop)
    if service is None:
        service = _by_loop[loop] = _AsyncioTimers(loop)
    _last = (loop, service)
    return service


class Timer:
    """One armed timer: a subclass may be its own entry (its ``callback`` set to itself)."""

    __slots__ = ("bucket", "callback", "owner", "when")

    when: float
    callback: Callable[[], object] | None
    owner: _Timers
    bucket: deque[Timer]

    def cancel(self) -> None:
        """Stop the timer; idempotent, and harmless once it has fired."""
        if self.callback is not None:
            self.callback = None
            bucket = self.bucket
            if bucket[0] is self:
                # Calls mostly end in the order they started: the front is dropped at once.
                bucket.popleft()
                self.owner._live -= 1
                if bucket and bucket[0].callback is None:
                    self.owner._drop_cancelled_front(bucket)
            else:
                self.owner._cancelled(self)


class _Timers:
    """The timers of one event loop, a deque per delay; subclasses arm the wake-up."""

    __slots__ = ("_armed_at", "_buckets", "_dead", "_live")

    def __init__(self) -> None:
        self._buckets: dict[float, deque[Timer]] = {}
        self._live = 0
        self._dead = 0  # cancelled entries still queued behind a live one
        self._armed_at = math.inf  # when the native wake-up is due

    def _now(self) -> float:
        raise NotImplementedError

    def _arm(self, when: float) -> None:
        raise NotImplementedError

    def arm(self, entry: Timer, delay: float) -> None:
        bucket = self._buckets.get(delay)
        if bucket is None:
            bucket = self._buckets[delay] = deque()
        when = entry.when = self._now() + delay
        entry.owner = self
        entry.bucket = bucket
        bucket.append(entry)
        self._live += 1
        if when < self._armed_at:
            self._armed_at = when
            self._arm(when)

    def _cancelled(self, entry: Timer) -> None:
        """``entry``, not at the front of its deque, was cancelled: it stays queued."""
        self._live -= 1
        self._dead += 1
        # Dropped in bulk once they are the majority, so memory follows the live timers.
        if self._dead > 64 and self._dead > self._live:
            self._compact()

    def _drop_cancelled_front(self, bucket: deque[Timer]) -> None:
        while bucket and bucket[0].callback is None:
            bucket.popleft()
            self._dead -= 1

    def _compact(self) -> None:
        for delay, bucket in list(self._buckets.items()):
            kept = deque(entry for entry in bucket if entry.callback is not None)
            for entry in kept:
                entry.bucket = kept
            self._buckets[delay] = kept
        self._dead = 0

    def _fire_due(self) -> float:
        """Run every timer that is due; return when the next one is (``inf``: none)."""
        now = self._now()
        due: list[Callable[[], object]] = []
        following = math.inf
        for bucket in self._buckets.values():
            while bucket:
                head = bucket[0]
                if head.callback is None:
                    bucket.popleft()
                    self._dead -= 1
                    continue
                if head.when > now:
                    following = min(following, head.when)
                    break
                bucket.popleft()
                due.append(head.callback)
                head.callback = None
                self._live -= 1
        self._armed_at = following
        for callback in due:
            try:
                callback()
            except Exception:
                logger.exception("timer callback %r raised; contained", callback)
        # A callback may have armed a timer: _armed_at already accounts for it.
        return self._armed_at


@final
class _AsyncioTimers(_Timers):
    __slots__ = ("_handle", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._loop = loop
        self._handle: asyncio.TimerHandle | None = None

    def _now(self) -> float:
        return self._loop.time()

    def _arm(self, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = self._loop.call_at(when, self._wake)

    def _wake(self) -> None:
        self._handle = None
        following = self._fire_due()
        if following < math.inf and self._handle is None:
            self._handle = self._loop.call_at(following, self._wake)


_trio_service: Any = None  # trio.lowlevel.RunVar, made on first use under trio


def _trio_timers() -> _TrioTimers:
    global _trio_service
    import trio  # optional: only a trio run gets here

    run_var: Any = _trio_service
    if run_var is None:
        run_var = _trio_service = trio.lowlevel.RunVar[_TrioTimers]("toolseam_trio_timers")
    try:
        service: _TrioTimers = run_var.get()
    except LookupError:
        service = _TrioTimers(trio)
        run_var.set(service)
    return service


@final
class _TrioTimers(_Timers):
    """One system task per trio run sleeps until the earliest timer."""

    __slots__ = ("_trio", "_wake")

    def __init__(self, trio: Any) -> None:
        super().__init__()
        self._trio = trio
        self._wake: Any = trio.Event()
        trio.lowlevel.spawn_system_task(self._serve, name="toolseam timers")

    def _now(self) -> float:
        now: float = self._trio.current_time()
        return now

    def _arm(self, when: float) -> None:
        self._wake.set()  # the serving task sleeps until a later time: wake it

    async def _serve(self) -> None:
        trio = self._trio
        while True:
            following = self._fire_due()
            self._wake = trio.Event()
            with trio.move_on_at(following):
                await self._wake.wait()
