"""A toolseam registry as a pydantic-ai toolset (contract §10, extra ``toolseam[pydantic-ai]``).

``Agent(model, toolsets=[RegistryToolset(registry)])`` gives the agent every tool of the
registry, and every call goes through `ToolRegistry.execute`, so the registry's contract holds
inside pydantic-ai: one published result per call, "ran" told apart from "never ran", bodies
(thread bodies too) awaited until they stop, deadlines that ask rather than tear down.

pydantic-ai stops a run by cancelling the asyncio task of each running tool call (its
``RunContext.cancel()``, a ``CancellationToken``, a run ``timeout=`` and a cancelled host task
all end there). That cancellation reaches `ToolRegistry.execute`, whose host-cancellation path
(contract §5) aborts the body's signal, waits for the body, publishes the call's one result and
re-raises the cancellation unchanged: pydantic-ai then goes on tearing the run down as usual.

Progress and logs: what a body reports with ``exec.progress`` and ``exec.log`` is emitted into
the agent run's own event stream (``RunContext.emit``) as a `ToolProgressEvent` or a
`ToolLogEvent`, so it reaches ``event_stream_handler``, ``Agent.run_stream_events``,
``Agent.iter`` and (progress only) the UI adapters, attributed to the tool call, while the call
runs and before its result. A caller's own `ToolHost` (``host=``) sees them too and answers
``exec.elicit`` and ``exec.sample``.

pydantic-ai runs on asyncio only (its tool execution uses asyncio tasks), so this module does
too. See docs/integrations/pydantic-ai.md.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, cast, final

import anyio
from pydantic import JsonValue as PlainJson
from pydantic_ai import CustomEvent, ModelRetry, RunContext, ToolReturn
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from .. import (
    INVALID_ARGS,
    AbortController,
    LogEvent,
    LogLevel,
    ToolEvent,
    ToolExecution,
    ToolExecutionInput,
    ToolHost,
    ToolRegistry,
    ToolResult,
    ToolSuccess,
)
from ._common import CODE_METADATA_KEY as CODE_METADATA_KEY
from ._common import plain, result_text
from ._events import call_events, check_host, resolve_host
from ._gate import Gate as _Gate

__all__ = ["CODE_METADATA_KEY", "RegistryToolset", "ToolLogEvent", "ToolProgressEvent"]

# toolseam validates the arguments (contract §6), so pydantic-ai must let through whatever
# the model sent once it parses as JSON: the registry decides, and answers INVALID_ARGS.
_ANY_ARGUMENTS: Final = SchemaValidator(core_schema.any_schema())

_STOPPED_WAITING = "the agent run was cancelled while the call waited for its turn"


@final
@dataclass(repr=False, kw_only=True)
class ToolProgressEvent(CustomEvent, name="toolseam.progress"):
    """A tool body's ``exec.progress(...)``, in the agent run's event stream.

    pydantic-ai stamps ``tool_call_id`` and ``tool_name`` with the model's tool call. The UI
    adapters forward it to the frontend (AG-UI ``CustomEvent``, Vercel AI ``data-`` part)
    with the payload below.
    """

    progress: float
    """Work done so far, in the tool's unit."""
    total: float | None = None
    """The whole of the work, when known."""
    message: str | None = None
    """What it is doing now, for a human."""
    call_id: str
    """The toolseam call that reported it: ``tool_call_id``, or a nested call's own id."""
    tool: str
    """The name of that call's tool (a nested call's own)."""


@final
@dataclass(repr=False, kw_only=True)
class ToolLogEvent(CustomEvent, name="toolseam.log", ui=False):
    """A tool body's ``exec.log(...)``, in the agent run's event stream.

    Server-side only (``ui=False``): the UI adapters do not forward it to the frontend; an
    ``event_stream_handler`` that wants to show it there re-emits what it chooses.
    """

    level: LogLevel
    """Its RFC 5424 severity (``"debug"`` ... ``"emergency"``)."""
    value: PlainJson
    """What was logged (the ``data`` of ``exec.log``), as plain JSON."""
    logger: str | None = None
    """The logger name the body gave, if any."""
    call_id: str
    """The toolseam call that reported it: ``tool_call_id``, or a nested call's own id."""
    tool: str
    """The name of that call's tool (a nested call's own)."""


@final
class RegistryToolset(AbstractToolset[object]):
    """A pydantic-ai toolset that runs its tools through a toolseam registry.

    ``Agent(model, toolsets=[RegistryToolset(registry)])``. The tools are listed from
    `ToolRegistry.schemas` each time pydantic-ai asks (a tool registered or removed meanwhile
    shows up at the next model request). Each call runs `ToolRegistry.execute` with
    ``call_id = ctx.tool_call_id``, a signal of its own and ``agent = ctx`` (the
    ``RunContext``), and answers the model with:

    * on success, the result's ``value``;
    * on `INVALID_ARGS`, a ``ModelRetry`` with the failure's message: the model is asked to fix
      its arguments (counted against the retry budget, ``max_retries``);
    * on any other failure, a ``ToolReturn`` whose ``return_value`` is the result's text (such
      as ``"Error: tool call timed out after 5.0s"``) and whose ``metadata`` holds the code
      under `CODE_METADATA_KEY` (``None`` for an error without a code).

    Concurrency: every tool is listed with pydantic-ai's ``sequential=False``, so pydantic-ai
    starts all the calls of a model turn at once, and the toolset applies toolseam's
    per-call `ToolRegistry.execution_mode`: calls whose mode is ``"parallel"`` overlap, an
    ``"exclusive"`` call (the default for a tool without ``is_concurrency_safe``) runs alone,
    after the calls that arrived before it and before those that arrive after it. The order
    is per agent run (`for_run` gives each run a toolset of its own).

    Cancellation: when pydantic-ai cancels a call (the run was cancelled), a running body's
    signal aborts and the body is awaited, thread bodies included, before the cancellation
    goes on; the call publishes `ABORTED` (its body was invoked) or `ABORTED_BEFORE_DISPATCH`
    (it never was, for instance because it was waiting for its turn).

    Progress and logs: each ``exec.progress`` and ``exec.log`` of a call's body (and of its
    nested calls) is emitted into the run's event stream with ``ctx.emit`` as a
    `ToolProgressEvent` or `ToolLogEvent`, in order, while the call runs; the call returns
    its result to pydantic-ai only once every event it reported has been emitted.

    Durable execution: pydantic-ai's ``DBOSDurability`` runs a toolset like this one in the
    workflow's own code, not in steps. Pass ``execute=DurableTools(registry).execute``
    (`toolseam.durable`) and each call is one durable step of the workflow instead; see
    docs/durable.md.

    Args:
        registry: The registry whose tools this toolset serves.
        id: The toolset's id, for pydantic-ai (needed only under durable execution).
        max_retries: How many `INVALID_ARGS` retries the model gets per tool; ``None``
            means the agent's own default.
        execute: What runs each call: ``registry.execute`` (the default), or a function of
            the same shape that runs it through the registry, such as
            ``toolseam.durable.DurableTools.execute``.
        host: The caller's own `ToolHost` for every call, or a function that makes one per
            call from its ``RunContext`` (``None``: none for that call). Its ``on_progress``
            and ``on_log`` see the events too; its ``elicit`` and ``sample`` answer the
            body's ``exec.elicit`` and ``exec.sample`` (without one, those fail with
            ``CAPABILITY_UNAVAILABLE``). A function that raises fails the tool call before
            it reaches the registry.

    Raises:
        TypeError: ``registry`` is not a `ToolRegistry`, or ``host`` is neither a `ToolHost`
            nor callable.
    """

    __slots__ = ("_execute", "_gate", "_host", "_id", "_max_retries", "_registry")

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        id: str | None = None,
        max_retries: int | None = None,
        execute: Callable[[ToolExecutionInput], Awaitable[ToolResult]] | None = None,
        host: ToolHost | Callable[[RunContext[Any]], ToolHost | None] | None = None,
    ) -> None:
        given = cast("object", registry)  # checked at runtime too: untyped callers
        if type(given) is not ToolRegistry:
            kind = type(given).__name__
            raise TypeError(f"RegistryToolset expects a ToolRegistry, got {kind}")
        check_host(host)
        self._registry = registry
        self._id = id
        self._max_retries = max_retries
        self._execute = registry.execute if execute is None else execute
        self._host = host
        self._gate = _Gate()

    @property
    def registry(self) -> ToolRegistry:
        """The registry whose tools this toolset serves."""
        return self._registry

    @property
    def id(self) -> str | None:
        """The id given to the constructor."""
        return self._id

    async def for_run(self, ctx: RunContext[object]) -> RegistryToolset:
        """A toolset of the same registry for one agent run, with its own order of calls."""
        return RegistryToolset(
            self._registry,
            id=self._id,
            max_retries=self._max_retries,
            execute=self._execute,
            host=self._host,
        )

    async def get_tools(self, ctx: RunContext[object]) -> dict[str, ToolsetTool[object]]:
        """The registry's tools, from `ToolRegistry.schemas`, as pydantic-ai tools."""
        max_retries = ctx.max_retries if self._max_retries is None else self._max_retries
        tools: dict[str, ToolsetTool[object]] = {}
        for schema in self._registry.schemas():
            definition = ToolDefinition(
                name=schema.name,
                description=schema.description,
                # A plain, mutable copy: model adapters may rewrite a schema they are given.
                parameters_json_schema=plain(schema.parameters),
                sequential=False,  # toolseam orders the calls itself (see _Gate)
            )
            tools[schema.name] = ToolsetTool(
                toolset=self,
                tool_def=definition,
                max_retries=max_retries,
                args_validator=_ANY_ARGUMENTS,
            )
        return tools

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[object],
        tool: ToolsetTool[object],
    ) -> Any:
        """Run one call through the registry and translate its one result for pydantic-ai.

        Raises:
            ModelRetry: The registry answered `INVALID_ARGS`.
        """
        registry = self._registry
        controller = AbortController()
        user = resolve_host(self._host, ctx)

        async def emit(exec: ToolExecution, event: ToolEvent) -> None:
            await ctx.emit(_event(exec, event))

        async with call_events(emit, user) as host:
            call = ToolExecutionInput(
                call_id=ctx.tool_call_id or f"pyd_ai_{uuid.uuid4().hex}",
                name=name,
                arguments=tool_args,
                signal=controller.signal,
                agent=ctx,
                host=host,
            )
            gate = self._gate
            try:
                await gate.enter(registry.execution_mode(call) == "exclusive")
            except anyio.get_cancelled_exc_class():
                # contract §7: a call that never started still gets its one result.
                controller.abort(_STOPPED_WAITING)
                with anyio.CancelScope(shield=True):
                    await self._execute(call)
                raise
            try:
                # contract §5: when pydantic-ai cancels this task, execute aborts the body's
                # signal, waits for the body (a thread included), publishes, and re-raises
                # the cancellation.
                result = await self._execute(call)
            finally:
                gate.leave()
        # Leaving call_events emitted every event the call reported: they come first.
        return _answer(result)


def _event(exec: ToolExecution, event: ToolEvent) -> ToolProgressEvent | ToolLogEvent:
    """The pydantic-ai event for one of a body's events."""
    if isinstance(event, LogEvent):
        # Plain containers, thawed iteratively: the event may be serialized or edited.
        value = cast("PlainJson", copy.deepcopy(event.data))
        return ToolLogEvent(
            level=event.level,
            value=value,
            logger=event.logger,
            call_id=exec.call_id,
            tool=exec.name,
        )
    return ToolProgressEvent(
        progress=event.progress,
        total=event.total,
        message=event.message,
        call_id=exec.call_id,
        tool=exec.name,
    )


def _answer(result: ToolResult) -> Any:
    """What pydantic-ai hands the model for one toolseam result."""
    if isinstance(result, ToolSuccess):
        return result.value
    if result.code == INVALID_ARGS:
        raise ModelRetry(result.error.message)
    return ToolReturn(return_value=result_text(result), metadata={CODE_METADATA_KEY: result.code})
