r"""The driver of Google ADK's tool execution: an invocation ADK's own abort signal stops.

The tools are ADK `FunctionTool`\s; synchronous ones run on ADK's tool thread pool
(``RunConfig(tool_thread_pool_config=...)``, ADK's own way to keep a blocking tool off the
event loop). A scripted `BaseLlm` answers the first model request with every call of the
scenario (ADK runs the calls of one turn concurrently, each in a task of its own) and the
next with text. Each scenario is one ``Runner.run_async`` on an in-memory runner; the kit's
stop button is ADK's own ``abort_signal``, the ``asyncio.Event`` ADK answers by cancelling
the invocation's task and sealing the session. Each call's outcome is its function response in
the session: ``{"result": ...}`` a success, ``{"error": ...}`` a failure, and ADK's seal
(``error_code="INVOCATION_ABORTED"``) a cancellation that does not say whether the body ran.
A tool that raises makes the invocation raise (ADK has no error result unless an
``on_tool_error_callback`` makes one); the calls that finished before it keep their responses.

A body has nothing to listen to but task cancellation. The kit's pre- and post-execute
listeners are the agent's ``before_tool_callback`` and ``after_tool_callback`` (ADK awaits
both, around the tool), and its result observer a plugin's ``after_tool_callback``. ADK has
no tool timeout, and its confirmation is a round trip through the user (the invocation ends
with a request, a later one carries the answer): those clauses are skipped, as are progress,
elicitation and processes, which a function tool has no channel for outside live mode.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Collection, Mapping, Sequence
from typing import Any, final

from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig, ToolThreadPoolConfig
from google.adk.apps import App
from google.adk.events.event import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import InMemoryRunner
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from pydantic import Field
from typing_extensions import override

from .._driver import Call, Capability, ListenerScript, ObserverScript, Outcome, Scenario
from .._scripts import ScriptedTool
from ._common import TaskListen, host_cancelled, no_result, versions

__all__ = ["GoogleADKDriver"]

_SEALED = "INVOCATION_ABORTED"


@final
class _Turns(BaseLlm):
    """The scripted model: the scenario's calls first, then a text answer."""

    model: str = "toolseam-conformance"
    calls: list[Call] = Field(default_factory=list[Call])
    asked: int = 0

    @override
    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.asked += 1
        if self.asked == 1:
            parts = [
                types.Part(
                    function_call=types.FunctionCall(
                        id=c.call_id, name=c.tool, args=dict(c.arguments)
                    )
                )
                for c in self.calls
            ]
        else:
            parts = [types.Part(text="done")]
        yield LlmResponse(content=types.Content(role="model", parts=parts))


def _call_of(tool: BaseTool, args: Mapping[str, Any], context: ToolContext) -> Call:
    return Call(context.function_call_id or "", tool.name, {"key": str(args.get("key"))})


def _classify(call_id: str, response: Mapping[str, Any] | None, sealed: bool) -> Outcome:
    answer = dict(response or {})
    if sealed:
        return Outcome(call_id, "cancelled", str(answer.get("error", "")))
    if "error" in answer:
        return Outcome(call_id, "error", str(answer["error"]))
    return Outcome(call_id, "ok", value=answer.get("result"))


@final
class _Observer(BasePlugin):
    """The kit's result observer as a plugin's ``after_tool_callback``."""

    def __init__(self, observer: ObserverScript) -> None:
        super().__init__(name="toolseam-conformance")
        self._observer = observer

    @override
    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        call_id = tool_context.function_call_id or ""
        self._observer(_classify(call_id, {"result": result}, sealed=False))
        return None


def _callbacks(scenario: Scenario) -> dict[str, Any]:
    """The scenario's listeners as the agent's before- and after-tool callbacks."""
    options: dict[str, Any] = {}
    before, after = scenario.pre_execute, scenario.post_execute
    if before is not None:

        async def before_tool(
            tool: BaseTool, args: dict[str, Any], tool_context: ToolContext
        ) -> None:
            await _listen(before, _call_of(tool, args, tool_context))

        options["before_tool_callback"] = before_tool
    if after is not None:

        async def after_tool(
            tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, tool_response: Any
        ) -> None:
            await _listen(after, _call_of(tool, args, tool_context))

        options["after_tool_callback"] = after_tool
    return options


async def _listen(script: ListenerScript, call: Call) -> None:
    await script(call, TaskListen(RuntimeError))


def _tool(tool: ScriptedTool) -> FunctionTool:
    listen = TaskListen(RuntimeError)
    if tool.sync:

        def sync_body(key: str) -> str:
            return tool.run_sync({"key": key}, listen, None)

        body: Any = sync_body
    else:

        async def async_body(key: str) -> str:
            return await tool.run({"key": key}, listen, None)

        body = async_body
    body.__name__ = tool.name  # FunctionTool names the tool after its function
    body.__doc__ = tool.description
    return FunctionTool(body)


def _outcomes(calls: Sequence[Call], events: Sequence[Event], why: str) -> list[Outcome]:
    found: dict[str, Outcome] = {}
    for event in events:
        for response in event.get_function_responses():
            if response.id is not None and response.id not in found:
                sealed = event.error_code == _SEALED
                found[response.id] = _classify(response.id, response.response, sealed)
    return [found.get(c.call_id) or no_result(c.call_id, why) for c in calls]


@final
class GoogleADKDriver:
    """Drives ADK's ``Runner.run_async``, stopped by its own ``abort_signal``."""

    @property
    def subject(self) -> str:
        """``"google-adk"``."""
        return "google-adk"

    @property
    def capabilities(self) -> Collection[Capability]:
        """Host cancellation, thread bodies, a turn's calls at once, tool callbacks, plugins."""
        return (
            "host_cancel",
            "sync_bodies",
            "batch",
            "pre_execute",
            "post_execute",
            "result_observer",
        )

    @property
    def lacking(self) -> Mapping[Capability, str]:
        """Why ADK lacks the capabilities it does not offer a function tool."""
        return {
            "timeouts": "ADK has no tool timeout",
            "approval": "ADK's confirmation ends the invocation with a request to the user; "
            "the answer arrives in a later invocation",
            "progress": "a function tool has no channel to report progress on outside live mode",
            "elicitation": "a function tool cannot ask its user and wait for the answer",
            "process": "ADK has no process helper for a function tool",
        }

    @property
    def backends(self) -> Sequence[str]:
        """Asyncio only."""
        return ("asyncio",)

    def versions(self) -> Mapping[str, str]:
        """google-adk."""
        return versions("google-adk")

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        """One invocation: the model asks for every call of the scenario at once."""
        model = _Turns(calls=list(scenario.calls))
        agent = LlmAgent(
            name="conformance",
            model=model,
            tools=[_tool(t) for t in scenario.tools],
            **_callbacks(scenario),
        )
        plugins: list[BasePlugin] = []
        if scenario.observer is not None:
            plugins.append(_Observer(scenario.observer))
        runner = InMemoryRunner(app=App(name="conformance", root_agent=agent, plugins=plugins))
        session = await runner.session_service.create_session(app_name="conformance", user_id="kit")
        stop = asyncio.Event()
        scenario.stop.connect(stop.set)
        config = RunConfig(tool_thread_pool_config=ToolThreadPoolConfig())
        message = types.Content(role="user", parts=[types.Part(text="go")])
        why = "no function response for the call"
        try:
            async for _ in runner.run_async(
                user_id="kit",
                session_id=session.id,
                new_message=message,
                run_config=config,
                abort_signal=stop,
            ):
                pass
        except Exception as error:
            if host_cancelled():
                raise
            why = f"the invocation raised {error!r}"
        finally:
            await runner.close()
        stored = await runner.session_service.get_session(
            app_name="conformance", user_id="kit", session_id=session.id
        )
        events = stored.events if stored is not None else []
        return _outcomes(scenario.calls, events, why)
