"""Turns a DBOS workflow's cancellation and deadline into an abort signal.

``DBOS.cancel_workflow(id)``, from any process that shares the system database, writes
``CANCELLED`` into the workflow's status row and nothing else: no notification, no hook, and
the code of the workflow learns of it only when its next step starts or records (measured on
DBOS 3.4: a step body under way runs on to its end). DBOS's own preemptible steps poll that
row once a second and then cancel the step's task, which toolseam never does to a body. So
one poller per event loop reads the status of every workflow that has calls in flight, in
one query per interval (`DurableTools`' ``poll_interval``, 0.1 s by default), and aborts the
signal of each batch whose workflow it finds cancelled; the bodies are told through their
signals and awaited as always. A workflow's deadline (``SetWorkflowTimeout``) is a timer of
its own, which aborts with a `ToolTimeoutError` reason: the calls it cuts short end
`TOOL_TIMEOUT`, where DBOS would only cancel the workflow once its sweeper sees the deadline.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import weakref
from types import TracebackType
from typing import final

from .._errors import AbortError, ToolTimeoutError
from .._signals import AbortController, AbortSignal
from . import _engine

__all__ = ["WORKFLOW_TIMED_OUT", "Watch"]

logger = logging.getLogger("toolseam")

WORKFLOW_TIMED_OUT = "tool call timed out: its workflow's deadline passed"


@final
class Watch:
    """One batch's watch over its workflow: `signal` aborts on a cancel or the deadline.

    Enter it (a context manager) inside the event loop to start watching; leaving stops it.

    Args:
        workflow_id: The workflow.
        deadline: Its deadline (a `time.time` timestamp), or ``None``.
        interval: Seconds between two reads of the workflow's status.
    """

    __slots__ = (
        "_controller",
        "_deadline",
        "_poller",
        "_timeout",
        "_timer",
        "interval",
        "workflow_id",
    )

    def __init__(self, workflow_id: str, deadline: float | None, interval: float) -> None:
        self.workflow_id = workflow_id
        self.interval = interval
        self._deadline = deadline
        self._controller = AbortController()
        self._timeout: ToolTimeoutError | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._poller: _Poller | None = None

    @property
    def signal(self) -> AbortSignal:
        """Aborted once the workflow is seen cancelled, or its deadline passes."""
        return self._controller.signal

    def cancelled(self, how: str = "was cancelled") -> None:
        """The workflow was seen cancelled (by the poller, or by a DBOS operation)."""
        self._controller.abort(AbortError(f"workflow {self.workflow_id!r} {how}"))

    def _deadline_passed(self) -> None:
        self._timeout = ToolTimeoutError(WORKFLOW_TIMED_OUT)
        self._controller.abort(self._timeout)

    def timed_out(self, signal: AbortSignal) -> bool:
        """Whether the workflow's deadline was the first abort of ``signal`` (a fusion)."""
        timeout = self._timeout
        return timeout is not None and signal.reason is timeout

    def __enter__(self) -> Watch:
        loop = asyncio.get_running_loop()
        if self._deadline is not None:
            delay = max(0.0, self._deadline - time.time())
            self._timer = loop.call_later(delay, self._deadline_passed)
        poller = _POLLERS.get(loop)
        if poller is None:
            poller = _POLLERS[loop] = _Poller()
        self._poller = poller
        poller.add(self)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._poller is not None:
            self._poller.remove(self)


@final
class _Poller:
    """Reads, for one event loop, the status of every watched workflow, one query a turn."""

    __slots__ = ("__weakref__", "_task", "_watches")

    def __init__(self) -> None:
        self._watches: dict[str, set[Watch]] = {}
        self._task: asyncio.Task[None] | None = None

    def add(self, watch: Watch) -> None:
        self._watches.setdefault(watch.workflow_id, set()).add(watch)
        if self._task is None:
            # An empty context: the poller is nobody's step, and no batch's.
            loop = asyncio.get_running_loop()
            self._task = contextvars.Context().run(loop.create_task, self._poll())

    def remove(self, watch: Watch) -> None:
        watches = self._watches.get(watch.workflow_id)
        if watches is not None:
            watches.discard(watch)
            if not watches:
                del self._watches[watch.workflow_id]
        if not self._watches and self._task is not None:
            # Nothing to watch: stop now rather than at the next turn, so that no task is
            # left pending when the loop closes. A read under way finishes in its thread.
            self._task.cancel()
            self._task = None

    async def _poll(self) -> None:
        failing = False
        while self._watches:
            await asyncio.sleep(min(w.interval for ws in self._watches.values() for w in ws))
            # Only the watches present when the read starts: a stale CANCELLED must not stop
            # the calls of a workflow resumed since.
            snapshot = {wid: set(ws) for wid, ws in self._watches.items()}
            try:
                found = await asyncio.to_thread(_engine.cancelled_workflows, list(snapshot))
            except Exception as error:
                if not failing:
                    logger.warning("cannot read the status of DBOS workflows: %s", error)
                failing = True
                continue
            failing = False
            for workflow_id in found:
                for watch in snapshot.get(workflow_id, ()):
                    watch.cancelled()


_POLLERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Poller] = (
    weakref.WeakKeyDictionary()
)
