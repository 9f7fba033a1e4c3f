"""Run a synchronous tool body in a worker thread, awaited until the thread returns.

A thread cannot be cancelled, so host cancellation must not abandon it (contract §5,
"Quiescence"): on cancellation the body's signal is aborted, so a cooperative body sees
``exec.signal.aborted`` or wakes from ``wait_sync``, and the caller waits, shielded, until
the thread has returned before the cancellation propagates.

Three rules shape the code (contract §5, "Worker threads"):

* **The limit holds.** This module takes the thread-limit token itself and gives it back
  only once the thread has returned. anyio, asked to let go of a thread on cancellation
  (``abandon_on_cancel=True``, so the cancellation reaches us at once), would hand the
  token back while the thread still runs; it only ever sees an unbounded limiter.
* **Nested sync tools never deadlock.** A sync body that dispatches a nested sync tool
  (through ``anyio.from_thread``) blocks its thread, and so its token, until the nested
  call ends. Were the nested body to queue for the same limiter, enough such outer calls
  would hold every token and wait for ever. So each level of nesting has a limiter of its
  own: level 0 is anyio's default thread limiter, level ``n`` serves bodies with ``n``
  sync-body ancestors. A body waits only for tokens of its own level, which bodies of
  deeper levels never hold, so the deepest level always progresses. The level travels on
  the execution token that ``nested_input`` forwards as ``parent``.
* **"Invoked" means the function started.** A job withdrawn before a thread ran it (the
  host cancelled, or the call aborted while it queued for a token) never ran: the run is
  marked not invoked, so it ends ``ABORTED_BEFORE_DISPATCH``.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from ._errors import AbortError
from ._run import CallState, _body_failure
from ._signals import AbortController, AbortSignal, abort_owned, in_loop

__all__ = ["abort_for_host", "run_in_worker_thread"]

T = TypeVar("T")

logger = logging.getLogger("toolseam")

# Per event loop: the limiter of each nesting level, and one unbounded limiter that anyio's
# own accounting sees (the real limit is the level limiter, held here until the thread ends).
_level_limiters: anyio.lowlevel.RunVar[list[anyio.CapacityLimiter]] = anyio.lowlevel.RunVar(
    "toolseam_thread_levels"
)
_unbounded: anyio.lowlevel.RunVar[anyio.CapacityLimiter] = anyio.lowlevel.RunVar(
    "toolseam_unbounded_limiter"
)

HOST_CANCELLED = "the call was cancelled by its host"


class _Job:
    """The hand-off between the awaiting task and the thread; guarded by ``lock``."""

    __slots__ = ("error", "finished", "lock", "started", "withdrawn")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = False
        self.withdrawn = False
        self.error: BaseException | None = None  # what the body raised, if it raised
        self.finished = AbortController()  # "aborted" once the body has returned


def _level_limiter(level: int) -> anyio.CapacityLimiter:
    try:
        levels = _level_limiters.get()
    except LookupError:
        levels = [anyio.to_thread.current_default_thread_limiter()]
        _level_limiters.set(levels)
    while len(levels) <= level:
        levels.append(anyio.CapacityLimiter(levels[0].total_tokens))
    return levels[level]


def _unbounded_limiter() -> anyio.CapacityLimiter:
    try:
        return _unbounded.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(math.inf)
        _unbounded.set(limiter)
        return limiter


def abort_for_host(signal: AbortSignal) -> None:
    """Abort the body's own signal because the host cancelled the call.

    A ``KeyboardInterrupt`` or ``SystemExit`` that an abort listener raises must not cut
    short the host-cancellation path (the wait for a thread body, the one result, the
    re-raise of the host's cancellation): it is logged, and the host's cancellation wins.
    """
    interrupt = abort_owned(signal, AbortError(HOST_CANCELLED))
    if interrupt is not None:
        logger.error(
            "an abort listener raised %s while the host cancelled a call; the host's "
            "cancellation propagates",
            type(interrupt).__name__,
            exc_info=interrupt,
        )


async def run_in_worker_thread(run: CallState, call: Callable[[], T]) -> T:
    """Run ``call`` in a worker thread and await it until it returns, even when cancelled.

    The body's signal is the registry's own fusion (``run._host``): on host cancellation
    this function aborts it, so the body hears of the cancellation. Raises `AbortError`
    (with the run marked not invoked) when the call aborts before a thread starts it.
    """
    # Fused before the thread starts: the thread never races the event loop to make it.
    host = run._host if run._pending is None else run._body_signal()
    reach = run._reach
    if reach is not None:
        reach.enter_thread()  # the body's events will come from its worker thread
    assert host is not None, "sync bodies run inside the registry's body invocation"
    token = run._the_token()
    level = token._thread_level
    limiter = _level_limiter(level)
    job = _Job()
    try:
        acquired = await _acquire(limiter, job, host)
    except anyio.get_cancelled_exc_class():
        run._never_started()  # the host cancelled while the job queued
        raise
    if not acquired:
        run._never_started()
        raise AbortError(host.reason)
    # Calls the body makes from its thread (with this token as their parent) are one
    # level deeper; restored for whatever the token is used for after the thread.
    token._thread_level = level + 1
    try:
        return await _run_job(run, job, host, call)
    finally:
        token._thread_level = level
        limiter.release_on_behalf_of(job)


async def _run_job(run: CallState, job: _Job, host: AbortSignal, call: Callable[[], T]) -> T:
    def target() -> T | None:
        with job.lock:
            if job.withdrawn:
                return None  # cancelled before the body started: never start it
            job.started = True
        try:
            return call()
        except BaseException as error:
            # Kept here and raised again in the event loop's thread, never handed to the
            # thread machinery: anyio's and trio's hand-offs call methods of the exception
            # (``isinstance``, ``with_traceback``), and one that raises there loses the
            # thread's outcome, so the call would wait for ever (contract §8).
            job.error = error
            return None
        finally:
            job.finished.abort()

    try:
        result = await anyio.to_thread.run_sync(
            target, abandon_on_cancel=True, limiter=_unbounded_limiter()
        )
    except anyio.get_cancelled_exc_class():
        with job.lock:
            job.withdrawn = True
            started = job.started
        if not started:
            run._never_started()  # contract §5.6: the function never started
            raise
        # Tell the body, then wait for it: the thread is never abandoned.
        abort_for_host(host)
        await _wait_uninterruptibly(job.finished)
        # What the body raised before the cancellation reached us stays its outcome
        # (contract §5: cancellation never replaces a failure), on every backend; a body
        # that stopped because it was told to (it raised the host's reason, or a nested
        # call's cancellation reached it) has no failure of its own.
        error = job.error
        if error is not None and not _stopped_for_host(error, host):
            run._body_result = _body_failure(run, error)
        raise
    if job.withdrawn:  # pragma: no cover - only set on the cancellation path above
        raise AssertionError("a withdrawn job returned")
    error = job.error
    if error is not None:
        raise error
    return result  # type: ignore[return-value]  # only None when withdrawn or raised


def _stopped_for_host(error: BaseException, host: AbortSignal) -> bool:
    """Whether a thread body's ``error`` is it stopping for the host's cancellation.

    ``host`` has aborted (`abort_for_host`): ``raise_if_aborted()`` raises its reason, a
    body may raise an `AbortError` of its own, and a nested call the body awaited through
    ``anyio.from_thread`` raises the cancellation. Only ``type(error)`` is trusted (a
    hostile ``__class__`` may raise).
    """
    if error is host._reason or issubclass(type(error), AbortError):
        return True
    return issubclass(type(error), anyio.get_cancelled_exc_class())


async def _acquire(limiter: anyio.CapacityLimiter, job: _Job, signal: AbortSignal) -> bool:
    """Take a thread token for ``job``; ``False`` if ``signal`` aborts first.

    Waiting for a token is not the body: an abort (from whichever thread) stops the wait,
    so aborting a tree of nested sync calls ends the calls still queued in it.
    """
    try:
        limiter.acquire_on_behalf_of_nowait(job)
    except anyio.WouldBlock:
        with anyio.CancelScope() as scope:
            registration = signal.add_listener(in_loop(scope.cancel))
            try:
                await limiter.acquire_on_behalf_of(job)
            finally:
                registration.remove()
        if scope.cancelled_caught:
            return False
    if signal.aborted:
        limiter.release_on_behalf_of(job)
        return False
    return True


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
