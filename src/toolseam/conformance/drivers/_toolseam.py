"""The driver of toolseam's own `ToolRegistry` (it must pass every clause)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import NoReturn, cast, final

from typing_extensions import TypedDict

from toolseam import (
    AbortController,
    AbortError,
    AbortSignal,
    ApprovalAnswer,
    ApprovalRequest,
    Ask,
    Next,
    PostDecision,
    PreDecision,
    ToolCall,
    ToolDefinition,
    ToolDispatchExecution,
    ToolError,
    ToolExecution,
    ToolExecutionInput,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    define_tool,
    nested_input,
    run_tool_calls,
)

from .._driver import CAPABILITIES, Call, Capability, ListenerScript, Outcome, Scenario, Status
from .._scripts import ScriptedTool

__all__ = ["Listen", "ToolseamDriver", "define", "outcome_of", "registry_for", "run_on"]

_STATUS: Mapping[str | None, Status] = {
    "ABORTED": "aborted",
    "ABORTED_BEFORE_DISPATCH": "aborted_before_dispatch",
    "TOOL_TIMEOUT": "timeout",
}
_ANSWERS: Mapping[str, ApprovalAnswer] = {
    "approve": "allowed-once",
    "reject": "rejected",
    "cancel": "cancelled",
}


class KeyArgs(TypedDict):
    """The scripted tools' arguments."""

    key: str


def outcome_of(call_id: str, result: ToolResult) -> Outcome:
    """A toolseam result in the kit's words."""
    if isinstance(result, ToolSuccess):
        return Outcome(call_id, "ok", value=result.value)
    assert isinstance(result, ToolFailure)
    code = result.code
    detail = f"{code}: {result.error.message}" if code else result.error.message
    return Outcome(call_id, _STATUS.get(code, "error"), detail)


@final
class Listen:
    """A body's `Listen`: its ``exec.signal``, and nested calls through the registry."""

    def __init__(self, registry: ToolRegistry, exec: ToolRunContext) -> None:
        self._registry = registry
        self._exec = exec
        self._signal = exec.signal  # the body's own: exec.signal is restored after the body

    def is_told(self) -> bool:
        return self._signal.aborted

    async def wait(self) -> None:
        await self._signal.wait()

    def stop(self) -> NoReturn:
        self._signal.raise_if_aborted()
        raise AbortError()

    def fail(self, message: str) -> NoReturn:
        raise ToolError(message, code="SCRIPTED_FAILURE")

    async def call(self, call: Call) -> Outcome:
        nested = nested_input(
            self._exec, call_id=call.call_id, name=call.tool, arguments=dict(call.arguments)
        )
        return outcome_of(call.call_id, await self._registry.execute(nested))


@final
class _SignalListen:
    """A stage's `Listen` (an approval request, a listener): the signal that stage sees."""

    def __init__(self, signal: AbortSignal) -> None:
        self._signal = signal

    def is_told(self) -> bool:
        return self._signal.aborted

    async def wait(self) -> None:
        await self._signal.wait()

    def stop(self) -> NoReturn:
        raise AbortError()

    def fail(self, message: str) -> NoReturn:
        raise ToolError(message, code="SCRIPTED_FAILURE")

    async def call(self, call: Call) -> Outcome:
        raise NotImplementedError("a stage makes no calls")


def _call_of(exec: ToolExecution) -> Call:
    key = exec.arguments.get("key") if isinstance(exec.arguments, Mapping) else None
    return Call(exec.call_id, exec.name, {"key": str(key)})


def _always(args: object) -> bool:
    return True


def define(registry: ToolRegistry, tool: ScriptedTool) -> ToolDefinition[KeyArgs, str]:
    safe = _always if tool.parallel else None
    decorate = define_tool(
        name=tool.name,
        description=tool.description,
        timeout=tool.timeout,
        is_concurrency_safe=safe,
    )
    if tool.sync:

        def sync_body(args: KeyArgs, exec: ToolRunContext) -> str:
            return tool.run_sync(args, Listen(registry, exec))

        return decorate(sync_body)

    async def body(args: KeyArgs, exec: ToolRunContext) -> str:
        return await tool.run(args, Listen(registry, exec))

    return decorate(body)


@final
class _Approval:
    """An `ApprovalService` asking the kit's scripted approver."""

    def __init__(self, scenario: Scenario) -> None:
        self._scenario = scenario

    async def request(self, request: ApprovalRequest, /) -> ApprovalAnswer:
        approver = self._scenario.approval
        assert approver is not None
        answer = await approver(_call_of(request.execution), _SignalListen(request.signal))
        return _ANSWERS[answer]


async def _ask(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
    return Ask("the conformance kit decides")


def _pre_listener(
    script: ListenerScript,
) -> Callable[[ToolExecution, Next[PreDecision]], Awaitable[PreDecision]]:
    async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        await script(_call_of(exec), _SignalListen(exec.signal))
        return await next()

    return pre


def _post_listener(
    script: ListenerScript,
) -> Callable[[ToolExecution, ToolResult, Next[PostDecision]], Awaitable[PostDecision]]:
    async def post(
        exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
    ) -> PostDecision:
        await script(_call_of(exec), _SignalListen(exec.signal))
        return await next()

    return post


def _wrapper(
    around: Callable[[Call, Callable[[], Awaitable[object]]], Awaitable[object]],
) -> Callable[[ToolDispatchExecution, Next[ToolResult]], Awaitable[ToolResult]]:
    async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
        return cast("ToolResult", await around(_call_of(exec), next))

    return wrap


@final
class ToolseamDriver:
    """Drives `toolseam.ToolRegistry`: `execute`, `run_tool_calls`, every stage."""

    @property
    def subject(self) -> str:
        """``"toolseam"``."""
        return "toolseam"

    @property
    def capabilities(self) -> Collection[Capability]:
        """Every capability."""
        return CAPABILITIES

    @property
    def backends(self) -> Sequence[str]:
        """Asyncio and trio."""
        return ("asyncio", "trio")

    def versions(self) -> Mapping[str, str]:
        """Toolseam and anyio."""
        return {name: importlib.metadata.version(name) for name in ("toolseam", "anyio")}

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        """Run the scenario on a fresh registry."""
        return await run_on(registry_for(scenario), scenario)


Define = Callable[[ToolRegistry, ScriptedTool], ToolDefinition[KeyArgs, str]]


def registry_for(scenario: Scenario, *, timeouts: bool = True) -> ToolRegistry:
    """A fresh registry for ``scenario`` (with its approver as the approval service)."""
    return ToolRegistry(_Approval(scenario) if scenario.approval else None, timeouts=timeouts)


async def run_on(
    registry: ToolRegistry, scenario: Scenario, define: Define = define
) -> Sequence[Outcome]:
    """Register the scenario's tools and stages on ``registry`` and run its calls."""
    for tool in scenario.tools:
        registry.register(define(registry, tool))
    if scenario.approval is not None:
        registry.on_pre_execute(_ask)
    if scenario.pre_execute is not None:
        registry.on_pre_execute(_pre_listener(scenario.pre_execute))
    if scenario.around is not None:
        registry.on_execute(_wrapper(scenario.around))
    if scenario.post_execute is not None:
        registry.on_post_execute(_post_listener(scenario.post_execute))
    registry.on_result(lambda exec, result: scenario.publish(outcome_of(exec.call_id, result)))
    observer = scenario.observer
    if observer is not None:
        registry.on_result(lambda exec, result: observer(outcome_of(exec.call_id, result)))
    controller = AbortController()
    scenario.stop.connect(controller.abort)
    if scenario.batch:
        calls = [ToolCall(c.call_id, c.tool, dict(c.arguments)) for c in scenario.calls]
        outcomes = await run_tool_calls(
            registry, calls, signal=controller.signal, max_parallel=scenario.max_parallel
        )
        return [outcome_of(o.call.call_id, o.result) for o in outcomes]
    (call,) = scenario.calls
    result = await registry.execute(
        ToolExecutionInput(
            call_id=call.call_id,
            name=call.tool,
            arguments=dict(call.arguments),
            signal=controller.signal,
        )
    )
    return [outcome_of(call.call_id, result)]
