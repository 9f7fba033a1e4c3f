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
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Collection, Mapping, Sequence
from typing import Any, final

from pydantic_ai import Agent, CancellationToken, ModelRetry, RunCancelled, RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    AgentStreamEvent,
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

from .._driver import Call, Capability, ObserverScript, Outcome, Scenario, WrapperScript
from .._scripts import ScriptedTool
from ._common import TaskListen, host_cancelled, no_result, versions

__all__ = ["PydanticAIDriver"]

_TIMED_OUT = "Timed out after"
_INTERRUPTED = (
    "RunCancelled; the history holds no return for the call, and a resumed run closes it "
    "as outcome='interrupted', whether the body ran or not"
)


def _tool(tool: ScriptedTool) -> Tool[None]:
    listen = TaskListen(ModelRetry)
    options: dict[str, Any] = {
        "takes_ctx": False,
        "name": tool.name,
        "description": tool.description,
        "timeout": tool.timeout,
        "sequential": not tool.parallel,
        "max_retries": 1,
    }
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


def _outcome(call_id: str, part: ToolReturnPart) -> Outcome:
    if part.outcome == "success":
        return Outcome(call_id, "ok", value=part.content)
    if part.outcome == "interrupted":
        return Outcome(call_id, "cancelled", f"outcome='interrupted': {part.content}")
    # A failure is a retry prompt for the model (``outcome='retried'``); so is a timeout.
    timed_out = part.outcome == "retried" and str(part.content).startswith(_TIMED_OUT)
    detail = f"outcome={part.outcome!r}: {part.content}"
    return Outcome(call_id, "timeout" if timed_out else "error", detail)


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
            outcomes.append(_outcome(call.call_id, part))
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
            self._observer(_outcome(event.tool_call_id, event.part))


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

        toolset = FunctionToolset([_tool(t) for t in scenario.tools])
        wrapped: AbstractToolset[None] = (
            _Around(toolset, scenario.around) if scenario.around else toolset
        )
        capabilities: list[AbstractCapability[None]] = [_Stages(scenario)]
        if scenario.observer is not None:
            capabilities.append(_Observer(scenario.observer))
        agent = Agent(
            FunctionModel(model, stream_function=stream),
            toolsets=[wrapped],
            deps_type=type(None),
            capabilities=capabilities,
        )
        try:
            result = await agent.run("go", cancellation_token=token)
        except RunCancelled as cancelled:
            return _outcomes(scenario.calls, cancelled.all_messages(), _INTERRUPTED)
        except Exception as error:
            if host_cancelled():
                raise
            return [no_result(c.call_id, f"the run raised {error!r}") for c in scenario.calls]
        return _outcomes(scenario.calls, result.all_messages(), "")
