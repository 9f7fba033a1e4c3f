"""Mutants of toolseam's driver for the clauses of one call, threads, host cancellation,
deadlines, batches and the stages around a body (approval, wrappers, listeners, observers).

Each class is toolseam with exactly one rule broken; `MUTANTS` says which clauses that
breaks. A defect is written where a registry would have it (its approval stage, its
listener chain, a wrapper it installs), with the rest of toolseam's driver unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import anyio.to_thread

from toolseam import (
    ApprovalAnswer,
    ApprovalRequest,
    ErrorInfo,
    Next,
    ToolDefinition,
    ToolDispatchExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
)
from toolseam.conformance import Call, Listen, ListenerScript, Outcome, Scenario, ScriptedTool
from toolseam.conformance.drivers._toolseam import (
    KeyArgs,
    _Approval,
    define,
    outcome_of,
    registry_for,
    run_on,
)
from toolseam.conformance.drivers._toolseam import Listen as BodyListen

from ._base import Mutant, ToolseamMutant, race_abort

# -- deadlines ---------------------------------------------------------------------------


class RacingDeadline(ToolseamMutant):
    """Races each body with its deadline (``move_on_after`` around ``next()``)."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        registry = registry_for(scenario, timeouts=False)

        async def racing(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            definition = registry.get(exec.name)
            seconds = None if definition is None else definition.timeout
            if seconds is None:
                return await next()
            with anyio.move_on_after(seconds):
                return await next()
            return ToolFailure.from_message(
                "timed out", info=ErrorInfo("ToolTimeoutError", "TOOL_TIMEOUT")
            )

        registry.on_execute(racing)
        return await run_on(registry, scenario)


class TimeoutAsAbort(ToolseamMutant):
    """Reports the tool's own deadline as ABORTED: a timeout is not told apart."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        outcomes = await super().run(scenario)
        return [
            Outcome(o.call_id, "aborted", o.detail) if o.status == "timeout" else o
            for o in outcomes
        ]


# -- batches ------------------------------------------------------------------------------


class DropsSkipped(ToolseamMutant):
    """Drops the results of the calls a stopped batch never started."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        outcomes = await super().run(scenario)
        if not scenario.batch:
            return outcomes
        return [o for o in outcomes if o.status != "aborted_before_dispatch"]


# -- one call ------------------------------------------------------------------------------


class NoNeverRan(ToolseamMutant):
    """Reports both cancellation results alike: it cannot tell 'never ran' from 'ran'."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        outcomes = await super().run(scenario)
        return [
            Outcome(o.call_id, "aborted", o.detail) if o.status == "aborted_before_dispatch" else o
            for o in outcomes
        ]


class AbandonsThreads(ToolseamMutant):
    """Runs synchronous bodies with ``to_thread.run_sync(abandon_on_cancel=True)``."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        def abandoning(registry: ToolRegistry, tool: ScriptedTool) -> ToolDefinition[KeyArgs, str]:
            if not tool.sync:
                return define(registry, tool)

            @define_tool(name=tool.name, description=tool.description)
            async def body(args: KeyArgs, exec: ToolRunContext) -> str:
                listen = BodyListen(registry, exec)
                return await anyio.to_thread.run_sync(
                    tool.run_sync, args, listen, abandon_on_cancel=True
                )

            return body

        return await run_on(registry_for(scenario), scenario, abandoning)


class TearsDelegateDown(ToolseamMutant):
    """Installs a wrapper that tears what it delegates to down (a cancel scope) on abort."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        registry = registry_for(scenario)

        async def tearing(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            with anyio.CancelScope() as scope:
                registration = exec.signal.add_listener(lambda _: scope.cancel())
                try:
                    return await next()
                finally:
                    registration.remove()
            return ToolFailure.from_message("torn down", info=ErrorInfo("AbortError", "ABORTED"))

        registry.on_execute(tearing)
        return await run_on(registry, scenario)


class AbandonsDelegate(ToolseamMutant):
    """Installs a wrapper that answers ABORTED at the abort, leaving what it delegated to
    (the rest of the chain and the body, async or in a thread) running."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        registry = registry_for(scenario)

        async def abandoning(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            result = await race_abort(next, exec.signal.wait)
            if result is not None:
                return result[0]
            return ToolFailure.from_message("abandoned", info=ErrorInfo("AbortError", "ABORTED"))

        registry.on_execute(abandoning)
        return await run_on(registry, scenario)


class SwallowsHost(ToolseamMutant):
    """Swallows the host's cancellation: the call returns as if nothing happened."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        try:
            return await super().run(scenario)
        except anyio.get_cancelled_exc_class():
            return [Outcome(c.call_id, "aborted") for c in scenario.calls]


# -- approval -------------------------------------------------------------------------------


class _RacingApproval:
    """An approval service that answers ``cancelled`` at the abort, leaving its approver."""

    def __init__(self, scenario: Scenario) -> None:
        self._honest = _Approval(scenario)

    async def request(self, request: ApprovalRequest, /) -> ApprovalAnswer:
        answer = await race_abort(lambda: self._honest.request(request), request.signal.wait)
        return "cancelled" if answer is None else answer[0]


class RacingApproval(ToolseamMutant):
    """Answers ``cancelled`` at once when the signal aborts and abandons the approver."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        approval = _RacingApproval(scenario) if scenario.approval else None
        return await run_on(ToolRegistry(approval), scenario)


class _TearingApproval:
    """An approval service that cancels its approver at the abort and answers ``cancelled``."""

    def __init__(self, scenario: Scenario) -> None:
        self._honest = _Approval(scenario)

    async def request(self, request: ApprovalRequest, /) -> ApprovalAnswer:
        with anyio.CancelScope() as scope:
            registration = request.signal.add_listener(lambda _: scope.cancel())
            try:
                return await self._honest.request(request)
            finally:
                registration.remove()
        return "cancelled"


class TearsApproverDown(ToolseamMutant):
    """Cancels a pending approver when the signal aborts, then answers ``cancelled``."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        approval = _TearingApproval(scenario) if scenario.approval else None
        return await run_on(ToolRegistry(approval), scenario)


# -- listeners and observers -----------------------------------------------------------------


def _racing(script: ListenerScript) -> ListenerScript:
    """The registry's stage around a listener: it carries on without it at the abort."""

    async def stage(call: Call, listen: Listen) -> None:
        await race_abort(lambda: script(call, listen), listen.wait)

    return stage


class RacingPreListener(ToolseamMutant):
    """Its pre-execute chain carries on without a pending listener once the call aborts."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        if scenario.pre_execute is not None:
            scenario.pre_execute = _racing(scenario.pre_execute)
        return await super().run(scenario)


class RacingPostListener(ToolseamMutant):
    """Its post-execute chain carries on without a pending listener once the call aborts."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        if scenario.post_execute is not None:
            scenario.post_execute = _racing(scenario.post_execute)
        return await super().run(scenario)


class ObserverTwice(ToolseamMutant):
    """Hands every published result to each of its result observers twice."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        registry = registry_for(scenario)
        # run_on registers the driver's observers once; the defect is the second time.
        registry.on_result(lambda exec, result: scenario.publish(outcome_of(exec.call_id, result)))
        observer = scenario.observer
        if observer is not None:
            registry.on_result(lambda exec, result: observer(outcome_of(exec.call_id, result)))
        return await run_on(registry, scenario)


class ObserverFailureIsTheResult(ToolseamMutant):
    """Lets a raising result observer turn the call's result into a failure."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        raised: dict[str, BaseException] = {}
        observer = scenario.observer
        if observer is not None:

            def recording(outcome: Outcome) -> None:
                try:
                    observer(outcome)
                except Exception as error:
                    raised[outcome.call_id] = error
                    raise

            scenario.observer = recording
        outcomes = await super().run(scenario)
        return [
            Outcome(o.call_id, "error", repr(raised[o.call_id])) if o.call_id in raised else o
            for o in outcomes
        ]


MUTANTS: tuple[Mutant, ...] = (
    Mutant("racing-deadline", RacingDeadline, frozenset({"timeout.asks"})),
    Mutant("timeout-as-abort", TimeoutAsAbort, frozenset({"timeout.result", "timeout.asks"})),
    Mutant("drops-skipped", DropsSkipped, frozenset({"batch.balanced-after-stop"})),
    Mutant("abandons-threads", AbandonsThreads, frozenset({"host.thread-awaited"})),
    Mutant(
        "no-never-ran",
        NoNeverRan,
        frozenset(
            {
                "abort.pre-aborted",
                "abort.ran-vs-never-ran",
                "abort.during-approval",
                "abort.before-delegating",
                "approval.cancelled-vs-rejected",
                "batch.balanced-after-stop",
                "listener.pre-abort",
            }
        ),
    ),
    Mutant(
        "tears-delegate-down",
        TearsDelegateDown,
        frozenset(
            {
                "abort.asks-the-body",
                "abort.no-racing",
                "abort.failure-stays",  # the body never got to fail: torn down, it is ABORTED
                "abort.before-delegating",  # the kit's wrapper is the delegate torn down
                "nested.parent-signal",
            }
        ),
    ),
    Mutant(
        "abandons-delegate",
        AbandonsDelegate,
        frozenset(
            {
                "abort.quiescent",
                "abort.no-racing",
                "abort.failure-stays",  # it answered ABORTED before the body could fail
                "thread.awaited",
                # The abandoned body runs in a task the host's cancellation never reaches.
                "host.body-told",
                "host.awaited",
                "host.thread-awaited",
                "batch.drained",
                "abort.before-delegating",  # the kit's wrapper is the delegate abandoned
                "nested.parent-signal",
            }
        ),
    ),
    Mutant("swallows-host", SwallowsHost, frozenset({"host.propagates", "host.never-ran"})),
    Mutant("racing-approval", RacingApproval, frozenset({"abort.during-approval"})),
    Mutant("tears-approver-down", TearsApproverDown, frozenset({"abort.during-approval"})),
    Mutant(
        "racing-pre-listener",
        RacingPreListener,
        frozenset({"listener.pre-abort", "listener.ignored"}),
    ),
    Mutant("racing-post-listener", RacingPostListener, frozenset({"listener.post-abort"})),
    Mutant(
        "observer-twice",
        ObserverTwice,
        frozenset(
            {
                "result.success",
                "result.one-when-aborted",
                "host.one-result",
                "host.never-ran",
                "host.thread-one-result",
                "observer.one-result",
            }
        ),
    ),
    Mutant(
        "observer-failure-is-the-result",
        ObserverFailureIsTheResult,
        frozenset({"observer.one-result"}),
    ),
)
"""Every mutant of this module, with exactly the clauses it breaks."""
