"""`DurableTools`: a registry's calls as steps of the DBOS workflow that runs them."""

from __future__ import annotations

import math
from collections.abc import Iterable
from types import TracebackType
from typing import cast, final

from .._batch import CallOutcome, ToolCall, run_tool_calls
from .._errors import type_name
from .._principal import Principal
from .._registration import Registration
from .._registry import ToolRegistry
from .._results import ToolResult
from .._signals import AbortSignal, fuse
from .._stages import Next
from .._views import (
    ExecutionToken,
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionInput,
    ToolHost,
)
from . import _engine
from ._batch import ACTIVE, Batch
from ._checks import checked_batch
from ._watch import Watch

__all__ = ["DurableTools"]


@final
class DurableTools:
    """Runs a registry's tool calls as steps of the DBOS workflow that makes them.

    Inside a DBOS workflow (``@DBOS.workflow()``, asyncio), `execute` and `run_tool_calls`
    do what `ToolRegistry.execute` and `toolseam.run_tool_calls` do, and each call's one
    result is also the recorded outcome of one DBOS step (``toolseam:<tool>``): replaying
    the workflow returns it without running the body again. ``DBOS.cancel_workflow(id)``
    from any process that shares the system database aborts the signal of every call of the
    workflow in flight (its body is told, and awaited; a call not dispatched yet ends
    `ABORTED_BEFORE_DISPATCH`) and every call of the batch still gets its recorded outcome.
    The workflow's timeout ends the calls it cuts short with `TOOL_TIMEOUT`. After a crash,
    a call that was dispatched but has no recorded outcome runs again only if its tool is
    idempotent (``define_tool(..., idempotent=True)``); otherwise it ends `OUTCOME_UNKNOWN`.
    See docs/durable.md.

    Outside a workflow (and inside a DBOS step, where DBOS runs steps as plain calls) both
    methods run the calls plainly, as DBOS steps do there.

    Creating it installs, on ``registry``, one around-dispatch wrapper (added last, so
    innermost among the wrappers registered so far) and one result observer; both act only
    on calls of a durable batch. `close` removes them. Create it once per registry, at
    setup, and keep it for the registry's life: any number of workflows may use it at once.

    Args:
        registry: The registry whose tools the workflows call.
        poll_interval: Seconds between two reads of the status of the workflows with calls
            in flight: a cancellation reaches the bodies within about this much. Positive
            and finite; one query per interval and event loop, however many workflows run.

    Raises:
        TypeError: ``registry`` is not a `ToolRegistry`, or ``poll_interval`` is not a number.
        ValueError: ``poll_interval`` is not positive and finite.
    """

    __slots__ = ("_batch_class", "_observer", "_poll_interval", "_registry", "_wrapper")

    def __init__(self, registry: ToolRegistry, *, poll_interval: float = 0.1) -> None:
        given = cast("object", registry)
        if type(given) is not ToolRegistry:
            raise TypeError(f"DurableTools expects a ToolRegistry, got {type_name(type(given))}")
        interval = cast("object", poll_interval)
        if isinstance(interval, bool) or not isinstance(interval, (int, float)):
            raise TypeError(
                f"DurableTools(poll_interval=...) must be a number of seconds, got "
                f"{type_name(type(interval))}"
            )
        if not math.isfinite(interval) or interval <= 0:
            raise ValueError(
                f"DurableTools(poll_interval=...) must be positive and finite, got {interval!r}"
            )
        self._registry = registry
        self._poll_interval = float(interval)
        # What runs a batch: replaced only by the conformance kit's mutants (tests/kit_mutants).
        self._batch_class: type[Batch] = Batch
        self._wrapper: Registration = registry.on_execute(self._dispatching)
        self._observer: Registration = registry.on_result(self._published)

    @property
    def registry(self) -> ToolRegistry:
        """The registry whose tools run."""
        return self._registry

    @property
    def poll_interval(self) -> float:
        """Seconds between two reads of the workflows' status."""
        return self._poll_interval

    def close(self) -> None:
        """Remove the wrapper and the observer from the registry. Idempotent.

        Only when no durable batch of this object is running: a call dispatched without
        the wrapper would run without its dispatch marker.
        """
        self._wrapper.remove()
        self._observer.remove()

    def __enter__(self) -> DurableTools:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def _dispatching(
        self, execution: ToolDispatchExecution, next: Next[ToolResult]
    ) -> ToolResult:
        batch = ACTIVE.get()
        if batch is None or batch.tools is not self:
            return await next()
        return await batch.dispatching(execution, next)

    def _published(self, execution: ToolExecution, result: ToolResult) -> None:
        batch = ACTIVE.get()
        if batch is not None and batch.tools is self:
            batch.published(execution, result)

    async def execute(self, input: ToolExecutionInput) -> ToolResult:
        """`ToolRegistry.execute`, with the call's outcome one step of the workflow.

        The call is a batch of one (`run_tool_calls`): its ``call_id``, ``name``,
        ``arguments``, ``signal``, ``agent``, ``parent``, ``root_call_id``, ``host`` and
        ``principal`` are the input's.

        Raises:
            RuntimeError: Not on asyncio (see `run_tool_calls`).
            TypeError: ``input`` is not a `ToolExecutionInput`, or (in a workflow) its
                ``call_id`` or ``name`` is not a ``str``.
        """
        _engine.require_asyncio("DurableTools.execute")
        if type(input) is not ToolExecutionInput:
            raise TypeError(f"execute() expects a ToolExecutionInput, got {type_name(type(input))}")
        if _engine.workflow_context() is None:
            return await self._registry.execute(input)
        call = ToolCall(input.call_id, input.name, input.arguments)
        outcomes = await self.run_tool_calls(
            [call],
            signal=input.signal,
            agent=input.agent,
            parent=input.parent,
            root_call_id=input.root_call_id,
            host=input.host,
            principal=input.principal,
        )
        return outcomes[0].result

    async def run_tool_calls(
        self,
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
        """`toolseam.run_tool_calls`, with each call's outcome one step of the workflow.

        In a workflow, every call takes two step ids, in model order (a dispatch marker's
        and its outcome's), before any call starts. A call whose outcome is recorded is
        replayed (its body does not run); the others run as one `run_tool_calls` batch,
        whose signal is ``signal`` fused with the workflow's: the workflow's cancellation
        and its deadline abort it. Each call's outcome is recorded as soon as the registry
        publishes it. If the task is cancelled by its host, every call still gets its
        recorded outcome before the cancellation goes on.

        Args:
            calls: The calls, in the order the model gave them.
            signal: The caller-owned signal of the whole turn.
            max_parallel: As for `toolseam.run_tool_calls`.
            agent: As for `toolseam.run_tool_calls`.
            parent: As for `toolseam.run_tool_calls`.
            root_call_id: As for `toolseam.run_tool_calls`.
            host: As for `toolseam.run_tool_calls`. A replayed call's body does not run, so
                the host hears nothing from it.
            principal: As for `toolseam.run_tool_calls` (a replayed call is not checked
                again: its outcome was decided when it ran).

        Returns:
            One `CallOutcome` per call, in model order: the recorded one for a replayed call.

        Raises:
            RuntimeError: Not on asyncio (DBOS runs on asyncio only); or the recorded
                outcome of a call belongs to another call id (the workflow is not
                deterministic).
            TypeError: A call is not a `ToolCall`, or (in a workflow) its ``call_id`` or
                ``name`` is not a ``str``; ``signal`` is not an `AbortSignal`;
                ``max_parallel`` is not an int.
            ValueError: Two calls share a ``call_id``, or ``max_parallel < 1``.
        """
        _engine.require_asyncio("DurableTools.run_tool_calls")
        ctx = _engine.workflow_context()
        if ctx is None:
            return await run_tool_calls(
                self._registry,
                calls,
                signal=signal,
                max_parallel=max_parallel,
                agent=agent,
                parent=parent,
                root_call_id=root_call_id,
                host=host,
                principal=principal,
            )
        batch = checked_batch(calls, signal, max_parallel, keyed_by="the journal keys steps")
        with (
            Watch(ctx.workflow_id, _engine.deadline_of(ctx), self._poll_interval) as watch,
            fuse(signal, watch.signal) as fused,
        ):
            run = self._batch_class(
                self, self._registry, ctx.workflow_id, batch, fused.signal, watch, parent
            )
            return await run.run(
                max_parallel=max_parallel,
                agent=agent,
                root_call_id=root_call_id,
                host=host,
                principal=principal,
            )
