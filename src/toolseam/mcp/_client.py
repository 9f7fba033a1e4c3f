"""Use the tools of an MCP server as toolseam tools: `register_mcp_tools`.

How an abort crosses the wire. The SDK's ``ClientSession`` (``mcp`` 2.x,
``JSONRPCDispatcher.send_raw_request``) cancels a request when the task awaiting it is
cancelled through anyio: it writes ``notifications/cancelled`` with the request id (shielded,
its write bounded by the SDK), forgets the request so a late response is dropped, and
re-raises the cancellation. The body of a remote tool therefore runs ``session.call_tool``
inside a cancel scope of its own and cancels that scope when ``exec.signal`` aborts; it
returns only after the SDK has settled the request that way. It never races the call: the
SDK's own cancellation path is awaited to its end.

MCP has no acknowledgement of a cancellation: once the notification is written, the remote
body's quiescence is the server's business (a toolseam server aborts its body's signal and
awaits it; see ``toolseam.mcp._server``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol, cast, final

import anyio
import anyio.lowlevel
from mcp import ClientSession, MCPError, types
from mcp.shared.dispatcher import ProgressFnT

from .._errors import ToolArgsError, ToolError, safe_str
from .._json import FrozenDict, JsonValue, materialize
from .._registration import Registration
from .._registry import ToolRegistry
from .._results import ContentBlock, ToolResult, render_value
from .._signals import in_loop
from .._views import ToolExecution, ToolRunContext
from ._client_tasks import (
    CreateTaskResult,
    follow_task,
    legacy_task_refusal,
    missing_extension_hint,
)
from ._lean import lean_for
from ._relay import SessionCallbacks, elicit_for, roots_for, sample_for
from ._wire import (
    CODE_META_KEY,
    CONTEXTS_META_KEY,
    MESSAGE_META_KEY,
    VALUE_META_KEY,
    plain_json,
)

__all__ = [
    "REMOTE_TOOL_ERROR",
    "McpToolDefinition",
    "RemoteToolError",
    "SessionLink",
    "list_tools",
    "register_mcp_tools",
]

REMOTE_TOOL_ERROR: Final = "REMOTE_TOOL_ERROR"
"""The code of a failure the remote MCP server reported for a call (`RemoteToolError`)."""

# A 2026-07-28 server asks for input by answering InputRequiredResult (SEP-2322): as many
# rounds as the SDK's own driver allows, and its backoff when a round asks nothing.
_MAX_INPUT_ROUNDS: Final = 10
_FIRST_POLL: Final = 0.05
_LAST_POLL: Final = 0.25


class RemoteToolError(ToolError):
    """The MCP server failed a call: it answered ``isError``, or with a protocol error.

    Its code is `REMOTE_TOOL_ERROR`. The message names the tool and, when the server is a
    toolseam server, the remote code from ``_meta["toolseam/code"]``:
    ``remote tool "search" failed (TOOL_TIMEOUT): tool call timed out after 5.0s``.

    Args:
        tool: The remote tool's name.
        message: What the server said went wrong.
        remote_code: The server's toolseam code, when it sent one.
    """

    tool_name: str
    """The remote tool's name."""
    remote_code: str | None
    """The remote toolseam code (``"ABORTED"``, ``"INVALID_ARGS"``, …), or ``None``."""
    remote_message: str
    """The server's message, as sent."""

    def __init__(self, tool: str, message: str, *, remote_code: str | None = None) -> None:
        detail = f" ({remote_code})" if remote_code else ""
        super().__init__(f'remote tool "{tool}" failed{detail}: {message}', code=REMOTE_TOOL_ERROR)
        self.tool_name = tool
        self.remote_code = remote_code
        self.remote_message = message


@final
class _RemoteCall:
    """The parsed arguments of one call; also carries the remote content to `render`."""

    __slots__ = ("arguments", "content")

    arguments: dict[str, Any]
    """The arguments, as plain JSON for the SDK."""
    content: list[dict[str, Any]] | None
    """The remote content blocks, set by a successful `McpToolDefinition.run`."""

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments
        self.content = None


def _texts(content: Sequence[types.ContentBlock]) -> list[str]:
    return [block.text for block in content if isinstance(block, types.TextContent)]


def _dump(block: types.ContentBlock) -> dict[str, Any]:
    return block.model_dump(by_alias=True, mode="json", exclude_none=True)


def _meta(result: types.CallToolResult) -> Mapping[str, Any]:
    return result.meta if isinstance(result.meta, Mapping) else {}


class SessionLink(Protocol):
    """Where a remote tool gets the session for each call (the gateway's upstreams)."""

    async def session(self) -> ClientSession:
        """The session to call through now.

        Raises:
            ConnectionError: The server cannot be reached now (the message says why).
        """
        ...

    def failed(self, session: ClientSession, error: MCPError) -> None:
        """A call through ``session`` ended with a protocol error (the link may be lost)."""
        ...


@final
class _FixedSession:
    """The link of a tool bound to one session for its whole life."""

    __slots__ = ("_session",)

    def __init__(self, session: ClientSession) -> None:
        self._session = session

    async def session(self) -> ClientSession:
        await anyio.lowlevel.checkpoint()
        return self._session

    def failed(self, session: ClientSession, error: MCPError) -> None:
        return None


@final
class McpToolDefinition:
    """A `ToolDefinition` whose body calls one tool of a connected MCP ``ClientSession``.

    - ``parameters`` is the remote ``inputSchema``; validating the arguments is the
      server's job (``parse_arguments`` only checks they form a JSON object).
    - ``run`` forwards ``exec.signal``: on abort it cancels the MCP request (the SDK sends
      ``notifications/cancelled``, or on a 2026-era streamable HTTP session closes the
      request's stream) and raises the abort reason once the SDK has settled it, so the
      registry reports ``ABORTED``. It never sends a request for a signal that has already
      aborted.
    - A result with ``isError``, or an MCP protocol error (a closed connection too),
      raises `RemoteToolError` (code `REMOTE_TOOL_ERROR`).
    - A success's value is the remote ``structuredContent`` when present, else a toolseam
      server's ``_meta["toolseam/value"]``, else the text of its text blocks joined by
      newlines; its content is the remote content blocks as sent.
      Remote ``additional_contexts`` (from a toolseam server) are deferred onto the result.
    - A call may overlap others only when the tool's ``readOnlyHint`` annotation is true.
    - The server's progress notifications for a call become its ``exec.progress`` (only
      increasing values); with ``callbacks``, its log messages, elicitation and sampling
      requests become the call's ``exec.log``, ``exec.elicit`` and ``exec.sample``.
    - A 2026-07-28 server that asks for input (``InputRequiredResult``) is answered through
      ``exec.elicit``/``exec.sample`` and the call retried, as the SDK's ``Client`` does.
    - A 2026-07-28 server that answers with a task (the tasks extension, declared by a
      session made with `TasksExtension`) is followed to the task's final status: its
      questions are answered the same way, and an abort sends ``tasks/cancel`` and waits
      for the final status before raising the abort reason (see ``_client_tasks``).

    Args:
        session: An initialized ``mcp.ClientSession``; it must outlive every call.
        tool: The tool as listed by the server.
        name: The local tool name; defaults to the remote name.
        callbacks: The `SessionCallbacks` the session was created with, if any.
    """

    __slots__ = (
        "_callbacks",
        "_description",
        "_link",
        "_name",
        "_parameters",
        "_read_only",
        "_remote_name",
        "_tool",
    )

    def __init__(
        self,
        session: ClientSession,
        tool: types.Tool,
        *,
        name: str | None = None,
        callbacks: SessionCallbacks | None = None,
    ) -> None:
        self._setup(_FixedSession(session), tool, name, callbacks)

    @classmethod
    def _linked(
        cls, link: SessionLink, tool: types.Tool, name: str, callbacks: SessionCallbacks | None
    ) -> McpToolDefinition:
        """A definition that asks ``link`` for the session of each call."""
        self = cls.__new__(cls)
        self._setup(link, tool, name, callbacks)
        return self

    def _setup(
        self,
        link: SessionLink,
        tool: types.Tool,
        name: str | None,
        callbacks: SessionCallbacks | None,
    ) -> None:
        self._link = link
        self._callbacks = callbacks
        self._tool = tool
        self._remote_name = tool.name
        self._name = tool.name if name is None else name
        self._description = tool.description or ""
        schema = materialize(tool.input_schema)
        assert isinstance(schema, FrozenDict)  # the SDK validated a dict of JSON
        self._parameters: Mapping[str, JsonValue] = schema
        annotations = tool.annotations
        self._read_only = annotations is not None and annotations.read_only_hint is True

    @property
    def name(self) -> str:
        """The local tool name."""
        return self._name

    @property
    def remote_name(self) -> str:
        """The tool's name on the server."""
        return self._remote_name

    @property
    def description(self) -> str:
        """The remote tool's description (empty when it has none)."""
        return self._description

    @property
    def parameters(self) -> Mapping[str, JsonValue]:
        """The remote ``inputSchema``, frozen."""
        return self._parameters

    @property
    def timeout(self) -> float | None:
        """Always ``None``: deadlines belong to the caller or to the server."""
        return None

    def parse_arguments(self, arguments: JsonValue, /) -> _RemoteCall:
        """Check the arguments form a JSON object (``None`` means no arguments).

        Raises:
            ToolArgsError: The arguments are not a JSON object.
        """
        if arguments is None:
            return _RemoteCall({})
        if not isinstance(arguments, Mapping):
            raise ToolArgsError(
                f'invalid arguments for tool "{self._name}": expected a JSON object, '
                f"got {type(arguments).__name__}"
            )
        # Plain containers for the SDK, copied once (not through a JSON text and back): the
        # registry handed us a JSON snapshot already.
        try:
            plain: dict[str, Any] = plain_json(cast("JsonValue", arguments))
        except ValueError as error:
            raise ToolArgsError(
                f'invalid arguments for tool "{self._name}": {safe_str(error)}'
            ) from None
        return _RemoteCall(plain)

    async def run(self, args: _RemoteCall, exec: ToolRunContext, /) -> types.CallToolResult:
        """Call the remote tool, cancelling the MCP request if ``exec.signal`` aborts.

        Raises:
            BaseException: The abort reason, after the cancelled request has settled.
            RemoteToolError: The server failed the call.
        """
        signal = exec.signal
        signal.raise_if_aborted()  # an aborted call sends nothing
        session: ClientSession | None = None
        outcome: types.CallToolResult | CreateTaskResult | None = None
        failure: Exception | None = None
        call_scope = anyio.CancelScope()
        last: float | None = None

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            nonlocal last
            # The SDK runs each callback in a task of its own, and MCP progress increases:
            # one that overtook a later one is dropped rather than reported backwards.
            if last is None or progress > last:
                last = progress
                with contextlib.suppress(ValueError):  # a value the registry refuses
                    exec.progress(progress, total, message)

        callbacks = self._callbacks
        entered = None if callbacks is None else callbacks._enter(exec)
        tagged = None if entered is None or callbacks is None else callbacks._meta(entered[0])
        # The abort cancels the call's scope from a listener (run in this loop's thread,
        # whichever thread aborts), not from a task that waits for it: no task to start and
        # to cancel again on every call.
        forwarding = signal.add_listener(in_loop(call_scope.cancel))
        try:
            # Cancelling this scope is how the SDK is told to cancel the request: it
            # writes notifications/cancelled, then re-raises, and the scope absorbs it.
            with call_scope:
                try:
                    session = await self._link.session()
                    outcome = await self._call(session, args, exec, progress, tagged)
                except Exception as error:
                    failure = error
            if isinstance(outcome, CreateTaskResult):
                # A task (MCP tasks extension): followed to its end under the signal, which
                # cancels the task rather than this scope (see `_client_tasks`).
                created, outcome = outcome, None
                assert session is not None
                try:
                    outcome = await follow_task(
                        session,
                        created,
                        signal=signal,
                        answer=lambda request: self._answer(exec, request),
                    )
                except Exception as error:
                    failure = error
        finally:
            forwarding.remove()
            if entered is not None and callbacks is not None:
                callbacks._leave(*entered)
        if isinstance(failure, ConnectionError):  # the link has no session to offer
            raise RemoteToolError(self._remote_name, str(failure)) from failure
        if isinstance(failure, MCPError):
            if session is not None:
                self._link.failed(session, failure)
            raise RemoteToolError(
                self._remote_name,
                f"MCP error {failure.error.code}: {failure.error.message}"
                + missing_extension_hint(failure),
            ) from failure
        if failure is not None:
            raise failure
        assert not isinstance(outcome, CreateTaskResult)
        if outcome is None:  # the request (or task) was cancelled because the signal aborted
            signal.raise_if_aborted()
            raise AssertionError("unreachable: the call scope is only cancelled on abort")
        meta = _meta(outcome)
        contexts = meta.get(CONTEXTS_META_KEY)
        if isinstance(contexts, list):
            # JSON off the wire (the SDK types `_meta` as Any); defer_context re-validates it.
            for context in cast("list[JsonValue]", contexts):
                exec.defer_context(context)
        if outcome.is_error:
            code = meta.get(CODE_META_KEY)
            message = meta.get(MESSAGE_META_KEY)
            if not isinstance(message, str):
                message = "\n".join(_texts(outcome.content)) or "the tool reported an error"
            raise RemoteToolError(
                self._remote_name, message, remote_code=code if isinstance(code, str) else None
            )
        args.content = [_dump(block) for block in outcome.content]
        return outcome

    async def _call(
        self,
        session: ClientSession,
        args: _RemoteCall,
        exec: ToolRunContext,
        progress: ProgressFnT,
        meta: dict[str, Any] | None,
    ) -> types.CallToolResult | CreateTaskResult:
        """The ``tools/call``, and its retries while a 2026-07-28 server asks for input."""
        name = self._remote_name
        refusal = legacy_task_refusal(session, self._tool)
        if refusal is not None:
            raise RemoteToolError(name, refusal)
        request_meta = cast("types.RequestParamsMeta | None", meta)
        lean = lean_for(session)
        outcome: types.CallToolResult | types.InputRequiredResult | types.Result
        if lean is not None:  # a gateway's 2026-07-28 upstream (see `_lean`)
            outcome = await lean.call_tool(name, args.arguments, progress, meta)
        else:
            outcome = await session.call_tool(
                name,
                args.arguments,
                progress_callback=progress,
                meta=request_meta,
                allow_input_required=True,
                allow_claimed=True,
            )
        rounds = 0
        poll = _FIRST_POLL
        while isinstance(outcome, types.InputRequiredResult):
            rounds += 1
            if rounds > _MAX_INPUT_ROUNDS:
                raise RemoteToolError(
                    name, f"the server asked for input more than {_MAX_INPUT_ROUNDS} times"
                )
            responses: types.InputResponses | None = None
            if outcome.input_requests:
                poll = _FIRST_POLL
                # One at a time, in the server's order: they are questions for a person.
                responses = {
                    key: await self._answer(exec, request)
                    for key, request in outcome.input_requests.items()
                }
            else:  # the server is not ready yet: ask again, a little later each time
                await anyio.sleep(poll)
                poll = min(poll * 2, _LAST_POLL)
            outcome = await session.call_tool(
                name,
                args.arguments,
                progress_callback=progress,
                meta=request_meta,
                input_responses=responses,
                request_state=outcome.request_state,
                allow_input_required=True,
                allow_claimed=True,
            )
        if isinstance(outcome, CreateTaskResult):
            return outcome  # a task: `run` follows it outside the call's cancel scope
        if not isinstance(outcome, types.CallToolResult):
            raise RemoteToolError(name, f"the server answered an unknown result ({outcome!r})")
        return outcome

    async def _answer(
        self, exec: ToolRunContext, request: types.InputRequest
    ) -> types.InputResponse:
        if isinstance(request, types.ElicitRequest):
            return await elicit_for(exec, request.params)
        if isinstance(request, types.CreateMessageRequest):
            return await sample_for(exec, request.params)
        return await roots_for(exec)

    def serialize_output(self, output: types.CallToolResult, /) -> JsonValue:
        """The value: ``structuredContent``, else a toolseam server's ``_meta`` value, else text.

        A toolseam server sends a value that is not a JSON object under
        ``_meta["toolseam/value"]``; from any other server such a value is the text of the
        remote text blocks, joined by newlines.
        """
        if output.structured_content is not None:
            structured: JsonValue = output.structured_content
            return structured
        meta = _meta(output)
        if VALUE_META_KEY in meta:
            value: JsonValue = meta[VALUE_META_KEY]  # JSON off the wire; the registry checks it
            return value
        return "\n".join(_texts(output.content))

    def render(self, args: _RemoteCall, value: JsonValue, /) -> Sequence[ContentBlock]:
        """The remote content blocks, as the server sent them."""
        if args.content is None:  # pragma: no cover - run() always sets it on success
            return render_value(value)
        return args.content

    def is_concurrency_safe(self, args: _RemoteCall, /) -> bool:
        """Whether the server marked the tool read-only (``readOnlyHint``)."""
        return self._read_only

    def finalize_content(
        self, exec: ToolExecution, result: ToolResult, /
    ) -> Sequence[ContentBlock] | None:
        """Keep the content as it is."""
        return None

    def __repr__(self) -> str:
        return f"<McpToolDefinition {self._name!r} -> {self._remote_name!r}>"


async def list_tools(session: ClientSession) -> list[types.Tool]:
    """Every tool the server lists, following pagination."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools


async def register_mcp_tools(
    registry: ToolRegistry,
    session: ClientSession,
    *,
    name_prefix: str = "",
    callbacks: SessionCallbacks | None = None,
) -> list[Registration]:
    """Register every tool of a connected MCP server in a registry.

    Lists the server's tools (following pagination) and registers one `McpToolDefinition`
    per tool, named ``name_prefix + remote name``. Either every tool is registered or, if
    one registration fails, none stays registered.

    With ``callbacks`` (the `SessionCallbacks` the session was created with), the server's
    log messages, elicitation and sampling requests reach the calls of these tools; on a
    handshake-era connection to a server with logging, it first sends ``logging/setLevel``
    with ``callbacks.log_level``.

    Args:
        registry: Where to register the tools.
        session: An initialized ``mcp.ClientSession``; keep it open while the tools are used.
        name_prefix: Prepended to every local tool name, to keep servers apart.
        callbacks: The `SessionCallbacks` given to ``session`` when it was created.

    Returns:
        One `Registration` per tool, in the server's order; ``remove()`` unregisters it.

    Raises:
        ValueError: A tool of the same local name is already registered.
        mcp.MCPError: The server failed ``tools/list``.
    """
    if callbacks is not None:
        await callbacks._attach(session)
    tools = await list_tools(session)
    registrations: list[Registration] = []
    try:
        for tool in tools:
            definition = McpToolDefinition(
                session, tool, name=name_prefix + tool.name, callbacks=callbacks
            )
            registrations.append(registry.register(definition))
    except BaseException:
        for registration in registrations:
            registration.remove()
        raise
    return registrations
