"""`run_tool_calls`: the agent loop's seam for one model turn's tool calls (contract §7).

A model turn may ask for several tool calls at once. The model's next request must carry
exactly one result per call id, in order, even when the user pressed stop halfway:
otherwise providers reject the unbalanced history. This module guarantees that shape.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast, final

import anyio.lowlevel

from ._errors import exact_str, type_name
from ._registry import ToolRegistry
from ._results import ToolResult
from ._run import Run
from ._signals import AbortController, AbortSignal
from ._views import ExecutionToken, ToolExecutionInput

__all__ = ["CallOutcome", "ToolCall", "run_tool_calls"]


@final
@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call as the model asked for it."""

    call_id: str
    """The model's id for the call."""
    name: str
    """The tool to run."""
    arguments: object
    """JSON-like arguments."""


@final
@dataclass(frozen=True, slots=True)
class CallOutcome:
    """The one outcome of a `ToolCall`."""

    call: ToolCall
    """The call, as given."""
    result: ToolResult
    """Its result (published by the registry)."""
    dispatched: bool
    """Whether the call was started; ``False`` for calls skipped after the batch aborted."""


async def run_tool_calls(
    registry: ToolRegistry,
    calls: Iterable[ToolCall],
    *,
    signal: AbortSignal,
    max_parallel: int = 10,
    agent: object | None = None,
    parent: ExecutionToken | None = None,
    root_call_id: str | None = None,
) -> list[CallOutcome]:
    """Run one turn's tool calls and return exactly one outcome per call, in model order.

    Consecutive calls whose `ToolRegistry.execution_mode` is ``"parallel"`` overlap, at
    most ``max_parallel`` at a time; an ``"exclusive"`` call runs alone, as a barrier. The
    mode is read right before each call starts. Pre-execute (with approval and guards) and
    post-execute run in model order; only dispatch and the bodies overlap.

    Once ``signal`` aborts, no further call starts; the started ones are drained (awaited
    until they settle), and every call that never started gets an `ABORTED_BEFORE_DISPATCH`
    result with ``dispatched=False`` (also published to the registry's observers). If the
    awaiting task is cancelled by its host, the started calls publish their results and the
    cancellation is re-raised. A ``KeyboardInterrupt`` or ``SystemExit`` that a result
    observer or ``finalize_content`` raises for one call stops further calls from starting
    as an abort does, and propagates once every call has its one result.

    Args:
        registry: The registry to run the calls through.
        calls: The calls, in the order the model gave them.
        signal: The caller-owned signal of the whole turn; every call carries it.
        max_parallel: How many parallel calls may be in flight at once (at least 1).
        agent: Opaque value carried to every stage.
        parent: For a composite tool running its sub-calls as a batch: its own
            ``exec.token``, so that every call is its nested call (observers rebuild the
            tree, and a synchronous tool's sub-calls get the worker threads of the next
            nesting level instead of queueing for the one it holds). ``None`` for a model
            turn.
        root_call_id: With ``parent``: the composite call's ``exec.root_call_id``.

    Raises:
        ValueError: Two calls share a ``call_id``, or ``max_parallel < 1``.
        TypeError: A call is not a `ToolCall`, ``max_parallel`` is not an int, or
            ``signal`` is not an `AbortSignal`.
    """
    given = cast("object", max_parallel)  # checked at runtime too: untyped agent loops
    if isinstance(given, bool) or not isinstance(given, int):
        raise TypeError(f"max_parallel must be an int, got {type(max_parallel).__name__}")
    if max_parallel < 1:
        raise ValueError(f"max_parallel must be at least 1, got {max_parallel}")
    if type(signal) is not AbortSignal:
        raise TypeError(f"signal must be an AbortSignal, got {type(signal).__name__}")
    batch = list(calls)
    seen: set[str] = set()
    inputs: list[ToolExecutionInput] = []
    for position, call in enumerate(batch):
        if type(call) is not ToolCall:
            raise TypeError(
                f"run_tool_calls() expects ToolCall items, got {type_name(type(call))} at "
                f"index {position}: build each one as ToolCall(call_id, name, arguments)"
            )
        raw_id = call.call_id
        # An exact copy: a str subclass's __hash__ may raise. A non-str id is the call's
        # own failure (the registry reports it), not the batch's.
        call_id = raw_id if type(raw_id) is str else exact_str(raw_id)
        if call_id is not None:
            if call_id in seen:
                raise ValueError(f"duplicate call_id {call_id!r} in one batch")
            seen.add(call_id)
        inputs.append(
            ToolExecutionInput(
                call_id=raw_id,
                name=call.name,
                arguments=call.arguments,
                signal=signal,
                root_call_id=root_call_id,
                parent=parent,
                agent=agent,
            )
        )
    outcomes: list[CallOutcome | None] = [None] * len(batch)
    held: list[BaseException] = []  # what publishing a call raised (see _publish)
    try:
        index = 0
        mode: tuple[str, Any] | None = None  # the mode already read for batch[index], if any
        while index < len(batch) and not signal.aborted and not held:
            if mode is None:
                mode = registry._mode(inputs[index])
            if mode[0] == "exclusive":
                run = registry._start(inputs[index], mode[1])
                # The stages of `execute`, in its order, with the snapshot already taken.
                for stage in (
                    registry._stage_before,
                    registry._stage_dispatch,
                    registry._stage_after,
                ):
                    step = stage(run)
                    if step is not None:
                        await step
                outcomes[index] = _outcome(batch[index], _publish(registry, run, held), True)
                index += 1
                mode = None
            else:
                index, mode = await _run_parallel_group(
                    registry, batch, inputs, outcomes, index, mode, signal, max_parallel, held
                )
        if index == len(batch) and index:
            return cast("list[CallOutcome]", outcomes)  # every call was started
        skipped = [
            outcome
            if outcome is not None
            else _outcome(call, _publish(registry, registry._skip_run(call_input), held), False)
            for call, call_input, outcome in zip(batch, inputs, outcomes, strict=True)
        ]
        if not index:
            # Nothing started, so nothing was awaited: still a checkpoint, as `execute` is
            # (after the results: a host cancellation here loses none).
            await anyio.lowlevel.checkpoint()
        return skipped
    finally:
        if held:
            # Every call has its one result now; the interrupt goes on, bare (a host
            # cancellation under way is its __context__).
            raise held[0]


def _publish(registry: ToolRegistry, run: Run, held: list[BaseException]) -> ToolResult:
    """Publish ``run``'s result; hold an interrupt an observer raised, not the batch.

    `ToolRegistry._publish` raises a ``KeyboardInterrupt`` or ``SystemExit`` only after
    every observer has seen the result, which is then the run's; raising it here would tear
    down the calls still running in the batch and lose their results.
    """
    try:
        return registry._publish(run)
    except BaseException as error:
        held.append(error)
        return cast("ToolResult", run._result)


_set_call = cast("Any", CallOutcome).call.__set__
_set_result = cast("Any", CallOutcome).result.__set__
_set_dispatched = cast("Any", CallOutcome).dispatched.__set__


def _outcome(call: ToolCall, result: ToolResult, dispatched: bool) -> CallOutcome:
    """``CallOutcome(call, result, dispatched)`` without the frozen dataclass's ``__init__``.

    The slots' own setters, one per call of a batch: half the cost of the checked path.
    """
    outcome: CallOutcome = object.__new__(CallOutcome)
    _set_call(outcome, call)
    _set_result(outcome, result)
    _set_dispatched(outcome, dispatched)
    return outcome


# Where a started call of a parallel group is.
_BEFORE = 0  # in its pre-execute stage (which settles it if interrupted)
_QUEUED = 1  # waiting for a worker to dispatch it
_DISPATCHING = 2  # a worker runs its dispatch stage (which settles it if interrupted)
_DISPATCHED = 3  # waiting for its post-execute turn
_AFTER = 4  # in its post-execute stage (which settles it if interrupted), then published


@final
class _Started:
    """One started call of a parallel group."""

    __slots__ = ("index", "run", "state")

    def __init__(self, index: int, run: Run) -> None:
        self.index = index
        self.run = run
        self.state = _BEFORE


class _Group:
    """A task group of the running backend's own (anyio's costs several times more).

    asyncio's `asyncio.TaskGroup` or a trio nursery: structured like anyio's, so a host
    cancellation of the sequencer is delivered to every worker, and the group waits for
    all of them, as a task group does; nothing here cancels anything of its own accord.
    """

    __slots__ = ("_manager", "spawn")

    def __init__(self) -> None:
        if asyncio._get_running_loop() is not None:  # pyright: ignore[reportPrivateUsage]
            self._manager: Any = asyncio.TaskGroup()
        else:
            import trio  # the only other backend toolseam runs on

            self._manager = trio.open_nursery()
        self.spawn: Callable[[Callable[[], Coroutine[Any, Any, None]]], object]

    async def __aenter__(self) -> _Group:
        opened = await self._manager.__aenter__()
        if isinstance(opened, asyncio.TaskGroup):
            self.spawn = lambda work: opened.create_task(work())
        else:
            self.spawn = opened.start_soon
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self._manager.__aexit__(*exc_info)  # type: ignore[no-any-return]


async def _yield() -> None:
    """Let every other task that is ready run once (the backend's own checkpoint)."""
    if asyncio._get_running_loop() is not None:  # pyright: ignore[reportPrivateUsage]
        await asyncio.sleep(0)
    else:
        import trio

        await trio.lowlevel.checkpoint()


@final
class _Pool:
    """The worker tasks that dispatch a group's calls, and the queue they take them from.

    A worker takes queued calls one after another; when the queue is empty it parks, or
    returns if the sequencer will queue nothing more. The sequencer (the task running
    `run_tool_calls`) adds workers only as bodies block: after it has let the workers run,
    a call still queued while none of them is about to run means that every worker is
    inside a body that waits, and one more worker is started, up to ``max_parallel``.
    Bodies that never block are all dispatched by one worker, so a batch costs one task
    rather than one per call. Parking and waking use abort signals (the backend's own
    wait underneath).
    """

    __slots__ = (
        "cap",
        "closing",
        "group",
        "idle",
        "in_dispatch",
        "notify",
        "queue",
        "registry",
        "runnable",
        "workers",
    )

    def __init__(self, registry: ToolRegistry, group: _Group, cap: int) -> None:
        self.registry = registry
        self.group = group
        self.cap = cap
        self.queue: deque[_Started] = deque()
        self.idle: list[AbortController] = []  # one per parked worker: aborted to wake it
        self.workers = 0
        self.runnable = 0  # workers started or woken that have not run yet
        self.in_dispatch = 0  # queued or being dispatched: what max_parallel caps
        # Aborted by the next worker to finish a dispatch, while the sequencer waits.
        self.notify: AbortController | None = None
        self.closing = False  # nothing more will be queued

    def hand_off(self, *, eager: bool) -> None:
        """See that queued calls get workers: all of them now if ``eager``.

        The sequencer is eager before it awaits a stage of its own (a pre- or post-execute
        listener may wait for a human): every queued call must be dispatched meanwhile.
        """
        waiting = len(self.queue) - self.runnable
        idle = self.idle
        while waiting > 0 and idle:
            idle.pop().abort()
            self.runnable += 1
            waiting -= 1
        if waiting > 0 and (eager or not self.runnable):
            for _ in range(min(waiting if eager else 1, self.cap - self.workers)):
                self.workers += 1
                self.runnable += 1
                self.group.spawn(self._work)

    async def _work(self) -> None:
        self.runnable -= 1
        registry = self.registry
        queue = self.queue
        while True:
            while queue:
                started = queue.popleft()
                started.state = _DISPATCHING
                step = registry._stage_dispatch(started.run)
                try:
                    if step is not None:
                        await step
                finally:
                    started.state = _DISPATCHED
                    self.in_dispatch -= 1
                    notify = self.notify
                    if notify is not None:
                        self.notify = None
                        notify.abort()
            if self.closing:
                return
            wake = AbortController()
            self.idle.append(wake)
            await wake.signal.wait()
            self.runnable -= 1

    def close(self) -> None:
        """Nothing more will be queued: parked workers return, running ones once idle."""
        self.closing = True
        for wake in self.idle:
            wake.abort()
        self.idle.clear()


async def _run_parallel_group(
    registry: ToolRegistry,
    batch: Sequence[ToolCall],
    inputs: Sequence[ToolExecutionInput],
    outcomes: list[CallOutcome | None],
    start: int,
    mode: tuple[str, Any],
    signal: AbortSignal,
    max_parallel: int,
    held: list[BaseException],
) -> tuple[int, tuple[str, Any] | None]:
    """Run consecutive parallel calls from ``start`` (whose mode is ``mode``).

    This task is the sequencer: it runs pre-execute (with approval and guards) and
    post-execute of every call itself, each in model order, so the two never overlap
    (contract §7); a pool of workers dispatches. Returns the index of the first call not
    run and, when a call's mode ended the group, that mode (so it is read once per call).
    """
    order: deque[_Started] = deque()  # started, not yet published, in model order
    index = start
    pending: tuple[str, Any] | None = mode
    next_mode: tuple[str, Any] | None = None
    async with _Group() as group:
        pool = _Pool(registry, group, max_parallel)
        try:
            while True:
                # Post-execute and publish, in model order, every call whose dispatch ended.
                while order and order[0].state == _DISPATCHED:
                    started = order[0]
                    started.state = _AFTER
                    step = registry._stage_after(started.run, checkpoint=False)
                    if step is not None:
                        pool.hand_off(eager=True)
                        await step
                    order.popleft()
                    result = _publish(registry, started.run, held)
                    outcomes[started.index] = _outcome(batch[started.index], result, True)
                # Start calls while a dispatch slot is free.
                while (
                    next_mode is None
                    and index < len(batch)
                    and pool.in_dispatch < max_parallel
                    and not signal.aborted
                    and not held
                ):
                    if pending is None:
                        pending = registry._mode(inputs[index])
                    if pending[0] != "parallel":
                        next_mode = pending
                        break
                    started = _Started(index, registry._start(inputs[index], pending[1]))
                    pending = None
                    order.append(started)
                    index += 1
                    step = registry._stage_before(started.run)
                    if step is not None:
                        pool.hand_off(eager=True)
                        await step
                    if started.run._result is None:
                        started.state = _QUEUED
                        pool.queue.append(started)
                        pool.in_dispatch += 1
                    else:
                        started.state = _DISPATCHED  # nothing to dispatch
                if not order:
                    break  # every started call is published, and no further one may start
                if order[0].state == _DISPATCHED:
                    continue
                if next_mode is not None or index >= len(batch) or signal.aborted or held:
                    pool.closing = True  # workers return once the queue is empty
                pool.hand_off(eager=False)
                if pool.queue:
                    await _yield()  # let the workers take them
                else:
                    notify = pool.notify = AbortController()
                    await notify.signal.wait()
        except BaseException:
            # The host cancelled us (or an interrupt): every started call still publishes
            # its one result. Calls inside a stage settle themselves; these are between.
            pool.queue.clear()
            pool.close()
            for started in order:
                if started.state == _QUEUED or started.state == _DISPATCHED:
                    registry._settle_interrupted(started.run)
            raise
        finally:
            pool.close()
    return index, next_mode
