"""The driver of toolseam's own `ToolRegistry` (it must pass every clause)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, NoReturn, cast, final

from typing_extensions import TypedDict

from toolseam import (
    AbortController,
    AbortError,
    AbortSignal,
    ApprovalAnswer,
    ApprovalRequest,
    Ask,
    ElicitationRequest,
    Elicited,
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
    ToolHost,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    define_tool,
    nested_input,
    run_tool_calls,
)
from toolseam.capabilities import run_process

from .._body_reach import ElicitationScript
from .._body_reach import Reach as BodyReach
from .._driver import CAPABILITIES, Call, Capability, ListenerScript, Outcome, Scenario, Status
from .._scripts import ScriptedTool

__all__ = [
    "ANSWER_SCHEMA",
    "PROCESS_GRACE",
    "ExecReach",
    "Listen",
    "ProgramRunner",
    "ToolseamDriver",
    "capabilities",
    "define",
    "host_for",
    "lacking",
    "outcome_of",
    "prepare",
    "registry_for",
    "run_on",
]

_STATUS: Mapping[str | None, Status] = {
    "ABORTED": "aborted",
    "ABORTED_BEFORE_DISPATCH": "aborted_before_dispatch",
    "TOOL_TIMEOUT": "timeout",
    "OUTCOME_UNKNOWN": "unknown",  # toolseam.durable, after a crash
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


PROCESS_GRACE = 0.5
"""Seconds `run_process` waits between SIGTERM and SIGKILL for the kit's program."""

ANSWER_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}
"""The schema of the scripted bodies' questions: one string, ``answer``."""


class ExecReach:
    """A body's `toolseam.conformance.Reach`: its ``exec``'s capabilities, and `run_process`."""

    def __init__(self, exec: ToolRunContext) -> None:
        self._exec = exec

    async def progress(self, progress: float, message: str) -> None:
        self._exec.progress(progress, message=message)

    def progress_sync(self, progress: float, message: str) -> None:
        self._exec.progress(progress, message=message)

    async def elicit(self, question: str) -> str | None:
        answer = await self._exec.elicit(question, ANSWER_SCHEMA)
        if answer.content is None:
            return None
        return str(answer.content["answer"])

    async def run_process(self, argv: Sequence[str]) -> None:
        # The kit's program ignores SIGTERM: the grace only decides when SIGKILL follows.
        await run_process(argv, signal=self._exec.signal, check=False, grace=PROCESS_GRACE)


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


def define(
    registry: ToolRegistry,
    tool: ScriptedTool,
    reach: Callable[[ToolRunContext], BodyReach] = ExecReach,
) -> ToolDefinition[KeyArgs, str]:
    """``tool`` as a toolseam tool; a body that reaches gets ``reach(exec)``."""
    safe = _always if tool.parallel else None
    decorate = define_tool(
        name=tool.name,
        description=tool.description,
        timeout=tool.timeout,
        is_concurrency_safe=safe,
        idempotent=tool.idempotent,
    )
    reaches = bool(tool.reaches)
    if tool.sync:

        def sync_body(args: KeyArgs, exec: ToolRunContext) -> str:
            return tool.run_sync(args, Listen(registry, exec), reach(exec) if reaches else None)

        return decorate(sync_body)

    async def body(args: KeyArgs, exec: ToolRunContext) -> str:
        return await tool.run(args, Listen(registry, exec), reach(exec) if reaches else None)

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


def _elicit(
    script: ElicitationScript,
) -> Callable[[ToolExecution, ElicitationRequest, AbortSignal], Awaitable[Elicited[Any]]]:
    async def elicit(
        exec: ToolExecution, request: ElicitationRequest, signal: AbortSignal
    ) -> Elicited[Any]:
        answer = await script(_call_of(exec), request.message, _SignalListen(signal))
        if answer is None:
            return Elicited("cancel" if signal.aborted else "decline")
        return Elicited("accept", {"answer": answer})

    return elicit


def host_for(scenario: Scenario) -> ToolHost | None:
    """The caller's `ToolHost` for ``scenario``: its progress sink and elicitation, if any."""
    sink, script = scenario.progress, scenario.elicit
    if sink is None and script is None:
        return None
    return ToolHost(
        on_progress=(
            None
            if sink is None
            else lambda exec, event: sink(exec.call_id, event.progress, event.message)
        ),
        elicit=None if script is None else _elicit(script),
    )


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
        """Every capability (``ptc``, ``durable``: see `capabilities`)."""
        return capabilities()

    @property
    def lacking(self) -> Mapping[str, str]:
        """Why a capability is missing here."""
        return lacking()

    @property
    def backends(self) -> Sequence[str]:
        """Asyncio and trio."""
        return ("asyncio", "trio")

    def versions(self) -> Mapping[str, str]:
        """Toolseam and anyio (and pydantic-monty, which runs the programs, if installed)."""
        here = capabilities()
        names = (
            "toolseam",
            "anyio",
            *(("pydantic-monty",) if "ptc" in here else ()),
            *(("dbos",) if "durable" in here else ()),
        )
        return {name: importlib.metadata.version(name) for name in names}

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        """Run the scenario on a fresh registry."""
        return await run_on(registry_for(scenario), scenario)


Define = Callable[[ToolRegistry, ScriptedTool], ToolDefinition[KeyArgs, str]]


def capabilities() -> tuple[Capability, ...]:
    """What toolseam's driver offers here: all but what it `lacking`.

    ``ptc`` needs ``toolseam[ptc]``; ``durable`` needs ``toolseam[dbos]``, on asyncio (DBOS
    cannot host trio).
    """
    missing = lacking()
    return tuple(c for c in CAPABILITIES if c not in missing)


OVER_MCP: Mapping[str, str] = {
    "mcp": "an in-process registry: its MCP server is measured by the toolseam-mcp drivers",
    "mcp_input_required": (
        "an in-process registry: its MCP server is measured by the toolseam-mcp drivers"
    ),
}
"""The MCP capabilities, which a driver of an in-process registry lacks."""


def lacking() -> dict[str, str]:
    """The capabilities toolseam's driver lacks here, and why."""
    why: dict[str, str] = dict(OVER_MCP)
    if importlib.util.find_spec("pydantic_monty") is None:
        why["ptc"] = "toolseam.ptc needs pydantic-monty (pip install 'toolseam[ptc]')"
    if importlib.util.find_spec("dbos") is None:
        why["durable"] = "toolseam.durable needs DBOS (pip install 'toolseam[dbos]')"
    else:
        from ._dbos import sniff

        if sniff() == "trio":
            why["durable"] = (
                "toolseam.durable runs on asyncio only: DBOS runs workflows and steps as "
                "asyncio tasks and cannot host trio"
            )
    return why


def registry_for(scenario: Scenario, *, timeouts: bool = True) -> ToolRegistry:
    """A fresh registry for ``scenario`` (with its approver as the approval service)."""
    return ToolRegistry(_Approval(scenario) if scenario.approval else None, timeouts=timeouts)


ProgramRunner = Callable[[ToolRegistry, Scenario, AbortSignal], Awaitable[Sequence[Outcome]]]
"""Runs a scenario's program (capability ``ptc``) on a registry, with the call's signal."""


async def run_on(
    registry: ToolRegistry,
    scenario: Scenario,
    define: Define = define,
    host: ToolHost | None = None,
    program: ProgramRunner | None = None,
    durable: Callable[[ToolRegistry], Any] | None = None,
) -> Sequence[Outcome]:
    """Register the scenario's tools and stages on ``registry`` and run its calls.

    ``host`` is what the caller offers each call (by default `host_for` the scenario). A
    scenario with a program runs it with ``program`` (by default `toolseam.ptc`'s
    ``run_code``, `run_program`); a durable one runs as a DBOS workflow whose calls go
    through ``durable(registry)`` (by default a `toolseam.durable.DurableTools`).
    """
    host = prepare(registry, scenario, define, host)
    controller = AbortController()
    if scenario.durable is not None:
        from ._toolseam_durable import run_durable  # DBOS: only for a durable scenario

        return await run_durable(registry, scenario, host, make=durable)
    scenario.stop.connect(controller.abort)
    if scenario.program is not None:
        if program is None:
            from ._toolseam_ptc import run_program  # pydantic-monty: only for a program

            program = run_program
        return await program(registry, scenario, controller.signal)
    if scenario.batch:
        calls = [ToolCall(c.call_id, c.tool, dict(c.arguments)) for c in scenario.calls]
        outcomes = await run_tool_calls(
            registry,
            calls,
            signal=controller.signal,
            max_parallel=scenario.max_parallel,
            host=host,
        )
        return [outcome_of(o.call.call_id, o.result) for o in outcomes]
    (call,) = scenario.calls
    result = await registry.execute(
        ToolExecutionInput(
            call_id=call.call_id,
            name=call.tool,
            arguments=dict(call.arguments),
            signal=controller.signal,
            host=host,
        )
    )
    return [outcome_of(call.call_id, result)]


def prepare(
    registry: ToolRegistry,
    scenario: Scenario,
    define: Define = define,
    host: ToolHost | None = None,
) -> ToolHost | None:
    """Register the scenario's tools and stages on ``registry``; the caller's `ToolHost`.

    ``host`` is what the caller offers each call (by default `host_for` the scenario).
    """
    host = host if host is not None else host_for(scenario)
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
    return host
