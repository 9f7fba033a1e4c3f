"""One tool call's deadline: the rule the timeout policy and the registry both follow.

A deadline is an `AbortController` that a loop timer aborts with a reason of its own; that
reason's identity is how the owner tells "my deadline came first" from a caller's abort
(contract §7). It never touches the body: it only aborts a signal the body can observe.
"""

from __future__ import annotations

import logging
from typing import final

from ._errors import TOOL_TIMEOUT, ToolTimeoutError
from ._results import ErrorInfo, ToolFailure, ToolResult
from ._signals import AbortController, AbortSignal, _lock, _trigger
from ._timers import Timer, arm

__all__ = ["ELSEWHERE", "Deadline", "Elsewhere", "TimeoutPolicyBase", "timeout_message"]

logger = logging.getLogger("toolseam")

_TIMEOUT_INFO = ErrorInfo("ToolTimeoutError", TOOL_TIMEOUT)


def timeout_message(seconds: float) -> str:
    """``tool call timed out after 5.0s``: the timeout as Python's repr of the float."""
    return f"tool call timed out after {seconds!r}s"


@final
class Deadline(Timer):
    """Aborts `signal` with its own `ToolTimeoutError` once ``seconds`` have passed.

    Arm it inside a running event loop; `cancel` it once the call has settled. A deadline
    is its own timer entry, and its controller and reason are made only when needed: most
    deadlines never fire, and a body that never reads its signal never needs this one's.

    Args:
        seconds: The timeout.
        caller: With ``handed``, the other sources of the body's signal, for a body that
            never fused them: `owns` then tells whether the deadline came before both.
        handed: See ``caller``.
    """

    __slots__ = ("_caller", "_controller", "_first", "_handed", "_reason", "_seconds")

    def __init__(
        self,
        seconds: float,
        caller: AbortSignal | None = None,
        handed: AbortSignal | None = None,
    ) -> None:
        self._seconds = seconds
        self._caller = caller
        self._handed = handed
        self._controller: AbortController | None = None
        self._reason: ToolTimeoutError | None = None
        # _first is set with _reason, when the deadline passes, and only read after that.
        self.callback = self
        arm(self, seconds)

    def __call__(self) -> None:
        """The timer fired: the deadline has passed."""
        with _lock:  # against a signal being made for this deadline in another thread
            caller, handed = self._caller, self._handed
            self._first = not (
                (caller is not None and caller._aborted) or (handed is not None and handed._aborted)
            )
            reason = self._reason = ToolTimeoutError(timeout_message(self._seconds))
            controller = self._controller
        if controller is not None:
            interrupt = _trigger(controller.signal, reason)
            if interrupt is not None:
                # An abort listener raised it, in the loop's timer callback (where trio
                # would turn it into a TrioInternalError): the host-cancellation rule
                # (see _threads.abort_for_host), logged; every listener has run.
                logger.error(
                    "an abort listener raised %s when a deadline passed; contained",
                    type(interrupt).__name__,
                    exc_info=interrupt,
                )

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


@final
class Elsewhere:
    """In place of a `Deadline`: a timeout policy enforces the call's timeout itself.

    Only marks the timeout as owned (contract §5: a call's timeout is enforced once); it
    never fires.
    """

    __slots__ = ()

    def sources(self, others: tuple[AbortSignal, ...]) -> tuple[AbortSignal, ...]:
        """``others`` unchanged: no deadline of ours takes part in the body's signal."""
        return others

    def cancel(self) -> None:
        """Nothing to disarm."""

    def owns(self, signal: AbortSignal | None) -> bool:
        """Never: no deadline of ours aborts the body's signal."""
        return False

    def timed_out(self, result: ToolResult) -> ToolFailure:  # pragma: no cover - never owns
        """Unreachable: `owns` is always ``False``."""
        raise AssertionError("a timeout enforced elsewhere never times out here")


ELSEWHERE = Elsewhere()


class TimeoutPolicyBase:
    """The base of `toolseam.policies.timeout_policy`'s wrapper, by which a registry knows it.

    A registry whose only around-dispatch wrapper is a timeout policy over that registry
    runs its calls as with its built-in timeout (the policy as innermost wrapper, which it
    then is, *is* the built-in path): no chain, no view (see `_engine.Engine._stage_dispatch`).

    Args:
        registry: The registry the policy looks tools up in.
    """

    __slots__ = ("registry",)

    def __init__(self, registry: object) -> None:
        self.registry = registry
