"""One tool call's deadline: the rule the timeout policy and the registry both follow.

A deadline is an `AbortController` that a loop timer aborts with a reason of its own; that
reason's identity is how the owner tells "my deadline came first" from a caller's abort
(contract §7). It never touches the body: it only aborts a signal the body can observe.
"""

from __future__ import annotations

from typing import final

from ._errors import TOOL_TIMEOUT, ToolTimeoutError
from ._results import ErrorInfo, ToolFailure, ToolResult
from ._signals import AbortController, AbortSignal
from ._timers import TimerHandle, call_later

__all__ = ["Deadline", "timeout_message"]

_TIMEOUT_INFO = ErrorInfo("ToolTimeoutError", TOOL_TIMEOUT)


def timeout_message(seconds: float) -> str:
    """``tool call timed out after 5.0s``: the timeout as Python's repr of the float."""
    return f"tool call timed out after {seconds!r}s"


@final
class Deadline:
    """Aborts `signal` with its own `ToolTimeoutError` once ``seconds`` have passed.

    Arm it inside a running event loop; `cancel` it once the call has settled.
    """

    __slots__ = ("_controller", "_reason", "_timer")

    def __init__(self, seconds: float) -> None:
        self._controller = AbortController()
        self._reason = ToolTimeoutError(timeout_message(seconds))
        self._timer: TimerHandle = call_later(seconds, self._expire)

    def _expire(self) -> None:
        self._controller.abort(self._reason)

    @property
    def signal(self) -> AbortSignal:
        """Aborted when the deadline passes."""
        return self._controller.signal

    def cancel(self) -> None:
        """Disarm the timer (idempotent)."""
        self._timer.cancel()

    def owns(self, signal: AbortSignal) -> bool:
        """Whether this deadline was the first abort of ``signal`` (a fusion of it)."""
        return signal._reason is self._reason

    def timed_out(self, result: ToolResult) -> ToolFailure:
        """The `TOOL_TIMEOUT` failure that replaces ``result``; its contexts are kept."""
        return ToolFailure.from_message(
            self._reason.message,
            info=_TIMEOUT_INFO,
            additional_contexts=result.additional_contexts,
        )
