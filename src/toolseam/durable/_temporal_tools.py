"""`TemporalTools`: a registry's calls as activities of the Temporal workflow that makes them."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, cast, final

import sniffio
from temporalio import activity, workflow
from temporalio.client import Client

from .._batch import CallOutcome, ToolCall, run_tool_calls
from .._errors import type_name
from .._registration import Registration
from .._registry import ToolRegistry
from .._results import ToolResult
from .._signals import AbortSignal
from .._views import ToolExecutionInput
from . import _temporal_engine
from ._checks import checked_batch
from ._records import decode_outcome
from ._temporal_activity import CallActivity
from ._temporal_batch import ActivityOptions, run_batch

__all__ = ["TemporalTools", "recorded_outcomes"]


def _require_asyncio(what: str) -> None:
    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        library = None
    if library != "asyncio":
        raise RuntimeError(
            f"toolseam.durable.temporal: {what} runs on asyncio only, not on "
            f"{library or 'no event loop'}: Temporal runs workflows and activities on asyncio "
            "and cannot host trio"
        )


def _seconds(name: str, value: object, *, optional: bool = False) -> timedelta | None:
    if value is None and optional:
        return None
    if not isinstance(value, timedelta):
        raise TypeError(
            f"TemporalTools: `{name}` must be a timedelta, got {type_name(type(value))}"
        )
    if value <= timedelta(0):
        raise ValueError(f"TemporalTools: `{name}` must be positive, got {value!r}")
    return value


@final
class TemporalTools:
    """Runs a registry's tool calls as activities of the Temporal workflow that makes them.

    Create it once per registry, at setup, in the worker's process, and give the worker
    its activity (``Worker(..., activities=tools.activities)``). Inside a workflow,
    `run_tool_calls` is `toolseam.run_tool_calls` with each call one activity (type
    ``toolseam.call``) whose result is the call's outcome: a replay returns it without
    running the body. The activity heartbeats on the body's behalf; a cancellation of the
    workflow, of the activity, or an abort of the batch's signal aborts the body's signal
    (a thread body's too), and the activity returns the call's outcome once the body has
    settled (``WAIT_CANCELLATION_COMPLETED``). The activity's timeouts and the workflow's
    deadline end the calls they cut short ``TOOL_TIMEOUT``, told and awaited. After a
    worker died, a call that was dispatched runs again only if its tool is idempotent;
    otherwise it ends `OUTCOME_UNKNOWN`. See docs/durable.md.

    Outside a workflow (and inside an activity) both methods run the calls plainly.

    Creating it installs one around-dispatch wrapper on ``registry`` (added last: innermost
    among the wrappers registered so far), which records a call's dispatch marker right
    before its body; `close` removes it.

    Args:
        registry: The registry whose tools the activities run.
        start_to_close_timeout: How long one attempt of a call may run before it is told
            to stop (``TOOL_TIMEOUT``). Temporal's own start-to-close timeout is this plus
            ``grace``.
        schedule_to_close_timeout: The same over every attempt, from the first schedule;
            ``None``: no such limit.
        heartbeat_interval: Seconds between two heartbeats of a running call: a
            cancellation reaches the body within about this much. Positive and finite.
        heartbeat_timeout: How long the server waits for a heartbeat before it takes the
            worker for dead and runs the call's activity again (which then decides the
            call without running a non-idempotent body).
        grace: How long a body told of a deadline has to settle before Temporal's own
            timeout fires (the call is told ``grace`` before the deadline).
        task_queue: The task queue of the activities; ``None``: the workflow's.

    Raises:
        TypeError: ``registry`` is not a `ToolRegistry`, or an option has the wrong type.
        ValueError: An option is not positive (and finite).
    """

    __slots__ = (
        "_activity",
        "_defined",
        "_heartbeat_interval",
        "_options",
        "_registry",
        "_wrapper",
    )

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        start_to_close_timeout: timedelta = timedelta(minutes=10),
        schedule_to_close_timeout: timedelta | None = None,
        heartbeat_interval: float = 0.1,
        heartbeat_timeout: timedelta = timedelta(seconds=5),
        grace: timedelta = timedelta(seconds=1),
        task_queue: str | None = None,
    ) -> None:
        given = cast("object", registry)
        if type(given) is not ToolRegistry:
            raise TypeError(f"TemporalTools expects a ToolRegistry, got {type_name(type(given))}")
        interval = cast("object", heartbeat_interval)
        if isinstance(interval, bool) or not isinstance(interval, (int, float)):
            raise TypeError(
                "TemporalTools(heartbeat_interval=...) must be a number of seconds, got "
                f"{type_name(type(interval))}"
            )
        if not math.isfinite(interval) or interval <= 0:
            raise ValueError(
                f"TemporalTools(heartbeat_interval=...) must be positive and finite, "
                f"got {interval!r}"
            )
        stc = _seconds("start_to_close_timeout", start_to_close_timeout)
        s2c = _seconds("schedule_to_close_timeout", schedule_to_close_timeout, optional=True)
        beat = _seconds("heartbeat_timeout", heartbeat_timeout)
        settle = _seconds("grace", grace)
        assert stc is not None
        assert beat is not None
        assert settle is not None
        self._registry = registry
        self._heartbeat_interval = float(interval)
        self._options = ActivityOptions(
            start_to_close_timeout=stc,
            schedule_to_close_timeout=s2c,
            heartbeat_timeout=beat,
            grace=settle,
            task_queue=task_queue,
        )
        self._activity = CallActivity(registry, self._heartbeat_interval)
        run = self._activity.run

        async def toolseam_call(request: dict[str, Any]) -> dict[str, Any]:
            return await run(request)

        self._defined: Callable[[dict[str, Any]], Any] = activity.defn(
            name=_temporal_engine.ACTIVITY
        )(toolseam_call)
        self._wrapper: Registration = registry.on_execute(self._activity.dispatching)

    @property
    def registry(self) -> ToolRegistry:
        """The registry whose tools run."""
        return self._registry

    @property
    def activities(self) -> Sequence[Callable[..., Any]]:
        """The activities a worker must run for these tools (``Worker(activities=...)``)."""
        return (self._defined,)

    def close(self) -> None:
        """Remove the wrapper from the registry. Idempotent."""
        self._wrapper.remove()

    def __enter__(self) -> TemporalTools:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def execute(self, input: ToolExecutionInput) -> ToolResult:
        """`ToolRegistry.execute`, the call one activity of the workflow (a batch of one).

        Raises:
            RuntimeError: Not on asyncio.
            TypeError: ``input`` is not a `ToolExecutionInput`.
            ValueError: In a workflow, ``input`` carries a `Principal`: an activity cannot
                carry it yet, and running the call without it would skip its tool's scope
                check (contract §14).
        """
        if type(input) is not ToolExecutionInput:
            raise TypeError(f"execute() expects a ToolExecutionInput, got {type_name(type(input))}")
        if not workflow.in_workflow():
            _require_asyncio("TemporalTools.execute")
            return await self._registry.execute(input)
        if input.principal is not None:
            raise ValueError(
                "TemporalTools.execute cannot carry a principal into an activity yet: "
                "running the call without it would skip its tool's scope check"
            )
        call = ToolCall(input.call_id, input.name, input.arguments)
        outcomes = await self.run_tool_calls([call], signal=input.signal)
        return outcomes[0].result

    async def run_tool_calls(
        self,
        calls: Iterable[ToolCall],
        *,
        signal: AbortSignal,
        max_parallel: int = 10,
        start_to_close_timeout: timedelta | None = None,
        schedule_to_close_timeout: timedelta | None = None,
    ) -> list[CallOutcome]:
        """`toolseam.run_tool_calls`, each call one activity of the running workflow.

        Calls start in model order; consecutive parallel calls overlap up to
        ``max_parallel``; an exclusive call runs alone. When ``signal`` aborts, the
        workflow is cancelled or its deadline (minus ``grace``) comes: no further call
        starts, the calls in flight are told and awaited, and those never started end
        `ABORTED_BEFORE_DISPATCH`. A workflow cancellation is raised again once every
        call's outcome is recorded.

        Args:
            calls: The calls, in the order the model gave them.
            signal: The caller-owned signal of the whole turn.
            max_parallel: How many parallel calls may be in flight at once (at least 1).
            start_to_close_timeout: This batch's, instead of the one given at setup.
            schedule_to_close_timeout: This batch's, instead of the one given at setup.

        Returns:
            One `CallOutcome` per call, in model order.

        Raises:
            RuntimeError: Outside a workflow, not on asyncio.
            TypeError: A call is not a `ToolCall`, or its ``call_id`` or ``name`` is not a
                ``str``; ``signal`` is not an `AbortSignal`; ``max_parallel`` is not an int.
            ValueError: Two calls share a ``call_id``, or ``max_parallel < 1``.
        """
        if not workflow.in_workflow():
            _require_asyncio("TemporalTools.run_tool_calls")
            return await run_tool_calls(
                self._registry, calls, signal=signal, max_parallel=max_parallel
            )
        batch = checked_batch(calls, signal, max_parallel, keyed_by="the history keys calls")
        options = self._options
        if start_to_close_timeout is not None or schedule_to_close_timeout is not None:
            stc = _seconds("start_to_close_timeout", start_to_close_timeout, optional=True)
            s2c = _seconds("schedule_to_close_timeout", schedule_to_close_timeout, optional=True)
            options = ActivityOptions(
                start_to_close_timeout=stc or options.start_to_close_timeout,
                schedule_to_close_timeout=s2c or options.schedule_to_close_timeout,
                heartbeat_timeout=options.heartbeat_timeout,
                grace=options.grace,
                task_queue=options.task_queue,
            )
        return await run_batch(
            self._registry, batch, signal=signal, max_parallel=max_parallel, options=options
        )


async def recorded_outcomes(
    client: Client, workflow_id: str, *, run_id: str | None = None
) -> list[CallOutcome]:
    """The recorded outcome of every toolseam call of a workflow run, in model order.

    Read from the workflow's history (the results of its ``toolseam.call`` activities),
    from any process with a client; batches in the order they started.

    Raises:
        RuntimeError: Not on asyncio.
        ValueError: A toolseam activity holds something else than a toolseam outcome.
    """
    _require_asyncio("recorded_outcomes")
    found = await _temporal_engine.history_outcomes(client, workflow_id, run_id)
    order: dict[str, int] = {}
    keyed: list[tuple[int, int, CallOutcome]] = []
    for request, result in found:
        batch = str(request.get("batch"))
        first = order.setdefault(batch, len(order))
        keyed.append((first, int(request.get("index", 0)), decode_outcome(result)))
    keyed.sort(key=lambda item: (item[0], item[1]))
    return [outcome for _, _, outcome in keyed]
