"""One tool call as one Temporal activity: its result the call's outcome, as the journal holds it.

The activity runs ``registry.execute`` for its call and returns the call's outcome in the
form `toolseam.durable` records everywhere (`encode_outcome`). Around the call:

1. **A retry of a dispatched call.** Temporal runs an activity again when the worker that
   ran it stopped heartbeating (it died). Before anything runs, the activity looks at the
   heartbeat details the server kept from the attempt before: a dispatch marker there, and
   the tool is not idempotent, means the body may have run: the call ends
   `OUTCOME_UNKNOWN`, never entering the registry. An idempotent tool runs again (no
   marker is written for it).
2. **The dispatch marker.** Right before the body may start, an around-dispatch wrapper
   records the marker (``{"toolseam": 1, "marker": call_id}``) as the activity's heartbeat
   details and waits for the server to confirm it (`_temporal_engine.heartbeat`): the
   marker is durable before the body starts. Every later heartbeat carries it again.
3. **Told, not torn down.** While the call runs, the activity heartbeats on the body's
   behalf every ``heartbeat_interval``; when the server answers that a cancellation was
   requested, or that it no longer has the activity, the call's signal is aborted: the
   body is told and the registry awaits it. The activity then returns the call's outcome
   (``ABORTED``, or whatever the body made of it), which Temporal records: the workflow
   waits for it (``ActivityCancellationType.WAIT_CANCELLATION_COMPLETED``).
4. **Deadlines.** The activity's start-to-close and schedule-to-close timeouts, and the
   workflow's own deadline, each minus the call's grace, abort the signal with a
   `ToolTimeoutError`: the body is told and awaited, and the call ends `TOOL_TIMEOUT`
   before Temporal's own timeout would fire.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from contextvars import ContextVar
from datetime import timedelta
from typing import Any, Final, final

from temporalio import activity
from temporalio.client import Client

from .._batch import CallOutcome, ToolCall
from .._definitions import is_idempotent
from .._errors import TOOL_ABORTED, AbortError, ToolTimeoutError
from .._registry import ToolRegistry
from .._results import ToolFailure, ToolResult, aborted_result, failure_from_exception
from .._signals import AbortController
from .._stages import Next
from .._views import ToolDispatchExecution, ToolExecutionInput
from . import _temporal_engine
from ._errors import OutcomeUnknownError, UnrecordableResultError
from ._records import encode_marker, encode_outcome

__all__ = [
    "ACTIVITY_TIMED_OUT",
    "WORKFLOW_TIMED_OUT",
    "CallActivity",
]

_log = logging.getLogger("toolseam")

WORKFLOW_TIMED_OUT: Final = "tool call timed out: its workflow's deadline passed"
"""The message of a call cut short by its workflow's deadline (the same on DBOS)."""

ACTIVITY_TIMED_OUT: Final = "tool call timed out: its activity's {} timeout passed"
"""The message of a call cut short by its activity's timeout (``start-to-close`` or
``schedule-to-close``)."""


@final
class _Run:
    """One attempt of one call's activity: its signal, its heartbeats and its marker."""

    __slots__ = (
        "call",
        "client",
        "controller",
        "details",
        "dispatched",
        "idempotent",
        "lock",
        "task_token",
        "timeout",
    )

    def __init__(self, call: ToolCall, client: Client, task_token: bytes, idem: bool) -> None:
        self.call = call
        self.client = client
        self.task_token = task_token
        self.idempotent = idem
        self.controller = AbortController()
        self.details: dict[str, Any] | None = None
        self.dispatched = False
        self.timeout: ToolTimeoutError | None = None
        # One heartbeat at a time, so the server always keeps the newest details.
        self.lock = asyncio.Lock()

    async def beat(self) -> None:
        """One heartbeat, confirmed; a cancellation or a lost activity aborts the signal."""
        async with self.lock:
            details = () if self.details is None else (self.details,)
            try:
                cancel = await _temporal_engine.heartbeat(self.client, self.task_token, details)
            except _temporal_engine.ActivityGone:
                self.controller.abort(AbortError("the activity is gone from the server"))
                raise
        if cancel:
            self.controller.abort(AbortError("the activity was cancelled"))

    async def heartbeats(self, interval: float) -> None:
        """Heartbeat every ``interval`` seconds until cancelled (by the activity itself)."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.beat()
            except _temporal_engine.ActivityGone:
                return
            except Exception as error:  # the server is unreachable: try again next time
                _log.warning("toolseam.durable: a heartbeat failed: %r", error)

    async def mark(self) -> bool:
        """Record the dispatch marker and wait for the server to confirm it."""
        self.details = encode_marker(self.call.call_id)
        try:
            await self.beat()
        except Exception as error:
            _log.warning("toolseam.durable: the dispatch marker was not recorded: %r", error)
            return False
        return True

    def time_out(self, message: str) -> None:
        """The call's deadline passed: tell the body (the outcome will be `TOOL_TIMEOUT`)."""
        if self.controller.signal.aborted:
            return
        self.timeout = ToolTimeoutError(message)
        # Kept for a retry (the body may not settle within its grace): it ends the same way.
        self.details = {**(self.details or encode_marker(self.call.call_id)), "timed_out": message}
        self.controller.abort(self.timeout)


_RUN: ContextVar[_Run | None] = ContextVar("toolseam.durable temporal run", default=None)


@final
class CallActivity:
    """The activity that runs one call of a registry (see the module docstring).

    Args:
        registry: The registry.
        heartbeat_interval: Seconds between two heartbeats of a running call.
    """

    __slots__ = ("_heartbeat_interval", "_registry")

    def __init__(self, registry: ToolRegistry, heartbeat_interval: float) -> None:
        self._registry = registry
        self._heartbeat_interval = heartbeat_interval

    async def dispatching(
        self, execution: ToolDispatchExecution, next: Next[ToolResult]
    ) -> ToolResult:
        """An around-dispatch wrapper: the dispatch marker, recorded before the body."""
        run = _RUN.get()
        if (
            run is None
            or run.dispatched
            or execution.parent is not None
            or execution.call_id != run.call.call_id
        ):
            return await next()
        run.dispatched = True
        if not run.idempotent and not await run.mark():
            # No marker, no body: a retry could not tell whether it ran.
            return aborted_result(body_invoked=False)
        return await next()

    async def run(self, request: dict[str, Any]) -> dict[str, Any]:
        """The activity's function: the call's outcome, as the journal records it."""
        record = request.get("record")
        if record is not None:
            return dict(record)  # an outcome the workflow decided (the call never ran here)
        info = activity.info()
        call = ToolCall(request["call_id"], request["name"], request["arguments"])
        idempotent = is_idempotent(self._registry.get(call.name))
        previous = _marker_of(info.heartbeat_details, call.call_id)
        if previous is not None and "timed_out" in previous:
            # An attempt before was told its deadline and did not settle in its grace.
            timed_out = failure_from_exception(ToolTimeoutError(str(previous["timed_out"])))
            return self._payload(CallOutcome(call, timed_out, True))
        if previous is not None and not idempotent:
            unknown = failure_from_exception(OutcomeUnknownError(call.name, call.call_id))
            return self._payload(CallOutcome(call, unknown, True))
        run = _Run(call, activity.client(), info.task_token, idempotent)
        loop = asyncio.get_running_loop()
        timers = [
            loop.call_at(loop.time() + max(0.0, at - time.time()), run.time_out, message)
            for at, message in _deadlines(info, request)
        ]
        beating = asyncio.create_task(run.heartbeats(self._heartbeat_interval))
        token = _RUN.set(run)
        try:
            result = await self._registry.execute(
                ToolExecutionInput(
                    call_id=call.call_id,
                    name=call.name,
                    arguments=call.arguments,
                    signal=run.controller.signal,
                )
            )
        finally:
            _RUN.reset(token)
            for timer in timers:
                timer.cancel()
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating
        if (
            run.timeout is not None
            and isinstance(result, ToolFailure)
            and result.code == TOOL_ABORTED
            and run.controller.signal.reason is run.timeout
        ):
            result = failure_from_exception(
                run.timeout, additional_contexts=result.additional_contexts
            )
        return self._payload(CallOutcome(call, result, True))

    @staticmethod
    def _payload(outcome: CallOutcome) -> dict[str, Any]:
        """The outcome as Temporal will record it; a result it cannot serialize is replaced."""
        payload = encode_outcome(outcome)
        try:
            activity.payload_converter().to_payloads([payload])
        except Exception as error:
            failure = failure_from_exception(
                UnrecordableResultError(outcome.call.name, error),
                additional_contexts=outcome.result.additional_contexts,
            )
            payload = encode_outcome(CallOutcome(outcome.call, failure, outcome.dispatched))
        return payload


def _marker_of(details: object, call_id: str) -> dict[str, Any] | None:
    """The dispatch marker of ``call_id`` among an earlier attempt's heartbeat details."""
    if not isinstance(details, (list, tuple)) or not details:
        return None
    last: object = details[-1]  # pyright: ignore[reportUnknownVariableType]
    if isinstance(last, dict) and last.get("marker") == call_id:  # pyright: ignore[reportUnknownMemberType]
        return dict(last)  # pyright: ignore[reportUnknownArgumentType]
    return None


def _deadlines(info: activity.Info, request: dict[str, Any]) -> list[tuple[float, str]]:
    """When the call must be told to stop (``time.time`` stamps), and the message it ends with.

    Each of Temporal's deadlines minus the call's grace, so that the body has the grace to
    settle and the activity returns its outcome before Temporal's own timeout fires.
    """
    grace = float(request.get("grace", 0.0))
    deadlines: list[tuple[float, str]] = []

    def add(start: float, timeout: timedelta | None, message: str) -> None:
        if timeout is not None and timeout > timedelta(0):
            deadlines.append((start + timeout.total_seconds() - grace, message))

    add(info.started_time.timestamp(), info.start_to_close_timeout, "start-to-close")
    add(info.scheduled_time.timestamp(), info.schedule_to_close_timeout, "schedule-to-close")
    deadlines = [(at, ACTIVITY_TIMED_OUT.format(kind)) for at, kind in deadlines]
    workflow_deadline = request.get("deadline")
    if workflow_deadline is not None:
        deadlines.append((float(workflow_deadline) - grace, WORKFLOW_TIMED_OUT))
    return deadlines
