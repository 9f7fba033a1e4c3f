"""A Temporal worker process for tests/test_durable_temporal.py.

``python tests/temporal_worker.py NAME``, the server's address in ``TEMPORAL_ADDRESS`` and
the task queue in ``TEMPORAL_TASK_QUEUE``: runs the ``Turn`` workflow and the toolseam
activity until its standard input closes (or it is killed). Prints ``ready NAME`` once
polling, ``started <call id> NAME`` as a body starts and ``told <call id> NAME`` as a body
hears its signal abort. Every body start is appended to the file named by
``DURABLE_RUNS`` (one call id a line): the count of a body's runs across processes.

The workers cache no workflow (``max_cached_workflows=0``): every workflow task replays
the history from its start, so every test also checks that a replay runs no body.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from typing_extensions import TypedDict

    from toolseam import AbortController, ToolCall, ToolRegistry, ToolRunContext, define_tool
    from toolseam.durable._records import encode_outcome
    from toolseam.durable.temporal import TemporalTools

NAME = sys.argv[1] if len(sys.argv) > 1 else "worker"


class NoArgs(TypedDict):
    pass


def ran(call_id: str) -> int:
    with open(os.environ["DURABLE_RUNS"], "a+", encoding="utf-8") as runs:
        runs.write(f"{call_id}\n")
        runs.seek(0)
        count = runs.read().split().count(call_id)
    print(f"started {call_id} {NAME}", flush=True)
    return count


def parallel(_: object) -> bool:
    return True


@define_tool(name="notify", description="Send a notification (not idempotent).")
async def notify(args: NoArgs, exec: ToolRunContext) -> str:
    ran(exec.call_id)
    return "sent"


@define_tool(name="write", description="Write (not idempotent).", is_concurrency_safe=parallel)
async def write(args: NoArgs, exec: ToolRunContext) -> str:
    ran(exec.call_id)
    await exec.signal.wait()
    print(f"told {exec.call_id} {NAME}", flush=True)
    exec.signal.raise_if_aborted()
    return "written"


@define_tool(name="write_sync", description="Write, in a thread.", is_concurrency_safe=parallel)
def write_sync(args: NoArgs, exec: ToolRunContext) -> str:
    ran(exec.call_id)
    exec.signal.wait_sync()
    print(f"told {exec.call_id} {NAME}", flush=True)
    exec.signal.raise_if_aborted()
    return "written"


@define_tool(
    name="read", description="Read (idempotent).", is_concurrency_safe=parallel, idempotent=True
)
async def read(args: NoArgs, exec: ToolRunContext) -> str:
    if ran(exec.call_id) == 1:
        await exec.signal.wait()  # the first run: the test kills this worker meanwhile
    return "read"


REGISTRY = ToolRegistry()
for tool in (notify, write, write_sync, read):
    REGISTRY.register(tool)
TOOLS = TemporalTools(
    REGISTRY,
    heartbeat_interval=0.05,
    heartbeat_timeout=timedelta(seconds=1),
    grace=timedelta(seconds=1),
)


@workflow.defn
class Turn:
    """One model turn's tool calls; returns each call's outcome as the history records it."""

    def __init__(self) -> None:
        self.turn = AbortController()

    @workflow.signal
    def stop(self) -> None:
        """The user pressed stop: the turn's own signal aborts (not a workflow cancel)."""
        self.turn.abort()

    @workflow.run
    async def run(self, calls: list[list[Any]], max_parallel: int, seconds: float) -> list[Any]:
        outcomes = await TOOLS.run_tool_calls(
            [ToolCall(*call) for call in calls],
            signal=self.turn.signal,
            max_parallel=max_parallel,
            start_to_close_timeout=timedelta(seconds=seconds) if seconds else None,
        )
        return [encode_outcome(outcome) for outcome in outcomes]


async def main() -> None:
    client = await Client.connect(os.environ["TEMPORAL_ADDRESS"])
    async with Worker(
        client,
        task_queue=os.environ["TEMPORAL_TASK_QUEUE"],
        workflows=[Turn],
        activities=TOOLS.activities,
        max_cached_workflows=0,
    ):
        print(f"ready {NAME}", flush=True)
        await asyncio.to_thread(sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main())
