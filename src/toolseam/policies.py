"""Around-dispatch policies. ``registry.on_execute(timeout_policy(registry))``."""

from __future__ import annotations

from typing import final

from ._chain import _Next
from ._registry import ToolRegistry
from ._results import ToolResult
from ._run import DispatchView
from ._signals import fuse
from ._stages import AroundDispatch, Next
from ._timeouts import ELSEWHERE, Deadline, TimeoutPolicyBase
from ._views import ToolDispatchExecution

__all__ = ["timeout_policy"]


def _is_innermost(next: object) -> bool:
    """Whether ``next`` is the registry's own innermost ``next``: the body's dispatch."""
    return type(next) is _Next and next._innermost


def timeout_policy(registry: ToolRegistry) -> AroundDispatch:
    """An around-dispatch wrapper that gives each tool with a ``timeout`` its own deadline.

    For such a tool it replaces ``exec.signal`` with a fusion of the upstream signal and its
    own deadline, delegates, and restores the upstream signal. Only when *its own* deadline
    was the first abort does it replace the result with `TOOL_TIMEOUT`
    (``tool call timed out after <timeout>s``, the timeout as Python's ``repr`` of the
    float); a caller abort that came first stays `ABORTED`. It never races the body: the
    deadline aborts the body's signal, and the wrapper waits for the body to settle like
    every other stage. Tools without a timeout are delegated untouched.

    A `ToolRegistry` enforces timeouts by default as if this policy were its innermost
    wrapper (``timeouts=True``); registering the policy yourself places it where you
    register it instead. A call's timeout is enforced once: the first policy to see the
    call owns it, and every later one (the registry's own included) delegates untouched.

    Args:
        registry: Where to look up each call's tool definition (and its ``timeout``).
    """
    return _TimeoutPolicy(registry)


@final
class _TimeoutPolicy(TimeoutPolicyBase):
    """What `timeout_policy` returns: an around-dispatch wrapper."""

    __slots__ = ("_tools",)

    def __init__(self, registry: ToolRegistry) -> None:
        super().__init__(registry)
        self._tools = registry

    async def __call__(self, exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
        """Enforce the called tool's timeout, if it has one, around ``next``."""
        definition = self._tools.get(exec.name)
        seconds = None if definition is None else definition.timeout
        if seconds is None:
            return await next()
        if type(exec) is DispatchView:
            run = exec._run
            if run._deadline is not None:
                return await next()  # contract §5: never enforced twice
            if _is_innermost(next):
                # Nothing runs between this wrapper and the body, so nothing but the body
                # could see the fused signal: the registry enforces this deadline around the
                # body itself, as its built-in policy does (the same deadline, fused into
                # the body's signal when the body first reads it, the same TOOL_TIMEOUT),
                # at a fraction of the cost of a fusion per call.
                deadline = run._deadline = Deadline(seconds, run._caller_signal, exec.signal)
                try:
                    return await next()
                finally:
                    deadline.cancel()  # also when the body was never invoked
            run._deadline = ELSEWHERE  # this wrapper owns the call's timeout
        upstream = exec.signal
        deadline = Deadline(seconds)
        with fuse(upstream, deadline.signal) as fused:
            exec.signal = fused.signal
            try:
                result = await next()
            finally:
                deadline.cancel()
                exec.signal = upstream
        if deadline.owns(fused.signal):
            return deadline.timed_out(result)
        return result
