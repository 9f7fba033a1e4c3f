"""Delivering a body's events to whoever listens, in the event loop's thread.

A call whose caller gave a `ToolHost`, or whose registry has event listeners when it
starts, carries a `Delivery`: the host, the listeners it snapshotted (as every stage's
listeners are snapshotted per call, contract §5) and, while a synchronous body runs, how
to hand an event from the worker thread to the event loop without blocking the body. A
call with neither carries ``None``, and ``exec.progress`` costs it a check.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast, final

import anyio.lowlevel

from ._capabilities import ProgressEvent, ToolEvent

if TYPE_CHECKING:
    from ._stages import EventListener
    from ._views import ToolExecution, ToolHost

__all__ = ["Delivery"]


class _Run(Protocol):
    """What delivery reads of the run behind an execution (`_run.CallState`)."""

    _in_body: bool


logger = logging.getLogger("toolseam")


@final
class Delivery:
    """One call's event consumers; see the module docstring."""

    __slots__ = ("host", "listeners", "loop")

    def __init__(self, host: ToolHost | None, listeners: tuple[EventListener, ...]) -> None:
        self.host = host
        self.listeners = listeners
        # While a synchronous body runs: the event loop's thread and how to call into it.
        self.loop: tuple[int, Callable[[Callable[[], object]], object]] | None = None

    def enter_thread(self) -> None:
        """A synchronous body is about to run: its events will come from a worker thread.

        Called in the event loop's thread, before the thread starts.
        """
        native: Any = anyio.lowlevel.current_token().native_token
        post = (
            native.call_soon_threadsafe
            if isinstance(native, asyncio.AbstractEventLoop)
            else native.run_sync_soon  # a trio token
        )
        self.loop = (threading.get_ident(), post)

    def emit(self, exec: ToolExecution, event: ToolEvent) -> None:
        """Hand ``event`` to every consumer: now, or soon in the event loop's thread."""
        loop = self.loop
        if loop is None or threading.get_ident() == loop[0]:
            self._deliver(exec, event)
            return
        # FIFO with the thread's own completion, which is posted the same way: every event
        # a body reported reaches its consumers before its call settles. RuntimeError: the
        # event loop has finished, nobody is left to tell.
        with contextlib.suppress(RuntimeError):
            loop[1](lambda: self._deliver_posted(exec, event))

    def _deliver_posted(self, exec: ToolExecution, event: ToolEvent) -> None:
        # A thread the body left behind may have passed the body's check and posted after
        # the call settled: dropped like any event reported after the body returned. The
        # worker thread's own events are posted before its completion, so they are in time.
        if not cast("_Run", exec)._in_body:
            return
        try:
            self._deliver(exec, event)
        except BaseException as error:  # a loop callback has nowhere to raise it
            _log("an event consumer raised %s in the event loop; contained", error)

    def _deliver(self, exec: ToolExecution, event: ToolEvent) -> None:
        host = self.host
        if host is not None:
            consumer = host.on_progress if type(event) is ProgressEvent else host.on_log
            if consumer is not None:
                try:
                    consumer(exec, event)  # type: ignore[arg-type]
                except Exception as error:
                    _log("ToolHost consumer %r raised; contained", consumer, error)
        for listener in self.listeners:
            try:
                listener(exec, event)
            except Exception as error:
                _log("event listener %r raised; contained", listener, error)


def _log(message: str, *args: object) -> None:
    error = args[-1]
    with contextlib.suppress(Exception):
        logger.error(message, *args[:-1], exc_info=error)  # type: ignore[arg-type]
