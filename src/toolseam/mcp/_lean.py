"""The gateway's lean hop 2: `LeanHttp` (2026-07-28 over HTTP), `LeanSession` (over stdio).

On MCP 2026-07-28 over streamable HTTP a call is one exchange: one POST, answered by the
JSON-RPC response in JSON, or by an SSE stream of the call's notifications (progress,
logs) ending with it; the client cancels by closing the request's stream. The SDK's
``ClientSession.call_tool`` goes through its dispatcher (a request model, a task and memory
streams for the POST, a task for each progress callback), which costs the gateway about as
much CPU a call as the upstream's whole server. `LeanHttp` makes the same exchange itself on
the same ``httpx2`` client (its headers, its ``Auth`` flow, its timeouts and connection
pool), with the SDK's own pieces for everything the request and the answer must be: the
session's stamp (the ``_meta`` the SDK sends: protocol version, client info and
capabilities, the log-level opt-in; the ``MCP-Protocol-Version``, ``Mcp-Method``,
``Mcp-Name`` and ``Mcp-Param-*`` headers), its redirect rule (`stream_within_origin`), its
result model and its check of ``structuredContent`` against the tool's output schema.

What it does as the SDK does: a JSON-RPC error (in the body, whatever the status) is an
``MCPError``; a progress notification for the call reaches the progress callback (in
order, in the calling task), a log message the session's logging callback; cancelling the
calling task closes the request's stream (``httpx2`` closes a connection whose response
was not read to the end), which is how the server learns of it. A transport failure is an
``MCPError`` (``CONNECTION_CLOSED``) and tells the owner its connection is lost (`lost`).
What it does not: resume an SSE stream that broke before the answer (the SDK reconnects
with ``Last-Event-ID`` to a server that numbers its events; here the call fails with
``CONNECTION_CLOSED``, as when the server numbers none), nor answer a request the server
sends on the call's stream (2026-07-28 servers ask through ``InputRequiredResult``).
The gateway's ``httpx2`` client also sends each request in one write rather than
``httpcore2``'s two (`coalesce_writes`): the same bytes, one segment, one wake-up of the
upstream.

Over stdio (2026-07-28) the SDK's dispatcher stays: it reads, parses and routes every
message, and `LeanSession` only skips the per-call machinery around it (a request model
built and dumped, a memory stream, a request clock), putting its request in the
dispatcher's own table of pending requests, so that the response, the progress
notifications and the connection's end reach it as they reach the SDK's, and a
cancellation sends the dispatcher's own ``notifications/cancelled``.

Only the gateway uses them (`attach` for each 2026-07-28 HTTP connection it holds,
`attach_session` for each 2026-07-28 stdio one, and `detach` when it closes: the path
holds its session, so the weak table alone would keep both alive); the remote tool takes
one for a first request (`lean_for`), and leaves retries that answer an
``InputRequiredResult`` to the SDK's session.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import ssl
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from typing import Any, Final, cast, final

import anyio
import anyio.lowlevel
import httpcore2
import httpx2
from mcp import ClientSession, MCPError, types
from mcp.client import session as sdk_session
from mcp.shared import jsonrpc_dispatcher
from mcp.shared._httpx_utils import stream_within_origin
from mcp.shared._otel import inject_trace_context, otel_span
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.message import ClientMessageMetadata
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
)
from mcp_types import methods as sdk_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry.trace import SpanKind, StatusCode

from ._client_tasks import CreateTaskResult

__all__ = [
    "LeanHttp",
    "LeanSession",
    "attach",
    "attach_session",
    "coalesce_writes",
    "detach",
    "lean_for",
]

logger = logging.getLogger("toolseam.mcp")

_ACCEPT: Final = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
}

LogFn = Callable[[types.LoggingMessageNotificationParams], Awaitable[None]]

_LEAN: weakref.WeakKeyDictionary[ClientSession, LeanHttp | LeanSession] = (
    weakref.WeakKeyDictionary()
)


def lean_for(session: ClientSession) -> LeanHttp | LeanSession | None:
    """The lean path of ``session``, if its owner attached one."""
    return _LEAN.get(session)


def attach(
    session: ClientSession,
    http: httpx2.AsyncClient,
    url: str,
    on_log: LogFn,
    lost: Callable[[BaseException], None],
) -> None:
    """Give ``session`` a lean path if it speaks 2026-07-28 (over ``http``, to ``url``)."""
    if session.protocol_version in MODERN_PROTOCOL_VERSIONS and _has(session, _SESSION_PARTS):
        _LEAN[session] = LeanHttp(session, http, url, on_log, lost)


# The SDK's private parts the lean paths use (mcp 2.x). The SDK does not promise them: if
# a release renames one, its connections keep the SDK's own path instead of failing.
_SESSION_PARTS: Final = ("_stamp", "_call_tool_adapter", "validate_tool_result")
_DISPATCHER_PARTS: Final = (
    "_closed",
    "_pending",
    "_allocate_id",
    "_write",
    "_final_write",
    "_cancel_outbound",
)
_MODULE_PARTS: Final = (
    (sdk_session, "_clamp_inbound_ttl"),
    (sdk_session, "_later_revision_fields"),
    (jsonrpc_dispatcher, "_ABANDON_WRITE_TIMEOUT"),
    (sdk_methods, "validate_server_result"),
)


def _has(thing: object, names: tuple[str, ...]) -> bool:
    return all(hasattr(thing, name) for name in names)


def attach_session(session: ClientSession) -> None:
    """Give ``session`` a lean path over its own dispatcher if it speaks 2026-07-28.

    For a session over a stream transport (stdio), whose requests the SDK's
    ``JSONRPCDispatcher`` correlates, and only without a session read timeout.
    """
    dispatcher: object = getattr(session, "_dispatcher", None)
    if (
        session.protocol_version in MODERN_PROTOCOL_VERSIONS
        and type(dispatcher) is JSONRPCDispatcher
        and getattr(session, "_session_read_timeout_seconds", 0) is None
        and _has(session, _SESSION_PARTS)
        and _has(dispatcher, _DISPATCHER_PARTS)
        and all(hasattr(module, name) for module, name in _MODULE_PARTS)
    ):
        _LEAN[session] = LeanSession(session, dispatcher)


def detach(session: ClientSession) -> None:
    """Forget the lean path of ``session`` (its connection is closing)."""
    _LEAN.pop(session, None)


# A write at most this long waits to go out with the next one (see `_CoalescingStream`).
_HOLD_BYTES: Final = 16 * 1024


@final
class _CoalescingStream(httpcore2.AsyncNetworkStream):
    """A connection's stream that sends a request's head and body in one write.

    ``httpcore2`` writes an HTTP/1.1 request as two writes (head, then body), which over
    TCP with ``TCP_NODELAY`` are two segments: two send calls here, two wake-ups and two
    reads for the server. This stream holds a short write back until the next write (sent
    together) or the next read (sent first), so the bytes and their order on the wire are
    the same; only the number of writes changes. A held write that fails in a read is
    ignored there, as ``httpcore2`` ignores a failed request write to read the server's
    answer anyway. A held write still pending when the connection closes (its request was
    abandoned while being sent) is dropped with the connection.
    """

    __slots__ = ("_held", "_stream", "_timeout")

    def __init__(self, stream: httpcore2.AsyncNetworkStream) -> None:
        self._stream = stream
        self._held: bytes | None = None
        self._timeout: float | None = None

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not buffer:
            return
        held = self._held
        if held is not None:
            self._held = None
            await self._stream.write(held + buffer, timeout)
        elif len(buffer) <= _HOLD_BYTES:
            self._held = buffer
            self._timeout = timeout
        else:
            await self._stream.write(buffer, timeout)

    async def _flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            await self._stream.write(held, self._timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        if self._held is not None:
            # As `httpcore2` after a failed request write: the server may have answered.
            with contextlib.suppress(httpcore2.WriteError):
                await self._flush()
        return await self._stream.read(max_bytes, timeout)

    async def aclose(self) -> None:
        self._held = None
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> httpcore2.AsyncNetworkStream:
        await self._flush()
        return _CoalescingStream(
            await self._stream.start_tls(ssl_context, server_hostname, timeout)
        )

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


@final
class _CoalescingBackend(httpcore2.AsyncNetworkBackend):
    """A network backend whose connections are `_CoalescingStream` objects."""

    __slots__ = ("_backend",)

    def __init__(self, backend: httpcore2.AsyncNetworkBackend) -> None:
        self._backend = backend

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        return _CoalescingStream(
            await self._backend.connect_tcp(
                host,
                port,
                timeout=timeout,
                local_address=local_address,
                socket_options=socket_options,
            )
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        return _CoalescingStream(
            await self._backend.connect_unix_socket(
                path, timeout=timeout, socket_options=socket_options
            )
        )

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


def coalesce_writes(http: httpx2.AsyncClient) -> bool:
    """Make ``http``'s direct connections send each request's head and body in one write.

    Only its pool's network I/O changes (`_CoalescingStream`); returns whether it could
    (``False``, changing nothing, for a transport or pool this does not know).
    """
    transport: object = getattr(http, "_transport", None)
    pool: object = getattr(transport, "_pool", None)
    if type(pool) is not httpcore2.AsyncConnectionPool:
        return False
    backend: object = getattr(pool, "_network_backend", None)
    if not isinstance(backend, httpcore2.AsyncNetworkBackend) or isinstance(
        backend, _CoalescingBackend
    ):
        return False
    pool._network_backend = _CoalescingBackend(backend)  # pyright: ignore[reportPrivateUsage]
    return True


def _error(payload: Mapping[str, Any]) -> MCPError:
    error = payload.get("error")
    if not isinstance(error, Mapping):
        return MCPError(INTERNAL_ERROR, "malformed JSON-RPC error")
    fields = cast("Mapping[str, Any]", error)
    code = fields.get("code")
    message = fields.get("message")
    return MCPError(
        code if type(code) is int else INTERNAL_ERROR,
        message if isinstance(message, str) else "",
        fields.get("data"),
    )


@final
class LeanHttp:
    """The ``tools/call`` of one 2026-07-28 HTTP connection, without the SDK's dispatcher.

    Used from the event loop's thread only; any number of calls at once.
    """

    __slots__ = ("_http", "_ids", "_lost", "_on_log", "_session", "_url")

    def __init__(
        self,
        session: ClientSession,
        http: httpx2.AsyncClient,
        url: str,
        on_log: LogFn,
        lost: Callable[[BaseException], None],
    ) -> None:
        self._session = session
        self._http = http
        self._url = url
        self._on_log = on_log
        self._lost = lost
        # Ids of their own, far from the session's: 2026-07-28 requests share no state, but
        # a log line that names an id should not name two requests.
        self._ids = itertools.count(1 << 40)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        progress: ProgressFnT | None,
        meta: Mapping[str, Any] | None,
    ) -> types.CallToolResult | types.InputRequiredResult | CreateTaskResult:
        """Call ``name`` and return its result, as ``ClientSession.call_tool`` would.

        A task (``resultType: "task"``, when the session declared the tasks extension) is
        returned as it came, for the caller to follow (``_client_tasks``).

        Raises:
            MCPError: The server answered an error, or the connection failed.
            RuntimeError: The result does not conform to the tool's output schema.
        """
        session = self._session
        request_id = next(self._ids)
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        request_meta: dict[str, Any] = dict(meta) if meta else {}
        if progress is not None:
            request_meta["progressToken"] = request_id
        if request_meta:
            params["_meta"] = request_meta
        data: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": params,
        }
        opts: dict[str, Any] = {}
        # The SDK's own stamp of this session (mcp 2.x `ClientSession._stamp`).
        stamp = cast("Callable[[dict[str, Any], dict[str, Any]], None]", session._stamp)  # pyright: ignore[reportPrivateUsage]
        stamp(data, opts)
        headers = {**_ACCEPT, **opts.get("headers", {})}
        body = json.dumps(data, separators=(",", ":")).encode()
        try:
            async with stream_within_origin(
                self._http, "POST", self._url, content=body, headers=headers
            ) as response:
                payload = await self._answer(response, request_id, progress)
        except httpx2.TransportError as error:
            # The SDK's transport dies of it, and its session with it: the owner reconnects.
            self._lost(error)
            raise MCPError(CONNECTION_CLOSED, "Connection closed") from error
        except httpx2.HTTPError as error:  # the stream broke (SSE, decoding): this call only
            raise MCPError(CONNECTION_CLOSED, f"the response stream failed: {error}") from error
        adapter: Any = session._call_tool_adapter  # pyright: ignore[reportPrivateUsage]
        result: object = adapter.validate_python(payload)
        if isinstance(result, types.CallToolResult) and not result.is_error:
            await session.validate_tool_result(name, result)
        if not isinstance(
            result, types.CallToolResult | types.InputRequiredResult | CreateTaskResult
        ):
            raise MCPError(INVALID_REQUEST, "the server answered tools/call with another result")
        return result

    async def _answer(
        self, response: httpx2.Response, request_id: int, progress: ProgressFnT | None
    ) -> Any:
        status = response.status_code
        kind = response.headers.get("content-type", "").lower()
        if status == 202:
            raise MCPError(INVALID_REQUEST, "server answered a request with 202 Accepted")
        if 300 <= status < 400:
            raise MCPError(INVALID_REQUEST, f"redirect (HTTP {status}) not followed")
        if status >= 400:
            if kind.startswith("application/json"):
                try:
                    payload: object = json.loads(await response.aread())
                except ValueError:
                    payload = None
                if isinstance(payload, Mapping) and "error" in payload:
                    raise _error(cast("Mapping[str, Any]", payload))
            if status == 404:
                raise MCPError(METHOD_NOT_FOUND, "Not Found")
            raise MCPError(INTERNAL_ERROR, "Server returned an error response")
        if kind.startswith("application/json"):
            content = await response.aread()
            try:
                payload = json.loads(content)
            except ValueError as error:
                raise MCPError(PARSE_ERROR, f"Failed to parse JSON response: {error}") from None
            return self._response(payload)
        if not kind.startswith("text/event-stream"):
            raise MCPError(INVALID_REQUEST, f"Unexpected content type: {kind}")
        async for event in httpx2.EventSource(response):
            if not event.data:
                continue
            try:
                message: object = json.loads(event.data)
            except ValueError:
                logger.debug("MCP upstream sent an SSE event that is not JSON; ignored")
                continue
            if not isinstance(message, Mapping):
                continue
            fields = cast("Mapping[str, Any]", message)
            if "method" not in fields:
                if fields.get("id") == request_id:
                    return self._response(fields)
                continue
            try:
                await self._notification(fields, request_id, progress)
            except Exception as error:  # as the SDK: a callback's failure is not the call's
                logger.debug("MCP upstream notification not handled: %r", error)
        raise MCPError(CONNECTION_CLOSED, "SSE stream ended without a response")

    @staticmethod
    def _response(payload: object) -> Any:
        if not isinstance(payload, Mapping):
            raise MCPError(INTERNAL_ERROR, "malformed JSON-RPC response")
        fields = cast("Mapping[str, Any]", payload)
        if "error" in fields:
            raise _error(fields)
        return fields.get("result")

    async def _notification(
        self, message: Mapping[str, Any], request_id: int, progress: ProgressFnT | None
    ) -> None:
        method = message.get("method")
        params: object = message.get("params")
        if "id" in message or not isinstance(params, Mapping):
            return  # a request from the server: 2026-07-28 servers ask otherwise
        fields = cast("Mapping[str, Any]", params)
        if method == "notifications/progress":
            if progress is None or fields.get("progressToken") != request_id:
                return
            note = types.ProgressNotificationParams.model_validate(fields)
            await progress(note.progress, note.total, note.message)
        elif method == "notifications/message":
            await self._on_log(types.LoggingMessageNotificationParams.model_validate(fields))


@final
class _Waiter:
    """One lean request in the dispatcher's table of pending requests.

    Stands where the SDK puts its own (``_Pending``): the dispatcher hands it the response
    (or the connection's end) through ``send.send_nowait``, and the request's progress
    notifications to ``on_progress``, exactly as it would for ``send_raw_request``.
    """

    __slots__ = ("done", "on_progress", "outcome", "send")

    def __init__(self, on_progress: ProgressFnT | None) -> None:
        self.outcome: dict[str, Any] | types.ErrorData | None = None
        self.done = anyio.Event()
        self.on_progress = on_progress
        self.send = self

    def send_nowait(self, outcome: dict[str, Any] | types.ErrorData) -> None:
        if self.outcome is not None:
            raise anyio.WouldBlock  # as a full one-slot stream: the first outcome stands
        self.outcome = outcome
        self.done.set()


@final
class LeanSession:
    """The ``tools/call`` of one 2026-07-28 stream (stdio) connection, made leaner.

    The SDK's ``ClientSession.call_tool`` builds a request model and dumps it, and its
    dispatcher's ``send_raw_request`` a memory stream, a request clock and an outbound
    plan for every call. This makes the same request on the same dispatcher with none of
    those: the session's stamp, the dispatcher's id, trace context, client span, write,
    table of pending requests (so its response, its progress notifications and the
    connection's end reach the call as they reach the SDK's), and on cancellation the
    dispatcher's own ``notifications/cancelled`` (shielded, bounded); then the SDK's own
    checks of the result (the negotiated revision's result schema, the tool's output
    schema). Used from the event loop's thread only; any number of calls at once.
    """

    __slots__ = ("_dispatcher", "_session")

    def __init__(self, session: ClientSession, dispatcher: JSONRPCDispatcher[Any]) -> None:
        self._session = session
        self._dispatcher = dispatcher

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        progress: ProgressFnT | None,
        meta: Mapping[str, Any] | None,
    ) -> types.CallToolResult | types.InputRequiredResult | types.Result:
        """Call ``name`` and return its result, as ``ClientSession.call_tool`` would.

        With ``allow_input_required`` and ``allow_claimed``: an ``InputRequiredResult``,
        or a result an extension of the session claims (a task), is returned as is.

        Raises:
            MCPError: The server answered an error, or the connection closed.
            RuntimeError: The result does not conform to the tool's output schema.
        """
        session = self._session
        dispatcher: Any = self._dispatcher  # its private parts, as `send_raw_request` uses them
        if dispatcher._closed:
            raise MCPError(CONNECTION_CLOSED, "Connection closed")
        pending: dict[Any, Any] = dispatcher._pending
        request_id: int = dispatcher._allocate_id()
        while request_id in pending:
            request_id = dispatcher._allocate_id()
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if meta:
            params["_meta"] = dict(meta)
        data: dict[str, Any] = {"method": "tools/call", "params": params}
        opts: dict[str, Any] = {}
        stamp = cast("Callable[[dict[str, Any], dict[str, Any]], None]", session._stamp)  # pyright: ignore[reportPrivateUsage]
        stamp(data, opts)
        out_meta: dict[str, Any] = params.setdefault("_meta", {})
        if progress is not None:
            out_meta["progressToken"] = request_id
        headers = opts.get("headers")
        metadata = ClientMessageMetadata(headers=headers) if headers else None
        waiter = _Waiter(progress)
        pending[request_id] = waiter
        written = False
        try:
            with otel_span(
                f"MCP send tools/call {name}",
                kind=SpanKind.CLIENT,
                attributes={"mcp.method.name": "tools/call", "jsonrpc.request.id": str(request_id)},
            ) as span:
                inject_trace_context(out_meta)
                message = types.JSONRPCRequest(
                    jsonrpc="2.0", id=request_id, method="tools/call", params=params
                )
                await anyio.lowlevel.checkpoint_if_cancelled()
                written = True  # a cancelled write may still have delivered: cancel it too
                try:
                    await dispatcher._write(message, metadata)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    raise MCPError(CONNECTION_CLOSED, "Connection closed") from None
                await waiter.done.wait()
                outcome = waiter.outcome
                if isinstance(outcome, types.ErrorData) and outcome.code != CONNECTION_CLOSED:
                    code = str(outcome.code)
                    span.set_attributes({"error.type": code, "rpc.response.status_code": code})
                    span.set_status(StatusCode.ERROR, outcome.message)
        except anyio.get_cancelled_exc_class():
            if written:
                await dispatcher._final_write(
                    partial(dispatcher._cancel_outbound, request_id, "caller cancelled", None),
                    shield=True,
                    timeout=jsonrpc_dispatcher._ABANDON_WRITE_TIMEOUT,  # pyright: ignore[reportPrivateUsage]
                    describe=f"courtesy cancel for caller-cancelled request {request_id!r}",
                )
            raise
        finally:
            pending.pop(request_id, None)
        if isinstance(outcome, types.ErrorData):
            raise MCPError(outcome.code, outcome.message, outcome.data)
        assert outcome is not None  # the event is set with an outcome
        return await self._result(name, outcome)

    async def _result(
        self, name: str, raw: dict[str, Any]
    ) -> types.CallToolResult | types.InputRequiredResult | types.Result:
        # What `ClientSession.send_request` and `call_tool` do with a raw result (mcp 2.x).
        session = self._session
        sdk: Any = sdk_session
        sdk._clamp_inbound_ttl(raw)
        version = session.protocol_version or "2025-11-25"
        with contextlib.suppress(KeyError):
            sdk_methods.validate_server_result("tools/call", version, raw)
        foreign: frozenset[str] = sdk._later_revision_fields("tools/call", version)
        if not foreign.isdisjoint(raw):
            raw = {key: value for key, value in raw.items() if key not in foreign}
        adapter: Any = session._call_tool_adapter  # pyright: ignore[reportPrivateUsage]
        result: types.CallToolResult | types.InputRequiredResult | types.Result = (
            adapter.validate_python(raw, by_name=False)
        )
        if isinstance(result, types.CallToolResult) and not result.is_error:
            await session.validate_tool_result(name, result)
        return result
