"""Stopping the helpers' own operations: on an abort of the signal, and on host cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

import anyio

from .._signals import AbortSignal, in_loop

__all__ = ["finish_on_cancel", "raise_abort", "run_unless_aborted"]

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
        Exception: What the operation raised, unchanged, unless the abort had already
            cancelled it: an error raised while it was being cancelled is the abort's
            doing, and the outcome is the abort.
    """
    if signal.aborted:
        await anyio.lowlevel.checkpoint()
        return None
    with anyio.CancelScope() as scope:
        # The abort may come from any thread; the scope is cancelled in this loop's.
        registration = signal.add_listener(in_loop(scope.cancel))
        try:
            return (await operation(),)
        except Exception:
            if scope.cancel_called:
                return None
            raise
        finally:
            registration.remove()
    return None  # the abort cancelled the operation (a host cancellation propagates)


def raise_abort(signal: AbortSignal) -> NoReturn:
    """Raise the abort of ``signal``, which has aborted (as ``raise_if_aborted()`` does)."""
    signal.raise_if_aborted()
    raise AssertionError("raise_abort() needs a signal that has aborted")


async def finish_on_cancel(
    operation: Callable[[], Awaitable[_T]], on_cancel: Callable[[], object]
) -> _T:
    """Await ``operation()``; on host cancellation, stop it and await its end, then re-raise.

    On host cancellation ``on_cancel()`` asks the operation to stop (it aborts the
    operation's signal), the operation is awaited to its end whatever further cancellation
    arrives, and the cancellation is re-raised unchanged (contract §5, host cancellation).

    anyio's shield stops anyio's and trio's cancellation, so on trio the operation's own
    shielded cleanup is enough and it runs in the caller's task. asyncio's native
    ``Task.cancel()`` breaks through that shield — hosts such as the OpenAI Agents SDK cancel
    that way, and a second cancel may follow the first — so on asyncio the operation runs
    in a task of its own, which no cancellation of the caller reaches.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return await operation()  # trio
    task = asyncio.ensure_future(_awaited(operation))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            on_cancel()
        while not task.done():
            try:
                with anyio.CancelScope(shield=True):
                    await asyncio.wait({task})
            except asyncio.CancelledError:
                continue  # a native cancel on top of the first: keep waiting
        if not task.cancelled():
            task.exception()  # the cancellation is the outcome; this marks the error seen
        raise


async def _awaited(operation: Callable[[], Awaitable[_T]]) -> _T:
    return await operation()
