"""Serve a `ToolRegistry` as an MCP server: `create_server` and `serve_stdio`.

Every ``tools/call`` request runs ``registry.execute`` with a fresh `AbortController` and
the MCP request id as ``call_id``.

How a client's cancellation reaches the tool body. The SDK (``mcp`` 2.x,
``mcp.shared.jsonrpc_dispatcher``) applies an inbound ``notifications/cancelled`` by
cancelling the anyio cancel scope of the request's handler task ("interrupt" mode, the only
one its servers use); the streamable HTTP transport does the same when a 2026-era client
closes the request's stream, and every transport does it to every running handler when the
connection closes. Left alone, that would deliver *host* cancellation into the registry:
the body would be torn down at its next checkpoint rather than told to stop. So the handler
runs the registry call in a shielded scope and keeps one unshielded watcher task beside it:
when the SDK cancels the handler's scope, the watcher is what gets cancelled, and it aborts
the call's controller. The body observes ``exec.signal`` aborting, winds down
cooperatively, the registry publishes ``ABORTED`` (or ``ABORTED_BEFORE_DISPATCH``), and only
then does the handler let the SDK's cancellation propagate. A body is never abandoned: the
handler returns only after it has settled.

A request the SDK cancelled before the handler ran still publishes one result: the handler
checks, before its first checkpoint, whether its scope is already cancelled and then enters
the registry with an aborted signal (``ABORTED_BEFORE_DISPATCH``, no stage runs); and
`_publish_unreached`, the server's outermost middleware, does the same for a request
cancelled while a later middleware awaited, before the handler was reached.
"""

from __future__ import annotations

import contextvars
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeAlias, cast, final

import anyio
import anyio.lowlevel
from mcp import types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.caching import CacheHint
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .. import __version__
from .._definitions import ToolSchema
from .._errors import AbortError, type_name
from .._principal import Principal
from .._registry import ToolRegistry
from .._results import ToolResult
from .._signals import AbortController, AbortSignal
from .._views import ToolExecutionInput, ToolHost
from ._auth import principal_of
from ._host import RequestHost, connection_state, missing_capability_error, set_log_level
from ._overtaken import EarlyCancels, request_key
from ._rounds import INPUT_DEADLINE, RoundCall, Rounds, check_deadline
from ._stdio import stdio_streams
from ._tasks import MAX_TASKS, TASK_TTL, Tasks, TaskSupport, check_tasks
from ._wire import call_tool_result, plain_json

if TYPE_CHECKING:
    from ..durable import DurableTools
    from ._durable import DurableTasks

__all__ = [
    "DISCONNECTED_SCOPE_KEY",
    "ClientGone",
    "RunningCalls",
    "create_server",
    "serve_registry",
    "serve_stdio",
]

logger = logging.getLogger("toolseam")

DISCONNECTED_SCOPE_KEY: Final = "toolseam.mcp.disconnected"
"""ASGI scope key of a `ClientGone`, set when the HTTP client of the request goes away.

The HTTP server (``toolseam.mcp._http``) puts one in the scope of every request; the
handler reads it from the request the SDK attaches to the call's context.
"""


@final
class ClientGone:
    """Whether the HTTP client of one request went away; runs its callbacks when it does.

    A callback, not an event to wait on: the call's handler needs no task to watch it.
    Used from the event loop's thread only.
    """

    __slots__ = ("_callbacks", "gone")

    def __init__(self) -> None:
        self.gone = False
        self._callbacks: list[Callable[[], object]] = []

    def set(self) -> None:
        """Mark the client gone and run every callback once (idempotent)."""
        if self.gone:
            return
        self.gone = True
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_gone(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` when the client goes away (at once if it has)."""
        if self.gone:
            callback()
        else:
            self._callbacks.append(callback)


# Abort reasons; each abort gets an AbortError of its own (a body may raise its reason).
_CANCELLED: Final = "the MCP request was cancelled"
_DISCONNECTED: Final = "the MCP client closed the request's stream"
_EARLY_KEY: Final = "toolseam.mcp.early_cancels"
# Given, or anyio builds the name from the function's module and qualname on every call.
_WATCHER_NAME: Final = "toolseam.mcp call watcher"


# tools/list on 2026-07-28 carries caching hints (SEP-2549): stale at once, since a tool
# registered later is listed at the next request, and private, since who may call decides.
_TOOLS_CACHE_HINT: Final = CacheHint(ttl_ms=0, scope="private")


def _tool(schema: ToolSchema) -> types.Tool:
    return types.Tool(
        name=schema.name,
        description=schema.description,
        input_schema=plain_json(dict(schema.parameters)),
    )


@final
class RunningCalls:
    """The ``tools/call`` requests one server is running, so that it can stop them all.

    `close` aborts every running call and every call that starts afterwards (it enters
    the registry already aborted); `wait_idle` returns once none is running. Used from the
    event loop's thread only.
    """

    __slots__ = ("_closed", "_controllers", "_idle")

    def __init__(self) -> None:
        self._controllers: set[AbortController] = set()
        self._closed: str | None = None
        self._idle: anyio.Event | None = None

    def enter(self, controller: AbortController) -> None:
        """Track a call's controller; abort it at once if the server is closing."""
        if self._closed is not None:
            _abort(controller, self._closed)
        self._controllers.add(controller)

    def leave(self, controller: AbortController) -> None:
        """Stop tracking a call that has published its result."""
        self._controllers.discard(controller)
        if not self._controllers and self._idle is not None:
            self._idle.set()

    def close(self, reason: str) -> None:
        """Abort every running call, and every later one, with ``AbortError(reason)``.

        Idempotent: the first reason stays.
        """
        if self._closed is None:
            self._closed = reason
        for controller in list(self._controllers):
            _abort(controller, self._closed)

    async def wait_idle(self) -> None:
        """Return once no call is running (each has published its one result)."""
        await anyio.lowlevel.checkpoint()
        while self._controllers:
            self._idle = anyio.Event()
            await self._idle.wait()


def _abort(controller: AbortController, reason: str) -> None:
    """Abort a call on the client's or the server's behalf; never raises.

    An abort listener's ``KeyboardInterrupt`` or ``SystemExit`` leaves ``abort()`` once every
    listener has run (contract §2). Here it must not cut the path short — the other calls of a
    shutdown still have to be aborted, a cancelled request still has to settle — so it is
    logged and contained, as on the registry's own host-cancellation path.
    """
    try:
        controller.abort(AbortError(reason))
    except (KeyboardInterrupt, SystemExit) as interrupt:
        logger.error(
            "an abort listener raised %s while the MCP server aborted a call; contained",
            type_name(type(interrupt)),
            exc_info=interrupt,
        )


def _disconnected(ctx: ServerRequestContext[Any]) -> ClientGone | None:
    scope: object = getattr(ctx.request, "scope", None)  # a starlette Request on HTTP
    if not isinstance(scope, Mapping):
        return None
    gone: object = cast("Mapping[str, object]", scope).get(DISCONNECTED_SCOPE_KEY)
    return gone if isinstance(gone, ClientGone) else None


def _cancelled_already() -> bool:
    """Whether the current task's cancel scope is cancelled (checked without a checkpoint)."""
    return anyio.current_effective_deadline() == -math.inf


async def _execute(
    registry: ToolRegistry,
    calls: RunningCalls,
    call: ToolExecutionInput,
    controller: AbortController,
    disconnected: ClientGone | None,
    host: RequestHost,
) -> ToolResult:
    """Run one call to quiescence, turning the SDK's cancellation into an abort.

    See the module docstring: the registry call is shielded from the handler's cancel scope;
    the watcher task is not, so a cancelled request (or a closing connection) cancels the
    watcher, which aborts the controller. A client that disconnects aborts it too (a
    callback of its `ClientGone`). Cancellation is re-raised once the call settled. The
    watcher also sends the call's progress and log notifications; once the call has
    settled, its requests still pending are withdrawn and awaited (shielded) and its
    notifications sent, before the answer (see ``_host``).

    One task per call, and on the common path nothing is cancelled: the watcher returns
    once the last notification is sent (cancelling a scope on asyncio formats the task's
    repr, a cost on every call).
    """
    settled = False
    result: ToolResult | None = None

    def client_gone() -> None:
        if not settled:
            _abort(controller, _DISCONNECTED)

    async def abort_when_cancelled() -> None:
        # The watcher is also the task that sends the call's notifications: it returns
        # once `host.flush()` has sent the last one.
        try:
            await host.send_notifications()
        except anyio.get_cancelled_exc_class():
            if not settled:
                _abort(controller, _CANCELLED)
            raise

    if disconnected is not None:
        disconnected.on_gone(client_gone)
    calls.enter(controller)
    try:
        async with anyio.create_task_group() as watcher:
            host.starting()
            watcher.start_soon(abort_when_cancelled, name=_WATCHER_NAME)
            # Not a race: the shield keeps the SDK's cancellation away from the body, which
            # is awaited to completion; the abort reaches it through its signal instead.
            with anyio.CancelScope(shield=True):
                result = await registry.execute(call)
                await host.settle()
            settled = True
            await host.flush()
        await anyio.lowlevel.checkpoint_if_cancelled()
    finally:
        calls.leave(controller)
    # If the SDK cancelled this request, leaving the task group above re-raised that
    # cancellation: the SDK then answers nothing (a cancelled request) or CONNECTION_CLOSED.
    assert result is not None  # nothing cancels the shielded scope itself
    return result


@final
class _Entry:
    """Whether the ``tools/call`` handler took over the request (see `_publish_unreached`)."""

    __slots__ = ("reached",)

    def __init__(self) -> None:
        self.reached = False


_ENTRY: contextvars.ContextVar[_Entry | None] = contextvars.ContextVar(
    "toolseam_mcp_entry", default=None
)


def _call_input(
    request_id: object,
    name: str,
    arguments: object,
    signal: AbortSignal,
    principal: Principal | None,
    host: ToolHost | None = None,
) -> ToolExecutionInput:
    return ToolExecutionInput(
        call_id=str(request_id),
        name=name,
        arguments={} if arguments is None else arguments,
        signal=signal,
        host=host,
        principal=principal,
    )


def _principal(ctx: ServerRequestContext[Any, Any]) -> Principal | None:
    """Who sent this request: the principal of the bearer token the HTTP server verified.

    ``None`` without authentication (stdio, or HTTP without `HttpAuth`): the caller is
    then trusted as an in-process one (contract §14).
    """
    scope: object = getattr(ctx.request, "scope", None)  # a starlette Request on HTTP
    if not isinstance(scope, Mapping):
        return None
    user: object = cast("Mapping[str, object]", scope).get("user")
    if not isinstance(user, AuthenticatedUser):
        return None
    return principal_of(user.access_token)


def _early_cancels(ctx: ServerRequestContext[Any, Any], *, create: bool) -> EarlyCancels | None:
    """The session's `EarlyCancels`, kept in the SDK's per-connection state."""
    state = connection_state(ctx)
    if state is None:
        return None
    early: object = state.get(_EARLY_KEY)
    if isinstance(early, EarlyCancels):
        return early
    if not create:
        return None
    state[_EARLY_KEY] = fresh = EarlyCancels()
    return fresh


def _mark_cancelled(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Tell the SDK the peer cancelled this request, as its dispatcher would have done.

    The dispatcher never answers a request whose dispatch context has ``cancel_requested``
    set (``mcp`` 2.x, ``JSONRPCDispatcher._handle_request``); the context is reachable only
    through the session's private attribute. Returns whether it could be set.
    """
    outbound: object = getattr(ctx.session, "_request_outbound", None)
    requested: object = getattr(outbound, "cancel_requested", None)
    if isinstance(requested, anyio.Event):
        requested.set()
        return True
    return False


def _publish_unreached(registry: ToolRegistry) -> ServerMiddleware[Any]:
    """The outermost middleware: one result for a call cancelled before its handler ran.

    The SDK runs a request's middleware chain and handler in the request's task, with no
    checkpoint of its own in front of the first middleware (``mcp`` 2.x: the dispatcher's
    ``_handle_request`` and ``ServerRunner._on_request``). A middleware behind this one
    may await, and a cancellation delivered there never reaches the handler; this one
    then enters the registry with an aborted signal, so the call still publishes
    ``ABORTED_BEFORE_DISPATCH`` (no stage runs, exactly as for a pre-aborted call).

    It also keeps the cancellations that overtake their call (``_overtaken``): a
    ``notifications/cancelled`` is remembered for the session, and a ``tools/call`` whose
    id was cancelled in the window enters the registry aborted and is left unanswered.
    The dispatcher starts each message's task in the order received, and neither path
    awaits before it reaches this middleware, so a cancellation received before its call is
    remembered before the call looks.
    """

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        method = ctx.method
        if method == "notifications/cancelled":
            key = request_key((ctx.params or {}).get("requestId"))
            early = _early_cancels(ctx, create=True) if key is not None else None
            if early is not None and key is not None:
                early.remember(key, anyio.current_time())
            return await call_next(ctx)
        if method != "tools/call":
            return await call_next(ctx)
        params = ctx.params or {}
        name = params.get("name")
        key = request_key(ctx.request_id)
        early = _early_cancels(ctx, create=False) if key is not None else None
        if (
            early is not None
            and key is not None
            and isinstance(name, str)
            and early.take(key, anyio.current_time())
        ):
            # contract §5 (pre-aborted entry): the cancellation overtook this call, so its
            # body never runs; the SDK is told, so the call is never answered.
            call = _call_input(
                ctx.request_id,
                name,
                params.get("arguments"),
                AbortSignal.aborted_signal(AbortError(_CANCELLED)),
                _principal(ctx),
            )
            _mark_cancelled(ctx)
            with anyio.CancelScope(shield=True):
                return call_tool_result(await registry.execute(call))
        entry = _Entry()
        token = _ENTRY.set(entry)
        try:
            return await call_next(ctx)
        except anyio.get_cancelled_exc_class():
            # A 2026 retry (it carries a requestState) is no new call: nothing to publish.
            if not entry.reached and isinstance(name, str) and "requestState" not in params:
                call = _call_input(
                    ctx.request_id,
                    name,
                    params.get("arguments"),
                    AbortSignal.aborted_signal(AbortError(_CANCELLED)),
                    _principal(ctx),
                )
                with anyio.CancelScope(shield=True):
                    await registry.execute(call)
            raise
        finally:
            _ENTRY.reset(token)

    return middleware


_CallTool: TypeAlias = Callable[
    [ServerRequestContext[Any], types.CallToolRequestParams],
    Awaitable[types.CallToolResult | types.InputRequiredResult],
]


def serve_registry(
    registry: ToolRegistry,
    calls: RunningCalls,
    *,
    name: str,
    version: str,
    instructions: str | None,
    input_deadline: float = INPUT_DEADLINE,
    tasks: Mapping[str, TaskSupport] | None = None,
    max_tasks: int = MAX_TASKS,
    task_ttl: float = TASK_TTL,
    durable: DurableTools | None = None,
) -> Server[Any]:
    """`create_server`, with the caller's `RunningCalls` (to stop every call at shutdown)."""
    rounds = Rounds(registry, calls, check_deadline(input_deadline), _abort)
    check_tasks(tasks or {}, max_tasks, task_ttl)
    backing = None
    if durable is not None:
        backing = _durable_tasks(registry, durable, name, tasks or {}, calls)
    background = Tasks(
        rounds,
        tasks or {},
        max_tasks,
        float(task_ttl),
        backing,
        _principal if backing is not None else None,
    )

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        # contract §14: a principal sees only the tools whose scopes it holds.
        schemas = registry.schemas(principal=_principal(ctx))
        return types.ListToolsResult(tools=[_tool(schema) for schema in schemas])

    def round_host(ctx: ServerRequestContext[Any], call: RoundCall) -> RequestHost:
        return RequestHost(ctx, call)

    def round_input(
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        signal: AbortSignal,
        host: ToolHost,
    ) -> ToolExecutionInput:
        return _call_input(
            ctx.request_id, params.name, params.arguments, signal, _principal(ctx), host
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        entry = _ENTRY.get()
        if entry is not None:
            entry.reached = True
        # The tasks extension (see `_tasks`): a CreateTaskResult, the call run in background.
        created = await background.call(ctx, params, round_host, round_input)
        if created is not None:
            return created
        if ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            # 2026-07-28: questions travel as InputRequiredResult rounds (see `_rounds`).
            answer = await rounds.handle(
                ctx, params, round_host, round_input, _disconnected(ctx), _cancelled_already()
            )
            if answer is not None:
                return answer
        controller = AbortController()
        if _cancelled_already():
            # contract §5 (pre-aborted entry): the SDK cancelled the request before this
            # handler ran, so the body must not start; the registry publishes
            # ABORTED_BEFORE_DISPATCH and the cancellation goes on below.
            controller.abort(AbortError(_CANCELLED))
        host = RequestHost(ctx)
        call = _call_input(
            ctx.request_id,
            params.name,
            params.arguments,
            controller.signal,
            _principal(ctx),
            host.host,
        )
        result = await _execute(registry, calls, call, controller, _disconnected(ctx), host)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            refusal = missing_capability_error(host, result)
            if refusal is not None:
                raise refusal
        return call_tool_result(result)

    def input_schema(name: str) -> Mapping[str, Any] | None:
        # For the SDK's check of a 2026-07-28 call's Mcp-Param-* headers (SEP-2243): the
        # tool's schema straight from the registry; without it the SDK's HTTP transport runs
        # the whole tools/list for every call.
        definition = registry.get(name)
        return None if definition is None else definition.parameters

    server: Server[Any] = Server(
        name,
        version=version or __version__,
        instructions=instructions,
        cache_hints={"tools/list": _TOOLS_CACHE_HINT},
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        # A CreateTaskResult is a mapping the SDK's runner sends as it is (an extension's
        # resultType, "task"), which its handler type does not spell.
        on_call_tool=cast("_CallTool", call_tool),
        lifespan=rounds.lifespan,
    )
    # Registered by hand (not `on_set_logging_level`, which the SDK marks deprecated); it
    # also makes the server advertise the `logging` capability.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_log_level)
    background.install(server)
    server.middleware.insert(0, _publish_unreached(registry))
    return server


def _durable_tasks(
    registry: ToolRegistry,
    durable: object,
    name: str,
    tasks: Mapping[str, TaskSupport],
    calls: RunningCalls,
) -> DurableTasks:
    """The DBOS backing of a server's tasks (see `_durable`), its settings checked."""
    from ..durable import DurableTools  # imports DBOS: only for a durable server
    from ._durable import DurableTasks, check_launch

    if type(durable) is not DurableTools:
        raise TypeError(f"`durable` must be a toolseam.durable.DurableTools, got {durable!r}")
    if durable.registry is not registry:
        raise ValueError("`durable` must be the DurableTools of the registry the server serves")
    if not tasks:
        raise ValueError("`durable` backs tasks: name the tools whose calls are tasks (`tasks`)")
    late = [tool for tool, support in tasks.items() if support == "after-input"]
    if late:
        raise ValueError(
            f"a durable task cannot start as a call suspended at a question: {late[0]!r} is "
            "'after-input'"
        )
    check_launch()
    return DurableTasks(durable, name, calls)


def create_server(
    registry: ToolRegistry,
    *,
    name: str = "toolseam",
    version: str = "",
    instructions: str | None = None,
    input_deadline: float = INPUT_DEADLINE,
    tasks: Mapping[str, TaskSupport] | None = None,
    max_tasks: int = MAX_TASKS,
    task_ttl: float = TASK_TTL,
    durable: DurableTools | None = None,
) -> Server[Any]:
    """Build a low-level MCP ``Server`` that serves a registry's tools.

    ``tools/list`` lists ``registry.schemas()`` (name, description, and the parameters as
    ``inputSchema``), read at every request, so tools registered later are listed too.
    ``tools/call`` runs ``registry.execute`` with a fresh `AbortController` and the MCP
    request id as ``call_id``; the answer is `call_tool_result` of the one result the
    registry published (an unknown tool is an ``UNKNOWN_TOOL`` result, not a protocol
    error). A ``notifications/cancelled`` for the request (or, over streamable HTTP, the
    client closing the request's stream or going away) aborts that controller; a cancelled
    request is then left unanswered, as MCP prescribes, once the body has settled. A
    request cancelled before its handler ran publishes ``ABORTED_BEFORE_DISPATCH``.

    It speaks MCP 2025-11-25 (the ``initialize`` handshake) and 2026-07-28 (stateless
    requests), whichever the client asks for. On 2026-07-28, ``tools/list`` carries caching
    hints (``ttlMs`` 0, ``cacheScope`` private), and a call that ends
    ``CAPABILITY_UNAVAILABLE`` because its body asked for a capability the client did not
    declare is answered with ``MissingRequiredClientCapabilityError`` (-32021).

    A body's ``exec.elicit``/``exec.sample``/``exec.roots`` reach the client of the call: on
    MCP 2025-11-25 as requests during the call, on 2026-07-28 as the questions of an
    ``InputRequiredResult``, the body suspended at its question until the client's retry
    answers them (never run twice; the ``requestState`` is signed with a key drawn for this
    server). A call whose retry does not come within ``input_deadline`` seconds is aborted.

    Use `serve_stdio` or `serve_http` to run it; for another transport, run it yourself
    (``server.run(read, write, server.create_initialization_options())``). Its first
    middleware is toolseam's own: add yours after it (``server.middleware.append``).

    Args:
        registry: The registry to serve.
        name: The server name reported at initialization.
        version: The server version reported to clients (empty: toolseam's version).
        instructions: Optional instructions for the client's model.
        input_deadline: Seconds a call suspended at a question waits for its 2026-07-28
            client's retry before it is aborted (default 600).
        tasks: The tools whose calls run as tasks of the MCP tasks extension
            (``io.modelcontextprotocol/tasks``, 2026-07-28), by name: ``"optional"`` (a
            task for a client that declares the extension, an ordinary call for one that
            does not) or ``"required"`` (such a client is refused with -32021). The call
            runs in the background under the registry; ``tasks/get`` reports it,
            ``tasks/update`` answers its questions, ``tasks/cancel`` aborts its signal, and
            once the body has been awaited the task is ``cancelled`` with the ``ABORTED``
            or ``ABORTED_BEFORE_DISPATCH`` result. None: the extension is not offered.
        max_tasks: How many unfinished tasks the server holds at once (default 256); a
            task-creating call beyond is refused (-32600) and runs nothing.
        task_ttl: Seconds a finished task stays readable (its ``ttlMs``; default 3600).
        durable: The `toolseam.durable.DurableTools` of ``registry``, to make each task's
            call a DBOS workflow of its own (``toolseam-task-<task id>``, asyncio only): the
            task outlives a crash of the server (recovered by ``DBOS.launch()`` in the
            restarted process, a dispatched call that is not idempotent ending
            ``OUTCOME_UNKNOWN``), ``tasks/get`` reads it from the system database, and
            ``tasks/cancel`` cancels the workflow. Create the server before
            ``DBOS.launch()``. A durable task's body cannot ask the client (its questions
            end ``CAPABILITY_UNAVAILABLE``), so no tool may be ``"after-input"``. See
            docs/mcp.md.

    Returns:
        The server; it holds no connection until run.

    Raises:
        ValueError: ``input_deadline`` or ``task_ttl`` is not a positive number of seconds,
            ``max_tasks`` not a positive int, or ``tasks`` maps a name to something else;
            ``durable`` without ``tasks``, of another registry, or with an
            ``"after-input"`` tool.
        TypeError: ``durable`` is not a `DurableTools`.
        RuntimeError: ``durable`` given after ``DBOS.launch()``.
    """
    return serve_registry(
        registry,
        RunningCalls(),
        name=name,
        version=version,
        instructions=instructions,
        input_deadline=input_deadline,
        tasks=tasks,
        max_tasks=max_tasks,
        task_ttl=task_ttl,
        durable=durable,
    )


async def serve_stdio(
    registry: ToolRegistry,
    *,
    name: str = "toolseam",
    version: str = "",
    input_deadline: float = INPUT_DEADLINE,
    tasks: Mapping[str, TaskSupport] | None = None,
    max_tasks: int = MAX_TASKS,
    task_ttl: float = TASK_TTL,
) -> None:
    """Serve a registry over MCP on this process's stdin and stdout until stdin closes.

    While it serves, the SDK points file descriptors 0 and 1 away from the wire (at the
    null device and at stderr), so stray prints from tools cannot corrupt the protocol.
    When the connection closes, calls still running are aborted through their signals and
    awaited before this returns.

    Args:
        registry: The registry to serve (see `create_server`).
        name: The server name reported at initialization.
        version: The server version reported to clients (empty: toolseam's version).
        input_deadline: Seconds a call suspended at a question waits for its 2026-07-28
            client's retry before it is aborted (see `create_server`).
        tasks: The tools whose calls run as tasks (see `create_server`).
        max_tasks: How many unfinished tasks at once (see `create_server`).
        task_ttl: Seconds a finished task stays readable (see `create_server`).
    """
    server = create_server(
        registry,
        name=name,
        version=version,
        input_deadline=input_deadline,
        tasks=tasks,
        max_tasks=max_tasks,
        task_ttl=task_ttl,
    )
    async with stdio_streams() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
