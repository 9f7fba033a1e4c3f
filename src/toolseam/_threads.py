"""Run a synchronous tool body in a worker thread, awaited until the thread returns.

A thread cannot be cancelled, so host cancellation must not abandon it (SPEC §5,
"Quiescence"): on cancellation the body's signal is aborted, so a cooperative body sees
``exec.signal.aborted`` or wakes from ``wait_sync``, and the caller waits, shielded, until
the thread has returned before the cancellation propagates.

toolseam uses its own executor rather than ``anyio.to_thread``: a job submitted here always
runs, so "wait until it has returned" can never wait for a job that was silently dropped.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import anyio

from ._errors import AbortError
from ._run import Run
from ._signals import AbortController, fuse

__all__ = ["run_in_worker_thread"]

T = TypeVar("T")

_MAX_WORKERS = max(40, (os.cpu_count() or 1) * 5)
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _get_executor() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(_MAX_WORKERS, thread_name_prefix="toolseam-body")
        return _executor


async def run_in_worker_thread(run: Run, call: Callable[[], T]) -> T:
    """Run ``call`` in a worker thread and await it until it returns, even when cancelled."""
    host = AbortController()
    finished = AbortController()
    with fuse(run._signal, host.signal) as fused:
        previous = run._signal
        run._signal = fused.signal
        try:
            context = contextvars.copy_context()
            future: Future[T] = _get_executor().submit(context.run, call)
            future.add_done_callback(lambda _future: finished.abort())
            try:
                await finished.signal.wait()
            except BaseException:
                # Host cancellation (or an interrupt): tell the body, then wait for it.
                host.abort(AbortError("the call was cancelled by its host"))
                with anyio.CancelScope(shield=True):
                    await finished.signal.wait()
                raise
            return future.result()
        finally:
            run._signal = previous
