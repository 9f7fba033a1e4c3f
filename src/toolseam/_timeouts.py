"""One tool call's deadline: the rule the timeout policy and the registry both follow.

A deadline is an `AbortController` that a loop timer aborts with a reason of its own; that
reason's identity is how the owner tells "my deadline came first" from a caller's abort
(contract §7). It never touches the body: it only aborts a signal the body can observe.
"""

from __future__ import annotations

from typing import final

from ._errors import TOOL_TIMEOUT, ToolTimeoutError
from ._results import ErrorInfo, ToolFailure, ToolResult
from ._signals import AbortController, AbortSignal, _lock, _trigger
from ._timers import TimerHandle, call_later

__all__ = ["Deadline", "timeout_message"]

_TIMEOUT_INFO = ErrorInfo("ToolTimeoutError", TOOL_TIMEOUT)


def timeout_message(seconds: float) -> str:
    """``tool call timed out after 5.0s``: the timeout as Python's repr of the float."""
    return f"tool call timed out after {seconds!r}s"


@final
class Deadline:
    """Aborts `signal` with its own `ToolTimeoutError` once ``seconds`` have passed.

    Arm it inside a running event loop; `cancel` it once the call has settled. The
    controller and the reason are made only when needed: most deadlines never fire, and a
    body that never reads its signal never needs this one's.

    Args:
        seconds: The timeout.
        watch: The other sources of the body's signal, for a body that never fused them:
            `first` then tells whether the deadline came before any of them.
    """

    __slots__ = ("_controller", "_first", "_reason", "_seconds", "_timer", "_watch")

    def __init__(self, seconds: float, watch: tuple[AbortSignal, ...] = ()) -> None:
        self._seconds = seconds
        self._watch = watch
        self._controller: AbortController | None = None
        self._reason: ToolTimeoutError | None = None
        self._first = False
        self._timer: TimerHandle = call_later(seconds, self._expire)

    def _expire(self) -> None:
        with _lock:  # against a signal being made for this deadline in another thread
            self._first = not any(source._aborted for source in self._watch)
            reason = self._reason = ToolTimeoutError(timeout_message(self._seconds))
            controller = self._controller
        if controller is not None:
            controller.abort(reason)

    @property
    def signal(self) -> AbortSignal:
        """Aborted when the deadline passes."""
        with _lock:
            controller = self._controller
            if controller is None:
                controller = self._controller = AbortController()
                if self._reason is not None:
                    _trigger(controller.signal, self._reason)
        return controller.signal

    def sources(self, others: tuple[AbortSignal, ...]) -> tuple[AbortSignal, ...]:
        """``others`` and this deadline's signal, in the order `fuse` should get them.

        A fusion made after some sources aborted takes the reason of the last one given,
        so a deadline that passed after another source aborted goes first (contract §7:
        only a deadline that was the first abort is a timeout).
        """
        if self._reason is not None and not self._first:
            return (self.signal, *others)
        return (*others, self.signal)

    def cancel(self) -> None:
        """Disarm the timer (idempotent)."""
        self._timer.cancel()

    def owns(self, signal: AbortSignal | None) -> bool:
        """Whether this deadline was the first abort of ``signal`` (a fusion of it).

        ``None`` stands for the body's signal that was never fused: then whether the
        deadline passed before any watched source aborted.
        """
        reason = self._reason
        if reason is None:
            return False
        if signal is None:
            return self._first
        return signal._reason is reason

    def timed_out(self, result: ToolResult) -> ToolFailure:
        """The `TOOL_TIMEOUT` failure that replaces ``result``; its contexts are kept."""
        return ToolFailure.from_message(
            timeout_message(self._seconds),
            info=_TIMEOUT_INFO,
            additional_contexts=result.additional_contexts,
        )
