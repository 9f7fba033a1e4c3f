"""Cancel one network or pipe operation when a signal aborts, and let it unwind first."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

import anyio

from .._signals import AbortSignal

__all__ = ["raise_abort", "run_unless_aborted"]

_T = TypeVar("_T")


async def run_unless_aborted(
    signal: AbortSignal, operation: Callable[[], Awaitable[_T]]
) -> tuple[_T] | None:
    """Await ``operation()``, or cancel it once ``signal`` aborts.

    This is for operations the helpers own end to end (sending a request, reading one
    chunk, waiting for pipes), never for a tool body: the operation must release what it
    holds when cancelled (httpcore closes the connection, shielded, before the cancellation
    leaves it). Always reaches a checkpoint.

    Returns:
        ``(value,)`` when the operation finished; ``None`` when the abort cancelled it (or
        the signal had aborted before it started, and it never did), and it has unwound.

    Raises:
        Exception: What the operation raised, unchanged (never wrapped in a group), unless
            the abort had already cancelled it: an error raised while it was being
            cancelled is the abort's doing, and the outcome is the abort.
    """
    if signal.aborted:
        await anyio.lowlevel.checkpoint()
        return None
    outcome: tuple[_T] | None = None
    failure: Exception | None = None
    cancelled_by_abort = False

    async def cancel_when_aborted(scope: anyio.CancelScope) -> None:
        nonlocal cancelled_by_abort
        await signal.wait()
        cancelled_by_abort = True
        scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(cancel_when_aborted, group.cancel_scope)
        # A failure is kept and re-raised outside the group: raised inside, anyio would
        # hand it on wrapped in an ExceptionGroup. Cancellations pass through untouched.
        try:
            outcome = (await operation(),)
        except Exception as error:
            failure = error
        group.cancel_scope.cancel()
    if failure is not None and not cancelled_by_abort:
        raise failure
    return outcome


def raise_abort(signal: AbortSignal) -> NoReturn:
    """Raise the abort of ``signal``, which has aborted (as ``raise_if_aborted()`` does)."""
    signal.raise_if_aborted()
    raise AssertionError("raise_abort() needs a signal that has aborted")
