"""Mutants of toolseam.durable for the ``durable.*`` clauses (asyncio only, as DBOS).

Each is toolseam's driver whose durable batch (`toolseam.durable._batch.Batch`, swapped in
the `DurableTools` the driver builds) has exactly one defect, written where a durable
registry would have it: what it records after a cancel, how it decides a call on recovery
or replay, whether the workflow's cancel reaches the signal. `MUTANTS` says which clauses
each breaks.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from typing import Any, cast

import anyio

from toolseam import AbortController, ToolRegistry
from toolseam._definitions import is_idempotent
from toolseam.conformance import Capability, Outcome, Scenario
from toolseam.conformance.drivers._toolseam import capabilities, registry_for, run_on
from toolseam.conformance.drivers._toolseam_durable import POLL_INTERVAL
from toolseam.durable import DurableTools, _engine
from toolseam.durable import _batch as batch

from ._base import Mutant, ToolseamMutant


class _DurableMutant(ToolseamMutant):
    """toolseam's driver, its durable batches being `batch_class`."""

    backends: Sequence[str] = ("asyncio",)
    batch_class: type[batch.Batch] = batch.Batch

    @property
    def capabilities(self) -> Collection[Capability]:
        return capabilities()

    def _durable(self, registry: ToolRegistry) -> DurableTools:
        durable = DurableTools(registry, poll_interval=POLL_INTERVAL)
        durable._batch_class = self.batch_class
        return durable

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        return await run_on(registry_for(scenario), scenario, durable=self._durable)


# -- after a cancel ------------------------------------------------------------------------


class _ForgetfulBatch(batch.Batch):  # type: ignore[misc]
    async def _record_after_cancel(self, slot: Any) -> None:
        # The outcomes of a cancelled workflow's calls are dropped: DBOS refused them.
        return


class RecordsNothingAfterCancel(_DurableMutant):
    """Records no outcome for the calls of a cancelled workflow, as DBOS alone does."""

    batch_class = _ForgetfulBatch


class _DeafBatch(batch.Batch):  # type: ignore[misc]
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        # The caller's signal alone: the workflow's cancel never reaches the bodies.
        self.signal = AbortController().signal


class DoesNotTellTheBody(_DurableMutant):
    """Runs the calls with a signal the workflow's cancel never aborts."""

    batch_class = _DeafBatch


class _DeadlineBlindWatch:
    """A workflow's watch that cannot tell its deadline from a cancel."""

    def __init__(self, watch: Any) -> None:
        self._watch = watch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._watch, name)

    def timed_out(self, signal: object) -> bool:
        return False


class _DeadlineAsCancelBatch(batch.Batch):  # type: ignore[misc]
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        # The deadline still stops the calls, but their outcome says ABORTED, as a cancel's.
        self.watch = cast("Any", _DeadlineBlindWatch(self.watch))


class DeadlineAsCancel(_DurableMutant):
    """Reports the calls a workflow's deadline cut short as aborted, not timed out."""

    batch_class = _DeadlineAsCancelBatch


# -- recovery ------------------------------------------------------------------------------


class _BlindBatch(batch.Batch):  # type: ignore[misc]
    async def _decide_live(self, slot: Any) -> dict[str, Any]:
        # No look at the dispatch marker: a call without outcome simply runs again.
        slot.idempotent = is_idempotent(self._registry.get(slot.name))
        self._decide(slot, batch._LIVE)
        await slot.settled.wait()
        return self._payload(slot)


class RerunsBlindly(_DurableMutant):
    """Runs a call cut short by a crash again, idempotent or not."""

    batch_class = _BlindBatch


class _WaryBatch(batch.Batch):  # type: ignore[misc]
    async def _decide_live(self, slot: Any) -> dict[str, Any]:
        # Every tool taken as not idempotent: a marker is written, and recovery stops there.
        slot.idempotent = False
        marked = await anyio.to_thread.run_sync(
            functools.partial(
                _engine.marker_recorded,
                self._workflow_id,
                slot.marker.step_id,
                batch.marker_step_name(slot.name),
            )
        )
        if marked:
            unknown = batch.failure_from_exception(
                batch.OutcomeUnknownError(slot.name, slot.call.call_id)
            )
            slot.outcome = batch.CallOutcome(slot.call, unknown, True)
            slot.settled.set()
            self._decide(slot, batch._UNKNOWN)
        else:
            self._decide(slot, batch._LIVE)
            await slot.settled.wait()
        return self._payload(slot)


class NeverReruns(_DurableMutant):
    """Ignores that a tool is idempotent: a call cut short by a crash never runs again."""

    batch_class = _WaryBatch


# -- replay --------------------------------------------------------------------------------


class _ForgetsReplayBatch(batch.Batch):  # type: ignore[misc]
    def _replayed(self, slot: Any, payload: object) -> None:
        # The recorded outcome is ignored: the call runs again.
        self._decide(slot, batch._LIVE)


class ReplayRunsBodies(_DurableMutant):
    """Runs the bodies again on replay instead of returning their recorded outcomes."""

    batch_class = _ForgetsReplayBatch


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "durable-records-nothing-after-cancel",
        RecordsNothingAfterCancel,
        frozenset({"durable.one-outcome-after-cancel"}),
        ("asyncio",),
        # A deadline is a cancel for DBOS only once its sweep (about once a second) marks
        # the workflow cancelled: if that lands between the deadline and the outcomes'
        # writes, they are refused and this mutant drops them; otherwise they are written.
        sometimes=frozenset({"durable.timeout"}),
    ),
    Mutant(
        "durable-does-not-tell-the-body",
        DoesNotTellTheBody,
        frozenset(
            {"durable.told-on-cancel", "durable.one-outcome-after-cancel", "durable.timeout"}
        ),
        ("asyncio",),
    ),
    Mutant(
        "durable-deadline-as-cancel", DeadlineAsCancel, frozenset({"durable.timeout"}), ("asyncio",)
    ),
    Mutant(
        "durable-reruns-blindly", RerunsBlindly, frozenset({"durable.no-blind-rerun"}), ("asyncio",)
    ),
    Mutant(
        "durable-never-reruns", NeverReruns, frozenset({"durable.idempotent-reruns"}), ("asyncio",)
    ),
    Mutant(
        "durable-replay-runs-bodies",
        ReplayRunsBodies,
        frozenset({"durable.replay"}),
        ("asyncio",),
    ),
)
"""The ``durable.*`` family's mutants."""
