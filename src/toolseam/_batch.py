"""`run_tool_calls`: the agent loop's seam for one model turn's tool calls (contract §7).

A model turn may ask for several tool calls at once. The model's next request must carry
exactly one result per call id, in order, even when the user pressed stop halfway:
otherwise providers reject the unbalanced history. This module guarantees that shape.
"""

from __future__ import annotations

import asyncio
import types
from collections import deque
from collections.abc import Callable, Coroutine, Generator, Iterable, Sequence
from contextvars import copy_context
from dataclasses import dataclass
from typing import Any, cast, final

import anyio.lowlevel

from ._errors import exact_str, type_name
from ._principal import Principal
from ._registry import ToolRegistry
from ._results import ToolResult
from ._run import CallState
from ._signals import AbortController, AbortSignal
from ._views import (
    ExecutionToken,
    ToolExecutionInput,
    ToolHost,
    _set_input_agent,
    _set_input_arguments,
    _set_input_call_id,
    _set_input_host,
    _set_input_name,
    _set_input_parent,
    _set_input_principal,
    _set_input_root,
    _set_input_signal,
)

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
    host: ToolHost | None = None,
    principal: Principal | None = None,
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
    cancellation is re-raised. A ``KeyboardInterrupt``, ``SystemExit`` or any other
    ``BaseException`` but the host's cancellation, raised for one call (by a body, a
    stage's listener, a result observer or ``finalize_content``) once that call has its
    result, stops further calls from starting as an abort does, and propagates, bare, once
    every call has its one result.

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
        host: What the caller offers every call's body (progress and log sinks,
            elicitation, sampling); a composite tool passes its own ``exec.host``.
        principal: Who is calling (contract §14): every call is checked against the
            scopes of its tool; a composite tool passes its own ``exec.principal``.

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
            _input(
                raw_id,
                call.name,
                call.arguments,
                signal,
                root_call_id,
                agent,
                parent,
                host,
                principal,
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
                try:
                    # ≡ `registry.execute(inputs[index])` up to its publish, with the snapshot
                    # `_mode` took (parsed once); pinned by benchmarks/bench_batch.py.
                    for stage in (
                        registry._stage_before,
                        registry._stage_dispatch,
                        registry._stage_after,
                    ):
                        step = stage(run)
                        if step is not None:
                            await step
                except BaseException as interrupt:
                    if not _holds(interrupt):
                        raise
                    held.append(interrupt)  # the stage settled and published the call
                    result = cast("ToolResult", run._result)
                else:
                    result = _publish(registry, run, held)
                outcomes[index] = _outcome(batch[index], result, True)
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


def _publish(registry: ToolRegistry, run: CallState, held: list[BaseException]) -> ToolResult:
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


def _input(
    call_id: object,
    name: object,
    arguments: object,
    signal: AbortSignal,
    root_call_id: object,
    agent: object,
    parent: object,
    host: object,
    principal: object,
) -> ToolExecutionInput:
    """``ToolExecutionInput(...)`` without the frozen dataclass's ``__init__``.

    The same slot setters as ``ToolExecutionInput.__init__``, without binding its keywords:
    once per call of a batch (as `_outcome`). Pinned by benchmarks/bench_batch.py.
    """
    made: ToolExecutionInput = object.__new__(ToolExecutionInput)
    _set_input_call_id(made, call_id)
    _set_input_name(made, name)
    _set_input_arguments(made, arguments)
    _set_input_signal(made, signal)
    _set_input_root(made, root_call_id)
    _set_input_agent(made, agent)
    _set_input_parent(made, parent)
    _set_input_host(made, host)
    _set_input_principal(made, principal)
    return made


_set_call = cast("Any", CallOutcome).call.__set__
_set_result = cast("Any", CallOutcome).result.__set__
_set_dispatched = cast("Any", CallOutcome).dispatched.__set__


def _outcome(call: ToolCall, result: ToolResult, dispatched: bool) -> CallOutcome:
    """``CallOutcome(call, result, dispatched)`` without the frozen dataclass's ``__init__``.

    The slots' own setters, one per call of a batch: half the cost of the checked path.
    Pinned by benchmarks/bench_batch.py.
    """
    outcome: CallOutcome = object.__new__(CallOutcome)
    _set_call(outcome, call)
    _set_result(outcome, result)
    _set_dispatched(outcome, dispatched)
    return outcome


# Where a started call of a parallel group is.
_BEFORE = 0  # in its pre-execute stage (which settles it if interrupted)
_DISPATCHING = 1  # in its dispatch stage, in some task (which settles it if interrupted)
_DISPATCHED = 2  # waiting for its post-execute turn
_AFTER = 3  # in its post-execute stage (which settles it if interrupted), then published
_SETTLED = 4  # interrupted in its dispatch stage, which published its result
_ENDED = frozenset((_DISPATCHED, _SETTLED))  # the head's turn in the sequencer


def _holds(error: BaseException) -> bool:
    """Whether the batch holds ``error``, which a stage raised once it had settled its call.

    Every stage settles and publishes its call before it lets a ``BaseException`` out. The
    host's cancellation then goes on (contract §7: the started calls publish, it is
    re-raised); anything else — ``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit``, a
    tool's own ``BaseException``, a group — is held like an observer's (`_publish`): no
    further call starts, and it propagates bare once every call has its result, rather than
    tearing the running calls down and coming out wrapped in the task group's group.
    On asyncio a ``CancelledError`` that a stage raised as a value, while nothing cancels
    this task, is held too.
    """
    if not issubclass(type(error), anyio.get_cancelled_exc_class()):
        return True
    loop = asyncio._get_running_loop()  # pyright: ignore[reportPrivateUsage]
    task = None if loop is None else asyncio.current_task(loop)
    return task is not None and not task.cancelling()


@final
class _Started:
    """One started call of a parallel group."""

    __slots__ = ("index", "run", "state")

    def __init__(self, index: int, run: CallState) -> None:
        self.index = index
        self.run = run
        self.state = _BEFORE


class _Group:
    """A task group of the running backend's own (anyio's costs several times more).

    asyncio's `asyncio.TaskGroup` or a trio nursery: structured like anyio's, so a host
    cancellation of the calling task is delivered to every task of the group, which waits for
    all of them, as a task group does; nothing here cancels anything of its own accord.
    ≡ ``anyio.create_task_group()``; pinned by benchmarks/bench_targets.py (batch, trio).
    """

    __slots__ = ("_manager", "spawn", "yield_first")

    def __init__(self) -> None:
        loop = asyncio._get_running_loop()  # pyright: ignore[reportPrivateUsage]
        # A task factory may start tasks eagerly (asyncio.eager_task_factory): each new
        # holder would then run inside the step of the one before, as deep as there are
        # blocked bodies.
        self.yield_first = loop is not None and loop.get_task_factory() is not None
        if loop is not None:
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
        try:
            return await self._manager.__aexit__(*exc_info)  # type: ignore[no-any-return]
        except BaseExceptionGroup as group:
            # A trio nursery wraps the host's cancellation in a group; it must propagate
            # unchanged (contract §5, host cancellation), as anyio's task group does.
            import trio

            if not group.split(trio.Cancelled)[1]:
                raise trio.Cancelled._create() from group  # pyright: ignore[reportPrivateUsage]
            raise


@types.coroutine
def _resume(step: Coroutine[Any, Any, object], yielded: object) -> Generator[Any, Any, None]:
    """Drive ``step`` on from its first suspension, which yielded ``yielded``.

    ``await step`` (``yield from``, PEP 380) for a coroutine already started: what the
    task's scheduler sends or throws in goes on to ``step``, what ``step`` yields goes out.
    The body stays in the task it started in, with its cancel scopes and current task.
    """
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            step.close()
            raise
        except BaseException as error:  # a cancellation: ``step`` decides what it means
            try:
                yielded = step.throw(error)
            except StopIteration:
                return
        else:
            try:
                yielded = step.send(sent)
            except StopIteration:
                return


@final
class _Sequencer:
    """One parallel group, and the role of its sequencer: held by one task at a time.

    The holder runs pre- and post-execute of every call, each in model order, so the two
    never overlap (contract §7), and dispatches each call in its own task: a body that
    completes without blocking costs no task at all. When a body blocks, it stays in the
    task it started in (its cancel scopes and current task are that task's), and the role
    passes to a new task of the group, which goes on where the holder left off. A holder
    with nothing left to do but wait for bodies of other tasks waits for the next of them
    to finish (an abort signal, the backend's own wait underneath).
    """

    __slots__ = (
        "batch",
        "dead",
        "group",
        "held",
        "in_dispatch",
        "index",
        "inputs",
        "max_parallel",
        "next_mode",
        "notify",
        "order",
        "outcomes",
        "pending",
        "registry",
        "signal",
    )

    def __init__(
        self,
        registry: ToolRegistry,
        batch: Sequence[ToolCall],
        inputs: Sequence[ToolExecutionInput],
        outcomes: list[CallOutcome | None],
        start: int,
        mode: tuple[str, Any],
        signal: AbortSignal,
        max_parallel: int,
        group: _Group,
        held: list[BaseException],
    ) -> None:
        self.registry = registry
        self.batch = batch
        self.inputs = inputs
        self.outcomes = outcomes
        self.signal = signal
        self.max_parallel = max_parallel
        self.group = group
        self.held = held  # what publishing a call raised (see _publish)
        self.order: deque[_Started] = deque()  # started, not yet published, in model order
        self.index = start  # the next call to start
        self.pending: tuple[str, Any] | None = mode  # the mode already read for it, if any
        self.next_mode: tuple[str, Any] | None = None  # the mode that ended the group
        self.in_dispatch = 0  # in their dispatch stage: what max_parallel caps
        # Aborted by the next body to finish in another task, while the holder waits.
        self.notify: AbortController | None = None
        self.dead = False  # the holder was interrupted: nobody post-executes any more

    async def run(self) -> None:
        """Hold the role until the group is done, or until a body blocks in this task."""
        registry = self.registry
        batch = self.batch
        order = self.order
        outcomes = self.outcomes
        holding = True
        try:
            while True:
                # Post-execute and publish, in model order, every call whose dispatch ended.
                while order and order[0].state in _ENDED:
                    started = order[0]
                    if started.state == _SETTLED:
                        # Interrupted in its own task's dispatch stage, which published its
                        # one result (a body that cancelled its own task, say).
                        order.popleft()
                        result = cast("ToolResult", started.run._result)
                        outcomes[started.index] = _outcome(batch[started.index], result, True)
                        continue
                    started.state = _AFTER
                    step = registry._stage_after(started.run, checkpoint=False)
                    if step is not None:
                        try:
                            await step
                        except BaseException as interrupt:
                            if not _holds(interrupt):
                                raise
                            self._hold(started, interrupt)
                            continue
                    order.popleft()
                    result = _publish(registry, started.run, self.held)
                    outcomes[started.index] = _outcome(batch[started.index], result, True)
                # Start calls while a dispatch slot is free.
                while (
                    self.next_mode is None
                    and self.index < len(batch)
                    and self.in_dispatch < self.max_parallel
                    and not self.signal.aborted
                    and not self.held
                ):
                    index = self.index
                    pending = self.pending
                    if pending is None:
                        pending = registry._mode(self.inputs[index])
                    if pending[0] != "parallel":
                        self.pending = self.next_mode = pending
                        break
                    self.pending = None
                    started = _Started(index, registry._start(self.inputs[index], pending[1]))
                    order.append(started)
                    self.index = index + 1
                    step = registry._stage_before(started.run)
                    if step is not None:
                        try:
                            await step
                        except BaseException as interrupt:
                            if not _holds(interrupt):
                                raise
                            self._hold(started, interrupt)
                            continue
                    step = registry._stage_dispatch(started.run)
                    if step is None:
                        started.state = _DISPATCHED  # nothing to dispatch
                        continue
                    dispatch = cast("Coroutine[Any, Any, object]", step)
                    started.state = _DISPATCHING
                    # The context as it is between calls: a body that blocks has made its
                    # span (or anything else) current here, and the next holder must not
                    # inherit that (tracing: no call becomes another's parent).
                    between = copy_context()
                    try:
                        # ≡ `await dispatch` in this task, stepped by hand to see whether the
                        # body blocks (then `_resume` is the rest of that await); pinned by
                        # benchmarks/bench_batch.py.
                        yielded = dispatch.send(None)
                    except StopIteration:
                        started.state = _DISPATCHED  # done without blocking
                        continue
                    except BaseException as interrupt:
                        if not _holds(interrupt):
                            started.state = _SETTLED
                            raise
                        self._hold(started, interrupt)
                        continue
                    # The body blocked: it stays in this task, and the role moves on.
                    self.in_dispatch += 1
                    try:
                        between.run(self.group.spawn, self._spawned)
                        holding = False
                    except Exception:
                        # The group takes no more tasks (it is shutting down): this task
                        # keeps the role, and drives the body to its end first.
                        pass
                    try:
                        await _resume(dispatch, yielded)
                    except BaseException as interrupt:
                        holds = _holds(interrupt)
                        if holds:
                            self.held.append(interrupt)
                        self._body_ended(started, settled=True)
                        if not holds:
                            raise
                    else:
                        self._body_ended(started, settled=False)
                    if not holding:
                        return
                if not order:
                    return  # every started call is published, and no further one may start
                if order[0].state in _ENDED:
                    continue
                notify = self.notify = AbortController()
                await notify.signal.wait()
        except BaseException:
            if holding:
                self.settle_between()
            raise

    async def _spawned(self) -> None:
        """A new task taking the role on."""
        if self.group.yield_first:
            await asyncio.sleep(0)  # not inside the step of the task that spawned it
        # Not a call more once the host has cancelled: on trio a task runs until its first
        # checkpoint even in a cancelled scope, and a body's first yield looks like blocking.
        await anyio.lowlevel.checkpoint_if_cancelled()
        await self.run()

    def _hold(self, started: _Started, interrupt: BaseException) -> None:
        """A stage of ``started`` raised an interrupt, once it had settled and published it.

        Held as an observer's is (see `_publish`): no further call starts, the started
        ones finish, and `run_tool_calls` raises it once every call has its result.
        """
        self.held.append(interrupt)
        started.state = _SETTLED

    def settle_between(self) -> None:
        """The sequencer is gone (the host cancelled it, or an interrupt): still one result each.

        Calls inside a stage settle themselves; these are between stages. A body that ends
        later in its own task settles its call itself (`dead`).
        """
        self.dead = True
        for started in self.order:
            if started.state == _DISPATCHED:
                started.state = _AFTER
                self.registry._settle_interrupted(started.run)

    def _body_ended(self, started: _Started, *, settled: bool) -> None:
        """A body that blocked has ended, in the task it blocked in: post-execute is next."""
        self.in_dispatch -= 1
        if settled:
            started.state = _SETTLED  # its dispatch stage was interrupted and published
        elif self.dead:
            started.state = _AFTER  # nobody is left to post-execute it
            self.registry._settle_interrupted(started.run)
        else:
            started.state = _DISPATCHED
        notify = self.notify
        if notify is not None:
            self.notify = None
            notify.abort()


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

    This task is the first sequencer (see `_Sequencer`). Returns the index of the first
    call not run and, when a call's mode ended the group, that mode (so it is read once
    per call).
    """
    group = _Group()
    sequencer = _Sequencer(
        registry, batch, inputs, outcomes, start, mode, signal, max_parallel, group, held
    )
    try:
        async with group:
            await sequencer.run()
    except BaseException:
        # The group has awaited every task: a task cancelled before it ever ran (asyncio)
        # never ran its own handler, so whatever is still between stages is settled here.
        sequencer.settle_between()
        raise
    return sequencer.index, sequencer.next_mode
