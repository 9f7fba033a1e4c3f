"""One batch of tool calls inside a DBOS workflow: each call's outcome one step of the journal.

The batch itself is toolseam's `run_tool_calls`, unchanged, so a durable batch keeps every
rule of contract §7 (model order, parallel groups and exclusive barriers, one outcome per
call, the unstarted ones `ABORTED_BEFORE_DISPATCH` after an abort). Around it:

1. **Step ids.** Each call draws two step ids, in model order, before anything runs
   (`DBOS.reserve_step`): its dispatch marker's and its outcome's. The layout does not
   depend on the registry, so a replay after a tool was removed or changed finds every
   recorded step where it left it.
2. **Replay.** Each call's outcome step starts at once (`StepReservation.run_async`). DBOS
   first looks for a recorded outcome; if there is one it returns it without calling the
   step function, and the call is *replayed*: its body does not run. Otherwise DBOS calls
   the step function, which decides the call: *live* (it runs in the batch); or, for a tool
   that is not idempotent whose dispatch marker is recorded, *unknown* (the call was
   dispatched by an execution that died before its outcome was recorded:
   `OUTCOME_UNKNOWN`, never a second run).
3. **Live calls** run through `run_tool_calls` with the caller's signal fused with the
   workflow's (`Watch`). Right before a live call's body may start, the batch's
   around-dispatch wrapper records its dispatch marker (for a tool that is not idempotent;
   the markers of the calls that reach their dispatch in the same turn of the event loop in
   one commit); each call's one result reaches its outcome step as soon as the registry
   publishes it (a result observer), and DBOS records it there.
4. **Cancellation: the journal decides.** Once the workflow is cancelled (or resumed by
   another execution), DBOS refuses this execution's writes, and its replay check raises
   "cancelled" *before* it reads a call's record. A call this execution cannot vouch for is
   then decided from the journal itself (`_engine.recorded_steps`), never from the error:
   a recorded outcome is the call's outcome; a dispatch marker without an outcome, that
   this execution did not write, is `OUTCOME_UNKNOWN`; `ABORTED_BEFORE_DISPATCH` only for
   a call with neither, or whose marker this execution committed and whose body it then
   did not start (it knows). What the journal lacks is written by
   `_engine.record_after_cancel`, so it still holds exactly one outcome per call, and the
   workflow code gets what the journal holds.

Every outcome step runs shielded from host cancellation: a cancelled workflow task still
records what its calls did before the cancellation goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, Final, final

import anyio
import anyio.lowlevel
from dbos import DBOS, StepReservation
from dbos._error import DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError

from .._batch import CallOutcome, ToolCall, run_tool_calls
from .._definitions import is_idempotent
from .._errors import TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH, ToolTimeoutError
from .._principal import Principal
from .._registry import ToolRegistry
from .._results import ToolFailure, ToolResult, aborted_result, failure_from_exception
from .._signals import AbortSignal
from .._stages import Next
from .._views import ExecutionToken, ToolDispatchExecution, ToolExecution, ToolHost
from . import _engine
from ._errors import OutcomeUnknownError, UnrecordableResultError
from ._records import (
    decode_outcome,
    encode_marker,
    encode_outcome,
    marker_step_name,
    outcome_step_name,
)
from ._watch import WORKFLOW_TIMED_OUT, Watch

__all__ = ["ACTIVE", "Batch"]

# What DBOS raises at a step of an execution that no longer owns its workflow: cancelled
# (or timed out), or resumed elsewhere. Both are BaseExceptions.
_OWNERSHIP_LOST: Final = (DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError)

ACTIVE: ContextVar[Batch | None] = ContextVar("toolseam.durable batch", default=None)
"""The durable batch whose `run_tool_calls` is running in this context, if any."""

_PENDING, _REPLAYED, _LIVE, _UNKNOWN, _CANCELLED, _FAILED = range(6)


@final
class _MarkerCommit:
    """The dispatch markers of the calls that reach their dispatch together: one commit."""

    __slots__ = ("done", "error", "lost", "slots")

    def __init__(self) -> None:
        self.slots: list[_Slot] = []
        self.done = anyio.Event()
        self.lost = False
        self.error: Exception | None = None


@final
class _Slot:
    """One call of the batch: its two step ids, what was decided, and its one outcome."""

    __slots__ = (
        "call",
        "decided",
        "idempotent",
        "marked",
        "marker",
        "outcome",
        "own_marker",
        "settled",
        "state",
        "step",
        "writing",
    )

    def __init__(self, call: ToolCall, marker: StepReservation, step: StepReservation) -> None:
        self.call = call
        self.marker = marker
        self.step = step
        self.idempotent = False
        self.state = _PENDING
        self.marked = False
        # This execution committed the call's dispatch marker (and so knows whether the
        # body started: a marker it did not write says only "maybe").
        self.own_marker = False
        self.outcome: CallOutcome | None = None
        self.settled = anyio.Event()
        self.decided = False
        self.writing = False  # holds the batch's turn to write an outcome

    @property
    def name(self) -> str:
        # Validated to be an exact str when the batch was built.
        return self.call.name


@final
class Batch:
    """A batch of calls of one workflow (see the module docstring).

    Args:
        tools: Who runs it (its registry, and the wrapper and observer it installed).
        registry: The registry.
        workflow_id: The workflow whose code runs the batch.
        calls: The calls, validated, in model order.
        signal: The batch's signal: the caller's, fused with ``watch``'s.
        watch: The workflow's cancellation and deadline.
        parent: ``parent`` of every call (`run_tool_calls`).
    """

    __slots__ = (
        "_by_call_id",
        "_commit",
        "_errors",
        "_registry",
        "_slots",
        "_undecided",
        "_workflow_id",
        "_writing",
        "all_decided",
        "parent",
        "signal",
        "tools",
        "watch",
    )

    def __init__(
        self,
        tools: object,
        registry: ToolRegistry,
        workflow_id: str,
        calls: Sequence[ToolCall],
        signal: AbortSignal,
        watch: Watch,
        parent: ExecutionToken | None,
    ) -> None:
        self.tools = tools
        self._registry = registry
        self._workflow_id = workflow_id
        self.signal = signal
        self.watch = watch
        self.parent = parent
        # contract §7's model order is the order of the step ids: drawn here, before any
        # task starts, two per call whatever the registry holds.
        self._slots = [_Slot(call, _reserve(), _reserve()) for call in calls]
        self._by_call_id = {slot.call.call_id: slot for slot in self._slots}
        self._undecided = len(self._slots)
        self.all_decided = anyio.Event()
        if not self._slots:
            self.all_decided.set()
        self._errors: list[Exception] = []
        self._commit: _MarkerCommit | None = None
        # On SQLite, one outcome write of the batch at a time: concurrent commits only
        # contend (each backs off while another holds the write lock). Postgres takes them
        # side by side.
        self._writing: anyio.Lock | None = anyio.Lock() if _engine.single_writer() else None

    async def run(
        self,
        *,
        max_parallel: int,
        agent: object | None,
        root_call_id: str | None,
        host: ToolHost | None,
        principal: Principal | None,
    ) -> list[CallOutcome]:
        """Run the batch; return one outcome per call, in model order.

        What `run_tool_calls` raises (a held ``KeyboardInterrupt``, a host cancellation)
        propagates bare, once every call's outcome is recorded.
        """
        try:
            await self._run(
                max_parallel=max_parallel,
                agent=agent,
                root_call_id=root_call_id,
                host=host,
                principal=principal,
            )
        except BaseExceptionGroup as group:
            # The step tasks raise nothing: what the group holds is the batch's own, alone.
            raise group.exceptions[0] if len(group.exceptions) == 1 else group  # noqa: B904
        if self._errors:
            raise self._errors[0]
        return [slot.outcome for slot in self._slots if slot.outcome is not None]

    async def _run(
        self,
        *,
        max_parallel: int,
        agent: object | None,
        root_call_id: str | None,
        host: ToolHost | None,
        principal: Principal | None,
    ) -> None:
        async with anyio.create_task_group() as steps:
            for slot in self._slots:
                steps.start_soon(self._record, slot)
            try:
                await self.all_decided.wait()
                live = [slot for slot in self._slots if slot.state == _LIVE]
                if live and not self._errors:
                    token = ACTIVE.set(self)
                    try:
                        outcomes = await run_tool_calls(
                            self._registry,
                            [slot.call for slot in live],
                            signal=self.signal,
                            max_parallel=max_parallel,
                            agent=agent,
                            parent=self.parent,
                            root_call_id=root_call_id,
                            host=host,
                            principal=principal,
                        )
                    finally:
                        ACTIVE.reset(token)
                    for slot, outcome in zip(live, outcomes, strict=True):
                        self._settle(slot, outcome)
            finally:
                # Whatever stopped the batch, every call gets its one outcome, to record.
                for slot in self._slots:
                    if slot.outcome is None:
                        skipped = aborted_result(body_invoked=False)
                        self._settle(slot, CallOutcome(slot.call, skipped, False))

    # -- decisions ---------------------------------------------------------------------

    def _decide(self, slot: _Slot, state: int) -> None:
        if slot.decided:
            return
        slot.decided = True
        slot.state = state
        self._undecided -= 1
        if not self._undecided:
            self.all_decided.set()

    @staticmethod
    def _settle(slot: _Slot, outcome: CallOutcome) -> None:
        if slot.outcome is None:
            slot.outcome = outcome
            slot.settled.set()

    async def _record(self, slot: _Slot) -> None:
        """The call's outcome step: replayed, or decided and then recorded."""
        with anyio.CancelScope(shield=True):
            try:
                try:
                    payload: object = await slot.step.run_async(
                        {"name": outcome_step_name(slot.name)}, self._decide_live, slot
                    )
                finally:
                    if slot.writing and self._writing is not None:
                        slot.writing = False
                        self._writing.release()
            except _OWNERSHIP_LOST:
                # DBOS refused a read or a write of this execution, maybe before it read
                # the call's record: what the error says about the call is nothing.
                self.watch.cancelled()
                self._decide(slot, _CANCELLED)  # not run, if not decided yet
                await slot.settled.wait()
                try:
                    await self._record_after_cancel(slot)
                except Exception as error:
                    self._errors.append(error)
            except Exception as error:
                self._errors.append(error)
                self._decide(slot, _FAILED)
            else:
                if slot.state == _PENDING:
                    self._replayed(slot, payload)

    def _replayed(self, slot: _Slot, payload: object) -> None:
        try:
            recorded = self._recorded(slot, payload)
        except (RuntimeError, ValueError) as error:
            self._errors.append(error)
            self._decide(slot, _FAILED)
            return
        # The recorded outcome, whatever an interrupted batch settled meanwhile.
        slot.outcome = recorded
        slot.settled.set()
        self._decide(slot, _REPLAYED)

    def _recorded(self, slot: _Slot, payload: object) -> CallOutcome:
        """The call's recorded outcome, read from ``payload``.

        Raises:
            ValueError: ``payload`` is not a toolseam outcome.
            RuntimeError: It is another call's (the workflow is not deterministic).
        """
        recorded = decode_outcome(payload)
        if recorded.call.call_id != slot.call.call_id:
            raise RuntimeError(
                f"workflow {self._workflow_id!r}: step {slot.step.step_id} recorded call "
                f"{recorded.call.call_id!r} of tool {recorded.call.name!r}, but this "
                f"execution has call {slot.call.call_id!r} there: the workflow is not "
                "deterministic (call ids must come from recorded steps)"
            )
        return CallOutcome(slot.call, recorded.result, recorded.dispatched)

    async def _decide_live(self, slot: _Slot) -> dict[str, Any]:
        """The outcome step's function: DBOS found no recorded outcome for the call."""
        slot.idempotent = is_idempotent(self._registry.get(slot.name))
        if not slot.idempotent and await anyio.to_thread.run_sync(
            _engine.marker_recorded,
            self._workflow_id,
            slot.marker.step_id,
            marker_step_name(slot.name),
        ):
            # Dispatched by an execution that stopped before recording the outcome. Set even
            # over what an interrupted batch settled meanwhile: that is what is true.
            unknown = failure_from_exception(OutcomeUnknownError(slot.name, slot.call.call_id))
            slot.outcome = CallOutcome(slot.call, unknown, True)
            slot.settled.set()
            self._decide(slot, _UNKNOWN)
        else:
            self._decide(slot, _LIVE)
            await slot.settled.wait()
        payload = self._payload(slot)
        if self._writing is not None:
            # DBOS writes the outcome once this returns, in this task; `_record` releases.
            await self._writing.acquire()
            slot.writing = True
        return payload

    def _payload(self, slot: _Slot) -> dict[str, Any]:
        """The outcome as DBOS will record it; a result DBOS cannot serialize is replaced."""
        outcome = slot.outcome
        assert outcome is not None
        payload = encode_outcome(outcome)
        try:
            _engine.check_serializable(payload)
        except Exception as error:
            failure = failure_from_exception(
                UnrecordableResultError(slot.name, error),
                additional_contexts=outcome.result.additional_contexts,
            )
            slot.outcome = outcome = CallOutcome(slot.call, failure, outcome.dispatched)
            payload = encode_outcome(outcome)
        return payload

    async def _record_after_cancel(self, slot: _Slot) -> None:
        """Record the outcome of a call of a cancelled workflow (see `_engine`).

        The journal decides first: a recorded outcome stands (and is the call's); a marker
        this execution did not write turns a call it did not start into `OUTCOME_UNKNOWN`.
        """
        records = await anyio.to_thread.run_sync(
            _engine.recorded_steps,
            self._workflow_id,
            (slot.marker.step_id, slot.step.step_id),
        )
        if self._adopt(slot, records):
            return
        marker = records.get(slot.marker.step_id)
        outcome = slot.outcome
        assert outcome is not None
        if (
            marker is not None
            and marker[0] == marker_step_name(slot.name)
            and not slot.own_marker
            and not _ran(outcome)
        ):
            # Dispatched by an execution that stopped before recording the outcome.
            unknown = failure_from_exception(OutcomeUnknownError(slot.name, slot.call.call_id))
            slot.outcome = CallOutcome(slot.call, unknown, True)
            slot.state = _UNKNOWN
        payload = self._payload(slot)
        recorded = await anyio.to_thread.run_sync(
            _engine.record_after_cancel,
            self._workflow_id,
            slot.step.step_id,
            outcome_step_name(slot.name),
            payload,
        )
        if not recorded:
            # Another execution recorded the call first: the journal's outcome is the call's.
            records = await anyio.to_thread.run_sync(
                _engine.recorded_steps, self._workflow_id, (slot.step.step_id,)
            )
            if not self._adopt(slot, records):
                raise RuntimeError(
                    f"workflow {self._workflow_id!r}: step {slot.step.step_id} is recorded, "
                    "but holds no outcome of this call"
                )

    def _adopt(self, slot: _Slot, records: dict[int, tuple[str, object]]) -> bool:
        """Take the call's recorded outcome, if ``records`` hold it.

        Raises:
            RuntimeError: The step holds another step, or another call's outcome.
            ValueError: The step holds something else than a toolseam outcome.
        """
        entry = records.get(slot.step.step_id)
        if entry is None:
            return False
        name, payload = entry
        if name != outcome_step_name(slot.name):
            raise RuntimeError(
                f"workflow {self._workflow_id!r}: step {slot.step.step_id} recorded {name!r}, "
                f"but this execution has {outcome_step_name(slot.name)!r} there: the "
                "workflow is not deterministic"
            )
        slot.outcome = self._recorded(slot, payload)
        slot.state = _REPLAYED
        return True

    # -- the registry's side: the wrapper and the observer of `DurableTools` ------------

    def _live_slot(self, execution: ToolExecution) -> _Slot | None:
        if execution.parent is not self.parent:
            return None
        slot = self._by_call_id.get(execution.call_id)
        return slot if slot is not None and slot.state == _LIVE else None

    def published(self, execution: ToolExecution, result: ToolResult) -> None:
        """A result observer: a live call's one result, to its outcome step at once."""
        if execution.signal is not self.signal:
            return  # a call a body made on its own, with a call id of the batch
        slot = self._live_slot(execution)
        if slot is None or slot.outcome is not None:
            return
        if isinstance(result, ToolFailure) and result.code == TOOL_ABORTED_BEFORE_DISPATCH:
            return  # started or skipped? `run_tool_calls` says, once it returns
        self._settle(slot, CallOutcome(slot.call, result, True))

    async def dispatching(
        self, execution: ToolDispatchExecution, next: Next[ToolResult]
    ) -> ToolResult:
        """An around-dispatch wrapper: the marker before the body, `TOOL_TIMEOUT` after."""
        slot = self._live_slot(execution)
        if slot is None or slot.marked:
            return await next()
        slot.marked = True
        if not slot.idempotent:
            with anyio.CancelScope(shield=True):
                if not await self._mark(slot):
                    # No marker, no body: the workflow was cancelled before the call began.
                    self.watch.cancelled()
                    return aborted_result(body_invoked=False)
            slot.own_marker = True
        result = await next()
        if (
            isinstance(result, ToolFailure)
            and result.code == TOOL_ABORTED
            and self.watch.timed_out(self.signal)
        ):
            return failure_from_exception(
                ToolTimeoutError(WORKFLOW_TIMED_OUT),
                additional_contexts=result.additional_contexts,
            )
        return result

    async def _mark(self, slot: _Slot) -> bool:
        """Commit the call's dispatch marker; ``False`` if this execution lost the workflow.

        The markers of every call that reaches its dispatch before the commit starts (the
        calls of a parallel group, started together) go in the same commit, all or none:
        each body still starts only once its own marker is committed.

        Raises:
            Exception: What DBOS raised writing the markers (not a lost ownership).
        """
        commit = self._commit
        if commit is not None:
            commit.slots.append(slot)
            await commit.done.wait()
        else:
            commit = self._commit = _MarkerCommit()
            commit.slots.append(slot)
            # Turns of the event loop until one passes with no call joining: the calls
            # started with this one reach their dispatch meanwhile and join the commit.
            joined = 0
            while joined != len(commit.slots):
                joined = len(commit.slots)
                await anyio.lowlevel.checkpoint()
            self._commit = None
            markers = [
                (s.marker.step_id, marker_step_name(s.name), encode_marker(s.call.call_id))
                for s in commit.slots
            ]
            try:
                await anyio.to_thread.run_sync(_engine.record_markers, self._workflow_id, markers)
            except _OWNERSHIP_LOST:
                commit.lost = True
            except Exception as error:
                commit.error = error
            finally:
                commit.done.set()
        if commit.error is not None:
            raise commit.error
        return not commit.lost


def _ran(outcome: CallOutcome) -> bool:
    """Whether this execution's outcome says the call's body was started."""
    result = outcome.result
    return outcome.dispatched and not (
        isinstance(result, ToolFailure) and result.code == TOOL_ABORTED_BEFORE_DISPATCH
    )


def _reserve() -> StepReservation:
    return DBOS.reserve_step()
