"""A toolseam registry as a Google ADK toolset (contract §10, extra ``toolseam[google-adk]``).

``LlmAgent(..., tools=[toolset])`` with ``toolset = RegistryToolset(registry)`` gives the agent
every tool of the registry, and every call goes through `ToolRegistry.execute` with ADK's
function call id as ``call_id`` and ADK's ``ToolContext`` as ``agent``. Give
``toolset.plugin`` to the ``App`` as well (``App(..., plugins=[toolset.plugin])``): it is what
keeps the session true after a stop.

The stop is ADK's own: the ``abort_signal`` (an ``asyncio.Event`` the host owns) given to
``Runner.run_async``. Setting it makes ADK cancel the invocation's task, and with it the task of
every running tool call, and then *seal* the session: every function call left without a
response gets a synthetic one, ``{"error": "Invocation was aborted by client."}``, so the next
invocation's model request is valid. ADK's seal cannot tell a call whose body ran from one that
never started, and it also covers calls that had finished but whose response ADK dropped from
its queue when the abort arrived. With this toolset:

* each registry call ADK cancels is not torn down: the cancellation aborts the call's signal,
  the body (a thread body too) is awaited until it stops, and the call's one result is kept
  before the cancellation goes on (contract §5: told, awaited, one result);
* `RegistryToolset.plugin` rewrites ADK's seal: each registry call's response is the call's own
  result — ``ABORTED`` (its body ran), ``ABORTED_BEFORE_DISPATCH`` (it never did, for instance
  while waiting for its turn), or what it ended with before the stop reached it — and a
  registry call ADK sealed before it reached the toolset is run through the registry
  pre-aborted, so it too has its published ``ABORTED_BEFORE_DISPATCH`` result.

What the model reads: a success is ``{"result": <text>}`` and a failure ``{"error": <text>,
"code": <code>}`` (ADK's own convention is an ``"error"`` key), the text being the result's
content text (``Error: ...`` for a failure).

De-duplication: ADK 2.13 has no tool-call de-duplication (no ``RunConfig.dedupe_tool_calls``):
each function call runs on its own. This toolset keys everything it keeps by invocation and
function call id and never by arguments, so no result is ever handed to another call.

Approval stays on toolseam's side: the registry's approval service (``Ask``, contract §5)
decides; the toolset's tools never ask ADK's confirmation (``check_require_confirmation`` is
``False``), so ADK's gate never holds them.

Progress and logs: ADK gives a running function tool no channel to stream on (outside live
mode), so they reach the caller only through its own `ToolHost` (``host=``), which also answers
``exec.elicit`` and ``exec.sample``.

ADK runs on asyncio only (its runner, flows and tool calls are asyncio tasks), so this module
does too. See docs/integrations/google-adk.md.
"""

from __future__ import annotations

import importlib.util as _importlib_util

if _importlib_util.find_spec("google.adk") is None:  # pragma: no cover - only without it
    raise ImportError(
        'toolseam.integrations.google_adk needs google-adk: pip install "toolseam[google-adk]"'
    )

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final, cast, final

from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.events.event import Event
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from typing_extensions import override

from .._definitions import ToolSchema
from .._registry import ToolRegistry
from .._results import ToolResult, ToolSuccess
from .._signals import AbortController
from .._views import ToolExecutionInput, ToolHost
from ._common import plain, result_text
from ._events import check_host, resolve_host
from ._gate import Gate

__all__ = ["SEAL_ERROR_CODE", "RegistryToolset", "response_of"]

SEAL_ERROR_CODE: Final = "INVOCATION_ABORTED"
"""The ``error_code`` of the events with which ADK seals an aborted invocation."""

_STOPPED = "the ADK invocation was aborted"
_STOPPED_WAITING = "the ADK invocation was aborted while the call waited for its turn"
_NEVER_REACHED = "the ADK invocation was aborted before the call reached the registry"


def response_of(result: ToolResult) -> dict[str, Any]:
    """The function response ADK hands the model for one toolseam result.

    ``{"result": text}`` for a success, ``{"error": text, "code": code}`` for a failure
    (``code`` is ``None`` for an error without one); ``text`` is the result's content text.
    """
    if isinstance(result, ToolSuccess):
        return {"result": result_text(result)}
    return {"error": result_text(result), "code": result.code}


@final
class RegistryToolset(BaseToolset):
    """A Google ADK toolset that runs its tools through a toolseam registry.

    ``LlmAgent(model=..., tools=[toolset])`` and ``App(..., plugins=[toolset.plugin])``.
    The tools are listed from `ToolRegistry.schemas` each time ADK asks (every model request),
    each with its JSON schema as ``parameters_json_schema``. Each call runs
    `ToolRegistry.execute` with ``call_id`` = ADK's function call id, a signal of its own and
    ``agent`` = the call's ``ToolContext``, and answers with `response_of` its result.

    Concurrency: ADK starts every call of a model turn at once; the toolset applies toolseam's
    per-call `ToolRegistry.execution_mode`, per invocation: ``"parallel"`` calls overlap, an
    ``"exclusive"`` call runs alone, after the calls that arrived before it and before those
    that arrive after it.

    Stopping: when ADK cancels a call (``abort_signal`` set, or the task driving
    ``Runner.run_async`` cancelled), the call's signal is aborted, its body is awaited, thread
    bodies included, and its result is kept for `plugin`, which puts it in ADK's seal of the
    session; then the cancellation goes on. A call still waiting for its turn ends
    ``ABORTED_BEFORE_DISPATCH``, one whose body was invoked ``ABORTED``.

    Args:
        registry: The registry whose tools this toolset serves.
        execute: What runs each call: ``registry.execute`` (the default), or a function of
            the same shape that runs it through the registry.
        host: The caller's own `ToolHost` for every call, or a function that makes one per
            call from its ``ToolContext`` (``None``: none for that call). Its ``on_progress``
            and ``on_log`` see the body's events; its ``elicit`` and ``sample`` answer the
            body (without one, those fail with ``CAPABILITY_UNAVAILABLE``).
        plugin_name: The name of `plugin` (ADK refuses two plugins of one name).

    Raises:
        TypeError: ``registry`` is not a `ToolRegistry`, or ``host`` is neither a `ToolHost`
            nor callable.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        execute: Callable[[ToolExecutionInput], Awaitable[ToolResult]] | None = None,
        host: ToolHost | Callable[[ToolContext], ToolHost | None] | None = None,
        plugin_name: str = "toolseam",
    ) -> None:
        given = cast("object", registry)  # checked at runtime too: untyped callers
        if type(given) is not ToolRegistry:
            kind = type(given).__name__
            raise TypeError(f"RegistryToolset expects a ToolRegistry, got {kind}")
        check_host(host)
        super().__init__()
        self._registry = registry
        self._execute = registry.execute if execute is None else execute
        self._host = host
        self._gates: dict[str, Gate] = {}
        # {invocation id: {function call id: result}}: what each call ended with, until ADK
        # has recorded a response for it or the invocation is over. Only for invocations the
        # plugin runs in (it adds them): without it nobody would ever take them.
        self._results: dict[str, dict[str, ToolResult]] = {}
        self._plugin = _SealPlugin(self, plugin_name)

    @property
    def registry(self) -> ToolRegistry:
        """The registry whose tools this toolset serves."""
        return self._registry

    @property
    def plugin(self) -> BasePlugin:
        """The ADK plugin that puts each stopped call's own result into ADK's seal.

        Give it to the app: ``App(..., plugins=[toolset.plugin])``. Without it a stop still
        leaves one response per call, ADK's ``"Invocation was aborted by client."``, and the
        toolset keeps no result.
        """
        return self._plugin

    @override
    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        """The registry's tools, from `ToolRegistry.schemas`, as ADK tools."""
        return [_RegistryTool(self, schema) for schema in self._registry.schemas()]

    async def _run(self, name: str, args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        invocation = context.invocation_id
        call_id = context.function_call_id or f"adk_{uuid.uuid4().hex}"
        controller = AbortController()
        call = ToolExecutionInput(
            call_id=call_id,
            name=name,
            arguments=args,
            signal=controller.signal,
            agent=context,
            host=resolve_host(self._host, context),
        )
        gate = self._gates.get(invocation)
        if gate is None:
            gate = self._gates[invocation] = Gate()
        try:
            try:
                await gate.enter(self._registry.execution_mode(call) == "exclusive")
            except asyncio.CancelledError:
                # contract §7: a call that never started still gets its one result.
                controller.abort(_STOPPED_WAITING)
                self._keep(invocation, call_id, await _settle(self._execute(call)))
                raise
            try:
                result = await self._execute_told(call, controller, invocation)
            finally:
                gate.leave()
        finally:
            if gate.idle and self._gates.get(invocation) is gate:
                del self._gates[invocation]
        self._keep(invocation, call_id, result)
        return response_of(result)

    async def _execute_told(
        self, call: ToolExecutionInput, controller: AbortController, invocation: str
    ) -> ToolResult:
        """Run the call; when ADK cancels it, tell the body, await it, keep its result.

        ADK keeps nothing of a call it cancelled, so the call runs in a task of its own and
        the cancellation reaches it as its signal (contract §5) rather than as a second
        cancellation: what it ends with is kept for the seal, then the cancellation goes on.
        """
        running = asyncio.ensure_future(self._execute(call))
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            controller.abort(_STOPPED)
            self._keep(invocation, call.call_id, await _settle(running))
            raise

    def _keep(self, invocation: str, call_id: str, result: ToolResult) -> None:
        kept = self._results.get(invocation)
        if kept is not None:
            kept[call_id] = result

    async def _never_reached(
        self, invocation: InvocationContext, response: types.FunctionResponse
    ) -> ToolResult | None:
        """The registry's result for a call of its tools ADK sealed before it reached us."""
        name, call_id = response.name, response.id
        if name is None or call_id is None or self._registry.get(name) is None:
            return None
        arguments: dict[str, Any] = {}
        for event in invocation.session.events:
            for function_call in event.get_function_calls():
                if function_call.id == call_id:
                    arguments = dict(function_call.args or {})
        controller = AbortController()
        controller.abort(_NEVER_REACHED)
        call = ToolExecutionInput(
            call_id=call_id,
            name=name,
            arguments=arguments,
            signal=controller.signal,
            agent=invocation,
        )
        return await self._execute(call)  # pre-aborted: no body runs


@final
class _RegistryTool(BaseTool):
    """One registry tool, as ADK sees it."""

    def __init__(self, toolset: RegistryToolset, schema: ToolSchema) -> None:
        super().__init__(name=schema.name, description=schema.description)
        self._toolset = toolset
        # A plain, mutable copy: model adapters may rewrite a schema they are given.
        self._parameters = plain(schema.parameters)

    @override
    def _get_declaration(self) -> types.FunctionDeclaration | None:
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters_json_schema=self._parameters,
        )

    @override
    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        return await self._toolset._run(self.name, args, tool_context)


@final
class _SealPlugin(BasePlugin):
    """Puts each registry call's own result into ADK's seal of an aborted invocation."""

    def __init__(self, toolset: RegistryToolset, name: str) -> None:
        super().__init__(name=name)
        self._toolset = toolset

    @override
    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> Event | None:
        toolset = self._toolset
        kept = toolset._results.get(invocation_context.invocation_id)
        if kept is None:
            return None
        if event.error_code != SEAL_ERROR_CODE or event.content is None:
            for recorded in event.get_function_responses():
                if recorded.id is not None:
                    kept.pop(recorded.id, None)  # ADK recorded the call's own response
            return None
        parts: list[types.Part] = []
        for part in event.content.parts or []:
            sealed = part.function_response
            result: ToolResult | None = None
            if sealed is not None and sealed.id is not None:
                result = kept.pop(sealed.id, None)
                if result is None:
                    result = await toolset._never_reached(invocation_context, sealed)
            if sealed is None or result is None:
                parts.append(part)
                continue
            answer = types.FunctionResponse(
                id=sealed.id, name=sealed.name, response=response_of(result)
            )
            parts.append(types.Part(function_response=answer))
        content = types.Content(role=event.content.role, parts=parts)
        return event.model_copy(update={"content": content})

    @override
    async def before_run_callback(
        self, *, invocation_context: InvocationContext
    ) -> types.Content | None:
        self._toolset._results.setdefault(invocation_context.invocation_id, {})
        return None

    @override
    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        self._toolset._results.pop(invocation_context.invocation_id, None)


async def _settle(call: Awaitable[ToolResult]) -> ToolResult:
    """Await a call to its end even while cancellations arrive (the caller re-raises them)."""
    running = asyncio.ensure_future(call)
    while True:
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            if running.done():
                return running.result()
