"""Run a synchronous tool body in a worker thread, awaited until the thread returns.

A thread cannot be cancelled, so host cancellation must not abandon it (SPEC §5,
"Quiescence"): on cancellation the body's signal is aborted, so a cooperative body sees
``exec.signal.aborted`` or wakes from ``wait_sync``, and the caller waits, shielded, until
the thread has returned before the cancellation propagates.

The body runs in an anyio worker thread (so ``anyio.from_thread`` works inside it). anyio
is asked to let go of the thread on cancellation (``abandon_on_cancel=True``) only so that
the cancellation reaches this function at once; this function then does the waiting itself.
A job that had not started yet when the host cancelled is told not to start at all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

from ._errors import AbortError
from ._run import Run
from ._signals import AbortController, abort_owned

__all__ = ["run_in_worker_thread"]

T = TypeVar("T")


class _Job:
    """The hand-off between the awaiting task and the thread; guarded by ``lock``."""

    __slots__ = ("finished", "lock", "started", "withdrawn")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = False
        self.withdrawn = False
        self.finished = AbortController()  # "aborted" once the body has returned


async def run_in_worker_thread(run: Run, call: Callable[[], T]) -> T:
    """Run ``call`` in a worker thread and await it until it returns, even when cancelled.

    The body's signal is the registry's own fusion (``run._host``): on host cancellation
    this function aborts it, so the body hears of the cancellation.
    """
    host = run._host
    assert host is not None, "sync bodies run inside the registry's body invocation"
    job = _Job()

    def target() -> T | None:
        with job.lock:
            if job.withdrawn:
                return None  # the host cancelled before the body started: never start it
            job.started = True
        try:
            return call()
        finally:
            job.finished.abort()

    try:
        result = await anyio.to_thread.run_sync(target, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        with job.lock:
            job.withdrawn = True
            started = job.started
        if started:
            # Tell the body, then wait for it: the thread is never abandoned.
            abort_owned(host, AbortError("the call was cancelled by its host"))
            await _wait_uninterruptibly(job.finished)
        raise
    return result  # type: ignore[return-value]  # only None when withdrawn


async def _wait_uninterruptibly(finished: AbortController) -> None:
    """Wait until ``finished`` aborts, whatever cancellation arrives meanwhile.

    A shielded scope stops anyio and trio cancellation, but asyncio's native
    ``Task.cancel()`` still interrupts the await; a second one (a timeout or a task group
    tearing down on top of a user's cancel) must not make us abandon the thread. The
    caller re-raises the original cancellation afterwards.
    """
    while not finished.signal.aborted:
        try:
            with anyio.CancelScope(shield=True):
                await finished.signal.wait()
        except anyio.get_cancelled_exc_class():
            continue
