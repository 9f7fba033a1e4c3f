"""The batch sequencer: one parallel group of `run_tool_calls`, driven by hand (contract §7).

`run_tool_calls` (in `_batch`) hands each run of consecutive ``"parallel"`` calls to
`run_parallel_group`. One task at a time holds the role of sequencer (`_Sequencer`): it runs
pre- and post-execute of every call, each in model order, so the two never overlap, and
dispatches each call in the task it is in: a body that completes without blocking costs no
task at all. When a body blocks it stays in the task it started in (`_resume` drives it on,
so its cancel scopes and current task stay its own) and the role passes to a new task of the
group (`_Group`: the backend's own task group). The reference batch
(`toolseam.reference.run_tool_calls`: an anyio task group, a lock and a capacity limiter)
does the same with plain tasks; tests/test_reference_differential.py requires both to publish
the same results.
"""

from __future__ import annotations

import asyncio
import types
from collections import deque
from collections.abc import Callable, Coroutine, Generator, Sequence
from contextvars import copy_context
from typing import Any, cast, final

import anyio.lowlevel

from ._registry import ToolRegistry
from ._results import ToolResult
from ._run import CallState
from ._signals import AbortController, AbortSignal
from ._views import ToolExecutionInput

__all__ = ["holds", "publish", "run_parallel_group"]


def publish(registry: ToolRegistry, run: CallState, held: list[BaseException]) -> ToolResult:
    """Publish ``run``'s result; hold an interrupt an observer raised, not the batch.

    `Engine._publish` (`_engine`) raises a ``KeyboardInterrupt`` or ``SystemExit`` only after
    every observer has seen the result, which is then the run's; raising it here would tear
    down the calls still running in the batch and lose their results.
    """
    try:
        return registry._publish(run)
    except BaseException as error:
        held.append(error)
        return cast("ToolResult", run._result)


# Where a started call of a parallel group is.
_BEFORE = 0  # in its pre-execute stage (which settles it if interrupted)
_DISPATCHING = 1  # in its dispatch stage, in some task (which settles it if interrupted)
_DISPATCHED = 2  # waiting for its post-execute turn
_AFTER = 3  # in its post-execute stage (which settles it if interrupted), then published
_SETTLED = 4  # interrupted in its dispatch stage, which published its result
_ENDED = frozenset((_DISPATCHED, _SETTLED))  # the head's turn in the sequencer


def holds(error: BaseException) -> bool:
    """Whether the batch holds ``error``, which a stage raised once it had settled its call.

    Every stage settles and publishes its call before it lets a ``BaseException`` out. The
    host's cancellation then goes on (contract §7: the started calls publish, it is
    re-raised); anything else — ``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit``, a
    tool's own ``BaseException``, a group — is held like an observer's (`publish`): no
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
    ≡ ``anyio.create_task_group()``, the reference batch's (`reference.run_tool_calls`); pinned
    by tests/test_reference_differential.py::test_generated_batches_match and
    ::test_batches_with_an_event_in_any_body_keep_the_contract (host cancellation in any
    body); its speed by benchmarks/bench_targets.py (batch, trio).
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
        "pending",
        "registry",
        "results",
        "signal",
    )

    def __init__(
        self,
        registry: ToolRegistry,
        inputs: Sequence[ToolExecutionInput],
        results: list[ToolResult | None],
        start: int,
        mode: tuple[str, Any],
        signal: AbortSignal,
        max_parallel: int,
        group: _Group,
        held: list[BaseException],
    ) -> None:
        self.registry = registry
        self.inputs = inputs
        self.results = results  # each call's published result, by its index
        self.signal = signal
        self.max_parallel = max_parallel
        self.group = group
        self.held = held  # what publishing a call raised (see `publish`)
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
        inputs = self.inputs
        order = self.order
        results = self.results
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
                        results[started.index] = cast("ToolResult", started.run._result)
                        continue
                    started.state = _AFTER
                    step = registry._stage_after(started.run, checkpoint=False)
                    if step is not None:
                        try:
                            await step
                        except BaseException as interrupt:
                            if not holds(interrupt):
                                raise
                            self._hold(started, interrupt)
                            continue
                    order.popleft()
                    results[started.index] = publish(registry, started.run, self.held)
                # Start calls while a dispatch slot is free.
                while (
                    self.next_mode is None
                    and self.index < len(inputs)
                    and self.in_dispatch < self.max_parallel
                    and not self.signal.aborted
                    and not self.held
                ):
                    index = self.index
                    pending = self.pending
                    if pending is None:
                        pending = registry._mode(inputs[index])
                    if pending[0] != "parallel":
                        self.pending = self.next_mode = pending
                        break
                    self.pending = None
                    started = _Started(index, registry._start(inputs[index], pending[1]))
                    order.append(started)
                    self.index = index + 1
                    step = registry._stage_before(started.run)
                    if step is not None:
                        try:
                            await step
                        except BaseException as interrupt:
                            if not holds(interrupt):
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
                        # ≡ `await dispatch` in this task (`reference._dispatch_and_post`), stepped
                        # by hand to see whether the body blocks (then `_resume` is the rest of that
                        # await); pinned by tests/test_reference_differential.py::
                        # test_a_one_call_batch_matches_execute ("parallel batch") and
                        # tests/test_perf_engine.py::TestBatchPool::
                        # test_a_blocking_body_resumes_in_the_task_it_started_in; its speed by
                        # benchmarks/bench_batch.py.
                        yielded = dispatch.send(None)
                    except StopIteration:
                        started.state = _DISPATCHED  # done without blocking
                        continue
                    except BaseException as interrupt:
                        if not holds(interrupt):
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
                        kept = holds(interrupt)
                        if kept:
                            self.held.append(interrupt)
                        self._body_ended(started, settled=True)
                        if not kept:
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

        Held as an observer's is (see `publish`): no further call starts, the started
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


async def run_parallel_group(
    registry: ToolRegistry,
    inputs: Sequence[ToolExecutionInput],
    results: list[ToolResult | None],
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
        registry, inputs, results, start, mode, signal, max_parallel, group, held
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
