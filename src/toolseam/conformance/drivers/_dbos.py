"""The DBOS the durable drivers share: one per process, on SQLite in a temporary folder.

A scenario with capability ``durable`` (`Durable`) runs its calls as one workflow of this
module's (`run_workflow`); what the workflow does is the driver's `Live` code, looked up by
a key the workflow takes as its input, so that a replay or a recovery (a DBOS fork of the
workflow, with the same input) finds the scenario's live tools and probe. DBOS is a
singleton per process: `launch` starts the kit's own on the first durable scenario (DBOS
stops in about a second, far too slow to start one per clause) and `shutdown` stops it, at
the latest when the interpreter exits. A process that already runs a DBOS of its own cannot
host the kit's: `launch` refuses, saying so, rather than run the kit's workflows in it.
"""

from __future__ import annotations

import atexit
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import anyio
from dbos import DBOS, SetWorkflowID, SetWorkflowTimeout
from dbos._dbos import _get_dbos_instance  # pyright: ignore[reportPrivateUsage]
from dbos._error import DBOSAwaitedWorkflowCancelledError, DBOSWorkflowCancelledError

from .._driver import Outcome, Scenario, Status

__all__ = [
    "APP_NAME",
    "CallRow",
    "Live",
    "OutcomeRow",
    "launch",
    "missing",
    "require_asyncio",
    "row",
    "run_workflow",
    "shutdown",
    "sniff",
    "step",
]

APP_NAME: Final = "toolseam_conformance"
"""The DBOS application name of the kit's workflows."""

CallRow: TypeAlias = tuple[str, str, dict[str, str]]
"""A call as the workflow takes it: ``(call_id, tool, arguments)``."""
OutcomeRow: TypeAlias = tuple[str, Status, str, Any]
"""An `Outcome` as the workflow returns it (DBOS records it): ``(call_id, status, detail,
value)``."""

Code: TypeAlias = Callable[[str, list[CallRow], int], Awaitable[list[OutcomeRow]]]
"""The workflow's code for one scenario: its key (for `step`), its calls and
``max_parallel``, to outcome rows."""
Step: TypeAlias = Callable[[str, dict[str, str]], Awaitable[Any]]
"""A bare DBOS step's body for one scenario: a tool's name and arguments to its value."""
Journal: TypeAlias = Callable[[str], Awaitable[Sequence[Outcome]]]
"""Reads a workflow's recorded outcomes from its journal, by workflow id."""


@dataclass(frozen=True, slots=True)
class Live:
    """One scenario's live side, which the workflow and its steps look up by key."""

    code: Code
    """What the workflow does."""
    journal: Journal
    """How the driver reads what the workflow recorded (after a cancel)."""
    step: Step | None = None
    """The body of the scenario's bare DBOS steps (`step`), for a driver that makes them."""


_LIVE: dict[str, Live] = {}


@DBOS.workflow(name="toolseam.conformance.workflow")
async def _workflow(key: str, calls: list[CallRow], max_parallel: int) -> list[OutcomeRow]:
    return await _LIVE[key].code(key, calls, max_parallel)


@DBOS.step(name="toolseam.conformance.step", preemptible=True)
async def step(key: str, tool: str, arguments: dict[str, str]) -> Any:
    """A plain DBOS step running one call's body.

    ``preemptible``: DBOS's own cancellation of a running step, the most a bare DBOS step
    can do once its workflow is cancelled.
    """
    run = _LIVE[key].step
    assert run is not None
    return await run(tool, arguments)


# -- the kit's DBOS ------------------------------------------------------------------------

_state: dict[str, Any] = {}  # "instance", "folder": the DBOS this module launched


def require_asyncio() -> None:
    """Raise unless on asyncio: DBOS runs workflows and steps as asyncio tasks only."""
    if sniff() != "asyncio":
        raise RuntimeError("the durable clauses run on asyncio only: DBOS cannot host trio")


def sniff() -> str | None:
    """The running async library (``"asyncio"``, ``"trio"``), or ``None`` outside one."""
    import sniffio

    try:
        return sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return None


def launch() -> None:
    """Start the kit's DBOS, unless it runs: SQLite in a temporary folder, quiet logs.

    Raises:
        RuntimeError: This process already has a DBOS that is not the kit's.
    """
    try:
        current: object = _get_dbos_instance()
    except Exception:
        current = None
    if current is not None:
        if current is _state.get("instance"):
            return
        raise RuntimeError(
            "this process already has a DBOS of its own; the durable clauses launch the kit's "
            "(SQLite in a temporary folder): run them in a process without one"
        )
    _sqlite_fallback()
    folder = tempfile.TemporaryDirectory(prefix="toolseam-kit-dbos-")
    url = f"sqlite:///{folder.name}/system.sqlite"
    instance = DBOS(config={"name": APP_NAME, "system_database_url": url, "log_level": "CRITICAL"})
    try:
        DBOS.launch()
    except BaseException:
        DBOS.destroy()
        folder.cleanup()
        raise
    if not _state:
        atexit.register(shutdown)
    _state.update(instance=instance, folder=folder)


def shutdown() -> None:
    """Stop the kit's DBOS, if it runs, and remove its database (a no-op otherwise)."""
    instance = _state.pop("instance", None)
    folder: tempfile.TemporaryDirectory[str] | None = _state.pop("folder", None)
    try:
        current: object = _get_dbos_instance()
    except Exception:
        current = None
    if instance is not None and current is instance:
        DBOS.destroy()
    if folder is not None:
        folder.cleanup()


# -- one scenario as a workflow ------------------------------------------------------------


async def run_workflow(scenario: Scenario, live: Live) -> Sequence[Outcome]:
    """Run ``scenario``'s calls as one workflow whose code is ``live.code`` (see `Durable`).

    The scenario's stop cancels the workflow through the system database
    (``DBOS.cancel_workflow_async``, what another process does). Returns, once the workflow's
    execution has ended here: the recorded outcomes (``live.journal``) if it was cancelled;
    else what its code returned — or, for ``then="replay"`` / ``"recover"``, what the code of
    a fork of it returned (from after its last step, or at it).
    """
    require_asyncio()
    launch()
    key = uuid.uuid4().hex
    workflow_id = f"toolseam-kit-{key}"
    calls: list[CallRow] = [(c.call_id, c.tool, dict(c.arguments)) for c in scenario.calls]
    _LIVE[key] = live
    try:
        rows = await _run(scenario, key, workflow_id, calls)
        if rows is None:
            return await live.journal(workflow_id)
        then = scenario.durable.then if scenario.durable is not None else "return"
        if then != "return":
            steps = await DBOS.list_workflow_steps_async(workflow_id)
            last = max((s["function_id"] for s in steps), default=0)
            start = last + 1 if then == "replay" else last
            fork = await DBOS.fork_workflow_async(workflow_id, start)
            forked: list[OutcomeRow] = await fork.get_result()
            rows = forked
        return [Outcome(call_id, status, detail, value) for call_id, status, detail, value in rows]
    finally:
        del _LIVE[key]


async def _run(
    scenario: Scenario, key: str, workflow_id: str, calls: list[CallRow]
) -> list[OutcomeRow] | None:
    """Start the workflow, wire the stop to its cancel, await it: its rows, or ``None``."""
    pressed = anyio.Event()
    rows: list[OutcomeRow] | None = None
    async with anyio.create_task_group() as group:
        timeout = scenario.durable.timeout if scenario.durable is not None else None
        with SetWorkflowID(workflow_id), SetWorkflowTimeout(timeout):
            handle = await DBOS.start_workflow_async(_workflow, key, calls, scenario.max_parallel)

        async def cancel_when_pressed() -> None:
            await pressed.wait()
            await DBOS.cancel_workflow_async(workflow_id)

        group.start_soon(cancel_when_pressed)
        scenario.stop.connect(pressed.set)
        try:
            # The task handle awaits the workflow's own task: its execution, here, ended.
            rows = await handle.get_result()
        except (DBOSAwaitedWorkflowCancelledError, DBOSWorkflowCancelledError):
            rows = None
        finally:
            group.cancel_scope.cancel()
    return rows


def row(outcome: Outcome) -> OutcomeRow:
    """An `Outcome` as a row the workflow can return."""
    return (outcome.call_id, outcome.status, outcome.detail, outcome.value)


def missing(recorded: Sequence[Outcome], calls: Sequence[str]) -> list[Outcome]:
    """``recorded``, then ``none`` for each of the call ids ``calls`` it has nothing for."""
    seen = {o.call_id for o in recorded}
    absent = [
        Outcome(call_id, "none", "no outcome recorded in the journal")
        for call_id in calls
        if call_id not in seen
    ]
    return [*recorded, *absent]


# -- SQLite older than 3.42 on Python 3.12+ ------------------------------------------------

_fallback: list[bool] = []


def _sqlite_fallback() -> None:
    """Answer ``unixepoch`` in Python on SQLite older than 3.42, on Python 3.12 and later.

    DBOS 3.4 stamps its SQLite rows with ``unixepoch('subsec')`` there, which SQLite has
    only since 3.42 (Debian 12 ships 3.40): DBOS would fail at launch. Every SQLite
    connection SQLAlchemy opens in this process from then on answers as a newer SQLite
    would (the forms DBOS uses only); elsewhere this does nothing.
    """
    # hexversion: a check that type checkers running on 3.11 do not take as unreachable.
    if _fallback or sys.hexversion < 0x030C0000 or sqlite3.sqlite_version_info >= (3, 42):
        return
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def unixepoch(*args: object) -> float | int:
        if args == ("subsec",):
            return time.time()
        if not args:
            return int(time.time())
        raise sqlite3.ProgrammingError(f"unixepoch{args!r}: only DBOS's forms are supported")

    def on_connect(connection: object, record: object) -> None:
        if isinstance(connection, sqlite3.Connection):
            connection.create_function("unixepoch", -1, unixepoch)

    event.listen(Engine, "connect", on_connect)
    _fallback.append(True)
