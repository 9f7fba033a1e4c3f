"""Tasks of the MCP tasks extension as DBOS workflows: ``create_server(durable=...)``.

With a `toolseam.durable.DurableTools`, a task's call is the one call of a DBOS workflow
(``toolseam.mcp.task``) whose id derives from the task id (``toolseam-task-<task id>``),
made through ``DurableTools.execute``: its one result is the recorded outcome of a DBOS
step. Everything a task is lives in the system database, so ``tasks/get`` reads it there,
on this server or on the same server restarted:

- the workflow's inputs hold the call (tool, arguments, call id), the caller's
  `Principal` (for the pipeline's scope check if the call runs again) and the identity of
  the caller that created the task (the token's client id, issuer and subject, or none
  without authentication): ``tasks/*`` of anyone else are told the task does not exist;
- a recorded outcome is the task's one final result, whichever execution recorded it;
- a server that crashed leaves the workflow ``PENDING``: ``DBOS.launch()`` in the
  restarted process recovers it, and `DurableTools` decides the call (an idempotent one
  runs again, a dispatched one that is not ends ``OUTCOME_UNKNOWN``, a recorded outcome
  stands);
- ``tasks/cancel`` cancels the workflow (``DBOS.cancel_workflow``: `DurableTools` aborts
  the signal of a body running in any process that shares the database) and aborts the
  task's own signal if its body runs in this process; the task is final once the outcome
  is recorded (the body told and awaited), ``ABORTED`` or ``ABORTED_BEFORE_DISPATCH``. A
  workflow cancelled before any execution ran it (recovery had queued it) is settled from
  the journal (`settle_cancelled`): its call never dispatched, ``ABORTED_BEFORE_DISPATCH``.

DBOS recovers workflows at launch, so their function must be registered by then: this
module registers it when imported, and ``create_server(durable=...)`` refuses a DBOS
launched before that. DBOS runs on asyncio only.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import threading
from typing import TYPE_CHECKING, Any, Final, cast, final

from dbos import DBOS, SetWorkflowID
from mcp import MCPError
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import principal_components
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from .._errors import AbortError
from .._json import JsonValue
from .._principal import Principal
from .._results import ToolResult, aborted_result
from .._signals import AbortController
from .._views import ToolExecutionInput
from ..durable import _engine, recorded_outcomes, settle_cancelled

if TYPE_CHECKING:
    from dbos import WorkflowStatus

    from ..durable import DurableTools
    from ._server import RunningCalls

__all__ = ["WORKFLOW", "DurableTasks", "check_launch", "workflow_id"]

WORKFLOW: Final = "toolseam.mcp.task"
"""The name of the DBOS workflow that runs one task's call."""

_PREFIX: Final = "toolseam-task-"
_CANCELLED: Final = "the MCP client cancelled the task"
_FAILED: Final = frozenset({"ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})

# The backing of each server that serves durable tasks, by server name: where a workflow
# recovered at launch finds its registry.
_BACKINGS: dict[str, DurableTasks] = {}


_LAUNCHED_BEFORE_IMPORT: Final = _engine.launched()


def check_launch() -> None:
    """Raise unless the task workflow was registered before DBOS launched.

    Raises:
        RuntimeError: DBOS was launched before this module was imported: the workflows it
            recovered at launch could not find their function.
    """
    if _LAUNCHED_BEFORE_IMPORT:
        raise RuntimeError(
            "create_server(durable=...) must be called before DBOS.launch(): DBOS recovers "
            "the tasks a crashed server left at launch, and their workflow must be "
            "registered by then"
        )


def workflow_id(task_id: str) -> str:
    """The id of the DBOS workflow that runs the task ``task_id``."""
    return _PREFIX + task_id


def _owner() -> str | None:
    """Who sends this request: the token's (client id, issuer, subject), or ``None``."""
    token = get_access_token()
    if token is None:
        return None
    return json.dumps(principal_components(token), separators=(",", ":"), ensure_ascii=True)


def _same(owner: object, caller: str | None) -> bool:
    if owner is None or caller is None:
        return owner is None and caller is None
    return isinstance(owner, str) and hmac.compare_digest(owner.encode(), caller.encode())


def _plain_principal(principal: Principal | None) -> dict[str, Any] | None:
    if principal is None:
        return None
    return {
        "name": principal.name,
        "scopes": sorted(principal.scopes),
        "claims": json.loads(json.dumps(principal.claims)),
    }


def _principal(data: object) -> Principal | None:
    if not isinstance(data, dict):
        return None
    fields = cast("dict[str, Any]", data)
    return Principal(
        fields["name"], fields["scopes"], cast("dict[str, JsonValue]", fields["claims"])
    )


@DBOS.workflow(name=WORKFLOW)
async def _task_workflow(server: str, spec: dict[str, Any]) -> None:
    """One task's call: the one step `DurableTools.execute` records."""
    backing = _BACKINGS.get(server)
    if backing is None:
        raise RuntimeError(
            f"no MCP server named {server!r} serves durable tasks in this process: create it "
            "(create_server(durable=...)) before DBOS.launch()"
        )
    await backing.run(spec)


@final
class DurableTasks:
    """The durable tasks of one server: started, read and cancelled through DBOS."""

    __slots__ = (
        "_calls",
        "_controllers",
        "_durable",
        "_lock",
        "_loop",
        "_owners",
        "_server",
    )

    def __init__(self, durable: DurableTools, server: str, calls: RunningCalls) -> None:
        self._durable = durable
        self._server = server
        self._calls = calls
        self._loop: asyncio.AbstractEventLoop | None = None  # the serving loop, once known
        self._lock = threading.Lock()
        # The workflows whose body runs in this process, and how to abort their signal
        # (a recovered workflow may run on DBOS's own event loop).
        self._controllers: dict[str, tuple[asyncio.AbstractEventLoop, AbortController]] = {}
        # Every workflow started here and not finished, and who created it: entered before
        # its start (whose body may begin only after `start` returned) and left when its
        # body ends, so `live` and `held_by_caller` never miss one in between.
        self._owners: dict[str, str | None] = {}
        _BACKINGS[server] = self

    def live(self) -> int:
        """How many tasks run, or are being started, in this process."""
        with self._lock:
            return len(self._owners)

    def held_by_caller(self) -> int:
        """How many of those tasks the authenticated caller of this request created.

        0 for an unauthenticated caller: only authenticated principals have a share.
        """
        owner = _owner()
        if owner is None:
            return 0
        with self._lock:
            return sum(1 for who in self._owners.values() if who == owner)

    async def run(self, spec: dict[str, Any]) -> None:
        """The workflow's body: the call, through `DurableTools.execute`."""
        identifier = DBOS.workflow_id
        assert identifier is not None
        controller = AbortController()
        loop = asyncio.get_running_loop()
        # On the serving loop (where DBOS runs the workflows a request starts, and those it
        # recovers when launched from that loop), the server's shutdown aborts the call and
        # awaits it, as any call of the server: the task ends with its recorded ABORTED.
        tracked = self._loop is None or self._loop is loop
        with self._lock:
            self._controllers[identifier] = (loop, controller)
            self._owners[identifier] = spec.get("owner")
        if tracked:
            self._calls.enter(controller)  # aborted at once if the server is closing
        try:
            call = ToolExecutionInput(
                call_id=spec["call_id"],
                name=spec["tool"],
                arguments=spec["arguments"],
                signal=controller.signal,
                principal=_principal(spec["principal"]),
            )
            await self._durable.execute(call)
        finally:
            with self._lock:
                self._controllers.pop(identifier, None)
                self._owners.pop(identifier, None)
            if tracked:
                self._calls.leave(controller)

    async def start(
        self, task_id: str, call_id: str, tool: str, arguments: object, principal: Principal | None
    ) -> WorkflowStatus:
        """Start the task's workflow; its status once recorded.

        Raises:
            MCPError: ``-32603``: not on asyncio (DBOS runs on asyncio only); nothing ran.
        """
        try:
            _engine.require_asyncio("a durable MCP task")
        except RuntimeError as error:
            raise MCPError(INTERNAL_ERROR, str(error)) from None
        owner = _owner()
        spec = {
            "task": task_id,
            "call_id": call_id,
            "tool": tool,
            "arguments": arguments,
            "principal": _plain_principal(principal),
            "owner": owner,
        }
        identifier = workflow_id(task_id)
        self._loop = asyncio.get_running_loop()
        with self._lock:
            self._owners[identifier] = owner
        try:
            with SetWorkflowID(identifier):
                await DBOS.start_workflow_async(_task_workflow, self._server, spec)
        except BaseException:
            with self._lock:
                self._owners.pop(identifier, None)
            raise
        status = await DBOS.get_workflow_status_async(identifier)
        assert status is not None
        return status

    async def find(self, task_id: str, ttl: float) -> WorkflowStatus:
        """The task's workflow, if this caller created it and it is not forgotten.

        Raises:
            MCPError: ``-32602``: no such task for this caller.
        """
        status = None
        if task_id and all(c.isalnum() or c in "-_" for c in task_id):
            status = await DBOS.get_workflow_status_async(workflow_id(task_id))
        inputs = None if status is None or status.name != WORKFLOW else status.input
        spec: object = None if inputs is None or len(inputs["args"]) != 2 else inputs["args"][1]
        owner: object = (
            cast("dict[str, object]", spec).get("owner", "") if isinstance(spec, dict) else ""
        )
        if status is None or not isinstance(spec, dict) or not _same(owner, _owner()):
            raise MCPError(
                INVALID_PARAMS,
                f"no task {task_id!r} on this server (never created here, or finished more "
                f"than {ttl:g} s ago and forgotten)",
            )
        return status

    async def final(self, status: WorkflowStatus) -> tuple[ToolResult | None, str | None]:
        """The task's one result if it is final (or why it failed), else ``(None, None)``."""
        identifier = status.workflow_id
        with self._lock:
            running_here = identifier in self._controllers
        outcomes = await recorded_outcomes(identifier)
        if outcomes:
            return outcomes[0].result, None
        mine = status.executor_id in (None, _engine.executor_id())
        if status.status == "CANCELLED" and mine and not running_here:
            # Nothing runs it any more (a cancel before its execution started): the journal
            # decides; a call that never dispatched did not run. A workflow of another
            # executor is that executor's to record: it stays `working` here.
            settled = await settle_cancelled(identifier)
            if settled:
                return settled[0].result, None
            return aborted_result(body_invoked=False), None
        if status.status in _FAILED:
            why = f"the task's workflow ended {status.status}"
            if status.error is not None:  # DBOS's or toolseam's own error, not the body's
                why += f": {status.error}"
            return None, why
        return None, None

    async def cancel(self, task_id: str) -> None:
        """Cancel the task's workflow, and abort its signal if its body runs here."""
        identifier = workflow_id(task_id)
        await DBOS.cancel_workflow_async(identifier)
        with self._lock:
            running = self._controllers.get(identifier)
        if running is not None:
            loop, controller = running
            loop.call_soon_threadsafe(controller.abort, AbortError(_CANCELLED))
