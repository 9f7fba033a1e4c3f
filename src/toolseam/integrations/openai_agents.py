"""The OpenAI Agents SDK integration: a registry's tools as SDK `FunctionTool`s (contract §10).

``Agent(..., tools=[*function_tools(registry)])`` runs every tool call of the agent through
`ToolRegistry.execute`, so the registry's contract holds inside the SDK: one result per
call, a body told to stop through its signal and awaited until it has, deadlines that ask
instead of tearing down. The SDK is asyncio-only, and so is this module. Install it with
the extra ``toolseam[openai-agents]``; ``import toolseam`` never imports the SDK.

The SDK stops a tool call by cancelling its task — on its own ``timeout_seconds``, when a
sibling call fails, and when the run is cancelled — and when the run is cancelled it does
not wait for the tool tasks it cancelled. The registry's host-cancellation path
(contract §5) turns each such cancellation into an abort of the body's signal, awaits the
body (a thread body too), publishes the call's one result and only then lets the
cancellation go on. Nobody in the SDK awaits that last part: ``await registry.wait_idle()``
is how a host waits for it.

Progress and logs: the SDK's run stream (``RunResultStreaming.stream_events()``) has no event a
function tool can add while it runs (openai/openai-agents-python#1333). Its own seam for what
happens inside a tool is a callback per tool, as ``Agent.as_tool(on_stream=...)`` has:
``function_tools(registry, on_stream=...)`` hands it each ``exec.progress`` and ``exec.log``
as a `RegistryToolStreamEvent`, in order, while the call runs and before the SDK receives the
tool's output. A caller's own `ToolHost` (``host=``) sees them too and answers
``exec.elicit`` and ``exec.sample``.
"""

from __future__ import annotations

import importlib.util as _importlib_util

if _importlib_util.find_spec("agents") is None:  # pragma: no cover - only without it
    raise ImportError(
        "toolseam.integrations.openai_agents needs the OpenAI Agents SDK: "
        'pip install "toolseam[openai-agents]"'
    )

import copy
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from agents import FunctionTool, RunContextWrapper
from agents.strict_schema import ensure_strict_json_schema
from agents.tool_context import ToolContext
from openai.types.responses import ResponseFunctionToolCall
from typing_extensions import TypedDict

from .._capabilities import ToolEvent
from .._definitions import ToolSchema
from .._json import FrozenDict, JsonValue, MaterializationError, materialize
from .._jsontext import loads
from .._registry import ToolRegistry
from .._signals import AbortController
from .._views import ToolExecution, ToolExecutionInput, ToolHost
from ._common import result_text
from ._events import call_events, check_host, resolve_host

__all__ = ["RegistryToolStreamEvent", "function_tools"]


class RegistryToolStreamEvent(TypedDict):
    """What ``function_tools(registry, on_stream=...)`` hands its callback, per event.

    Shaped like the SDK's own ``AgentToolStreamEvent`` (``Agent.as_tool(on_stream=...)``).
    """

    event: ToolEvent
    """The body's `ProgressEvent` or `LogEvent`."""
    execution: ToolExecution
    """The toolseam call that reported it: the tool call's own, or a nested call's."""
    context: ToolContext[Any]
    """The SDK's context of the tool call (``tool_call_id``, ``tool_name``, ``context``)."""
    tool_call: ResponseFunctionToolCall | None
    """The model's tool call, when the SDK has it."""


OnStream: TypeAlias = Callable[[RegistryToolStreamEvent], Awaitable[None] | None]


def function_tools(
    registry: ToolRegistry,
    *,
    needs_approval: bool
    | Callable[[RunContextWrapper[Any], dict[str, Any], str], Awaitable[bool]] = False,
    on_stream: Callable[[RegistryToolStreamEvent], Awaitable[None] | None] | None = None,
    host: ToolHost | Callable[[ToolContext[Any]], ToolHost | None] | None = None,
) -> list[FunctionTool]:
    """One SDK `FunctionTool` per tool registered on ``registry`` now, in registration order.

    Each tool takes the schema's ``name`` and ``description``, and its ``parameters`` as
    ``params_json_schema``, unchanged. A tool is strict (``strict_json_schema=True``) exactly
    when the SDK's own strict conversion (``agents.strict_schema.ensure_strict_json_schema``)
    leaves its schema as it is: every object closed with ``"additionalProperties": false``
    and every property required. Any other schema is sent non-strict, because the SDK would
    have to change it — make an optional property required, close an open object, or refuse
    it — and the model could then no longer send every call the registry accepts.

    Calling a tool (``on_invoke_tool(ctx, json_args)``) parses the arguments (an empty
    string is ``{}``), then runs ``registry.execute`` with ``call_id=ctx.tool_call_id``, a
    fresh `AbortController` of its own and ``agent=ctx``, and returns the text the model
    reads: the result's content — a success's text, a failure's ``Error: ...``. It never
    raises for a failure. Arguments that cannot be read as JSON are answered with an
    ``Error: ...`` text without a registry call. If the SDK cancels the task, the registry
    publishes the call's one result (``ABORTED``, or ``ABORTED_BEFORE_DISPATCH`` if the body
    never started) once the body has stopped, and the cancellation propagates.

    Args:
        registry: The registry whose tools to offer, and that runs every call.
        needs_approval: The SDK's own approval gate, set on every tool. ``False``, the
            default, leaves approval to the registry alone: a pre-execute listener's `Ask`,
            answered by the registry's `ApprovalService` inside the call. ``True`` or a
            policy callable makes the SDK interrupt the run before a call reaches the
            registry; a call the SDK's approver rejects never reaches it (the registry
            publishes nothing for it), and one it approves still goes through every stage
            of the registry, whose own `Ask`, `Deny` and guards still apply.
        on_stream: Receives every ``exec.progress`` and ``exec.log`` of a call's body (and
            of its nested calls) as a `RegistryToolStreamEvent`; sync or async, like the
            SDK's ``Agent.as_tool(on_stream=...)``. The events are buffered (without bound:
            the body never waits for the callback) and handed over in order by a task of the
            call's own, and the call returns its output to the SDK only once the callback
            has had every one of them. An exception it raises is logged and contained.
        host: The caller's own `ToolHost` for every call, or a function that makes one per
            call from its ``ToolContext`` (``None``: none for that call). Its ``on_progress``
            and ``on_log`` see the events too; its ``elicit`` and ``sample`` answer the
            body's ``exec.elicit`` and ``exec.sample`` (without one, those fail with
            ``CAPABILITY_UNAVAILABLE``). A function that raises fails the SDK's tool call
            before it reaches the registry.

    Returns:
        The tools: plain SDK `FunctionTool` objects, whose fields may still be changed one
        by one (``needs_approval`` of a single tool, say). ``Agent(tools=...)`` is typed
        ``list[Tool]``, and ``list`` is invariant: pass ``[*function_tools(registry)]``.

    Raises:
        ValueError: A tool's parameters schema is not a JSON object.
        TypeError: ``on_stream`` is not callable, or ``host`` is neither a `ToolHost` nor
            callable.
    """
    if on_stream is not None and not callable(on_stream):
        raise TypeError(f"on_stream must be callable or None, got {type(on_stream).__name__}")
    check_host(host)
    tools: list[FunctionTool] = []
    for schema in registry.schemas():
        parameters = _parameters(schema)
        tools.append(
            FunctionTool(
                name=schema.name,
                description=schema.description,
                params_json_schema=parameters,
                on_invoke_tool=_invoker(registry, schema.name, on_stream, host),
                strict_json_schema=_strict_as_is(parameters),
                needs_approval=needs_approval,
            )
        )
    return tools


def _parameters(schema: ToolSchema) -> dict[str, Any]:
    """A plain, mutable copy of a tool's parameters schema, for the SDK to keep."""
    try:
        frozen = materialize(dict(schema.parameters))
    except (MaterializationError, TypeError, ValueError) as error:
        raise ValueError(
            f'tool "{schema.name}": its parameters schema is not JSON ({error})'
        ) from None
    if not isinstance(frozen, FrozenDict):  # pragma: no cover - dict() gave a dict
        raise ValueError(f'tool "{schema.name}": its parameters schema is not a JSON object')
    return copy.deepcopy(frozen)  # deepcopy thaws a snapshot into plain dicts and lists


def _strict_as_is(parameters: dict[str, Any]) -> bool:
    """Whether the SDK's strict mode takes ``parameters`` exactly as they are."""
    try:
        converted = ensure_strict_json_schema(copy.deepcopy(parameters))
    except Exception:
        return False  # the SDK refuses it (an open `additionalProperties`, say)
    return converted == parameters


def _invoker(
    registry: ToolRegistry,
    name: str,
    on_stream: OnStream | None,
    host_option: ToolHost | Callable[[ToolContext[Any]], ToolHost | None] | None,
) -> Callable[[ToolContext[Any], str], Awaitable[str]]:
    async def on_invoke_tool(ctx: ToolContext[Any], json_args: str) -> str:
        try:
            # At any depth (contract §5.2): json.loads gives up about a thousand levels down.
            arguments: JsonValue = loads(json_args) if json_args else {}
        except ValueError as error:
            return f"Error: the tool call's arguments could not be read as JSON ({error})"
        user = resolve_host(host_option, ctx)

        def call(host: ToolHost | None) -> ToolExecutionInput:
            return ToolExecutionInput(
                call_id=ctx.tool_call_id,
                name=name,
                arguments=arguments,
                signal=AbortController().signal,
                agent=ctx,
                host=host,
            )

        stream = on_stream
        if stream is None:
            # No await before execute(): a cancellation from the SDK can only reach the call
            # inside the registry, which settles it (contract §5, host cancellation).
            return result_text(await registry.execute(call(user)))

        async def deliver(exec: ToolExecution, event: ToolEvent) -> None:
            handed = stream(
                {"event": event, "execution": exec, "context": ctx, "tool_call": ctx.tool_call}
            )
            if inspect.isawaitable(handed):
                await handed

        # Entering call_events does not checkpoint before execute() either: starting its
        # task is synchronous. Leaving it hands the callback every event the call reported
        # before the SDK receives the output.
        async with call_events(deliver, user) as host:
            result = await registry.execute(call(host))
        return result_text(result)

    return on_invoke_tool
