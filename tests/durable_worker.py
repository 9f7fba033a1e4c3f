"""A DBOS worker process for tests/test_durable_processes.py and tests/test_durable_postgres.py.

``python tests/durable_worker.py ROLE [WORKFLOW_ID]``, the system database's URL in
``DBOS_SYSTEM_DATABASE_URL`` (DBOS's convention; SQLite or Postgres, the same code):

* ``host``: start the turn workflow under WORKFLOW_ID and wait for it; prints ``started
  <call id>`` as each body starts, then ``outcome <json>`` per recorded call (after a cancel
  as well);
* ``crash``: like ``host``, but the bodies of ``write`` and ``read`` never return (the test
  kills this process mid-body);
* ``recover``: launch DBOS, which recovers the workflows this executor left pending, wait
  for WORKFLOW_ID and print its recorded outcomes;
* ``recover-paused``: like ``recover``, but the recovered workflow prints ``paused
  <workflow id>`` before its batch and waits for a line on standard input (the test cancels
  the workflow meanwhile);
* ``serve``: a queue worker (executor id ``$DURABLE_EXECUTOR``): runs the workflows
  enqueued on the ``tools`` queue, one at a time, until killed;
* ``outage``: host a workflow of one ``pause`` call, whose body waits for a line on standard
  input (the test stops the database meanwhile).

Each workflow prints ``returned <json>`` per outcome its batch returned, then ``batch done
<workflow id>``.

Every body start is appended to the file named by ``DURABLE_RUNS`` (one call id a line): the
count of a body's runs across processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from typing import Any

from dbos import DBOS, SetWorkflowID
from typing_extensions import TypedDict

import dbos_sqlite_compat
from toolseam import (
    AbortController,
    CallOutcome,
    ToolCall,
    ToolRegistry,
    ToolRunContext,
    ToolSuccess,
    define_tool,
)
from toolseam.durable import DurableTools, recorded_outcomes

dbos_sqlite_compat.install()

ROLE = sys.argv[1]
WORKFLOW_ID = sys.argv[2] if len(sys.argv) > 2 else ""
URL = os.environ["DBOS_SYSTEM_DATABASE_URL"]


class NoArgs(TypedDict):
    pass


def ran(call_id: str) -> None:
    with open(os.environ["DURABLE_RUNS"], "a", encoding="utf-8") as runs:
        runs.write(f"{call_id}\n")
    print(f"started {call_id}", flush=True)


def parallel(_: object) -> bool:
    return True


@define_tool(name="notify", description="Send a notification (not idempotent).")
async def notify(args: NoArgs, exec: ToolRunContext) -> str:
    ran(exec.call_id)
    return "sent"


@define_tool(
    name="write", description="Write a record (not idempotent).", is_concurrency_safe=parallel
)
async def write(args: NoArgs, exec: ToolRunContext) -> str:
    ran(exec.call_id)
    await exec.signal.wait()  # in the crash role, the test kills the process first
    print(f"told {exec.call_id}", flush=True)
    exec.signal.raise_if_aborted()
    return "written"


@define_tool(
    name="read", description="Read a record.", is_concurrency_safe=parallel, idempotent=True
)
async def read(args: NoArgs, exec: ToolRunContext) -> str:
    ran(exec.call_id)
    if ROLE == "crash":
        await exec.signal.wait()
    return "read"


@define_tool(name="pause", description="Wait for a line on standard input.")
async def pause(args: NoArgs, exec: ToolRunContext) -> str:
    ran(exec.call_id)
    line = await asyncio.to_thread(sys.stdin.readline)
    print(f"finished {exec.call_id}", flush=True)
    return line.strip()


REGISTRY = ToolRegistry()
for tool in (notify, write, read, pause):
    REGISTRY.register(tool)
DURABLE = DurableTools(REGISTRY, poll_interval=0.05)

TURN = [
    ("c1", "notify", {}),
    ("c2", "write", {}),  # parallel with c3
    ("c3", "read", {}),
    ("c4", "notify", {}),  # exclusive: after c2 and c3
]


# Set once the batch has returned: the handle of a cancelled workflow raises at once, while
# its execution (on DBOS's own event loop, for a recovered one) still records its calls.
BATCH_DONE = threading.Event()


@DBOS.workflow()
async def turn(calls: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    try:
        if ROLE == "recover-paused":
            print(f"paused {DBOS.workflow_id}", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
        outcomes = await DURABLE.run_tool_calls(
            [ToolCall(*call) for call in calls], signal=AbortController().signal
        )
        for outcome in outcomes:
            print(f"returned {json.dumps(record(outcome))}", flush=True)
        print(f"batch done {DBOS.workflow_id}", flush=True)
    finally:
        BATCH_DONE.set()
    return [o.call.call_id for o in outcomes if isinstance(o.result, ToolSuccess)]


def record(outcome: CallOutcome) -> dict[str, Any]:
    result = outcome.result
    return {
        "call_id": outcome.call.call_id,
        "code": "OK" if isinstance(result, ToolSuccess) else result.code,
        "text": result.content[0]["text"],
        "dispatched": outcome.dispatched,
    }


async def print_outcomes(workflow_id: str) -> None:
    for outcome in await recorded_outcomes(workflow_id):
        print(f"outcome {json.dumps(record(outcome))}", flush=True)


async def main() -> None:
    DBOS(
        config={
            "name": "toolseam_durable_worker",
            "system_database_url": URL,
            "log_level": "CRITICAL",
            "executor_id": os.environ.get("DURABLE_EXECUTOR", "local"),
        }
    )
    DBOS.launch()
    try:
        if ROLE in ("host", "crash", "outage"):
            calls = [("p1", "pause", {})] if ROLE == "outage" else TURN
            with SetWorkflowID(WORKFLOW_ID):
                handle = await DBOS.start_workflow_async(turn, calls)
            try:
                await handle.get_result()
            except Exception as error:
                print(f"ended {type(error).__name__}", flush=True)
                await asyncio.to_thread(BATCH_DONE.wait)
            await print_outcomes(WORKFLOW_ID)
        elif ROLE in ("recover", "recover-paused"):
            handle = await DBOS.retrieve_workflow_async(WORKFLOW_ID)
            try:
                await handle.get_result()
            except Exception as error:
                print(f"ended {type(error).__name__}", flush=True)
                await asyncio.to_thread(BATCH_DONE.wait)
            await print_outcomes(WORKFLOW_ID)
        elif ROLE == "serve":
            # One workflow at a time per worker: two workflows need two workers.
            await DBOS.register_queue_async("tools", worker_concurrency=1)
            print("serving", flush=True)
            await asyncio.to_thread(threading.Event().wait)
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    asyncio.run(main())
