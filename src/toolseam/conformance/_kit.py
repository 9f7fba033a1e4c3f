"""What a clause works with: scenarios, a running call, and deterministic observations.

`Kit.start` runs `Driver.run` in a task of its own, inside a cancel scope that plays the
host (`Running.host_cancel`). The moment `run` returns or raises, the kit takes the next
number of the probe's sequence and a snapshot of every record, in that same task,
synchronously (`Probe.stamp`): that is the quiescence measurement. `Running.held` lets a
body or stage go on past a gate only once everything else has had every chance to run
(`Kit.let_run`), and `Running.awaited` is the no-racing verdict: the stage's ``finished_at``
came before the call's ``returned_at``. Letting things run is never evidence: a registry
that races its stage is caught by the order of the two numbers, and a registry that waits
can never put them in the wrong order.

The kit never races a body. Its only clock is a watchdog for registries that hang (neither
return nor tell their body): after `WATCHDOG` seconds a wait gives up and the clause fails
saying so, and the kit opens every gate so that the body can end.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Final, NoReturn

import anyio
import anyio.abc

from ._driver import Call, Driver, Outcome, Scenario
from ._probe import BodyRecord, Probe
from ._scripts import Behaviour, ScriptedTool

__all__ = ["LET_RUN_ROUNDS", "WATCHDOG", "Failed", "Kit", "Running", "Skipped"]

WATCHDOG: Final = 10.0
"""Seconds a clause waits for a registry that neither returns nor tells its body."""

LET_RUN_ROUNDS: Final = 64
"""At most this many rounds of `Kit.let_run` before the kit opens a gate regardless.

A round waits until every task is blocked (`anyio.wait_all_tasks_blocked`). On trio that
sees the whole run queue. On asyncio it counts a task whose wake-up is already queued as a
loop callback (a done-callback of ``asyncio.wait``, a ``call_soon`` hop) as blocked, so the
rounds go on while the loop's ready queue holds callbacks. Letting things run only widens
the chance a racing registry has to return before the gate opens; the verdict is the
sequence numbers.
"""


def _current_asyncio_task() -> asyncio.Task[object] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None  # not on asyncio


def _callbacks_queued() -> bool:
    """Whether the event loop has callbacks queued to run (trio: none outside its tasks)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False  # trio: wait_all_tasks_blocked has seen its whole run queue
    # CPython's loops keep their ready queue in `_ready`; a loop that hides it (uvloop) gets
    # every round.
    ready: object = getattr(loop, "_ready", None)
    return True if ready is None else bool(ready)  # pyright: ignore[reportUnknownArgumentType]


class _Cancelled(Exception):
    """A cancellation the registry raised without the host asking (reported, not raised)."""


class Failed(Exception):
    """A clause's verdict: the registry does not do what the clause requires."""


class Skipped(Exception):
    """The clause cannot be measured here (the platform lacks what it measures with)."""


class Running:
    """One scenario in flight: `Driver.run` in its own task, under a host cancel scope."""

    def __init__(self, kit: Kit, scenario: Scenario) -> None:
        self._kit = kit
        self.scenario = scenario
        self.done = False
        self.outcomes: Sequence[Outcome] | None = None
        self.raised: BaseException | None = None
        self.cancelled = False  # the host's cancellation propagated out of run
        self.swallowed = False  # run returned normally although the host cancelled it
        self.at_return: dict[str, BodyRecord] = {}
        self.returned_at: int | None = None  # the probe's sequence when run returned or raised
        self._scope = anyio.CancelScope()
        self._task: asyncio.Task[object] | None = None
        self._host_cancelled = False
        self._on_return: list[Callable[[], object]] = []

    def _stamp(self) -> None:
        """The moment `run` returned: the probe's number, its records, and `on_return`."""
        self.returned_at, self.at_return = self._kit.probe.stamp()
        for callback in self._on_return:
            callback()

    def on_return(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` the moment `run` returns or raises, in the same step as the stamp.

        For measurements the probe cannot hold (what a process table says then).
        """
        self._on_return.append(callback)

    async def _main(self) -> None:
        probe = self._kit.probe
        self._task = _current_asyncio_task()
        with self._scope:
            try:
                self.outcomes = await self._kit.driver.run(self.scenario)
                self._stamp()
            except anyio.get_cancelled_exc_class():
                self._stamp()
                if not self._host_cancelled:
                    # The registry raised a cancellation of its own: that is no result.
                    self.raised = _Cancelled("the call raised a cancellation nobody asked for")
                    return
                self.cancelled = True
                if self._task is None:
                    raise  # trio: the host's cancel scope catches it
                self._task.uncancel()  # asyncio: we are the host that cancelled
            except Exception as error:
                self._stamp()
                self.raised = error
            finally:
                self.done = True
                probe.wake()
        if self._host_cancelled and not self.cancelled:
            self.swallowed = True
            if self._task is not None:
                self._task.uncancel()

    # -- driving -------------------------------------------------------------------------

    def abort(self) -> None:
        """Press the scenario's stop button (the caller's abort)."""
        self.scenario.stop._press()

    def host_cancel(self) -> None:
        """Cancel the task awaiting `Driver.run`, as a host would.

        On asyncio that is one ``Task.cancel()``, what asyncio hosts (``TaskGroup``,
        ``asyncio.timeout``, a cancelled request) do; on trio, a cancel scope.
        """
        if self._host_cancelled or self.done:
            return
        self._host_cancelled = True
        if self._task is not None:
            self._task.cancel()
        else:
            self._scope.cancel()

    def open(self, key: str, gate: str) -> None:
        """Let the body of ``key`` go on past ``gate``."""
        self._kit.probe.open(f"{key}:{gate}")

    # -- observing -----------------------------------------------------------------------

    async def until(self, what: str, key: str) -> BodyRecord:
        """Wait until the body of ``key`` has ``entered``, been ``told`` or ``finished``.

        Also returns when `run` has returned, and fails the clause after the watchdog.
        """
        probe = self._kit.probe

        def reached() -> bool:
            body = probe.body(key)
            if what == "entered":
                hit = body.entered
            elif what == "told":
                hit = body.told is not None
            else:
                hit = body.finished
            return self.done or hit or body.finished

        await self._kit.wait(reached, f"the body of {key!r} to be {what}")
        return probe.body(key)

    async def held(self, key: str, gate: str) -> None:
        """Hold ``key``'s body (or stage) at ``gate`` while everything else runs; then open it.

        Waits until it sits at the (closed) gate — or finished, or `run` returned — lets
        every other task run (`Kit.let_run`), then opens the gate. Whether the registry
        waited for it is `awaited`, read once the call has returned. A body torn down by
        task cancellation at the gate fails the clause.
        """
        probe = self._kit.probe

        def reached() -> bool:
            body = probe.body(key)
            return self.done or body.at_gate == gate or body.finished

        await self._kit.wait(reached, f"the body of {key!r} to reach its {gate!r} step")
        await self._kit.let_run()
        body = probe.body(key)
        self.open(key, gate)
        if body.torn_at == gate:
            self._kit.fail(
                f"{key} was torn down by task cancellation at its {gate!r} step instead of "
                "being awaited"
            )

    def awaited(self, key: str) -> bool:
        """Whether the call returned only after ``key``'s body or stage had finished.

        The evidence is two numbers of the probe's sequence: the one the body took when it
        finished and the one the kit took when `run` returned (or let the host's
        cancellation go on). Call it once `finish` has returned.
        """
        finished_at = self._kit.probe.body(key).finished_at
        return (
            finished_at is not None
            and self.returned_at is not None
            and finished_at < self.returned_at
        )

    def not_awaited(self, key: str, what: str) -> str:
        """Why ``key`` counts as not awaited, in words, with the sequence numbers."""
        finished_at = self._kit.probe.body(key).finished_at
        returned = f"the call returned at step {self.returned_at}"
        if finished_at is None:
            return f"{what} ({returned}; {key} had not finished by then)"
        return f"{what} ({returned}; {key} finished at step {finished_at})"

    async def finish(self) -> Sequence[Outcome]:
        """Open every gate, wait for `run` to end; the outcomes it returned (if any)."""
        probe = self._kit.probe
        await self._kit.let_run()  # let an abort or a cancellation land first
        while not self.done:
            for gate in probe.waiting():
                probe.open(gate)
            await self._kit.wait(lambda: self.done or bool(probe.waiting()), "the call to return")
        return self.outcomes or ()

    def outcome(self, call_id: str) -> Outcome:
        """The one outcome `run` returned for ``call_id``; fails the clause otherwise."""
        if self.raised is not None:
            self._kit.fail(
                f"run raised {type(self.raised).__name__}: {self.raised}; no result for {call_id}"
            )
        found = [o for o in self.outcomes or () if o.call_id == call_id]
        if len(found) != 1:
            self._kit.fail(f"{len(found)} outcomes returned for {call_id}, expected exactly one")
        return found[0]

    def published(self, call_id: str) -> list[Outcome]:
        """The results the registry announced for ``call_id`` (`Scenario.publish`)."""
        return [o for o in self.scenario._published if o.call_id == call_id]

    def quiet_at_return(self) -> list[str]:
        """What was unfinished when `run` returned: ``[]`` when every body had finished.

        Also names bodies that finished without the side effect they make on the way out.
        """
        problems: list[str] = []
        for key, body in sorted(self.at_return.items()):
            if body.entered and not body.finished:
                where = f" (at its {body.at_gate} step)" if body.at_gate else ""
                kind = body.stage
                if kind == "body" and body.thread != self._kit.loop_thread:
                    kind = "thread body"
                problems.append(f"the {kind} of {key.split('@')[0]} was still running{where}")
        return problems


class Kit:
    """A clause's workbench: builds scenarios and runs them against the driver."""

    def __init__(self, driver: Driver, group: anyio.abc.TaskGroup) -> None:
        self.driver = driver
        self._group = group
        self.probe = Probe()
        self.loop_thread = self.probe._loop_thread
        self.runs: list[Running] = []

    def tool(self, name: str, behaviour: Behaviour, **options: object) -> ScriptedTool:
        """A scripted tool reporting to this clause's probe."""
        return ScriptedTool(self.probe, name, behaviour, **options)  # type: ignore[arg-type]

    @staticmethod
    def call(tool: str, key: str) -> Call:
        """A call of ``tool`` whose body reports under ``key`` (also its call id)."""
        return Call(key, tool, {"key": key})

    def start_soon(self, func: Callable[[], Coroutine[Any, Any, object]]) -> None:
        """Run ``func()`` in the clause's task group (the clause must end it before it ends)."""
        self._group.start_soon(func)

    def start(self, scenario: Scenario) -> Running:
        """Start `Driver.run` on ``scenario`` in a task of its own."""
        running = Running(self, scenario)
        self.runs.append(running)
        self._group.start_soon(running._main)
        return running

    async def run(self, scenario: Scenario) -> Running:
        """Start ``scenario`` and wait for it to end."""
        running = self.start(scenario)
        await running.finish()
        return running

    @staticmethod
    async def let_run() -> None:
        """Let every task and loop callback that can run, run; never evidence.

        Returns once every other task is blocked with no callback queued, or after
        `LET_RUN_ROUNDS` rounds.
        """
        for _ in range(LET_RUN_ROUNDS):
            await anyio.wait_all_tasks_blocked()
            if not _callbacks_queued():
                return

    async def wait_at_most(self, condition: Callable[[], bool]) -> bool:
        """Wait for ``condition()``, up to the watchdog; whether it came (never fails)."""
        with anyio.move_on_after(WATCHDOG):
            await self.probe.until(condition)
            return True
        return False

    async def wait(self, condition: Callable[[], bool], what: str) -> None:
        """Wait for ``condition()``; fail the clause if the watchdog expires first."""
        with anyio.move_on_after(WATCHDOG):
            await self.probe.until(condition)
            return
        self.probe.release()
        self.fail(f"gave up after {WATCHDOG:g}s waiting for {what}: the registry hangs")

    @staticmethod
    def fail(detail: str) -> NoReturn:
        """Fail the clause with ``detail``."""
        raise Failed(detail)

    @staticmethod
    def skip(reason: str) -> NoReturn:
        """Skip the clause: the kit cannot measure it on this platform (``reason``)."""
        raise Skipped(reason)

    def check(self, condition: bool, detail: str) -> None:
        """Fail the clause with ``detail`` unless ``condition``."""
        if not condition:
            self.fail(detail)

    async def settle(self) -> list[str]:
        """End the clause: open every gate, let every run and body end; what would not."""
        self.probe.release()
        stuck: list[str] = []
        for running in self.runs:
            with anyio.move_on_after(WATCHDOG):
                await self.probe.until(functools.partial(getattr, running, "done"))
            if not running.done:
                running.host_cancel()
                stuck.append("a call that never returned (cancelled by the kit)")
        with anyio.move_on_after(WATCHDOG):
            await self.probe.until(lambda: not self.probe.running())
        stuck += [f"a body of {key} that never finished" for key in self.probe.running()]
        return stuck
