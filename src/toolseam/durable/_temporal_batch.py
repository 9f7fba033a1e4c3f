"""One batch of tool calls inside a Temporal workflow: each call one activity of the history.

The batch keeps the rules of contract §7 with activities in place of the registry's
tasks: calls start in model order; consecutive ``"parallel"`` calls (the registry's
`ToolRegistry.execution_mode`) overlap, at most ``max_parallel`` at a time; an
``"exclusive"`` call runs alone, as a barrier; one outcome per call, in model order. A
call's stages and body run in its activity, on a worker: the pre-execute stages of the
calls of one parallel group may interleave there (they run in model order in-process).

Each call's outcome is its activity's result, recorded by Temporal: a replay of the
workflow returns it without running anything. A call that ends without its activity
completing (never started, cancelled before a worker took it, timed out by Temporal) gets
its outcome from the batch, recorded by a second activity that only returns it: the
history holds exactly one completed toolseam activity per call.

After the batch's signal aborts, or the workflow is cancelled, or the workflow's deadline
(minus the grace) has passed: no further call starts; the activities in flight are
cancelled (their bodies are told through their signals and awaited, and each returns its
outcome: ``ActivityCancellationType.WAIT_CANCELLATION_COMPLETED``); the calls never started
end `ABORTED_BEFORE_DISPATCH`. A workflow cancellation then goes on, once every outcome is
recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Final, final

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError, TimeoutError, TimeoutType
from temporalio.workflow import ActivityCancellationType, ActivityHandle

from .._batch import CallOutcome, ToolCall
from .._errors import TOOL_TIMEOUT, ToolTimeoutError
from .._registry import ToolRegistry
from .._results import ToolFailure, aborted_result, failure_from_exception
from .._signals import AbortSignal
from .._views import ToolExecutionInput
from ._records import VERSION, decode_outcome, encode_outcome
from ._temporal_activity import ACTIVITY_TIMED_OUT, WORKFLOW_TIMED_OUT
from ._temporal_engine import ACTIVITY

__all__ = ["ActivityOptions", "run_batch"]

# How long the activity that records an outcome decided by the batch may take.
_RECORD_TIMEOUT: Final = timedelta(seconds=30)

_TIMEOUT_KINDS: Final = {
    TimeoutType.START_TO_CLOSE: "start-to-close",
    TimeoutType.SCHEDULE_TO_CLOSE: "schedule-to-close",
    TimeoutType.SCHEDULE_TO_START: "schedule-to-start",
    TimeoutType.HEARTBEAT: "heartbeat",
}


@final
class ActivityOptions:
    """How the calls' activities are scheduled (see `TemporalTools`)."""

    __slots__ = (
        "grace",
        "heartbeat_timeout",
        "retry_policy",
        "schedule_to_close_timeout",
        "start_to_close_timeout",
        "task_queue",
    )

    def __init__(
        self,
        *,
        start_to_close_timeout: timedelta,
        schedule_to_close_timeout: timedelta | None,
        heartbeat_timeout: timedelta,
        grace: timedelta,
        task_queue: str | None,
    ) -> None:
        self.start_to_close_timeout = start_to_close_timeout
        self.schedule_to_close_timeout = schedule_to_close_timeout
        self.heartbeat_timeout = heartbeat_timeout
        self.grace = grace
        self.task_queue = task_queue
        # Every attempt after the first is decided by the activity itself before any body
        # runs (a marker without outcome: OUTCOME_UNKNOWN, unless the tool is idempotent),
        # so Temporal may retry as often as it likes: a worker that died is never fatal.
        self.retry_policy = RetryPolicy(
            initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10)
        )


def _workflow_deadline() -> float | None:
    """The workflow's deadline (a ``time.time`` stamp): its execution or run timeout."""
    info = workflow.info()
    deadlines: list[float] = []
    if info.execution_timeout:
        deadlines.append((info.workflow_start_time + info.execution_timeout).timestamp())
    if info.run_timeout:
        deadlines.append((info.start_time + info.run_timeout).timestamp())
    return min(deadlines, default=None)


@final
class _Batch:
    __slots__ = (
        "_batch_id",
        "_calls",
        "_deadline",
        "_handles",
        "_options",
        "_outcomes",
        "_registry",
        "_signal",
        "_stopped",
        "_unrecorded",
    )

    def __init__(
        self,
        registry: ToolRegistry,
        calls: Sequence[ToolCall],
        signal: AbortSignal,
        options: ActivityOptions,
    ) -> None:
        self._registry = registry
        self._calls = calls
        self._signal = signal
        self._options = options
        self._batch_id = str(workflow.uuid4())
        self._deadline = _workflow_deadline()
        self._outcomes: list[CallOutcome | None] = [None] * len(calls)
        self._unrecorded: set[int] = set()
        self._handles: dict[int, ActivityHandle[Any]] = {}
        self._stopped = asyncio.Event()

    def _request(self, index: int, record: dict[str, Any] | None) -> dict[str, Any]:
        call = self._calls[index]
        return {
            "toolseam": VERSION,
            "batch": self._batch_id,
            "index": index,
            "call_id": call.call_id,
            "name": call.name,
            "arguments": _plain_arguments(call),
            "deadline": self._deadline,
            "grace": self._options.grace.total_seconds(),
            "record": record,
        }

    def _exclusive(self, index: int) -> bool:
        call = self._calls[index]
        probe = ToolExecutionInput(
            call_id=call.call_id, name=call.name, arguments=call.arguments, signal=self._signal
        )
        return self._registry.execution_mode(probe) == "exclusive"

    def _too_late(self) -> bool:
        if self._deadline is None:
            return False
        return workflow.now().timestamp() >= self._deadline - self._options.grace.total_seconds()

    async def _call(self, index: int) -> None:
        call, options = self._calls[index], self._options
        handle = workflow.start_activity(
            ACTIVITY,
            self._request(index, None),
            task_queue=options.task_queue,
            start_to_close_timeout=options.start_to_close_timeout + options.grace,
            schedule_to_close_timeout=(
                None
                if options.schedule_to_close_timeout is None
                else options.schedule_to_close_timeout + options.grace
            ),
            heartbeat_timeout=options.heartbeat_timeout,
            retry_policy=options.retry_policy,
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            summary=f"{call.name} ({call.call_id})",
        )
        self._handles[index] = handle
        if self._stopped.is_set():
            handle.cancel()
        try:
            payload: object = await handle
        except ActivityError as error:
            self._outcomes[index] = _ended(call, error)
            self._unrecorded.add(index)
        else:
            recorded = decode_outcome(payload)
            self._outcomes[index] = CallOutcome(call, recorded.result, recorded.dispatched)
            result = recorded.result
            if (
                isinstance(result, ToolFailure)
                and result.code == TOOL_TIMEOUT
                and result.error.message == WORKFLOW_TIMED_OUT
            ):
                # The workflow's deadline, as the activity saw it: no further call starts
                # (decided by the recorded outcome, so a replay decides the same).
                self._stop()

    def _stop(self) -> None:
        self._stopped.set()
        for handle in self._handles.values():
            if not handle.done():
                handle.cancel()

    async def run(self, max_parallel: int) -> list[CallOutcome]:
        registration = self._signal.add_listener(lambda _signal: self._stop())
        stop = asyncio.ensure_future(self._stopped.wait())
        running: set[asyncio.Task[None]] = set()
        cancelled: BaseException | None = None
        try:
            for index in range(len(self._calls)):
                if self._stopped.is_set() or self._too_late():
                    break
                exclusive = self._exclusive(index)
                while running and (exclusive or len(running) >= max_parallel):
                    done, _ = await asyncio.wait(
                        [*running, stop], return_when=asyncio.FIRST_COMPLETED
                    )
                    running -= done
                    if self._stopped.is_set():
                        break
                if self._stopped.is_set():
                    break
                running.add(asyncio.ensure_future(self._call(index)))
                if exclusive:  # an exclusive call runs alone: a barrier
                    while running and not self._stopped.is_set():
                        done, _ = await asyncio.wait(
                            [*running, stop], return_when=asyncio.FIRST_COMPLETED
                        )
                        running -= done
            while running and not self._stopped.is_set():
                done, _ = await asyncio.wait([*running, stop], return_when=asyncio.FIRST_COMPLETED)
                running -= done
        except asyncio.CancelledError as error:
            # The workflow is cancelled: tell the calls in flight, record every outcome, and
            # only then let the cancellation go on (contract §5).
            cancelled = error
        finally:
            registration.remove()
        if cancelled is not None or self._stopped.is_set():
            self._stop()
        cancelled = await _drain(running, self._stop, cancelled)
        stop.cancel()
        recording: set[asyncio.Task[None]] = set()
        for index, call in enumerate(self._calls):
            if self._outcomes[index] is None:
                self._outcomes[index] = CallOutcome(call, aborted_result(body_invoked=False), False)
                self._unrecorded.add(index)
            if index in self._unrecorded:
                recording.add(asyncio.ensure_future(self._record(index)))
        cancelled = await _drain(recording, lambda: None, cancelled)
        if cancelled is not None:
            raise cancelled
        return [outcome for outcome in self._outcomes if outcome is not None]

    async def _record(self, index: int) -> None:
        """Record an outcome the batch decided, as the result of an activity of its own."""
        outcome = self._outcomes[index]
        assert outcome is not None
        await workflow.execute_activity(
            ACTIVITY,
            self._request(index, encode_outcome(outcome)),
            task_queue=self._options.task_queue,
            start_to_close_timeout=_RECORD_TIMEOUT,
            retry_policy=self._options.retry_policy,
            summary=f"record {outcome.call.name} ({outcome.call.call_id})",
        )


async def _drain(
    tasks: set[asyncio.Task[None]], stop: Any, cancelled: BaseException | None
) -> BaseException | None:
    """Await every task, through further cancellations; return the first cancellation."""
    while tasks:
        try:
            await asyncio.wait(tasks)
        except asyncio.CancelledError as error:
            cancelled = cancelled or error
            stop()
        tasks = {task for task in tasks if not task.done()}
    return cancelled


def _plain_arguments(call: ToolCall) -> object:
    """The call's arguments as plain JSON (``None`` when they are not JSON: the call fails)."""
    return encode_outcome(CallOutcome(call, aborted_result(body_invoked=False), False))["arguments"]


def _ended(call: ToolCall, error: ActivityError) -> CallOutcome:
    """The outcome of a call whose activity ended without completing."""
    cause = error.cause
    if isinstance(cause, CancelledError):
        # Cancelled before a worker took it: a started activity returns its outcome.
        return CallOutcome(call, aborted_result(body_invoked=False), False)
    if isinstance(cause, TimeoutError):
        kind = _TIMEOUT_KINDS.get(cause.type, "its") if cause.type is not None else "its"
        timed_out = ToolTimeoutError(ACTIVITY_TIMED_OUT.format(kind))
        return CallOutcome(call, failure_from_exception(timed_out), True)
    return CallOutcome(call, failure_from_exception(cause or error), True)


async def run_batch(
    registry: ToolRegistry,
    calls: Sequence[ToolCall],
    *,
    signal: AbortSignal,
    max_parallel: int,
    options: ActivityOptions,
) -> list[CallOutcome]:
    """Run the calls as activities of the running workflow (see the module docstring)."""
    return await _Batch(registry, calls, signal, options).run(max_parallel)
