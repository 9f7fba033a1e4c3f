"""`run_tool_calls`: the agent loop's seam for one model turn's tool calls (contract §7).

A model turn may ask for several tool calls at once. The model's next request must carry
exactly one result per call id, in order, even when the user pressed stop halfway:
otherwise providers reject the unbalanced history. This module guarantees that shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast, final

import anyio

from ._errors import exact_str, type_name
from ._registry import ToolRegistry
from ._results import ToolResult
from ._run import Run
from ._signals import AbortSignal
from ._views import ToolExecutionInput

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
    cancellation is re-raised.

    Args:
        registry: The registry to run the calls through.
        calls: The calls, in the order the model gave them.
        signal: The caller-owned signal of the whole turn; every call carries it.
        max_parallel: How many parallel calls may be in flight at once (at least 1).
        agent: Opaque value carried to every stage.

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
    for position, call in enumerate(batch):
        if type(call) is not ToolCall:
            raise TypeError(
                f"run_tool_calls() expects ToolCall items, got {type_name(type(call))} at "
                f"index {position}: build each one as ToolCall(call_id, name, arguments)"
            )
        # An exact copy: a str subclass's __hash__ may raise. A non-str id is the call's
        # own failure (the registry reports it), not the batch's.
        call_id = exact_str(call.call_id)
        if call_id is None:
            continue
        if call_id in seen:
            raise ValueError(f"duplicate call_id {call_id!r} in one batch")
        seen.add(call_id)
    inputs = [
        ToolExecutionInput(
            call_id=call.call_id,
            name=call.name,
            arguments=call.arguments,
            signal=signal,
            agent=agent,
        )
        for call in batch
    ]
    outcomes: list[CallOutcome | None] = [None] * len(batch)
    index = 0
    mode: str | None = None  # the mode already read for batch[index], if any
    while index < len(batch) and not signal.aborted:
        if mode is None:
            mode = registry.execution_mode(inputs[index])
        if mode == "exclusive":
            result = await registry.execute(inputs[index])
            outcomes[index] = CallOutcome(batch[index], result, True)
            index += 1
            mode = None
        else:
            index, mode = await _run_parallel_group(
                registry, batch, inputs, outcomes, index, signal, max_parallel
            )
    return [
        outcome if outcome is not None else CallOutcome(call, registry._skip(call_input), False)
        for call, call_input, outcome in zip(batch, inputs, outcomes, strict=True)
    ]


async def _run_parallel_group(
    registry: ToolRegistry,
    batch: Sequence[ToolCall],
    inputs: Sequence[ToolExecutionInput],
    outcomes: list[CallOutcome | None],
    start: int,
    signal: AbortSignal,
    max_parallel: int,
) -> tuple[int, str | None]:
    """Run consecutive parallel calls from ``start``.

    Returns the index of the first call not run and, when a call's mode ended the group,
    that mode (so it is read once per call).
    """
    slots = anyio.Semaphore(max_parallel)
    # Pre-execute (with approval and guards) and post-execute never overlap each other:
    # only dispatch and bodies run concurrently (contract §7). The lock is FIFO.
    policy = anyio.Lock()
    post_turn = anyio.Event()
    post_turn.set()

    async def finish(index: int, run: Run, previous: anyio.Event, done: anyio.Event) -> None:
        holding = False

        async def my_turn() -> None:
            nonlocal holding
            await previous.wait()  # post-execute in model order
            await policy.acquire()
            holding = True

        try:
            try:
                await registry._stage_dispatch(run)
            finally:
                # The cap counts calls in dispatch; a call waiting for its post-execute
                # turn no longer holds a slot.
                slots.release()
            result = await registry._stage_after(run, my_turn)
            outcomes[index] = CallOutcome(batch[index], result, True)
        finally:
            if holding:
                policy.release()
            done.set()

    index = start
    next_mode: str | None = None
    async with anyio.create_task_group() as group:
        while index < len(batch):
            if index > start:
                mode = registry.execution_mode(inputs[index])
                if mode != "parallel":
                    next_mode = mode
                    break
            await slots.acquire()
            try:
                async with policy:
                    if signal.aborted:
                        slots.release()
                        break
                    run = registry._start(inputs[index])
                    await registry._stage_before(run)
            except BaseException:
                slots.release()
                raise
            done = anyio.Event()
            group.start_soon(finish, index, run, post_turn, done)
            post_turn = done
            index += 1
    return index, next_mode
