"""LangChain: a registry's tools as LangChain tools, and one `ToolMessage` per tool call.

Needs the optional ``langchain`` extra (``pip install "toolseam[langchain]"``, which installs
``langchain-core`` only); ``import toolseam`` never imports it. See contract §10 and
``docs/integrations/langchain.md``.

- `to_langchain_tools` turns each registered tool into a LangChain ``BaseTool`` carrying the
  tool's name, description and JSON schema. Each call runs `ToolRegistry.execute`.
- `run_ai_message_tool_calls` runs the tool calls of one ``AIMessage`` through
  `run_tool_calls` and answers every one of them with exactly one ``ToolMessage``, in order,
  also after a stop: the history ``[ai_message, *tool_messages]`` stays valid.

Both build their messages with one mapping from a `ToolResult` to a ``ToolMessage``:
``tool_call_id`` set, ``content`` the result's text, ``status="error"`` for failures, the
failure's code under ``response_metadata["toolseam/code"]``, the call's logs under
``response_metadata["toolseam/logs"]`` and the result's durable form
(`ToolSuccess.to_json` / `ToolFailure.to_json`) as ``artifact``.

Progress and logs: what a body reports with ``exec.progress`` and ``exec.log`` is dispatched
as LangChain custom events (``adispatch_custom_event``) named `PROGRESS_EVENT` and
`LOG_EVENT`, in the run of the tool (or, for `run_ai_message_tool_calls`, of the runnable it
is called from, a LangGraph node say): callback handlers' ``on_custom_event`` and
``astream_events`` see them while the call runs, before its ``on_tool_end``. A caller's own
`ToolHost` (``host=``) sees them too and answers ``exec.elicit`` and ``exec.sample``.

Backends: `run_ai_message_tool_calls` runs on asyncio and trio. A tool's ``ainvoke`` runs on
asyncio only, because langchain-core's ``BaseTool.arun`` (1.x) calls ``asyncio.gather`` and
``asyncio.create_task`` itself. A tool's sync ``invoke`` runs the call on a private event
loop of its own (``anyio.run``) and refuses to run inside a running loop.
"""

from __future__ import annotations

import importlib.util as _importlib_util

if _importlib_util.find_spec("langchain_core") is None:  # pragma: no cover - only without it
    raise ImportError(
        'toolseam.integrations.langchain needs langchain-core: pip install "toolseam[langchain]"'
    )

import copy
import functools
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, cast, final

import anyio
import anyio.lowlevel
from langchain_core.callbacks import adispatch_custom_event
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.runnables.config import get_async_callback_manager_for_config
from langchain_core.tools import BaseTool
from pydantic import PrivateAttr
from typing_extensions import override

from .._batch import ToolCall, run_tool_calls
from .._capabilities import LogEvent, ToolEvent
from .._definitions import ToolSchema
from .._errors import INVALID_ARGS
from .._registry import ToolRegistry
from .._results import ErrorInfo, ToolFailure, ToolResult
from .._signals import AbortController, AbortSignal
from .._views import ToolExecution, ToolExecutionInput, ToolHost
from ._common import CODE_METADATA_KEY as CODE_METADATA_KEY
from ._common import plain
from ._events import call_events, check_host, resolve_host

__all__ = [
    "CODE_METADATA_KEY",
    "LOGS_METADATA_KEY",
    "LOG_EVENT",
    "PROGRESS_EVENT",
    "run_ai_message_tool_calls",
    "to_langchain_tools",
]

PROGRESS_EVENT: Final = "toolseam.progress"
"""The name of the custom event that carries a body's ``exec.progress(...)``.

Its data: ``{"tool_call_id", "call_id", "tool", "progress", "total", "message"}`` —
``tool_call_id`` the model's tool call, ``call_id`` and ``tool`` the toolseam call that
reported it (the same call, or a nested one of its own).
"""

LOG_EVENT: Final = "toolseam.log"
"""The name of the custom event that carries a body's ``exec.log(...)``.

Its data: ``{"tool_call_id", "call_id", "tool", "level", "data", "logger"}`` (see
`PROGRESS_EVENT`); ``data`` is what was logged, as plain JSON.
"""

LOGS_METADATA_KEY: Final = "toolseam/logs"
"""The ``response_metadata`` key under which a ``ToolMessage`` lists its call's logs.

The list holds the `LOG_EVENT` data of every ``exec.log`` of the call (nested calls' too), in
order; the key is absent when the call logged nothing. LangChain never sends
``response_metadata`` to the model.
"""

_HostOption = ToolHost | Callable[[RunnableConfig], ToolHost | None] | None

_MessageContent = str | list[str | dict[Any, Any]]
"""What a ``ToolMessage``'s ``content`` holds."""


def to_langchain_tools(
    registry: ToolRegistry,
    *,
    host: ToolHost | Callable[[RunnableConfig], ToolHost | None] | None = None,
) -> list[BaseTool]:
    """One LangChain tool per tool registered now, in registration order.

    Each tool's ``name``, ``description`` and ``args_schema`` (a JSON schema ``dict``) are
    the registry's own (`ToolRegistry.schemas`), copied into plain containers; LangChain
    validates nothing, the registry does. Tools registered later are not in the list; a
    tool removed later answers ``UNKNOWN_TOOL``.

    Every invocation runs `ToolRegistry.execute` with a fresh `AbortController`'s signal:

    - ``await tool.ainvoke(tool_call)`` with a LangChain ``ToolCall`` (what an agent loop
      passes; ``{"name", "args", "id", "type": "tool_call"}``) uses the call's ``id`` as
      ``call_id`` and returns a ``ToolMessage`` (see `run_ai_message_tool_calls` for its
      fields).
    - ``await tool.ainvoke(arguments)`` with a plain ``dict`` uses a generated ``call_id``
      and returns the message content alone: the result's text, ``"Error: ..."`` for a
      failure.
    - ``ainvoke`` works on asyncio only: langchain-core's ``BaseTool.arun`` uses
      ``asyncio.gather`` and ``asyncio.create_task``. When the host cancels the task
      awaiting it (as LangGraph does on a stop), the call is cancelled at the body's
      current await (shields in the body are respected), the body's signal aborts, and the
      body is awaited and one result published before the cancellation goes on (contract
      §5, host cancellation).
    - ``tool.invoke(...)`` (sync) takes the same inputs and runs the call on a private event
      loop, with ``anyio.run``. Called inside a running event loop it raises
      ``RuntimeError`` instead (it would block that loop): await ``ainvoke`` there. The
      registry is not built to be driven from several threads at once, so do not fan sync
      calls out over threads (LangChain's sync ``batch``); use ``abatch`` instead.
    - Each ``exec.progress`` and ``exec.log`` of the body (and of its nested calls) is
      dispatched in the tool's run as a `PROGRESS_EVENT` or `LOG_EVENT` custom event, in
      order, while the call runs; the tool returns only once every one was dispatched. A
      ``ToolMessage`` answer lists the call's logs under `LOGS_METADATA_KEY`.

    Args:
        registry: The registry whose tools to expose.
        host: The caller's own `ToolHost` for every call, or a function that makes one per
            call from the run's ``RunnableConfig`` (``None``: none for that call). Its
            ``on_progress`` and ``on_log`` see the events too; its ``elicit`` and
            ``sample`` answer the body's ``exec.elicit`` and ``exec.sample`` (without one,
            those fail with ``CAPABILITY_UNAVAILABLE``). A function that raises fails the
            LangChain tool call before it reaches the registry.

    Returns:
        The tools, as LangChain ``BaseTool`` objects.

    Raises:
        TypeError: ``registry`` is not a `ToolRegistry`, or ``host`` is neither a
            `ToolHost` nor callable.
    """
    if not isinstance(cast("object", registry), ToolRegistry):  # untyped callers too
        raise TypeError(f"registry must be a ToolRegistry, got {type(registry).__name__}")
    check_host(host)
    return [_RegistryTool(registry, schema, host) for schema in registry.schemas()]


async def run_ai_message_tool_calls(
    registry: ToolRegistry,
    message: AIMessage,
    *,
    signal: AbortSignal,
    max_parallel: int = 10,
    host: ToolHost | None = None,
) -> list[ToolMessage]:
    """Run an ``AIMessage``'s tool calls and answer each with exactly one ``ToolMessage``.

    ``message.tool_calls`` go through `run_tool_calls` (model order, bounded parallelism,
    exclusive barriers). Once ``signal`` aborts, no further call starts, the started ones
    are awaited, and every call that never started answers ``ABORTED_BEFORE_DISPATCH``.
    Each ``ToolMessage`` has:

    - ``tool_call_id``: the call's ``id``; ``name``: the tool's name;
    - ``content``: the result's text (its text blocks joined by newlines), or the blocks
      themselves when some are not text blocks;
    - ``status``: ``"error"`` for a failure, ``"success"`` otherwise;
    - ``response_metadata``: ``{"toolseam/code": code}`` for a failure with a code
      (`CODE_METADATA_KEY`), else empty;
    - ``artifact``: the result's durable JSON form (``result.to_json()``, plain containers);
    - ``response_metadata[LOGS_METADATA_KEY]``: the call's logs, when it logged anything.

    Called inside a LangChain run (a LangGraph node, a ``RunnableLambda``: anything whose
    config carries a parent run), each ``exec.progress`` and ``exec.log`` of the bodies is
    dispatched in that run as a `PROGRESS_EVENT` or `LOG_EVENT` custom event while the
    calls run, and all of them before this returns. Called outside one, there is no run to
    stream to: only ``host`` sees them (and the messages list the logs).

    ``message.invalid_tool_calls`` (calls whose arguments did not parse) are answered too,
    after the others and without reaching the registry (there is nothing to run): each
    with an ``INVALID_ARGS`` failure. Chat model integrations send those calls to the
    provider with the message, so they need answers for the history to stay valid.

    The messages come back in the calls' order, so ``[message, *returned]`` is a valid
    history whether or not the turn was stopped. Stop a turn by aborting ``signal``: if the
    host cancels the awaiting task instead, every started call still publishes its result
    to the registry's observers, but the cancellation is re-raised and nothing is returned.

    Args:
        registry: The registry to run the calls through.
        message: The model's turn.
        signal: The caller-owned signal of the turn; every call carries it.
        max_parallel: How many parallel calls may be in flight at once (at least 1).
        host: The caller's own `ToolHost` for every call: its ``on_progress`` and
            ``on_log`` see the events too, its ``elicit`` and ``sample`` answer the bodies.

    Returns:
        One ``ToolMessage`` per tool call, then one per invalid tool call.

    Raises:
        TypeError: ``message`` is not an ``AIMessage`` (and see `run_tool_calls`).
        ValueError: A call has no ``id``, two calls share one, or ``max_parallel < 1``.
    """
    if not isinstance(cast("object", message), AIMessage):  # untyped callers too
        raise TypeError(f"message must be an AIMessage, got {type(message).__name__}")
    seen: set[str] = set()
    calls = [
        ToolCall(_call_id(call["id"], f"tool call {index}", seen), call["name"], call["args"])
        for index, call in enumerate(message.tool_calls)
    ]
    invalid = [
        (_call_id(call["id"], f"invalid tool call {index}", seen), call)
        for index, call in enumerate(message.invalid_tool_calls)
    ]
    config = ensure_config()
    # Outside a run, adispatch_custom_event has nowhere to dispatch to (it raises).
    in_run = get_async_callback_manager_for_config(config).parent_run_id is not None
    events = _Events(config if in_run else None)
    async with call_events(events.deliver, host) as call_host:
        outcomes = await run_tool_calls(
            registry, calls, signal=signal, max_parallel=max_parallel, host=call_host
        )
    if not calls:
        await anyio.lowlevel.checkpoint()  # run_tool_calls([]) returns without one
    replies = [
        _tool_message(o.call.call_id, o.call.name, o.result, events.logs.get(o.call.call_id))
        for o in outcomes
    ]
    for call_id, call in invalid:
        error = call["error"] or "its arguments could not be parsed"
        result = ToolFailure.from_message(
            f"invalid tool call: {error}", info=ErrorInfo("ToolArgsError", INVALID_ARGS)
        )
        replies.append(_tool_message(call_id, call["name"], result, None))
    return replies


@final
class _Events:
    """Dispatches one call's (or one message's calls') events and keeps their logs."""

    __slots__ = ("config", "logs")

    def __init__(self, config: RunnableConfig | None) -> None:
        self.config = config  # None: not inside a run, nothing to dispatch in
        # The LOG_EVENT data of each model's tool call (root_call_id), in order.
        self.logs: dict[str, list[dict[str, Any]]] = {}

    async def deliver(self, exec: ToolExecution, event: ToolEvent) -> None:
        """Keep a log for its message, then dispatch the event in the run."""
        if isinstance(event, LogEvent):
            self.logs.setdefault(exec.root_call_id, []).append(_data(exec, event))
        if self.config is not None:
            name = LOG_EVENT if isinstance(event, LogEvent) else PROGRESS_EVENT
            await adispatch_custom_event(name, _data(exec, event), config=self.config)


def _data(exec: ToolExecution, event: ToolEvent) -> dict[str, Any]:
    """A custom event's data: plain JSON, a fresh copy for each who may edit it."""
    head: dict[str, Any] = {
        "tool_call_id": exec.root_call_id,
        "call_id": exec.call_id,
        "tool": exec.name,
    }
    if isinstance(event, LogEvent):
        # deepcopy thaws the frozen JSON into plain containers, iteratively.
        return {
            **head,
            "level": event.level,
            "data": copy.deepcopy(event.data),
            "logger": event.logger,
        }
    return {**head, "progress": event.progress, "total": event.total, "message": event.message}


def _call_id(call_id: str | None, which: str, seen: set[str]) -> str:
    """A tool call's id, checked: a ``ToolMessage`` answers a call by its id."""
    if call_id is None:
        raise ValueError(f"{which} of the message has no id to answer it by")
    if call_id in seen:
        raise ValueError(f"duplicate tool call id {call_id!r} in one message")
    seen.add(call_id)
    return call_id


def _tool_message(
    call_id: str, name: str | None, result: ToolResult, logs: list[dict[str, Any]] | None
) -> ToolMessage:
    """The one mapping from a result to the ``ToolMessage`` that answers its call."""
    status: Literal["success", "error"] = "success"
    metadata: dict[str, Any] = {}
    if isinstance(result, ToolFailure):
        status = "error"
        if result.code is not None:
            metadata[CODE_METADATA_KEY] = result.code
    if logs:
        metadata[LOGS_METADATA_KEY] = logs
    return ToolMessage(
        _content(result),
        tool_call_id=call_id,
        name=name,
        status=status,
        artifact=copy.deepcopy(result.to_json()),  # plain containers, thawed iteratively
        response_metadata=metadata,
    )


def _content(result: ToolResult) -> _MessageContent:
    """The model-facing content: the text of the text blocks, or the blocks themselves."""
    texts: list[str] = []
    for block in result.content:
        text = block.get("text")
        if block.get("type") != "text" or not isinstance(text, str):
            # Not only text (an image, say): hand LangChain the blocks as they are.
            return [plain(block) for block in result.content]
        texts.append(text)
    return "\n".join(texts)


@final
class _RegistryTool(BaseTool):
    """One registered tool as a LangChain tool (see `to_langchain_tools`)."""

    _registry: ToolRegistry = PrivateAttr()
    _host: _HostOption = PrivateAttr()

    def __init__(self, registry: ToolRegistry, schema: ToolSchema, host: _HostOption) -> None:
        super().__init__(
            name=schema.name,
            description=schema.description,
            args_schema=plain(schema.parameters),
        )
        self._registry = registry
        self._host = host

    @override
    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        # This hook is the only place LangChain hands a tool the call's id: pass it on to
        # `_run`/`_arun` as their one positional argument, beside the model's arguments.
        _, arguments = super()._to_args_and_kwargs(tool_input, tool_call_id)
        return ((tool_call_id,) if tool_call_id is not None else ()), arguments

    @override
    async def _arun(self, /, *call_id: str, **arguments: Any) -> Any:
        return await self._call(call_id, arguments)

    @override
    def _run(self, /, *call_id: str, **arguments: Any) -> Any:
        try:
            anyio.get_current_task()
        except RuntimeError:  # no event loop runs in this thread: use a private one
            return anyio.run(functools.partial(self._call, call_id, arguments))
        raise RuntimeError(
            f'tool "{self.name}": invoke() cannot run inside a running event loop, which it '
            "would block; await ainvoke() instead"
        )

    async def _call(self, call_id: Sequence[str], arguments: dict[str, Any]) -> Any:
        """Run the call; a ``ToolMessage`` when LangChain gave a call id, else the content."""
        # The tool's run: BaseTool.arun (and run) set it as the config of this context.
        config = ensure_config()
        events = _Events(config)
        results: list[ToolResult] = []
        async with call_events(events.deliver, resolve_host(self._host, config)) as host:
            # A signal of the call's own: LangChain has no way to hand one in. A host stops
            # the call by cancelling its task, which the registry turns into an abort
            # (contract §5).
            execution = ToolExecutionInput(
                call_id=call_id[0] if call_id else f"toolseam_{uuid.uuid4().hex}",
                name=self.name,
                arguments=arguments,
                signal=AbortController().signal,
                host=host,
            )

            async def execute() -> None:
                results.append(await self._registry.execute(execution))

            # langchain-core awaits `_arun` in an asyncio task of its own, so a host
            # cancelling the caller reaches this task as bare `Task.cancel()` calls, repeated
            # by anyio's cancel scopes, which no shield in the body holds off. In a child
            # task the call sees one cancel-scope cancellation instead: delivered at the
            # body's current await, shields respected, the call awaited to its end, the
            # host's cancellation re-raised after it (contract §5, host cancellation).
            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(execute)
            except BaseExceptionGroup as errors:
                if len(errors.exceptions) == 1:  # what execute() raised, as it raised it
                    raise errors.exceptions[0] from None
                raise
        # Leaving call_events dispatched every event the call reported: they come first.
        [result] = results
        if call_id:
            logs = events.logs.get(execution.call_id)
            return _tool_message(call_id[0], self.name, result, logs)
        return _content(result)
