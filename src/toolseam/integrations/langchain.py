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
failure's code under ``response_metadata["toolseam/code"]`` and the result's durable form
(`ToolSuccess.to_json` / `ToolFailure.to_json`) as ``artifact``.

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
from collections.abc import Sequence
from typing import Any, Literal, cast, final

import anyio
import anyio.lowlevel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from pydantic import PrivateAttr
from typing_extensions import override

from .._batch import ToolCall, run_tool_calls
from .._definitions import ToolSchema
from .._errors import INVALID_ARGS
from .._registry import ToolRegistry
from .._results import ErrorInfo, ToolFailure, ToolResult
from .._signals import AbortController, AbortSignal
from .._views import ToolExecutionInput
from ._common import CODE_METADATA_KEY as CODE_METADATA_KEY
from ._common import plain

__all__ = ["CODE_METADATA_KEY", "run_ai_message_tool_calls", "to_langchain_tools"]

_MessageContent = str | list[str | dict[Any, Any]]
"""What a ``ToolMessage``'s ``content`` holds."""


def to_langchain_tools(registry: ToolRegistry) -> list[BaseTool]:
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

    Args:
        registry: The registry whose tools to expose.

    Returns:
        The tools, as LangChain ``BaseTool`` objects.

    Raises:
        TypeError: ``registry`` is not a `ToolRegistry`.
    """
    if not isinstance(cast("object", registry), ToolRegistry):  # untyped callers too
        raise TypeError(f"registry must be a ToolRegistry, got {type(registry).__name__}")
    return [_RegistryTool(registry, schema) for schema in registry.schemas()]


async def run_ai_message_tool_calls(
    registry: ToolRegistry,
    message: AIMessage,
    *,
    signal: AbortSignal,
    max_parallel: int = 10,
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
    - ``artifact``: the result's durable JSON form (``result.to_json()``, plain containers).

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
    outcomes = await run_tool_calls(registry, calls, signal=signal, max_parallel=max_parallel)
    if not calls:
        await anyio.lowlevel.checkpoint()  # run_tool_calls([]) returns without one
    replies = [_tool_message(o.call.call_id, o.call.name, o.result) for o in outcomes]
    for call_id, call in invalid:
        error = call["error"] or "its arguments could not be parsed"
        result = ToolFailure.from_message(
            f"invalid tool call: {error}", info=ErrorInfo("ToolArgsError", INVALID_ARGS)
        )
        replies.append(_tool_message(call_id, call["name"], result))
    return replies


def _call_id(call_id: str | None, which: str, seen: set[str]) -> str:
    """A tool call's id, checked: a ``ToolMessage`` answers a call by its id."""
    if call_id is None:
        raise ValueError(f"{which} of the message has no id to answer it by")
    if call_id in seen:
        raise ValueError(f"duplicate tool call id {call_id!r} in one message")
    seen.add(call_id)
    return call_id


def _tool_message(call_id: str, name: str | None, result: ToolResult) -> ToolMessage:
    """The one mapping from a result to the ``ToolMessage`` that answers its call."""
    status: Literal["success", "error"] = "success"
    metadata: dict[str, Any] = {}
    if isinstance(result, ToolFailure):
        status = "error"
        if result.code is not None:
            metadata[CODE_METADATA_KEY] = result.code
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

    def __init__(self, registry: ToolRegistry, schema: ToolSchema) -> None:
        super().__init__(
            name=schema.name,
            description=schema.description,
            args_schema=plain(schema.parameters),
        )
        self._registry = registry

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
        # A signal of the call's own: LangChain has no way to hand one in. A host stops the
        # call by cancelling its task, which the registry turns into an abort (contract §5).
        execution = ToolExecutionInput(
            call_id=call_id[0] if call_id else f"toolseam_{uuid.uuid4().hex}",
            name=self.name,
            arguments=arguments,
            signal=AbortController().signal,
        )
        results: list[ToolResult] = []

        async def execute() -> None:
            results.append(await self._registry.execute(execution))

        # langchain-core awaits `_arun` in an asyncio task of its own, so a host cancelling
        # the caller reaches this task as bare `Task.cancel()` calls, repeated by anyio's
        # cancel scopes, which no shield in the body holds off. In a child task the call
        # sees one cancel-scope cancellation instead: delivered at the body's current await,
        # shields respected, the call awaited to its end, the host's cancellation re-raised
        # after it (contract §5, host cancellation).
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(execute)
        except BaseExceptionGroup as errors:
            if len(errors.exceptions) == 1:  # what execute() raised, as it raised it
                raise errors.exceptions[0] from None
            raise
        [result] = results
        if call_id:
            return _tool_message(call_id[0], self.name, result)
        return _content(result)
