"""Serve a `ToolRegistry` as an MCP server: `create_server` and `serve_stdio`.

Every ``tools/call`` request runs ``registry.execute`` with a fresh `AbortController` and
the MCP request id as ``call_id``.

How a client's cancellation reaches the tool body. The SDK (``mcp`` 2.x,
``mcp.shared.jsonrpc_dispatcher``) applies an inbound ``notifications/cancelled`` by
cancelling the anyio cancel scope of the request's handler task ("interrupt" mode, the only
one the stdio server uses), and it never writes a response for a request the peer cancelled.
Left alone, that would deliver *host* cancellation into the registry: the body would be torn
down at its next checkpoint rather than told to stop. So the handler runs the registry call
in a shielded scope and keeps one unshielded watcher task beside it: when the SDK cancels
the handler's scope (a cancelled request, or the connection shutting down), the watcher is
what gets cancelled, and it aborts the call's controller. The body observes ``exec.signal``
aborting, winds down cooperatively, the registry publishes ``ABORTED`` (or
``ABORTED_BEFORE_DISPATCH``), and only then does the handler let the SDK's cancellation
propagate. A body is never abandoned: the handler returns only after it has settled.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, cast

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from pydantic import TypeAdapter, ValidationError

from .._definitions import ToolSchema
from .._errors import AbortError
from .._registry import ToolRegistry
from .._results import ContentBlock, ToolResult
from .._signals import AbortController
from .._views import ToolExecutionInput
from ._wire import CODE_META_KEY, CONTEXTS_META_KEY, MESSAGE_META_KEY, plain_json

__all__ = ["call_tool_result", "create_server", "serve_stdio"]

logger = logging.getLogger("toolseam")

_CONTENT_BLOCK: TypeAdapter[types.ContentBlock] = TypeAdapter(types.ContentBlock)

# `stdio_server` carries no return annotation; its streams are the SDK's private
# `ReadStream`/`WriteStream` protocols, which `Server.run` accepts as they come.
_stdio_server = cast(
    "Callable[[], AbstractAsyncContextManager[tuple[Any, Any]]]",
    stdio_server,
)


def _tool(schema: ToolSchema) -> types.Tool:
    return types.Tool(
        name=schema.name,
        description=schema.description,
        input_schema=plain_json(dict(schema.parameters)),
    )


def _content(block: ContentBlock) -> types.ContentBlock:
    """One toolseam content block as an MCP content block.

    A block that is not one of MCP's content types (text, image, audio, resource link,
    embedded resource) travels as a text block holding its JSON, so nothing is dropped.
    """
    raw = plain_json(dict(block))
    try:
        return _CONTENT_BLOCK.validate_python(raw)
    except ValidationError:
        return types.TextContent(type="text", text=json.dumps(raw, ensure_ascii=False))


def call_tool_result(result: ToolResult) -> types.CallToolResult:
    """Map a toolseam result to the MCP ``CallToolResult`` the server answers with.

    - ``content`` becomes MCP content blocks.
    - A failure sets ``isError`` and puts its code (when it has one) under
      ``_meta["toolseam/code"]`` and its message under ``_meta["toolseam/message"]``, so a
      client can tell ``ABORTED`` from ``TOOL_TIMEOUT`` from ``INVALID_ARGS``.
    - A success whose value is a JSON object also carries it as ``structuredContent`` (MCP
      2025-06-18 and 2025-11-25 allow only objects there); other values travel as content.
    - Non-empty ``additional_contexts`` go under ``_meta["toolseam/additional_contexts"]``.

    Args:
        result: What ``registry.execute`` returned.

    Returns:
        The MCP result.
    """
    content = [_content(block) for block in result.content]
    meta: dict[str, Any] = {}
    if result.additional_contexts:
        meta[CONTEXTS_META_KEY] = plain_json(list(result.additional_contexts))
    if result.is_error is True:
        info = result.error.info
        if info is not None:
            meta[CODE_META_KEY] = info.code
        meta[MESSAGE_META_KEY] = result.error.message
        return types.CallToolResult(content=content, is_error=True, _meta=meta or None)
    value = result.value
    structured = plain_json(value) if isinstance(value, Mapping) else None
    return types.CallToolResult(content=content, structured_content=structured, _meta=meta or None)


async def _execute(
    registry: ToolRegistry, call_id: str, name: str, arguments: object
) -> ToolResult:
    """Run one call to quiescence, turning the SDK's cancellation into an abort.

    See the module docstring: the registry call is shielded from the handler's cancel scope;
    the watcher task is not, so a cancelled request (or a closing connection) cancels the
    watcher, which aborts the controller. Cancellation is re-raised once the call settled.
    """
    controller = AbortController()
    call = ToolExecutionInput(
        call_id=call_id, name=name, arguments=arguments, signal=controller.signal
    )
    settled = False
    result: ToolResult | None = None

    async def abort_when_cancelled() -> None:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            if not settled:
                controller.abort(AbortError("the MCP request was cancelled"))
            raise

    async with anyio.create_task_group() as watcher:
        watcher.start_soon(abort_when_cancelled)
        # Not a race: the shield keeps the SDK's cancellation away from the body, which is
        # awaited to completion; the abort reaches it through its signal instead.
        with anyio.CancelScope(shield=True):
            result = await registry.execute(call)
        settled = True
        watcher.cancel_scope.cancel()
    # If the SDK cancelled this request, leaving the task group above re-raised that
    # cancellation: the SDK then answers nothing (a cancelled request) or CONNECTION_CLOSED.
    assert result is not None  # nothing cancels the shielded scope itself
    return result


def create_server(
    registry: ToolRegistry,
    *,
    name: str = "toolseam",
    version: str = "",
    instructions: str | None = None,
) -> Server[Any]:
    """Build a low-level MCP ``Server`` that serves a registry's tools.

    ``tools/list`` lists ``registry.schemas()`` (name, description, and the parameters as
    ``inputSchema``), read at every request, so tools registered later are listed too.
    ``tools/call`` runs ``registry.execute`` with a fresh `AbortController` and the MCP
    request id as ``call_id``; the answer is `call_tool_result` of the one result the
    registry published (an unknown tool is an ``UNKNOWN_TOOL`` result, not a protocol
    error). A ``notifications/cancelled`` for the request aborts that controller; the
    request is then left unanswered, as MCP prescribes, once the body has settled.

    Use it for transports other than stdio (``server.streamable_http_app()``, or
    ``server.run(read, write, server.create_initialization_options())``).

    Args:
        registry: The registry to serve.
        name: The server name reported at initialization.
        version: The server version reported at initialization.
        instructions: Optional instructions for the client's model.

    Returns:
        The server; it holds no connection until run.
    """

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(schema) for schema in registry.schemas()])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments: object = {} if params.arguments is None else params.arguments
        result = await _execute(registry, str(ctx.request_id), params.name, arguments)
        return call_tool_result(result)

    return Server(
        name,
        version=version,
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(registry: ToolRegistry, *, name: str = "toolseam", version: str = "") -> None:
    """Serve a registry over MCP on this process's stdin and stdout until stdin closes.

    While it serves, the SDK points file descriptors 0 and 1 away from the wire (at the
    null device and at stderr), so stray prints from tools cannot corrupt the protocol.
    When the connection closes, calls still running are aborted through their signals and
    awaited before this returns.

    Args:
        registry: The registry to serve (see `create_server`).
        name: The server name reported at initialization.
        version: The server version reported at initialization.
    """
    server = create_server(registry, name=name, version=version)
    async with _stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
