r"""The driver of the OpenAI Agents SDK's tool execution: a streamed run the SDK cancels.

The tools are `function_tool`\s (``timeout=`` their deadline; sync functions run
in ``asyncio.to_thread``, as the SDK does). The SDK's own test model, `ScriptedModel`,
answers the first request with the scenario's tool calls (one response: the SDK runs them
concurrently) and the next with text. Each scenario is one ``Runner.run_streamed``; the
kit's stop button is the SDK's own ``result.cancel()``. Each call's outcome is its
`ToolCallOutputItem` in ``result.new_items``: the SDK hands the model a failure or a
timeout as text (its default messages, ``"An error occurred while running the tool..."``
and ``"Tool '<name>' timed out after <n> seconds."``, are how this driver tells them
apart). A tool body has nothing to listen to but task cancellation. Approval
(``needs_approval`` interruptions), tool guardrails and agents as tools are not driven:
those clauses are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, cast, final

from agents import Agent, FunctionTool, Runner, RunResultStreaming, function_tool
from agents.items import ToolCallOutputItem
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from .._driver import Call, Capability, Outcome, Scenario
from .._scripts import ScriptedTool
from ._common import TaskListen, host_cancelled, no_result, versions

__all__ = ["OpenAIAgentsDriver"]

_ERROR = "An error occurred while running the tool"
_TIMED_OUT = re.compile(r"^Tool '.*' timed out after .* seconds\.$")


def _tool(tool: ScriptedTool) -> FunctionTool:
    listen = TaskListen(RuntimeError)
    if tool.sync:

        def sync_body(key: str) -> str:
            return tool.run_sync({"key": key}, listen)

        body: Any = sync_body
    else:

        async def async_body(key: str) -> str:
            return await tool.run({"key": key}, listen)

        body = async_body
    return function_tool(
        body,
        name_override=tool.name,
        description_override=tool.description,
        timeout=tool.timeout,
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
        text = str(outputs[call.call_id])
        if text.startswith(_ERROR):
            outcomes.append(Outcome(call.call_id, "error", text))
        elif _TIMED_OUT.match(text):
            outcomes.append(Outcome(call.call_id, "timeout", text))
        else:
            outcomes.append(Outcome(call.call_id, "ok", value=text))
    return outcomes


@final
class OpenAIAgentsDriver:
    """Drives the Agents SDK's streamed run loop, cancelled by ``result.cancel()``."""

    @property
    def subject(self) -> str:
        """``"openai-agents"``."""
        return "openai-agents"

    @property
    def capabilities(self) -> Collection[Capability]:
        """Host cancellation, thread bodies, batches, timeouts."""
        return ("host_cancel", "sync_bodies", "batch", "timeouts")

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
        agent = Agent(name="conformance", model=model, tools=[_tool(t) for t in scenario.tools])
        result = Runner.run_streamed(agent, "go")
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
