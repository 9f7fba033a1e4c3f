"""Probes: what the scripted bodies report, and the gates the kit holds them at.

Every scripted body — and every scripted stage (approver, wrapper, listener), each under a
key of its own — reports, under its call's key, when it enters, when it is told to stop (and
how: through the registry's signal or by task cancellation), each side effect it makes and
when it finishes. Each report takes the next number of one sequence (`Probe.tick`), and so
does the kit when the registry's call returns: "the stage finished before the call
returned" is a comparison of two numbers the probe handed out, whatever the scheduling.
Bodies wait at *gates* the kit opens, so the kit decides when they may finish. Bodies may run
in threads the registry starts (anyio's, asyncio's executor): the probe's state is
lock-guarded, and a thread wakes the kit through the event loop's token.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

import anyio
import anyio.from_thread
import anyio.lowlevel

__all__ = ["BodyRecord", "Probe", "Told"]

Told: TypeAlias = Literal["signal", "task cancellation"]


@dataclass
class BodyRecord:
    """What one body or stage (one key) did; ``*_at`` are numbers of the probe's sequence."""

    entered: bool = False
    told: Told | None = None
    effects: list[str] = field(default_factory=list[str])
    finished: bool = False
    at_gate: str | None = None
    thread: int | None = None
    on_loop_thread: bool = False
    torn_down: bool = False
    torn_at: str | None = None
    stage: str = "body"
    finished_at: int | None = None


class Probe:
    """The kit's record of every scripted body of one scenario."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bodies: dict[str, BodyRecord] = {}
        self._open: set[str] = set()
        self._thread_gates: dict[str, threading.Event] = {}
        self._async_gates: dict[str, anyio.Event] = {}
        self._told: dict[str, Callable[[], bool]] = {}
        self._loop_thread = threading.get_ident()
        self._token = anyio.lowlevel.current_token()
        self._changed = anyio.Event()
        self._clock = 0
        self.finish_order: list[str] = []
        """The keys of the bodies, in the order they finished."""
        self.released: bool = False
        """Set by the kit at the end of a scenario: every gate opens, every wait gives up."""

    # -- reading -------------------------------------------------------------------------

    def body(self, key: str) -> BodyRecord:
        """The record of ``key`` (an empty one if that body never entered)."""
        with self._lock:
            return self._bodies.setdefault(key, BodyRecord())

    def running(self) -> list[str]:
        """Keys of the bodies that entered and have not finished."""
        with self._lock:
            return sorted(k for k, b in self._bodies.items() if b.entered and not b.finished)

    def snapshot(self) -> dict[str, BodyRecord]:
        """A copy of every record, taken at once."""
        return self.stamp()[1]

    def stamp(self) -> tuple[int, dict[str, BodyRecord]]:
        """The next number of the sequence, and a copy of every record, taken at once.

        What the kit records when the registry's call returns: every record whose
        ``finished_at`` is below that number had finished before it.
        """
        with self._lock:
            self._clock += 1
            records = {
                k: dataclasses.replace(b, effects=list(b.effects)) for k, b in self._bodies.items()
            }
            return self._clock, records

    def _tick(self) -> int:
        # Under the lock.
        self._clock += 1
        return self._clock

    async def until(self, condition: Callable[[], bool]) -> None:
        """Wait until ``condition()`` holds (re-checked whenever a body reports)."""
        while not condition():
            changed = self._changed
            if condition():
                return
            await changed.wait()

    # -- what bodies report --------------------------------------------------------------

    def _update(self, key: str, change: Callable[[BodyRecord], object]) -> None:
        with self._lock:
            change(self._bodies.setdefault(key, BodyRecord()))
        self.wake()

    def wake(self) -> None:
        """Wake the kit from any thread (a no-op once the loop is gone)."""
        if threading.get_ident() == self._loop_thread:
            self._set_changed()
            return
        try:
            anyio.from_thread.run_sync(self._set_changed, token=self._token)
        except Exception:  # the kit's loop has ended: nobody is waiting any more
            return

    def _set_changed(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def signal_aborted(self, key: str) -> bool | None:
        """Whether the cancellation the body of ``key`` was given reports aborted *now*."""
        with self._lock:
            is_told = self._told.get(key)
        return None if is_told is None else is_told()

    def entered(
        self, key: str, is_told: Callable[[], bool] | None = None, *, stage: str = "body"
    ) -> None:
        """A body (or the ``stage`` named) started: records its thread, and its `Listen`."""
        ident = threading.get_ident()

        def change(b: BodyRecord) -> None:
            b.entered = True
            b.stage = stage
            b.thread = ident
            b.on_loop_thread = ident == self._loop_thread
            if is_told is not None:
                self._told[key] = is_told

        self._update(key, change)

    def told(self, key: str, how: Told) -> None:
        """A body heard it should stop (the first way it heard counts)."""

        def change(b: BodyRecord) -> None:
            if b.told is None:
                b.told = how
            if how == "task cancellation":
                b.torn_down = True

        self._update(key, change)

    def effect(self, key: str, name: str) -> None:
        """A body made a side effect."""
        self._update(key, lambda b: b.effects.append(name))

    def finished(self, key: str) -> None:
        """A body returned or raised: it is no longer running."""

        def change(b: BodyRecord) -> None:
            b.finished = True
            b.finished_at = self._tick()
            self.finish_order.append(key)

        self._update(key, change)

    # -- gates ---------------------------------------------------------------------------

    def open(self, gate: str) -> None:
        """Open ``gate`` (``"<key>:<name>"``): bodies waiting there go on; later ones pass."""
        with self._lock:
            self._open.add(gate)
            thread_gate = self._thread_gates.get(gate)
            async_gate = self._async_gates.get(gate)
        if thread_gate is not None:
            thread_gate.set()
        if async_gate is not None:
            async_gate.set()

    def waiting(self) -> list[str]:
        """The gates a body is waiting at now."""
        with self._lock:
            gates = (f"{k}:{b.at_gate}" for k, b in self._bodies.items() if b.at_gate)
            return [g for g in gates if g not in self._open]

    def release(self) -> None:
        """Open every gate and stop every wait for a tell (the end of a scenario)."""
        with self._lock:
            self.released = True
            gates = list(self._thread_gates.values())
            events = list(self._async_gates.values())
        for gate in gates:
            gate.set()
        for event in events:
            event.set()
        self._set_changed()

    def _is_open(self, gate: str) -> bool:
        return self.released or gate in self._open

    async def gate(self, key: str, name: str) -> None:
        """Hold an async body at ``<key>:<name>`` until the kit opens it."""
        gate = f"{key}:{name}"
        with self._lock:
            if self._is_open(gate):
                return
            event = self._async_gates.setdefault(gate, anyio.Event())
            self._bodies.setdefault(key, BodyRecord()).at_gate = name
        self.wake()
        try:
            await event.wait()
        except anyio.get_cancelled_exc_class():
            self._update(key, lambda b: setattr(b, "torn_at", name))
            raise
        finally:
            self._update(key, lambda b: setattr(b, "at_gate", None))

    def gate_sync(self, key: str, name: str) -> None:
        """Hold a thread body at ``<key>:<name>`` until the kit opens it.

        A "thread" body the registry runs on the event loop's own thread cannot be held
        (the kit could never open the gate): it passes, and the record says where it ran.
        """
        gate = f"{key}:{name}"
        if threading.get_ident() == self._loop_thread:
            return
        with self._lock:
            if self._is_open(gate):
                return
            event = self._thread_gates.setdefault(gate, threading.Event())
            self._bodies.setdefault(key, BodyRecord()).at_gate = name
        self.wake()
        event.wait()
        self._update(key, lambda b: setattr(b, "at_gate", None))
