r"""The driver of the OpenAI Agents SDK's tool execution: a streamed run the SDK cancels.

The tools are `function_tool`\s (``timeout=`` their deadline; sync functions run
in ``asyncio.to_thread``, as the SDK does). The SDK's own test model, `ScriptedModel`,
answers the first request with the scenario's tool calls (one response: the SDK runs them
concurrently) and the next with text. Each scenario is one ``Runner.run_streamed``; the
kit's stop button is the SDK's own ``result.cancel()``. Each call's outcome is its
`ToolCallOutputItem` in ``result.new_items``: the SDK hands the model a failure or a
timeout as text (its default messages, ``"An error occurred while running the tool..."``
and ``"Tool '<name>' timed out after <n> seconds."``, are how this driver tells them
apart). A tool body has nothing to listen to but task cancellation. The kit's pre- and
post-execute listeners are the tool's own input and output guardrails
(``tool_input_guardrails``, ``tool_output_guardrails``, each answering ``allow``), and its
result observer is the run's `RunHooks.on_tool_end`; they too hear of nothing but task
cancellation. Approval (``needs_approval`` interruptions) and agents as tools are not
driven: those clauses are skipped.

A function tool reaches no progress channel and cannot ask the user a question (the SDK's
elicitation is for MCP servers' requests, not tools): those clauses are skipped. It runs
processes in a sandbox: when a body does, the agent is a `SandboxAgent` on the SDK's
`UnixLocalSandboxClient`, the scenario's tools come from a sandbox `Capability` (as the
SDK's own shell tool does), and the body calls its session's ``exec(*argv, shell=False)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, NoReturn, cast, final

from agents import (
    Agent,
    FunctionTool,
    RunContextWrapper,
    RunHooks,
    Runner,
    RunResultStreaming,
    Tool,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    ToolOutputGuardrailData,
    function_tool,
    tool_input_guardrail,
    tool_output_guardrail,
)
from agents.items import ToolCallOutputItem
from agents.run_config import RunConfig
from agents.sandbox import Capability as SandboxCapability
from agents.sandbox import SandboxAgent, SandboxRunConfig
from agents.sandbox.sandboxes.unix_local import UnixLocalSandboxClient
from agents.sandbox.session.base_sandbox_session import BaseSandboxSession
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext
from pydantic import Field

from .._body_reach import Reach
from .._driver import Call, Capability, ListenerScript, ObserverScript, Outcome, Scenario
from .._scripts import ScriptedTool
from ._common import TaskListen, host_cancelled, no_result, versions

__all__ = ["OpenAIAgentsDriver"]

_ERROR = "An error occurred while running the tool"
_TIMED_OUT = re.compile(r"^Tool '.*' timed out after .* seconds\.$")


def _call_of(context: ToolContext[Any]) -> Call:
    try:
        arguments: object = json.loads(context.tool_arguments)
    except ValueError:
        arguments = {}
    key = cast("dict[str, object]", arguments).get("key") if isinstance(arguments, dict) else None
    return Call(context.tool_call_id, context.tool_name, {"key": str(key)})


def _guardrails(scenario: Scenario) -> dict[str, Any]:
    """The scenario's listeners as the tool's input and output guardrails."""
    options: dict[str, Any] = {}
    before, after = scenario.pre_execute, scenario.post_execute
    if before is not None:

        async def pre(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
            await _listen(before, data.context)
            return ToolGuardrailFunctionOutput.allow()

        options["tool_input_guardrails"] = [tool_input_guardrail(pre)]
    if after is not None:

        async def post(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
            await _listen(after, data.context)
            return ToolGuardrailFunctionOutput.allow()

        options["tool_output_guardrails"] = [tool_output_guardrail(post)]
    return options


async def _listen(script: ListenerScript, context: ToolContext[Any]) -> None:
    await script(_call_of(context), TaskListen(RuntimeError))


@final
class _Observer(RunHooks[Any]):
    """The kit's result observer as the run's ``on_tool_end`` hook."""

    def __init__(self, observer: ObserverScript) -> None:
        self._observer = observer

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object
    ) -> None:
        if isinstance(context, ToolContext):
            self._observer(_classify(context.tool_call_id, str(result)))


@final
class _Reach:
    """A body's `toolseam.conformance.Reach` in the Agents SDK: its sandbox session."""

    def __init__(self, session: BaseSandboxSession | None) -> None:
        self._session = session

    async def progress(self, progress: float, message: str) -> NoReturn:
        raise NotImplementedError("openai-agents: a function tool has no progress channel")

    def progress_sync(self, progress: float, message: str) -> NoReturn:
        raise NotImplementedError("openai-agents: a function tool has no progress channel")

    async def elicit(self, question: str) -> NoReturn:
        raise NotImplementedError("openai-agents: a function tool cannot ask its user")

    async def run_process(self, argv: Sequence[str]) -> None:
        if self._session is None:
            raise RuntimeError("no sandbox session is bound to the run")
        await self._session.exec(*argv, shell=False)


def _tool(
    tool: ScriptedTool, guardrails: Mapping[str, Any], reach: Callable[[], Reach] | None = None
) -> FunctionTool:
    listen = TaskListen(RuntimeError)
    if tool.sync:

        def sync_body(key: str) -> str:
            return tool.run_sync({"key": key}, listen, reach() if reach else None)

        body: Any = sync_body
    else:

        async def async_body(key: str) -> str:
            return await tool.run({"key": key}, listen, reach() if reach else None)

        body = async_body
    return function_tool(
        body,
        name_override=tool.name,
        description_override=tool.description,
        timeout=tool.timeout,
        **guardrails,
    )


def _call_id(item: ToolCallOutputItem) -> str | None:
    raw: object = item.raw_item
    if isinstance(raw, dict):
        value = cast("dict[str, object]", raw).get("call_id")
    else:
        value = getattr(raw, "call_id", None)
    return value if isinstance(value, str) else None


def _outcomes(calls: Sequence[Call], result: RunResultStreaming, why: str) -> list[Outcome]:
    outputs: dict[str, object] = {}
    for item in result.new_items:
        if isinstance(item, ToolCallOutputItem):
            call_id = _call_id(item)
            if call_id is not None:
                outputs.setdefault(call_id, item.output)
    outcomes: list[Outcome] = []
    for call in calls:
        if call.call_id not in outputs:
            outcomes.append(no_result(call.call_id, why))
            continue
        outcomes.append(_classify(call.call_id, str(outputs[call.call_id])))
    return outcomes


def _classify(call_id: str, text: str) -> Outcome:
    if text.startswith(_ERROR):
        return Outcome(call_id, "error", text)
    if _TIMED_OUT.match(text):
        return Outcome(call_id, "timeout", text)
    return Outcome(call_id, "ok", value=text)


class _Sandboxed(SandboxCapability):
    """The scenario's tools as a sandbox capability's, each body reaching its session."""

    type: str = "toolseam.conformance"
    scripted: list[ScriptedTool] = Field(default_factory=list[ScriptedTool], exclude=True)
    guardrails: dict[str, Any] = Field(default_factory=dict[str, Any], exclude=True)

    def tools(self) -> list[Tool]:
        return [_tool(t, self.guardrails, lambda: _Reach(self.session)) for t in self.scripted]


@final
class OpenAIAgentsDriver:
    """Drives the Agents SDK's streamed run loop, cancelled by ``result.cancel()``."""

    @property
    def subject(self) -> str:
        """``"openai-agents"``."""
        return "openai-agents"

    @property
    def capabilities(self) -> Collection[Capability]:
        """Host cancellation, thread bodies, batches, timeouts, guardrails, hooks, a sandbox."""
        return (
            "host_cancel",
            "sync_bodies",
            "batch",
            "timeouts",
            "pre_execute",
            "post_execute",
            "result_observer",
            "process",
        )

    @property
    def lacking(self) -> Mapping[Capability, str]:
        """Why the Agents SDK lacks the capabilities of a body it does not offer."""
        return {
            "progress": "a function tool has no channel to report progress on",
            "elicitation": "a function tool cannot ask its user (the SDK's elicitation answers "
            "MCP servers' requests)",
        }

    @property
    def backends(self) -> Sequence[str]:
        """Asyncio only."""
        return ("asyncio",)

    def versions(self) -> Mapping[str, str]:
        """openai-agents."""
        return versions("openai-agents")

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        """One streamed run: the model asks for every call of the scenario at once."""
        holder: list[RunResultStreaming] = []

        def ask(call: ModelCall) -> Sequence[Any]:
            # The calls exist from here on: the stop button cancels the run now.
            scenario.stop.connect(holder[0].cancel)
            return [
                function_call(c.tool, dict(c.arguments), call_id=c.call_id) for c in scenario.calls
            ]

        model = ScriptedModel([ModelStep.respond(ask), [assistant_message("done")]])
        guardrails = _guardrails(scenario)
        hooks = _Observer(scenario.observer) if scenario.observer is not None else None
        if any("process" in t.reaches for t in scenario.tools):
            sandboxed = _Sandboxed(scripted=list(scenario.tools), guardrails=guardrails)
            agent: Agent[Any] = SandboxAgent(
                name="conformance", model=model, capabilities=[sandboxed]
            )
            sandbox = SandboxRunConfig(client=UnixLocalSandboxClient())
            config = RunConfig(sandbox=sandbox)
        else:
            tools: list[Tool] = [_tool(t, guardrails) for t in scenario.tools]
            agent = Agent(name="conformance", model=model, tools=tools)
            config = None
        result = Runner.run_streamed(agent, "go", hooks=hooks, run_config=config)
        holder.append(result)
        try:
            async for _ in result.stream_events():
                pass
        except Exception as error:
            if host_cancelled():
                raise
            return [no_result(c.call_id, f"the run raised {error!r}") for c in scenario.calls]
        why = (
            "the run was cancelled: no output item for the call"
            if scenario.stop.aborted
            else ("no output item for the call")
        )
        return _outcomes(scenario.calls, result, why)
