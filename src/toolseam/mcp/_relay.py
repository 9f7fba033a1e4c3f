"""An MCP server's logs, elicitation, sampling and roots requests, relayed to their toolseam call.

A ``ClientSession`` takes one logging, one elicitation, one sampling and one roots callback
for the whole connection (given at construction: they decide which capabilities the client
declares in ``initialize``). `SessionCallbacks` is that bundle: each callback finds the
call in flight the message belongs to, and hands it to that call's ``exec.log``,
``exec.elicit``, ``exec.sample`` or ``exec.roots``, that is, to whoever called the tool
(contract §13).

Which call a message belongs to, in this order (never a guess beyond the third):

1. the ``_meta["toolseam/call"]`` tag the call sent, which a toolseam server copies onto
   every log message and request of that call (any transport, any protocol revision);
2. the call whose task sent the request whose stream the message arrived on: over
   streamable HTTP the SDK runs the callbacks of messages that arrived on a request's
   stream in the context of the task that sent it, where `McpToolDefinition.run` has set
   a context variable (servers that relate their messages to the request, as the SDK's do);
3. the only call in flight through these callbacks, if there is exactly one.

A log message that belongs to no call goes to the Python logger ``toolseam.mcp``; an
elicitation, sampling or roots request that belongs to none is answered with an MCP error.

When the server withdraws a request (``notifications/cancelled``), the SDK cancels the
callback's task: that cancellation reaches the pending ``exec.elicit``/``exec.sample`` and
the caller's own request is withdrawn in turn (the hop-1 request, in a gateway).
"""

from __future__ import annotations

import contextvars
import logging
import secrets
from collections.abc import Mapping
from typing import Any, Final, TypedDict, cast, final

import anyio
from mcp import types
from mcp.client.session import (
    ClientRequestContext,
    ClientSession,
    ElicitationFnT,
    ListRootsFnT,
    LoggingFnT,
    SamplingFnT,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

from .._capabilities import CAPABILITY_UNAVAILABLE, LogLevel
from .._errors import ToolError, safe_str
from .._json import JsonValue
from .._views import ToolRunContext
from ._wire import CALL_META_KEY, plain_json

__all__ = [
    "SessionCallbacks",
    "SessionKwargs",
    "elicit_for",
    "logger",
    "roots_for",
    "sample_for",
]

logger = logging.getLogger("toolseam.mcp")

_PYTHON_LEVELS: Final[Mapping[str, int]] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
_SAMPLING_CONTENT: TypeAdapter[types.SamplingContent] = TypeAdapter(types.SamplingContent)


@final
class _Call:
    """One call in flight through a `SessionCallbacks`."""

    __slots__ = ("ended", "exec", "tag")

    def __init__(self, tag: str, exec: ToolRunContext) -> None:
        self.tag = tag
        self.exec = exec
        self.ended = anyio.Event()  # its request has settled (or been cancelled)

    async def stopped(self) -> None:
        """The call aborted: wait until its request's cancellation is on the wire.

        Answering the server's question first would let it finish the call with that
        answer before it learns the call was cancelled. Usually the server withdraws the
        question on the cancellation, and the wait ends in that (the SDK cancels us).
        """
        await self.ended.wait()


# The call whose task is sending a request (see the module docstring, attribution 2).
_CURRENT: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
    "toolseam_mcp_call", default=None
)


class SessionKwargs(TypedDict):
    """The callbacks `SessionCallbacks.session_kwargs` hands to ``ClientSession``/``Client``."""

    logging_callback: LoggingFnT
    """Relays the server's log messages."""
    elicitation_callback: ElicitationFnT
    """Relays the server's elicitation requests."""
    sampling_callback: SamplingFnT
    """Relays the server's sampling requests."""
    list_roots_callback: ListRootsFnT
    """Relays the server's ``roots/list`` requests."""


@final
class SessionCallbacks:
    """Relay an MCP server's logs, elicitation, sampling and roots to the calls of its tools.

    Give its callbacks to the session when you create it (they decide which capabilities
    the client declares), then pass it to `register_mcp_tools`::

        callbacks = SessionCallbacks()
        async with ClientSession(read, write, **callbacks.session_kwargs()) as session:
            await session.initialize()
            await register_mcp_tools(registry, session, callbacks=callbacks)

    Then, while a remote tool's call runs, the server's log messages become that call's
    ``exec.log``, and its elicitation, sampling and ``roots/list`` requests become that
    call's ``exec.elicit``, ``exec.sample`` and ``exec.roots``: they reach whatever the
    caller of the tool offers (its `ToolHost`), or fail as that would. Progress needs no
    callbacks: every remote call asks for it, and it becomes the call's ``exec.progress``.
    See the module docstring of ``toolseam.mcp._relay`` for how a message is matched to its call.

    Use one per connection (a reconnection to the same server may reuse it).

    Args:
        log_level: The lowest severity to ask the server for: sent as
            ``logging/setLevel`` by `register_mcp_tools` (when the server has logging) on a
            handshake-era connection, and as each call's ``_meta`` opt-in on a 2026-07-28
            one. ``None`` asks for nothing (a handshake-era server then picks).
    """

    __slots__ = ("_calls", "_log_level")

    def __init__(self, *, log_level: LogLevel | None = "info") -> None:
        self._log_level: LogLevel | None = log_level
        self._calls: dict[str, _Call] = {}

    @property
    def log_level(self) -> LogLevel | None:
        """The lowest severity asked of the server, or ``None``."""
        return self._log_level

    def session_kwargs(self) -> SessionKwargs:
        """The keyword arguments that give these callbacks to ``ClientSession``/``Client``."""
        return SessionKwargs(
            logging_callback=self.logging_callback,
            elicitation_callback=self.elicitation_callback,
            sampling_callback=self.sampling_callback,
            list_roots_callback=self.list_roots_callback,
        )

    async def logging_callback(self, params: types.LoggingMessageNotificationParams) -> None:
        """``logging_callback``: the message becomes its call's ``exec.log``."""
        call = self._find(params.meta)
        if call is not None:
            try:
                call.exec.log(params.level, cast("JsonValue", params.data), logger=params.logger)
            except ValueError as error:  # not JSON the registry takes: say so, not drop it
                logger.warning("MCP server log not relayed (%s): %r", error, params.data)
            return
        logger.log(
            _PYTHON_LEVELS.get(params.level, logging.INFO),
            "MCP server log%s (no toolseam call in flight to relay it to): %s",
            f" from {params.logger}" if params.logger else "",
            params.data,
        )

    async def elicitation_callback(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """``elicitation_callback``: the request becomes its call's ``exec.elicit``."""
        call = self._find(context.meta)
        if call is None:
            return _unattributed("elicitation")
        try:
            return await elicit_for(call.exec, params)
        except Exception as error:
            if call.exec.signal.aborted:
                await call.stopped()
                return types.ElicitResult(action="cancel")
            return _refusal(error)

    async def sampling_callback(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        """``sampling_callback``: the request becomes its call's ``exec.sample``."""
        call = self._find(context.meta)
        if call is None:
            return _unattributed("sampling")
        try:
            return await sample_for(call.exec, params)
        except Exception as error:
            if call.exec.signal.aborted:
                await call.stopped()
                return types.ErrorData(
                    code=types.INVALID_REQUEST, message="the toolseam call was aborted"
                )
            return _refusal(error)

    async def list_roots_callback(
        self, context: ClientRequestContext
    ) -> types.ListRootsResult | types.ErrorData:
        """``list_roots_callback``: the request becomes its call's ``exec.roots``."""
        call = self._find(context.meta)
        if call is None:
            return _unattributed("roots")
        try:
            return await roots_for(call.exec)
        except Exception as error:
            if call.exec.signal.aborted:
                await call.stopped()
                return types.ErrorData(
                    code=types.INVALID_REQUEST, message="the toolseam call was aborted"
                )
            return _refusal(error)

    # -- for McpToolDefinition and register_mcp_tools -----------------------------------------

    def _enter(self, exec: ToolRunContext) -> tuple[_Call, contextvars.Token[_Call | None]]:
        """Track a call in flight (from its body, around its request)."""
        call = _Call(secrets.token_hex(8), exec)
        self._calls[call.tag] = call
        return call, _CURRENT.set(call)

    def _leave(self, call: _Call, token: contextvars.Token[_Call | None]) -> None:
        _CURRENT.reset(token)
        self._calls.pop(call.tag, None)
        call.ended.set()

    def _meta(self, call: _Call) -> dict[str, Any]:
        """The ``_meta`` of the call's requests: its tag, and the 2026 log opt-in."""
        meta: dict[str, Any] = {CALL_META_KEY: call.tag}
        if self._log_level is not None:
            meta[types.LOG_LEVEL_META_KEY] = self._log_level
        return meta

    async def _attach(self, session: ClientSession) -> None:
        """Ask a handshake-era server that has logging for the log level (once a connection)."""
        level = self._log_level
        capabilities = session.server_capabilities
        if (
            level is None
            or session.protocol_version in MODERN_PROTOCOL_VERSIONS
            or capabilities is None
            or capabilities.logging is None
        ):
            return
        # `send_request`, not `set_logging_level`, which the SDK marks deprecated.
        request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))
        await session.send_request(request, types.EmptyResult)

    def _find(self, meta: Mapping[str, Any] | None) -> _Call | None:
        tag = None if meta is None else meta.get(CALL_META_KEY)
        if tag is not None:
            # Tagged: that call, or none (it has ended; a late message is not re-homed).
            return self._calls.get(tag) if type(tag) is str else None
        current = _CURRENT.get()
        if current is not None and self._calls.get(current.tag) is current:
            return current
        if len(self._calls) == 1:
            return next(iter(self._calls.values()))
        return None


def _unattributed(capability: str) -> types.ErrorData:
    return types.ErrorData(
        code=types.INVALID_REQUEST,
        message=f"{capability} refused: no toolseam tool call in flight to relay it to",
    )


def _refusal(error: Exception) -> types.ErrorData:
    """What the server hears when the caller cannot answer (unavailable, failed, ended)."""
    unavailable = isinstance(error, ToolError) and error.code == CAPABILITY_UNAVAILABLE
    ended = isinstance(error, RuntimeError)  # the call settled while the request travelled
    code = types.INVALID_REQUEST if unavailable or ended else types.INTERNAL_ERROR
    return types.ErrorData(code=code, message=safe_str(error))


async def elicit_for(exec: ToolRunContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    """An MCP elicitation request, asked through ``exec.elicit`` (form mode only).

    Raises:
        ValueError: A URL-mode request.
        Exception: Whatever ``exec.elicit`` raises (its abort reason, ``ToolError``).
    """
    if not isinstance(params, types.ElicitRequestFormParams):
        raise ValueError("URL-mode elicitation is not relayed by toolseam (form mode only)")
    schema = cast("Mapping[str, JsonValue]", params.requested_schema)
    answer = await exec.elicit(params.message, schema)
    content = None if answer.content is None else plain_json(answer.content)
    return types.ElicitResult(action=answer.action, content=content)


async def roots_for(exec: ToolRunContext) -> types.ListRootsResult:
    """An MCP ``roots/list`` request, asked through ``exec.roots``.

    Raises:
        ValueError: A root MCP cannot carry (its ``uri`` is not a ``file://`` URI).
        Exception: Whatever ``exec.roots`` raises (its abort reason, ``ToolError``).
    """
    roots = await exec.roots()
    try:
        listed = [types.Root.model_validate({"uri": root.uri, "name": root.name}) for root in roots]
        return types.ListRootsResult(roots=listed)
    except ValidationError:
        raise ValueError("a root's uri is not a file:// URI, as MCP's roots are") from None


async def sample_for(
    exec: ToolRunContext, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    """An MCP sampling request, asked through ``exec.sample`` (without tools).

    Raises:
        ValueError: A request with tools, or a completion MCP cannot carry back.
        Exception: Whatever ``exec.sample`` raises (its abort reason, ``ToolError``).
    """
    if params.tools:
        raise ValueError("sampling with tools is not relayed by toolseam")
    messages = [
        message.model_dump(by_alias=True, mode="json", exclude_none=True)
        for message in params.messages
    ]
    preferences = params.model_preferences
    answer = await exec.sample(
        cast("list[Mapping[str, JsonValue]]", messages),
        max_tokens=params.max_tokens,
        system_prompt=params.system_prompt,
        temperature=params.temperature,
        stop_sequences=params.stop_sequences or (),
        model_preferences=(
            None
            if preferences is None
            else preferences.model_dump(by_alias=True, mode="json", exclude_none=True)
        ),
        metadata=cast("Mapping[str, JsonValue] | None", params.metadata),
    )
    if len(answer.content) != 1:
        raise ValueError(
            f"the completion has {len(answer.content)} content blocks; an MCP sampling "
            "answer without tools carries exactly one"
        )
    try:
        content = _SAMPLING_CONTENT.validate_python(plain_json(answer.content[0]))
    except ValidationError:
        raise ValueError(
            "the completion's content block is not text, an image or audio, as MCP sampling "
            "answers are"
        ) from None
    return types.CreateMessageResult(
        role=answer.role, content=content, model=answer.model, stop_reason=answer.stop_reason
    )
