"""One call's progress and log events on their way into a framework's own stream.

The registry hands a body's events to `ToolHost.on_progress` and ``on_log`` synchronously, in
the event loop's thread, where they must not block (contract §5). A framework takes events
through an async API instead (pydantic-ai's ``RunContext.emit``, LangChain's
``adispatch_custom_event``, an ``on_stream`` callback of the OpenAI Agents SDK's kind). So
`call_events` buffers them and a task of the call's own, started at its first event, hands
them on in order; when the call is over it waits for that task to deliver what is left, so
every event a body reported reaches the framework before the call's result does. Nothing
outlives the call: the task belongs to a task group inside it, and a host cancellation
cancels it with the call. A call that reports nothing costs a task group, no task.

The caller's own `ToolHost`, when an integration is given one, is merged in: its progress
and log sinks see every event as well (after the framework's buffer took it), and its
``elicit`` and ``sample`` are the body's.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TypeAlias, TypeVar, cast, final

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._capabilities import LogEvent, ProgressEvent, ToolEvent
from .._views import ToolExecution, ToolHost

try:
    import sniffio
except ModuleNotFoundError:  # pragma: no cover - anyio runs without it (asyncio only)
    sniffio = None  # type: ignore[assignment]

__all__ = ["Deliver", "call_events", "check_host", "resolve_host"]

logger = logging.getLogger("toolseam")

C = TypeVar("C")

Deliver: TypeAlias = Callable[[ToolExecution, ToolEvent], Awaitable[None]]
"""Hands one event on to the framework (awaited in the call's delivering task)."""

_Item: TypeAlias = tuple[ToolExecution, ToolEvent]


def check_host(option: object) -> None:
    """Refuse an integration's ``host=`` option that is neither a `ToolHost` nor a factory."""
    if option is not None and not isinstance(option, ToolHost) and not callable(option):
        raise TypeError(
            "host must be a ToolHost, a callable making one per call, or None, got "
            f"{type(option).__name__}"
        )


def resolve_host(
    option: ToolHost | Callable[[C], ToolHost | None] | None, context: C
) -> ToolHost | None:
    """The caller's `ToolHost` for one call: the one given, or what the factory makes of it.

    Raises:
        TypeError: The factory returned something else than a `ToolHost` or ``None``.
    """
    if option is None or isinstance(option, ToolHost):
        return option
    made = cast("object", option(context))  # checked: an untyped factory may return anything
    if made is not None and not isinstance(made, ToolHost):
        raise TypeError(
            f"the host factory must return a ToolHost or None, got {type(made).__name__}"
        )
    return made


@contextlib.asynccontextmanager
async def call_events(deliver: Deliver, user: ToolHost | None) -> AsyncGenerator[ToolHost, None]:
    """The `ToolHost` of one call, whose events ``deliver`` hands on while the call runs.

    Use it around the call (``async with call_events(...) as host: await
    registry.execute(ToolExecutionInput(..., host=host))``). On leaving normally, the events
    still buffered are delivered before the block's result goes on; on leaving with an
    exception (a host cancellation included) the delivering task is cancelled and the
    exception goes on unchanged. An exception ``deliver`` raises is logged (once per call)
    and contained, and later events are still offered. The buffer is unbounded: a body is
    never held up by a slow framework.
    """
    held: BaseException | None = None
    buffer: _Buffer | None = None
    try:
        async with anyio.create_task_group() as group:
            buffer = _Buffer(group, deliver)
            try:
                yield _merged(buffer.put, user)
            except anyio.get_cancelled_exc_class():
                raise  # the task group cancels the drain; the cancellation goes on as it is
            except BaseException as error:
                # Not wrapped in the task group's exception group: what the block raised (a
                # KeyboardInterrupt the registry let through, say) propagates as it is.
                held = error
                group.cancel_scope.cancel()
            finally:
                buffer.close()  # the drain delivers what is left, then returns
    finally:
        if buffer is not None:
            buffer.dispose()
    if held is not None:
        raise held


@final
class _Buffer:
    """One call's events on their way from the registry's sinks to ``deliver``.

    Most calls report nothing, so the stream and the task that drains it are made at the
    first event, in the event loop's thread (where the registry calls the sinks).
    """

    __slots__ = ("_context", "_deliver", "_group", "_receive", "_send")

    def __init__(self, group: TaskGroup, deliver: Deliver) -> None:
        self._group: TaskGroup | None = group  # None once the call is over
        self._deliver = deliver
        self._send: MemoryObjectSendStream[_Item] | None = None
        self._receive: MemoryObjectReceiveStream[_Item] | None = None
        # The call task's context, for starting the drain from a loop callback (a `def`
        # body's events arrive in one): there no task tells anyio which library runs the
        # loop, so this copy names it the way async libraries do, in sniffio's variable.
        # The drain runs in this context, as a task started by the call's task would.
        self._context = contextvars.copy_context()
        if sniffio is not None:
            library = sniffio.current_async_library()
            self._context.run(sniffio.current_async_library_cvar.set, library)

    def put(self, exec: ToolExecution, event: ToolEvent) -> None:
        """Buffer one event (a `ToolHost` sink: never blocks, never raises)."""
        send = self._send
        if send is None:
            group = self._group
            if group is None:
                return  # the call is over: the registry ignores its late events anyway
            send, receive = anyio.create_memory_object_stream[_Item](math.inf)
            self._send, self._receive = send, receive
            self._context.run(group.start_soon, _drain, receive, self._deliver)
        # Closed: the call is over; broken: the drain is gone with a host cancellation.
        # Either way nobody is left to tell.
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            send.send_nowait((exec, event))

    def close(self) -> None:
        """No more events: the drain, if any, returns once it delivered what is buffered."""
        self._group = None
        if self._send is not None:
            self._send.close()

    def dispose(self) -> None:
        """Close both ends of the stream, if there is one."""
        if self._send is not None:
            self._send.close()
        if self._receive is not None:
            self._receive.close()


async def _drain(receive: MemoryObjectReceiveStream[_Item], deliver: Deliver) -> None:
    failed = False
    async for exec, event in receive:
        try:
            await deliver(exec, event)
        except Exception as error:
            if not failed:
                failed = True
                logger.error(
                    "delivering tool %r's %s to the framework raised; contained (later "
                    "failures of this call are not logged)",
                    exec.name,
                    type(event).__name__,
                    exc_info=error,
                )


def _merged(put: Callable[[ToolExecution, ToolEvent], None], user: ToolHost | None) -> ToolHost:
    if user is None:
        return ToolHost(on_progress=put, on_log=put)
    user_progress, user_log = user.on_progress, user.on_log

    def on_progress(exec: ToolExecution, event: ProgressEvent) -> None:
        put(exec, event)
        if user_progress is not None:
            user_progress(exec, event)  # what it raises, the registry logs and contains

    def on_log(exec: ToolExecution, event: LogEvent) -> None:
        put(exec, event)
        if user_log is not None:
            user_log(exec, event)

    return ToolHost(on_progress=on_progress, on_log=on_log, elicit=user.elicit, sample=user.sample)
