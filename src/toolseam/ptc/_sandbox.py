"""One run's sandbox: a Monty worker process, driven from a thread, killed at the OS layer.

pydantic-monty's asyncio bindings (``AsyncMonty``) need a running asyncio loop, so the
synchronous bindings are used on every backend: the run's driver thread (an anyio worker
thread, which works on asyncio and trio alike) checks the worker out, steps the program and
closes the session. Monty has no way to interrupt a running program, so stopping one is a
``SIGKILL`` of the worker process, sent from the event loop through a pidfd (Linux) so that
a recycled pid is never hit; the process has exited when the pidfd turns readable.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, final

import anyio
import anyio.to_thread
from pydantic_monty import (
    FunctionSnapshot,
    FutureSnapshot,
    Monty,
    MontyComplete,
    MontySession,
    NameLookupSnapshot,
    OSPolicy,
    ResourceLimits,
)

from ._output import Printed

__all__ = ["Completed", "Sandbox", "Step"]

# Sleeps come back to the host (`Run` waits for them, and stops waiting when the run stops).
_OS_POLICY: Final[OSPolicy] = {"sleep": "call_host"}
# Monty caps the host round trips of a checkout (1000 by default); `Run` counts nested calls
# itself, so this cap only has to stay out of the way.
_MAX_SUSPENSIONS: Final = 1 << 40


@final
@dataclass(frozen=True, slots=True)
class Completed:
    """The program ran to its end; ``output`` is its last expression's value (or ``None``)."""

    output: object


Step = FunctionSnapshot | FutureSnapshot | NameLookupSnapshot | Completed


def _pidfd(pid: int) -> int | None:
    opener: Callable[[int], int] | None = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return opener(pid)
    except OSError:  # pragma: no cover - kernels before 5.3, or a worker already gone
        return None


@final
class Sandbox:
    """The worker one run checked out of the pool, and the one way to stop it: a kill.

    `start`, `step` and `close_session` block: the run's driver thread calls them. `doom`,
    `kill` and `close` are called from the event loop and never block it.
    """

    __slots__ = (
        "_doomed",
        "_limiter",
        "_limits",
        "_lock",
        "_pid",
        "_pidfd",
        "_pool",
        "_session",
        "killed",
        "output",
    )

    def __init__(
        self,
        pool: Monty,
        limiter: anyio.CapacityLimiter,
        *,
        max_memory: int | None,
        output_chars: int,
    ) -> None:
        self._pool = pool
        self._limiter = limiter
        self._limits: ResourceLimits = {"max_suspensions": _MAX_SUSPENSIONS}
        if max_memory is not None:
            self._limits["max_memory"] = max_memory
        self._lock = threading.Lock()
        self._session: MontySession | None = None
        self._pid: int | None = None
        self._pidfd: int | None = None
        self._doomed = False
        self.killed = False
        """Whether `kill` reached the worker process (so a crash after it is this kill)."""
        # Not pydantic-monty's `CollectString`: past its cap it fails the program with a
        # `MemoryError` the program cannot catch. This one keeps what fits and counts the rest.
        self.output = Printed(output_chars)
        """What the program printed, bounded."""

    @property
    def pid(self) -> int | None:
        """The worker's process id while this run holds it."""
        return self._pid

    def doom(self) -> None:
        """The run is stopping: its worker is never handed back to the pool, but killed."""
        with self._lock:
            self._doomed = True

    def kill(self) -> None:
        """Kill the worker process now (or as soon as it is checked out); never blocks."""
        with self._lock:
            self._doomed = True
            if self._session is not None and not self.killed:
                self._send_kill()

    async def close(self) -> None:
        """Once the driver is done: wait until a killed worker's process has exited."""
        if self._session is not None:  # pragma: no cover - the driver closes its session
            await anyio.to_thread.run_sync(self.close_session, limiter=self._limiter)
        pidfd = self._pidfd
        if pidfd is None:
            return
        try:
            if self.killed:
                # The process has exited when its pidfd turns readable (contract: `run_code`
                # returns only once the sandbox process is gone).
                await anyio.wait_readable(pidfd)
        finally:
            self._pidfd = None
            os.close(pidfd)

    # Everything below runs in the driver thread, or under the lock.

    def _send_kill(self) -> None:
        self.killed = True
        pidfd = self._pidfd
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        elif self._pid is not None:  # pragma: no cover - no pidfd on this platform
            os.kill(self._pid, signal.SIGKILL)

    def start(self, code: str) -> Step:
        """Check a worker out and start ``code`` in it; the first suspension, or the end."""
        session = self._pool.checkout(
            script_name="program.py", limits=self._limits, os_policy=_OS_POLICY
        )
        session.__enter__()
        with self._lock:
            self._session = session
            self._pid = pid = session.worker_pid
            self._pidfd = None if pid is None else _pidfd(pid)
            if self._doomed:
                # Stopped while the checkout waited: the worker never runs the program.
                self._send_kill()
        return self.step(lambda: session.feed_start(code, print_callback=self.output))

    def step(self, resume: Callable[[], Any]) -> Step:
        """Run one ``resume`` of the program until its next suspension, or its end."""
        try:
            step = resume()
        except BaseException:
            self.close_session()
            raise
        if isinstance(step, MontyComplete):
            completed = Completed(step.output)
            self.close_session()
            return completed
        return step  # type: ignore[no-any-return]

    def close_session(self) -> None:
        """Hand the worker back to the pool, or leave a doomed one killed; idempotent."""
        with self._lock:
            session, self._session = self._session, None
            if session is not None and self._doomed and not self.killed:
                # A stopped run never hands its worker back, even one that ended by itself.
                self._send_kill()
        if session is not None:
            session.__exit__(None, None, None)


if sys.platform == "win32":  # pragma: no cover
    raise ImportError("toolseam.ptc needs a POSIX system (it stops sandboxes with SIGKILL)")
