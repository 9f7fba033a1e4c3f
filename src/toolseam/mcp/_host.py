"""The `ToolHost` one ``tools/call`` request offers its tool body: `RequestHost`.

Each capability of a body maps onto the request's MCP connection (contract §13):

- ``exec.progress`` → ``notifications/progress`` with the request's own ``progressToken``
  (``ServerSession.report_progress``), only when the request carried one. MCP requires the
  values of one request to increase: a value not above the last one sent is dropped.
  Progress events still waiting to be sent coalesce into the latest.
- ``exec.log`` → ``notifications/message`` related to the request (over streamable HTTP it
  rides the request's own stream), at the levels the client asked for: ``logging/setLevel``
  on a handshake-era connection (`set_log_level`; everything until it is sent, as the SDK
  does), the request's ``_meta`` opt-in on a 2026-07-28 one.
- ``exec.elicit`` / ``exec.sample`` / ``exec.roots`` → ``elicitation/create`` /
  ``sampling/createMessage`` / ``roots/list``, when the client declared the capability: on a
  handshake-era connection, requests to the client related to the request; on a 2026-07-28
  one, questions of the call's next ``InputRequiredResult``, the body suspended until the
  client's retry answers them (``_rounds``). Otherwise the body gets
  ``CAPABILITY_UNAVAILABLE`` and the reason.

The registry calls ``on_progress``/``on_log`` synchronously in the event loop's thread, so
they only queue: one task writes the queue in order. On a handshake-era connection that is
the handler's watcher task (`RequestHost.send_notifications`, which returns once `flush` has
sent the last one); a 2026-07-28 call's request sends them itself while it waits for the
call (`RequestHost.send_queued`, woken by the call, see ``_rounds``). A request
is withdrawn (the SDK writes ``notifications/cancelled`` for it) by cancelling the scope its
``send_request`` runs in, when the call's signal aborts.

Before the handler answers, `settle` withdraws and awaits every request of the call still
pending (one a relay task asked for, after the body returned), and `flush` sends what is
queued: over streamable HTTP, messages related to a request whose stream has closed are
dropped by the SDK, so a late withdrawal would never reach the client.

Every ``_meta["toolseam/call"]`` tag the client sent is copied onto the log messages and
requests, so a toolseam client can attribute them to its call (``_relay``).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar, cast, final

import anyio
from mcp import MCPError, types
from mcp.server.connection import allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.shared.message import ServerMessageMetadata
from mcp_types import MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from .._capabilities import (
    CAPABILITY_UNAVAILABLE,
    LOG_LEVELS,
    ElicitationRequest,
    Elicited,
    LogEvent,
    ProgressEvent,
    Root,
    RootsRequest,
    Sampled,
    SamplingRequest,
)
from .._errors import ToolError
from .._json import FrozenDict
from .._results import ToolFailure, ToolResult
from .._signals import AbortSignal, in_loop
from .._views import ToolExecution, ToolHost
from ._wire import CALL_META_KEY, plain_json

if TYPE_CHECKING:
    from ._rounds import Kind, RoundCall

__all__ = [
    "OUTBOX_LIMIT",
    "RequestHost",
    "connection_state",
    "missing_capability_error",
    "set_log_level",
]

logger = logging.getLogger("toolseam.mcp")

OUTBOX_LIMIT: Final = 1024
"""How many progress and log notifications of one call may wait for a slow client.

Beyond it, new log messages are dropped (and counted, in a warning once the queue has
drained); consecutive progress notifications are coalesced into the latest one anyway.
"""

_LEVEL_KEY: Final = "toolseam.mcp.log_level"

ResultT = TypeVar("ResultT", bound=BaseModel)
_Note: TypeAlias = ProgressEvent | LogEvent


def connection_state(ctx: ServerRequestContext[Any]) -> dict[str, Any] | None:
    """The SDK's per-connection scratch state of the request's connection, if reachable."""
    # The per-connection scratch state of the SDK (`Connection.state`) is reachable from a
    # handler only through the session's private attribute (mcp 2.0 to 2.3); the SDK leaves
    # `logging/setLevel` filtering to the application (`mcp.server.connection`).
    connection: object = getattr(ctx.session, "_connection", None)
    state: object = getattr(connection, "state", None)
    return state if isinstance(state, dict) else None  # pyright: ignore[reportUnknownVariableType]


async def set_log_level(
    ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
) -> types.EmptyResult:
    """The ``logging/setLevel`` handler: keep the client's level for its connection."""
    state = connection_state(ctx)
    if state is not None:
        state[_LEVEL_KEY] = params.level
    return types.EmptyResult()


@final
class _Outbox:
    """A call's progress and log notifications, sent in order by one task.

    `put` never blocks. Consecutive progress events coalesce (the newest wins); beyond
    `OUTBOX_LIMIT` queued events, a new log message is dropped and counted. Used from the
    event loop's thread only.
    """

    __slots__ = (
        "_busy",
        "_closed",
        "_dropped",
        "_idle",
        "_items",
        "_on_put",
        "_pausing",
        "_running",
        "_wake",
    )

    def __init__(self, on_put: Callable[[], None] | None = None) -> None:
        self._on_put = on_put
        self._items: deque[_Note] = deque()
        self._wake: anyio.Event | None = None
        self._idle: anyio.Event | None = None
        self._busy = False
        self._running = False
        self._closed = False
        self._pausing = False
        self._dropped = 0

    def put(self, note: _Note) -> None:
        if self._closed:
            return
        items = self._items
        if type(note) is ProgressEvent and items and type(items[-1]) is ProgressEvent:
            items[-1] = note
        elif len(items) >= OUTBOX_LIMIT:
            self._dropped += 1
            return
        else:
            items.append(note)
        self._wake_sender()
        if self._on_put is not None:
            self._on_put()

    def _wake_sender(self) -> None:
        wake, self._wake = self._wake, None
        if wake is not None:
            wake.set()

    def detach(self) -> None:
        """Stop waking the call's request on `put` (the call has ended)."""
        self._on_put = None

    def starting(self) -> None:
        """Say the sender (`run`) is about to start: from now on, `flush` waits for it."""
        self._running = True
        self._pausing = False

    async def run(
        self,
        send: Callable[[_Note], Awaitable[None]],
        dropped: Callable[[int], Awaitable[None]],
    ) -> None:
        """Send whatever is queued, in order, until `close` (or cancelled)."""
        items = self._items
        try:
            while True:
                while items or self._dropped:
                    self._busy = True
                    try:
                        if items:
                            await send(items.popleft())
                        else:
                            count, self._dropped = self._dropped, 0
                            await dropped(count)
                    except Exception as error:
                        # A notification has no answer to fail: the connection is going
                        # away (and the SDK cancels the handler), or one message did not fit.
                        logger.debug("MCP notification not sent: %r", error)
                    finally:
                        self._busy = False
                idle, self._idle = self._idle, None
                if idle is not None:
                    idle.set()
                if self._closed or self._pausing:
                    break
                self._wake = wake = anyio.Event()
                await wake.wait()
        finally:
            self._running = False
            idle, self._idle = self._idle, None
            if idle is not None:
                idle.set()

    async def drain(
        self,
        send: Callable[[_Note], Awaitable[None]],
        dropped: Callable[[int], Awaitable[None]],
    ) -> None:
        """Send whatever is queued, in order, in the calling task; return once none is left.

        For a caller that sends the queue itself (no `run` task), between its other waits.
        """
        items = self._items
        while items or self._dropped:
            try:
                if items:
                    await send(items.popleft())
                else:
                    count, self._dropped = self._dropped, 0
                    await dropped(count)
            except Exception as error:
                logger.debug("MCP notification not sent: %r", error)

    async def flush(self) -> None:
        """Return once everything queued so far is sent (at once if nothing sends it)."""
        while self._running and (self._items or self._busy or self._dropped):
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()

    def close(self) -> None:
        """Drop whatever comes later; the sender returns once it has sent what is queued."""
        self._closed = True
        self._wake_sender()

    def pause(self) -> None:
        """Keep what comes later queued; the sender returns once it has sent what is queued.

        A suspended call's notifications wait for the request that resumes it.
        """
        self._pausing = True
        self._wake_sender()


@final
class _Asking:
    """One elicitation or sampling request in flight: withdrawn by cancelling ``scope``."""

    __slots__ = ("done", "scope")

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()


class _Withdrawn(Exception):
    """A sampling request the server withdrew because its call had already settled."""


@final
class RequestHost:
    """The capabilities one ``tools/call`` request offers its body: see the module docstring.

    The handler builds one per request, passes `host` in the call's input, runs `start`
    beside the call, and awaits `settle` then `flush` before it answers.
    """

    __slots__ = (
        "_asking",
        "_ctx",
        "_echo",
        "_last_progress",
        "_levels",
        "_modern",
        "_outbox",
        "_rounds",
        "_settled",
        "missing_capability",
    )

    def __init__(self, ctx: ServerRequestContext[Any], rounds: RoundCall | None = None) -> None:
        self._rounds = rounds
        self._modern = rounds is not None  # its questions travel as rounds (kept on `detach`)
        # A 2026 call's request sends the notifications itself, woken by the call.
        self._outbox = _Outbox(None if rounds is None else rounds.wake)
        self._last_progress: float | None = None
        self._asking: set[_Asking] = set()
        self._settled = False
        self.rebind(ctx)

    def rebind(self, ctx: ServerRequestContext[Any]) -> None:
        """Serve the call through ``ctx`` from now on (the retry that resumes a 2026 call)."""
        self._ctx = ctx
        meta: Mapping[str, Any] = ctx.meta or {}
        tag = meta.get(CALL_META_KEY)
        self._echo: dict[str, Any] | None = {CALL_META_KEY: tag} if type(tag) is str else None
        # Which levels this request may carry at all: every level on a handshake-era
        # connection (logging/setLevel narrows them), the _meta opt-in on a 2026 one.
        self._levels = allowed_log_levels(ctx.protocol_version, meta)
        # What the body asked for that this request's client did not declare, in its wire
        # form (``{"sampling": {}}``): on 2026-07-28 the call is then answered with
        # MissingRequiredClientCapabilityError (-32021), see `missing_capability_error`.
        self.missing_capability: dict[str, Any] | None = None

    @property
    def host(self) -> ToolHost:
        """The `ToolHost` to put in the call's input."""
        # Progress is offered even without a progressToken in the params: the in-process
        # dispatcher of the SDK's `Client(server)` hands the caller's callback over
        # directly, and `report_progress` is a no-op where nobody asked. A 2026 call's log
        # levels may change with the request that resumes it: filtered as they are sent.
        return ToolHost(
            on_progress=self._on_progress,
            on_log=self._on_log if self._levels or self._modern else None,
            elicit=self._elicit,
            sample=self._sample,
            roots=self._roots,
        )

    def starting(self) -> None:
        """Say `send_notifications` is about to run in a task: `flush` waits for it."""
        self._outbox.starting()

    async def send_notifications(self) -> None:
        """Send the call's notifications, in order, until `flush` has sent the last one.

        The handler runs it in the task that also watches for the SDK's cancellation.
        """
        await self._outbox.run(self._send, self._report_dropped)

    async def send_queued(self) -> None:
        """Send what is queued, in the calling task (a 2026 call's request, see `_rounds`)."""
        await self._outbox.drain(self._send, self._report_dropped)

    def drop_later(self) -> None:
        """Drop whatever the call reports from now on (its request has ended)."""
        self._outbox.close()

    def keep_later(self) -> None:
        """Keep what the call reports from now on for the request that resumes it."""
        self._outbox.pause()

    def detach(self) -> None:
        """Forget the call's `RoundCall` once its result is published (after `settle`).

        The call holds this host and this host held the call: a reference cycle that only
        the garbage collector's full passes freed, with everything the call kept alive.
        """
        self._rounds = None
        self._outbox.detach()

    async def settle(self) -> None:
        """Withdraw every request of the call still pending, and await each (run shielded)."""
        self._settled = True
        asking = list(self._asking)
        for request in asking:
            request.scope.cancel()
        for request in asking:
            await request.done.wait()

    async def flush(self) -> None:
        """Send what is queued; drop whatever the call reports later."""
        await self._outbox.flush()
        self._outbox.close()

    async def pause(self) -> None:
        """Send what is queued; keep what the call reports later for the next request."""
        await self._outbox.flush()
        self._outbox.pause()

    # -- progress and logs ------------------------------------------------------------------

    def _on_progress(self, exec: ToolExecution, event: ProgressEvent) -> None:
        last = self._last_progress
        if last is not None and event.progress <= last:
            return  # MCP: the progress of a request increases with each notification
        self._last_progress = event.progress
        self._outbox.put(event)

    def _on_log(self, exec: ToolExecution, event: LogEvent) -> None:
        if self._allows(event.level):
            self._outbox.put(event)

    def _allows(self, level: str) -> bool:
        if level not in self._levels:
            return False
        state = connection_state(self._ctx)
        wanted = None if state is None else state.get(_LEVEL_KEY)
        return wanted not in LOG_LEVELS or LOG_LEVELS.index(level) >= LOG_LEVELS.index(wanted)

    async def _send(self, note: _Note) -> None:
        ctx = self._ctx
        if type(note) is ProgressEvent:
            await ctx.session.report_progress(note.progress, note.total, note.message)
            return
        assert type(note) is LogEvent
        params = types.LoggingMessageNotificationParams(
            level=note.level, data=plain_json(note.data), logger=note.logger, _meta=self._echo
        )
        await ctx.session.send_notification(
            types.LoggingMessageNotification(params=params), related_request_id=ctx.request_id
        )

    async def _report_dropped(self, count: int) -> None:
        if self._allows("warning"):
            text = f"{count} log messages of this call were dropped: the client reads too slowly"
            await self._send(LogEvent("warning", text, "toolseam.mcp"))

    # -- elicitation and sampling -----------------------------------------------------------

    def _check_available(self, capability: Kind) -> None:
        """Raise ``CAPABILITY_UNAVAILABLE`` saying why, unless the client can be asked.

        A capability the client did not declare is checked first, and remembered
        (`missing_capability`): on every revision it is the reason the body gets. (On
        2026-07-28 the request that serves the call declares them.)
        """
        session = self._ctx.session
        declared = session.client_capabilities
        why = None
        if capability == "elicitation":
            modes = None if declared is None else declared.elicitation
            # `elicitation: {}` means form mode (the revisions before URL mode).
            if modes is None or (modes.form is None and modes.url is not None):
                why = "the MCP client did not declare the elicitation capability (form mode)"
                self.missing_capability = {"elicitation": {"form": {}}}
        elif capability == "sampling":
            if declared is None or declared.sampling is None:
                why = "the MCP client did not declare the sampling capability"
                self.missing_capability = {"sampling": {}}
        elif declared is None or declared.roots is None:
            why = "the MCP client did not declare the roots capability"
            self.missing_capability = {"roots": {}}
        if why is None and not self._modern and not session.can_send_request:
            version = session.protocol_version
            why = (
                f"the MCP client connected with protocol revision {version}, in which a server "
                "cannot send it requests during a call"
                if version in MODERN_PROTOCOL_VERSIONS
                else "this MCP connection cannot carry requests from the server to the client"
            )
        if why is not None:
            raise ToolError(why, code=CAPABILITY_UNAVAILABLE)

    async def _elicit(
        self, exec: ToolExecution, request: ElicitationRequest, signal: AbortSignal
    ) -> Elicited[Any]:
        self._check_available("elicitation")
        params = types.ElicitRequestFormParams(
            message=request.message,
            requested_schema=plain_json(request.requested_schema),
            _meta=self._request_meta(),
        )
        answer = await self._ask(
            request.key,
            "elicitation",
            types.ElicitRequest(params=params),
            types.ElicitResult,
            signal,
        )
        if not isinstance(answer, types.ElicitResult):
            # withdrawn: the call aborted (the body gets the abort) or settled
            return Elicited("cancel")
        return Elicited(answer.action, answer.content)

    async def _sample(
        self, exec: ToolExecution, request: SamplingRequest, signal: AbortSignal
    ) -> Sampled:
        self._check_available("sampling")
        metadata = request.metadata
        if metadata is not None and type(metadata) is not FrozenDict:
            raise ValueError("MCP sampling takes `metadata` as a JSON object")
        preferences = request.model_preferences
        try:
            params = types.CreateMessageRequestParams(
                messages=[
                    types.SamplingMessage.model_validate(plain_json(message))
                    for message in request.messages
                ],
                max_tokens=request.max_tokens,
                system_prompt=request.system_prompt,
                temperature=request.temperature,
                stop_sequences=list(request.stop_sequences) or None,
                model_preferences=(
                    None
                    if preferences is None
                    else types.ModelPreferences.model_validate(plain_json(preferences))
                ),
                metadata=None if metadata is None else plain_json(metadata),
                _meta=self._request_meta(),
            )
        except ValidationError as error:
            raise ValueError(f"not an MCP sampling request: {_first_problem(error)}") from None
        answer = await self._ask(
            request.key,
            "sampling",
            types.CreateMessageRequest(params=params),
            types.CreateMessageResult,
            signal,
        )
        if not isinstance(answer, types.CreateMessageResult | types.CreateMessageResultWithTools):
            raise _Withdrawn("the request was withdrawn: its MCP call has ended")
        # A 2026 client may answer with a list of blocks (sampling with tools' shape).
        blocks = answer.content if isinstance(answer.content, list) else [answer.content]
        return Sampled(
            content=[
                block.model_dump(by_alias=True, mode="json", exclude_none=True)
                for block in cast("list[BaseModel]", blocks)
            ],
            model=answer.model,
            role=answer.role,
            stop_reason=answer.stop_reason,
        )

    async def _roots(
        self, exec: ToolExecution, request: RootsRequest, signal: AbortSignal
    ) -> tuple[Root, ...]:
        self._check_available("roots")
        meta = self._request_meta()
        answer = await self._ask(
            request.key,
            "roots",
            types.ListRootsRequest(
                params=None if meta is None else types.RequestParams(_meta=meta)
            ),
            types.ListRootsResult,
            signal,
        )
        if not isinstance(answer, types.ListRootsResult):
            raise _Withdrawn("the request was withdrawn: its MCP call has ended")
        return tuple(Root(str(root.uri), root.name) for root in answer.roots)

    def _request_meta(self) -> types.RequestParamsMeta | None:
        # An open TypedDict (PEP 728 extra items), which the checkers read as closed.
        return cast("types.RequestParamsMeta | None", self._echo)

    async def _ask(
        self,
        key: str | None,
        kind: Kind,
        request: types.ElicitRequest | types.CreateMessageRequest | types.ListRootsRequest,
        result_type: type[BaseModel],
        signal: AbortSignal,
    ) -> BaseModel | None:
        """Ask the client; ``None`` once withdrawn (the signal, or `settle`).

        On a handshake-era connection, a request to the client; on a 2026-07-28 one, a
        question of the call's next round (any of the answer models of its kind).
        """
        if self._settled:
            return None
        if self._rounds is not None:
            return await self._rounds.ask(key, kind, request, signal)
        if self._modern:
            return None  # detached: the call has ended
        ctx = self._ctx
        asking = _Asking()
        self._asking.add(asking)
        # The abort may come from any thread; the scope is cancelled in the event loop's.
        registration = signal.add_listener(in_loop(asking.scope.cancel))
        try:
            with asking.scope:
                await self._outbox.flush()  # what the body reported before asking comes first
                # Cancelling the scope is how the SDK is told to withdraw the request: it
                # writes notifications/cancelled for it, forgets it, and re-raises.
                return await ctx.session.send_request(
                    request,
                    result_type,
                    metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
                )
            return None
        finally:
            registration.remove()
            self._asking.discard(asking)
            asking.done.set()


def _first_problem(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])


def missing_capability_error(host: RequestHost, result: ToolResult) -> MCPError | None:
    """The error that answers a 2026-07-28 call its client lacked a capability for, if any.

    A call that ends ``CAPABILITY_UNAVAILABLE`` because its body asked for a capability the
    request did not declare is answered with MissingRequiredClientCapabilityError (-32021,
    HTTP 400), naming the capability, instead of a result. The caller checks the revision.
    """
    missing = host.missing_capability
    if (
        missing is None
        or not isinstance(result, ToolFailure)
        or result.error.info is None
        or result.error.info.code != CAPABILITY_UNAVAILABLE
    ):
        return None
    return MCPError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        result.error.message,
        {"requiredCapabilities": missing},
    )
