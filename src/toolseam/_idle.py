"""`ToolRegistry.wait_idle`'s accounting: calls in flight, counted by generation.

A call is counted into the current generation when its run is made (`Engine._new_run`) and
out when it publishes (`Engine._publish`); both count inline, on the hot path, and call
`Generations._left` only when an older generation empties. `wait_idle` starts a new
generation and waits, on an abort signal that any thread may abort, for every older one to
drain.
"""

from __future__ import annotations

import threading
from typing import final

import anyio.lowlevel

from ._signals import AbortController

__all__ = ["Generations"]


class Generations:
    """The generations of calls in flight, and the `wait_idle` calls waiting for them.

    A base of `ToolRegistry` (through `Engine`): its slots are the registry's own, read and
    written inline by the engine's hot path.
    """

    __slots__ = ("_epoch", "_floor", "_idle_lock", "_idle_waiters", "_in_flight")

    def __init__(self) -> None:
        # wait_idle(): calls in flight per generation; a wait_idle() call starts a new one
        # and waits for every older generation to drain. The current generation is always a
        # key; an older one is a key exactly while it has calls in flight (see _left).
        self._epoch = 0
        self._in_flight: dict[int, int] = {0: 0}
        self._floor = 0  # the oldest generation in _in_flight: older ones have drained
        self._idle_waiters: list[_IdleWaiter] = []  # by target generation, oldest first
        self._idle_lock = threading.Lock()  # see _left

    async def wait_idle(self) -> None:
        """Return once every call started so far has published its one result.

        For hosts that cancel a task running `execute` and do not wait for it (the call
        still finishes: its body is aborted and awaited, a thread body included, before
        the result is published), and for shutdown. Calls started after this method was
        called are not waited for, nor are calls on other threads' event loops started
        after it (a registry may serve several loops). Always reaches a checkpoint.
        """
        waiter = _IdleWaiter()  # its signal aborts, from whichever thread, once drained
        with self._idle_lock:  # allocates nothing: see _left
            target = self._epoch
            self._epoch = target + 1
            in_flight = self._in_flight
            in_flight[target + 1] = 0
            if not in_flight[target]:  # the generation that ends here has nothing in flight
                self._forget(target)
            waiter.target = target
            drained = self._floor > target
            if not drained:
                self._idle_waiters.append(waiter)
        if drained:
            await anyio.lowlevel.checkpoint()
            return
        signal = waiter.controller.signal
        try:
            await signal.wait()
        finally:
            if not signal.aborted:  # cancelled: nobody is to wake it now
                with self._idle_lock:
                    waiters = self._idle_waiters
                    if waiter in waiters:  # identity: no __eq__; _left may have taken it
                        waiters.remove(waiter)

    def _forget(self, epoch: int) -> None:
        """Under ``_idle_lock``: generation ``epoch`` has drained; move the floor past it."""
        in_flight = self._in_flight
        in_flight.pop(epoch, None)
        floor = self._floor
        while floor not in in_flight:  # the current generation is always a key
            floor += 1
        self._floor = floor

    def _left(self, epoch: int) -> None:
        """The last call of an older generation has published: wake whom it was holding.

        `_publish` counts every other call out itself (the common case, kept inline). A
        registry may serve several event loops in several threads (a LangChain tool's
        synchronous ``invoke`` runs its own): the generations and the waiters change under
        ``_idle_lock``, and a waiter is an abort signal, which wakes its own loop from any
        thread. The hot paths' read-and-update of a count (`_new_run`, `_publish`) has no
        call in it, so with the GIL no other thread runs in between.

        Nothing under ``_idle_lock`` allocates, so no garbage collection — and no finalizer
        — runs inside it: a finalizer may close a suspended call, whose publishing ends up
        here, in the thread that holds the lock (contract §2, threads and finalizers). Hence
        the floor: a waiter's generation has drained once the floor has passed it, a test
        that needs no iteration (the waiters are kept oldest first).
        """
        woken: list[_IdleWaiter] = []
        with self._idle_lock:
            self._forget(epoch)
            waiters = self._idle_waiters
            floor = self._floor
            while waiters and waiters[0].target < floor:
                woken.append(waiters.pop(0))
        for waiter in woken:
            waiter.controller.abort()


@final
class _IdleWaiter:
    """One `ToolRegistry.wait_idle` call: made before the lock, so the lock allocates nothing."""

    __slots__ = ("controller", "target")

    def __init__(self) -> None:
        self.target = 0  # the newest generation it waits for
        self.controller = AbortController()
