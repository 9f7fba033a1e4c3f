r"""The driver of pydantic-ai's tool execution: an agent run whose model asks for the calls.

The tools are `pydantic_ai.Tool`\s (``timeout=`` their deadline, ``sequential=`` for tools
not safe to overlap) behind a `WrapperToolset` whose ``call_tool`` is the kit's
around-dispatch wrapper. A `FunctionModel` — pydantic-ai's own test model — answers the
first request with the scenario's tool calls (one response: pydantic-ai runs them
concurrently) and the next with text. The kit's stop button is pydantic-ai's run
cancellation, a `CancellationToken` passed to ``agent.run``; a cancelled run raises
`RunCancelled`, whose ``all_messages()`` hold what completed. Each call's outcome is read
from the history: its `ToolReturnPart` and that part's ``outcome``. pydantic-ai
tells a tool body nothing but task cancellation. The kit's pre- and post-execute listeners
are a capability's ``before_tool_execute`` and ``after_tool_execute`` hooks, and its result
observer that capability's ``on_event`` for each `FunctionToolResultEvent`: a hook, too,
hears of nothing but task cancellation. Approval (deferred tool requests, answered in a
later run) and nested calls are not driven: those clauses are skipped.

What a body reaches: progress is ``await ctx.emit(event)`` of a `CustomEvent`, which the
kit receives through a capability's ``on_event`` (a synchronous tool cannot emit: "Sync
tools cannot emit events; write async tools instead", says ``RunContext.emit``, so a thread
body's progress fails). A question to the user is ``wait_for_external_event`` from the
body, whose ``ask`` is the kit's elicitation; pydantic-ai has no way for the side that
answers to say it cannot, so a caller offering none hands the token to nobody and the wait
waits. Processes run through the run's workspace, ``ctx.workspace.run(argv)`` on a
`LocalWorkspaceBackend`.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Awaitable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, final

from pydantic import JsonValue
from pydantic_ai import Agent, CancellationToken, ModelRetry, RunCancelled, RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.external_events import wait_for_external_event
from pydantic_ai.messages import (
    AgentStreamEvent,
    CustomEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import FunctionToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import AbstractToolset, ToolsetTool
from pydantic_ai.workspaces import LocalWorkspaceBackend

from .._body_reach import ElicitationScript, ProgressSink
from .._driver import Call, Capability, ObserverScript, Outcome, Scenario, WrapperScript
from .._scripts import ScriptedTool
from ._common import TaskListen, host_cancelled, no_result, versions
from ._pydantic_ai_parts import outcome

__all__ = ["PydanticAIDriver"]

_INTERRUPTED = (
    "RunCancelled; the history holds no return for the call, and a resumed run closes it "
    "as outcome='interrupted', whether the body ran or not"
)


@dataclass(kw_only=True)
class _Progress(CustomEvent, name="toolseam.conformance.progress", ui=False):
    """A scripted body's progress, as an application-defined event of the run's stream."""

    progress: float
    message: str


@final
class _Reach:
    """A body's `toolseam.conformance.Reach` in pydantic-ai: its ``RunContext``."""

    def __init__(self, ctx: RunContext[None], key: str, elicit: ElicitationScript | None) -> None:
        self._ctx = ctx
        self._key = key
        self._elicit = elicit

    async def progress(self, progress: float, message: str) -> None:
        await self._ctx.emit(_Progress(progress=progress, message=message))

    def progress_sync(self, progress: float, message: str) -> NoReturn:
        raise NotImplementedError(
            "pydantic-ai: RunContext.emit is async; 'Sync tools cannot emit events; write "
            "async tools instead'"
        )

    async def elicit(self, question: str) -> str | None:
        script = self._elicit
        call = Call(self._ctx.tool_call_id or "", self._ctx.tool_name or "", {"key": self._key})

        async def ask(token: str) -> JsonValue:
            if script is None:
                return None  # nobody to answer: the token goes nowhere, and the run waits
            return {"answer": await script(call, question, TaskListen(ModelRetry))}

        payload = await wait_for_external_event("toolseam.conformance.elicit", ask=ask)
        answer = payload.get("answer") if isinstance(payload, dict) else None
        return answer if isinstance(answer, str) else None

    async def run_process(self, argv: Sequence[str]) -> None:
        await self._ctx.workspace.run(list(argv))


def _tool(tool: ScriptedTool, elicit: ElicitationScript | None) -> Tool[None]:
    listen = TaskListen(ModelRetry)
    options: dict[str, Any] = {
        "takes_ctx": bool(tool.reaches),
        "name": tool.name,
        "description": tool.description,
        "timeout": tool.timeout,
        "sequential": not tool.parallel,
        "max_retries": 1,
    }
    if tool.reaches and tool.sync:

        def sync_reaching(ctx: RunContext[None], key: str) -> str:
            return tool.run_sync({"key": key}, listen, _Reach(ctx, key, elicit))

        return Tool(sync_reaching, **options)
    if tool.reaches:

        async def reaching(ctx: RunContext[None], key: str) -> str:
            return await tool.run({"key": key}, listen, _Reach(ctx, key, elicit))

        return Tool(reaching, **options)
    if tool.sync:

        def sync_body(key: str) -> str:
            return tool.run_sync({"key": key}, listen)

        return Tool(sync_body, **options)

    async def body(key: str) -> str:
        return await tool.run({"key": key}, listen)

    return Tool(body, **options)


@final
class _Around(WrapperToolset[None]):
    """The kit's around-dispatch wrapper as pydantic-ai's toolset wrapper."""

    def __init__(self, wrapped: FunctionToolset[None], around: WrapperScript) -> None:
        super().__init__(wrapped)
        self._around = around

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[None], tool: ToolsetTool[None]
    ) -> Any:
        call = Call(ctx.tool_call_id or "", name, {"key": str(tool_args.get("key"))})

        def next() -> Awaitable[object]:
            return super(_Around, self).call_tool(name, tool_args, ctx, tool)

        return await self._around(call, next)


def _outcomes(calls: Sequence[Call], messages: Sequence[ModelMessage], why: str) -> list[Outcome]:
    parts: dict[str, ToolReturnPart] = {}
    for message in messages:
        if isinstance(message, ModelRequest):
            for candidate in message.parts:
                if isinstance(candidate, ToolReturnPart):
                    parts.setdefault(candidate.tool_call_id, candidate)
    outcomes: list[Outcome] = []
    for call in calls:
        part = parts.get(call.call_id)
        if part is None and why:
            outcomes.append(Outcome(call.call_id, "cancelled", why))
        elif part is None:
            outcomes.append(no_result(call.call_id, "the history holds no return for the call"))
        else:
            outcomes.append(outcome(call.call_id, part))
    return outcomes


def _call_of(call: ToolCallPart) -> Call:
    args = call.args_as_dict()
    return Call(call.tool_call_id, call.tool_name, {"key": str(args.get("key"))})


@final
class _Stages(AbstractCapability[None]):
    """The kit's listeners and observer as pydantic-ai's tool-execute hooks and events."""

    def __init__(self, scenario: Scenario) -> None:
        self._scenario = scenario
        self._listen = TaskListen(ModelRetry)

    async def before_tool_execute(
        self,
        ctx: RunContext[None],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
    ) -> dict[str, Any]:
        script = self._scenario.pre_execute
        if script is not None:
            await script(_call_of(call), self._listen)
        return args

    async def after_tool_execute(
        self,
        ctx: RunContext[None],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        result: Any,
    ) -> Any:
        script = self._scenario.post_execute
        if script is not None:
            await script(_call_of(call), self._listen)
        return result


@final
class _Observer(AbstractCapability[None]):
    """The kit's result observer as a capability's ``on_event`` for tool results.

    Listening to events makes pydantic-ai stream the model's responses: only a scenario
    with an observer has one.
    """

    def __init__(self, observer: ObserverScript) -> None:
        self._observer = observer

    async def on_event(self, ctx: RunContext[None], *, event: AgentStreamEvent) -> None:
        if isinstance(event, FunctionToolResultEvent):
            self._observer(outcome(event.tool_call_id, event.part))


@final
class _Sink(AbstractCapability[None]):
    """The kit's progress sink as a capability's ``on_event`` for the bodies' events."""

    def __init__(self, sink: ProgressSink) -> None:
        self._sink = sink

    async def on_event(self, ctx: RunContext[None], *, event: AgentStreamEvent) -> None:
        if isinstance(event, _Progress):
            self._sink(event.tool_call_id or "", event.progress, event.message)


@final
class PydanticAIDriver:
    """Drives pydantic-ai's agent-run tool execution, cancelled by its `CancellationToken`."""

    @property
    def subject(self) -> str:
        """``"pydantic-ai"``."""
        return "pydantic-ai"

    @property
    def capabilities(self) -> Collection[Capability]:
        """Everything but approval and nested calls."""
        return (
            "host_cancel",
            "sync_bodies",
            "batch",
            "timeouts",
            "around_dispatch",
            "pre_execute",
            "post_execute",
            "result_observer",
            "progress",
            "elicitation",
            "process",
        )

    @property
    def backends(self) -> Sequence[str]:
        """Asyncio (pydantic-ai's run cancellation is asyncio task cancellation)."""
        return ("asyncio",)

    def versions(self) -> Mapping[str, str]:
        """pydantic-ai-slim."""
        return versions("pydantic-ai-slim")

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        """One agent run: the model asks for every call of the scenario at once."""
        token = CancellationToken()

        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            if len(messages) == 1:
                # The calls exist from here on: the stop button cancels the run now.
                scenario.stop.connect(token.cancel)
                return ModelResponse(
                    parts=[
                        ToolCallPart(c.tool, dict(c.arguments), tool_call_id=c.call_id)
                        for c in scenario.calls
                    ]
                )
            return ModelResponse(parts=[TextPart("done")])

        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            # The same answers, streamed (pydantic-ai streams when a capability listens to
            # events).
            for index, part in enumerate(model(messages, info).parts):
                if isinstance(part, ToolCallPart):
                    args = part.args_as_json_str()
                    yield {
                        index: DeltaToolCall(part.tool_name, args, tool_call_id=part.tool_call_id)
                    }
                elif isinstance(part, TextPart):
                    yield part.content

        toolset = FunctionToolset([_tool(t, scenario.elicit) for t in scenario.tools])
        wrapped: AbstractToolset[None] = (
            _Around(toolset, scenario.around) if scenario.around else toolset
        )
        capabilities: list[AbstractCapability[None]] = [_Stages(scenario)]
        if scenario.observer is not None:
            capabilities.append(_Observer(scenario.observer))
        if scenario.progress is not None:
            capabilities.append(_Sink(scenario.progress))
        agent = Agent(
            FunctionModel(model, stream_function=stream),
            toolsets=[wrapped],
            deps_type=type(None),
            capabilities=capabilities,
        )
        with tempfile.TemporaryDirectory(prefix="toolseam-conformance-") as workdir:
            return await self._run(agent, scenario, token, LocalWorkspaceBackend(workdir))

    @staticmethod
    async def _run(
        agent: Agent[None, str],
        scenario: Scenario,
        token: CancellationToken,
        workspace: LocalWorkspaceBackend,
    ) -> Sequence[Outcome]:
        try:
            result = await agent.run("go", cancellation_token=token, workspace=workspace)
        except RunCancelled as cancelled:
            return _outcomes(scenario.calls, cancelled.all_messages(), _INTERRUPTED)
        except Exception as error:
            if host_cancelled():
                raise
            return [no_result(c.call_id, f"the run raised {error!r}") for c in scenario.calls]
        return _outcomes(scenario.calls, result.all_messages(), "")
