"""Mutants of toolseam's ``run_code`` (toolseam.ptc) for the ``ptc.*`` clauses.

Each is toolseam's driver whose code-running tool has exactly one defect, written where a
PTC runtime would have it: the run of one program (`toolseam.ptc._run.Run`), replaced in
the tool the driver builds. `MUTANTS` says which clauses each breaks.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Sequence
from typing import Any

import anyio

from toolseam import AbortController, ToolRegistry, nested_input
from toolseam.conformance import Outcome, Scenario
from toolseam.conformance.drivers._toolseam import registry_for, run_on
from toolseam.conformance.drivers._toolseam_ptc import run_program
from toolseam.ptc import PtcTool, ptc_tool
from toolseam.ptc._run import Run, _Nested

from ._base import Mutant, ToolseamMutant, race_abort


class _PtcMutant(ToolseamMutant):
    """toolseam's driver, its ``run_code`` runs being `run_class`."""

    run_class: type[Run] = Run

    def _build(self, registry: ToolRegistry, **options: Any) -> PtcTool:
        tool = ptc_tool(registry, **options)
        tool._run_class = self.run_class
        return tool

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        program = functools.partial(run_program, build=self._build)
        return await run_on(registry_for(scenario), scenario, program=program)


# -- the stop ---------------------------------------------------------------------------


class _RacingRun(Run):
    async def run(self) -> Any:
        # The program's run, raced with the caller's abort (and the host's cancellation):
        # at the stop run_code returns, and its nested calls and sandbox are left behind.
        finished = await race_abort(super().run, self._exec.signal.wait)
        if finished is None:
            self._exec.signal.raise_if_aborted()
        assert finished is not None
        return finished[0]


class RacesTheStop(_PtcMutant):
    """Returns at the stop, leaving the nested calls in flight and the sandbox behind."""

    run_class = _RacingRun


# -- what the model is told --------------------------------------------------------------


class _NoNeverRanRun(Run):
    def nested_calls(self) -> Any:
        calls = [dict(entry) for entry in super().nested_calls()]
        for entry in calls:
            if entry["code"] == "ABORTED_BEFORE_DISPATCH":
                entry["code"] = "ABORTED"
        return calls


class ListsNeverRanAsAborted(_PtcMutant):
    """Lists a nested call that never ran as ABORTED, like one stopped while it ran."""

    run_class = _NoNeverRanRun


# -- calls after the stop ----------------------------------------------------------------


class _DispatchingRun(Run):
    async def _begin(self, call: _Nested) -> None:
        if not self.signal.aborted:
            await super()._begin(call)
            return
        # After the stop: dispatched with a signal of its own, as if nothing had happened.
        call_input = dataclasses.replace(
            nested_input(
                self._exec, call_id=call.call_id, name=call.name, arguments=call.arguments
            ),
            signal=AbortController().signal,
        )
        self._in_flight += 1
        await self._execute(call, call_input, False)


class DispatchesAfterStop(_PtcMutant):
    """Runs the nested calls a program makes after the stop."""

    run_class = _DispatchingRun


# -- the sandbox at the return -------------------------------------------------------------

_LATE = 0.3  # seconds after the return that the mutant's kill lands


class _KillsLateRun(Run):
    """Once the stop's grace is over: returns, and leaves the kill to a timer."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._late = anyio.Event()

    async def _watch(self, scope: anyio.CancelScope) -> None:
        with scope:  # Run._watch, but for its last step
            await self.signal.wait()
            self._sandbox.doom()
            self._wake_driver()
            while self._live:
                await self._wait_change(stoppable=False)
            await anyio.sleep(self._config.grace)
            threading.Timer(_LATE, self._sandbox.kill).start()
            self._late.set()

    async def _drive(self) -> None:
        if await race_abort(super()._drive, self._late.wait) is None:
            with self._cond:  # the program is left behind: nothing more to dispatch
                self._driver_done = True
                bell = self._ring()
            if bell is not None:
                bell.abort()


class KillsAfterReturning(_PtcMutant):
    """Returns from a stopped call before its sandbox process has exited."""

    run_class = _KillsLateRun


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "ptc-races-the-stop",
        RacesTheStop,
        frozenset(
            {
                "ptc.nested-told-and-awaited",
                "ptc.never-ran-labelled",
                "ptc.sandbox-gone",
                "ptc.host-cancel",
            }
        ),
    ),
    Mutant(
        "ptc-never-ran-as-aborted", ListsNeverRanAsAborted, frozenset({"ptc.never-ran-labelled"})
    ),
    Mutant("ptc-dispatches-after-stop", DispatchesAfterStop, frozenset({"ptc.no-call-after-stop"})),
    Mutant("ptc-kills-after-returning", KillsAfterReturning, frozenset({"ptc.sandbox-gone"})),
)
"""The ``ptc.*`` family's mutants."""
