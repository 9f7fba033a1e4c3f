"""`run_tool_calls`: the agent loop's seam for one model turn's tool calls (contract §7).

A model turn may ask for several tool calls at once. The model's next request must carry
exactly one result per call id, in order, even when the user pressed stop halfway:
otherwise providers reject the unbalanced history. This module guarantees that shape.

It runs an ``"exclusive"`` call alone, through the registry's stages, and hands each run of
consecutive ``"parallel"`` calls to the batch sequencer (`_sequencer.run_parallel_group`),
which overlaps their dispatch while pre- and post-execute stay in model order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast, final

import anyio.lowlevel

from ._errors import exact_str, type_name
from ._principal import Principal
from ._registry import ToolRegistry
from ._results import ToolResult
from ._sequencer import holds, publish, run_parallel_group
from ._signals import AbortSignal
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
    # Each started call's published result, by its index (the sequencer fills its groups').
    results: list[ToolResult | None] = [None] * len(batch)
    held: list[BaseException] = []  # what publishing a call raised (see `publish`)
    try:
        index = 0
        mode: tuple[str, Any] | None = None  # the mode already read for batch[index], if any
        while index < len(batch) and not signal.aborted and not held:
            if mode is None:
                mode = registry._mode(inputs[index])
            if mode[0] == "exclusive":
                run = registry._start(inputs[index], mode[1])
                try:
                    # ≡ `registry.execute(inputs[index])` (`ReferenceRegistry.execute`) up to its
                    # publish, with the snapshot `_mode` took (parsed once); pinned by
                    # tests/test_reference_differential.py::test_a_one_call_batch_matches_execute
                    # and ::test_generated_batches_match; its speed by benchmarks/bench_batch.py.
                    for stage in (
                        registry._stage_before,
                        registry._stage_dispatch,
                        registry._stage_after,
                    ):
                        step = stage(run)
                        if step is not None:
                            await step
                except BaseException as interrupt:
                    if not holds(interrupt):
                        raise
                    held.append(interrupt)  # the stage settled and published the call
                    results[index] = cast("ToolResult", run._result)
                else:
                    results[index] = publish(registry, run, held)
                index += 1
                mode = None
            else:
                index, mode = await run_parallel_group(
                    registry, inputs, results, index, mode, signal, max_parallel, held
                )
        if index == len(batch) and index:  # every call was started
            started = cast("list[ToolResult]", results)
            return [
                _outcome(call, result, True) for call, result in zip(batch, started, strict=True)
            ]
        skipped = [
            _outcome(call, result, True)
            if result is not None
            else _outcome(call, publish(registry, registry._skip_run(call_input), held), False)
            for call, call_input, result in zip(batch, inputs, results, strict=True)
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
