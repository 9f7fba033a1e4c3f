"""Everything `toolseam.durable` asks of DBOS that its public API does not offer, in one place.

The public API carries the common path: `DBOS.reserve_step` draws a call's step ids in model
order, `StepReservation.run_async` checkpoints its outcome (and returns the recorded one on
replay), and `DBOS.list_workflow_steps_async` reads the journal back. Four things need DBOS's
internals (dbos 3.4); each is a function here, so that a DBOS upgrade is checked in one
module:

* the running workflow's context (its id, and its deadline, which no public property
  gives);
* whether a call's dispatch marker is recorded, read without recording the read: DBOS's own
  replay check for one step (`check_operation_execution`);
* which watched workflows are ``CANCELLED``: the query DBOS's own preemptible-step watcher
  polls (`get_cancelled_workflow_ids`);
* reading steps' records as they are (`recorded_steps`), whatever the workflow's status:
  DBOS's replay check raises "cancelled" *before* it reads a step's record, so a cancelled
  workflow cannot learn through it what its calls did; toolseam decides every call of a
  cancelled workflow from this read instead;
* the dispatch markers of a batch's calls in one commit (`record_markers`), with DBOS's
  ownership check: the rows and the check DBOS writes for one step, in one transaction;
* the status of one workflow (`workflow_status`), from a process that may only hold a
  `DBOSClient`; whether the system database is SQLite (`single_writer`); and whether DBOS
  is launched in this process (`launched`: ``toolseam.mcp``'s durable tasks must register
  their workflow before, for DBOS's recovery at launch to find it), and its executor id
  (`executor_id`);
* recording an outcome after a cancellation. ``DBOS.cancel_workflow`` takes ownership of the
  workflow away from the execution that runs it, so DBOS refuses every later write of that
  execution, the outcomes of the calls it had in flight included (and says so with
  ``DBOSWorkflowConflictIDError``). Those outcomes are the truth about calls whose bodies
  ran; left out, a resumed workflow would run them again. They are written into DBOS's own
  step table (`record_operation_result`, serialized as DBOS serializes a step's output),
  outside the workflow's context, so that DBOS's ownership check does not apply. Nothing
  else is written there, and nothing is written anywhere else.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Sequence
from typing import Any

import sniffio
import sqlalchemy as sa
from dbos import DBOSClient
from dbos._context import DBOSContext, current_owner_xid, get_local_dbos_context
from dbos._dbos import _get_dbos_instance
from dbos._error import DBOSStepNondeterminismError
from dbos._serialization import deserialize_value, serialize_value
from dbos._sys_db import OperationResultInternal, SystemDatabase, db_retry

__all__ = [
    "cancelled_workflows",
    "check_serializable",
    "deadline_of",
    "executor_id",
    "launched",
    "marker_recorded",
    "record_after_cancel",
    "record_markers",
    "recorded_steps",
    "require_asyncio",
    "single_writer",
    "workflow_context",
    "workflow_status",
]


def workflow_context() -> DBOSContext | None:
    """The context of the DBOS workflow whose code is running, or ``None``.

    ``None`` outside a workflow, and inside a step (where DBOS runs steps as plain calls).
    """
    ctx = get_local_dbos_context()
    if ctx is None or not ctx.is_workflow():
        return None
    return ctx


def deadline_of(ctx: DBOSContext) -> float | None:
    """The workflow's deadline as a `time.time` timestamp, or ``None``."""
    deadline_ms = ctx.workflow_deadline_epoch_ms
    return None if deadline_ms is None else deadline_ms / 1000


def marker_recorded(workflow_id: str, step_id: int, name: str) -> bool:
    """Whether step ``step_id`` of the workflow is recorded (blocking; a worker thread).

    Raises:
        DBOSWorkflowCancelledError: The workflow is cancelled (DBOS's replay check says so
            before anything else).
    """
    recorded = _get_dbos_instance()._sys_db.check_operation_execution(workflow_id, step_id, name)
    return recorded is not None


def _system_database(client: DBOSClient | None) -> SystemDatabase:
    return _get_dbos_instance()._sys_db if client is None else client._sys_db


def recorded_steps(
    workflow_id: str, step_ids: Sequence[int], client: DBOSClient | None = None
) -> dict[int, tuple[str, object]]:
    """The records of these steps of the workflow: ``{step id: (name, output)}`` (blocking).

    Read as they are, whatever the workflow's status (DBOS's own replay check raises for a
    cancelled workflow before it reads anything); a step with no record is left out, and so
    is one that recorded an error (no toolseam step does). Through the DBOS of this process,
    or ``client``'s system database.
    """
    sys_db = _system_database(client)
    table = sys_db.tables.operation_outputs
    query = sa.select(
        table.c.function_id,
        table.c.function_name,
        table.c.output,
        table.c.error,
        table.c.serialization,
    ).where(*sys_db._wf(table, workflow_id), table.c.function_id.in_(list(step_ids)))

    @db_retry(sys_db=sys_db)
    def read() -> list[Any]:
        with sys_db._own_key(workflow_id), sys_db.engine.begin() as connection:
            return list(connection.execute(query).all())

    return {
        row[0]: (row[1], deserialize_value(row[2], row[4], sys_db.serializer))
        for row in read()
        if row[3] is None and row[2] is not None
    }


def single_writer() -> bool:
    """Whether the system database takes one write at a time: SQLite.

    A SQLite writer that finds another one holding the lock backs off and retries, so
    concurrent commits only lose time there.
    """
    return bool(_get_dbos_instance()._sys_db._is_sqlite)


def executor_id() -> str:
    """The DBOS executor id of this process (``"local"`` unless configured)."""
    from dbos._utils import GlobalParams

    return str(GlobalParams.executor_id)


def launched() -> bool:
    """Whether a DBOS instance of this process has been launched (and not destroyed)."""
    from dbos import _dbos

    instance: object = getattr(_dbos, "_dbos_global_instance", None)
    return bool(getattr(instance, "_launched", False))


def workflow_status(workflow_id: str, client: DBOSClient | None = None) -> str | None:
    """The workflow's status (``"CANCELLED"``, ``"PENDING"``, ...), or ``None`` (blocking)."""
    status = _system_database(client).get_workflow_status(workflow_id)
    return None if status is None else status["status"]


def record_markers(workflow_id: str, markers: Sequence[tuple[int, str, object]]) -> None:
    """Record dispatch markers ``(step id, name, payload)`` in one commit (blocking).

    Called in the workflow's context (a worker thread copies it). Each row is the one DBOS
    writes for a step, behind DBOS's check that this execution still owns the workflow, in
    one transaction: all are recorded, or none.

    Raises:
        DBOSWorkflowConflictIDError: ``owner`` no longer owns the workflow (it was cancelled,
            or resumed elsewhere): nothing is recorded.
    """
    sys_db = _get_dbos_instance()._sys_db
    owner = current_owner_xid(workflow_id)
    if owner is None:
        raise RuntimeError(f"record_markers runs outside workflow {workflow_id!r}")
    started = int(time.time() * 1000)
    rows: list[OperationResultInternal] = []
    for step_id, name, payload in markers:
        output, serialization = serialize_value(payload, None, sys_db.serializer)
        rows.append(
            {
                "workflow_uuid": workflow_id,
                "function_id": step_id,
                "function_name": name,
                "output": output,
                "error": None,
                "serialization": serialization,
                "started_at_epoch_ms": started,
                "child_workflow_id": None,
            }
        )

    @db_retry(sys_db=sys_db)
    def write() -> None:
        completed = int(time.time() * 1000)
        with sys_db._own_key(workflow_id), sys_db.engine.begin() as connection:
            for row in rows:
                sys_db._record_operation_result_txn(row, completed, connection, owner_xid=owner)

    write()


def cancelled_workflows(workflow_ids: list[str]) -> set[str]:
    """Which of these workflows are ``CANCELLED`` now (blocking; a worker thread).

    While the database is unreachable, DBOS retries this read with backoff: the poll then
    pauses, as every DBOS operation does, and resumes when the database is back.
    """
    return _get_dbos_instance()._sys_db.get_cancelled_workflow_ids(workflow_ids)


def check_serializable(payload: object) -> None:
    """Serialize ``payload`` as DBOS will serialize a step's output; raise if it cannot."""
    serialize_value(payload, None, _get_dbos_instance()._serializer)


def record_after_cancel(
    workflow_id: str,
    step_id: int,
    name: str,
    payload: object,
    client: DBOSClient | None = None,
) -> bool:
    """Record a step's output after the workflow was cancelled (blocking; a worker thread).

    Returns:
        ``True`` once recorded; ``False`` when the step already had an outcome (another
        execution recorded it first: the journal keeps exactly one).
    """
    sys_db = _system_database(client)
    output, serialization = serialize_value(payload, None, sys_db.serializer)

    def write() -> bool:
        try:
            sys_db.record_operation_result(
                {
                    "workflow_uuid": workflow_id,
                    "function_id": step_id,
                    "function_name": name,
                    "output": output,
                    "error": None,
                    "serialization": serialization,
                    "started_at_epoch_ms": int(time.time() * 1000),
                    "child_workflow_id": None,
                }
            )
        except DBOSStepNondeterminismError:
            return False
        return True

    # An empty context: no DBOS context, so DBOS checks no ownership token (see above).
    return contextvars.Context().run(write)


def require_asyncio(what: str) -> None:
    """Raise a clear error unless the running event loop is asyncio's.

    Raises:
        RuntimeError: Another async library (trio) runs this task.
    """
    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        library = None
    if library != "asyncio":
        raise RuntimeError(
            f"toolseam.durable: {what} runs on asyncio only, not on {library or 'no event loop'}: "
            "DBOS runs workflows and their steps as asyncio tasks and cannot host trio"
        )
