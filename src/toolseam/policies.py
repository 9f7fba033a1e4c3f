"""Around-dispatch policies. ``registry.on_execute(timeout_policy(registry))``."""

from __future__ import annotations

import logging

import anyio

from ._errors import ToolTimeoutError
from ._registry import ToolRegistry
from ._results import ErrorInfo, ToolFailure, ToolResult
from ._signals import AbortController, fuse
from ._stages import AroundDispatch, Next
from ._views import ToolDispatchExecution

__all__ = ["timeout_policy"]

_TIMEOUT_INFO = ErrorInfo("ToolTimeoutError", "TOOL_TIMEOUT")
_logger = logging.getLogger("toolseam")


async def _expire(deadline: AbortController, reason: ToolTimeoutError, seconds: float) -> None:
    # Never raises: a failing timer would make its task group cancel the delegation.
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        raise
    except Exception:  # pragma: no cover - register() validates timeouts
        _logger.exception("timeout timer failed; the deadline fires now")
    deadline.abort(reason)


def _timeout_message(seconds: float) -> str:
    # contract §7: the timeout as Python's repr of the float (5.0s, 0.1234567s).
    return f"tool call timed out after {seconds!r}s"


def timeout_policy(registry: ToolRegistry) -> AroundDispatch:
    """An around-dispatch wrapper that gives each tool with a ``timeout`` its own deadline.

    For such a tool it replaces ``exec.signal`` with a fusion of the upstream signal and its
    own deadline, delegates, and restores the upstream signal. Only when *its own* deadline
    was the first abort does it replace the result with `TOOL_TIMEOUT`
    (``tool call timed out after <timeout>s``); a caller abort that came first stays
    `ABORTED`. It never races the body: the deadline aborts the body's signal, and the
    wrapper waits for the body to settle like every other stage. Tools without a timeout
    are delegated untouched.

    Args:
        registry: Where to look up each call's tool definition (and its ``timeout``).
    """

    async def timeout_wrapper(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
        definition = registry.get(exec.name)
        seconds = None if definition is None else definition.timeout
        if seconds is None:
            return await next()
        upstream = exec.signal
        deadline = AbortController()
        # The identity of this reason is how the policy recognizes its own abort.
        reason = ToolTimeoutError(_timeout_message(seconds))
        result: ToolResult | None = None
        failure: Exception | None = None
        with fuse(upstream, deadline.signal) as fused:
            exec.signal = fused.signal
            try:
                # The task group only hosts the timer. Its scope is cancelled after
                # `next()` has returned, to stop the timer: the delegation itself is
                # never cancelled or raced (SPEC §7).
                async with anyio.create_task_group() as timer:
                    timer.start_soon(_expire, deadline, reason, seconds)
                    try:
                        result = await next()
                    except Exception as error:
                        # Re-raised below, unwrapped: a task group would turn it into
                        # an ExceptionGroup and lose its ErrorInfo.
                        failure = error
                    timer.cancel_scope.cancel()
            finally:
                exec.signal = upstream
        if failure is not None:
            raise failure
        assert result is not None  # the timer's scope never swallows the delegation
        if fused.signal.reason is not reason:
            return result
        return ToolFailure.from_message(
            reason.message,
            info=_TIMEOUT_INFO,
            additional_contexts=result.additional_contexts,
        )

    return timeout_wrapper
