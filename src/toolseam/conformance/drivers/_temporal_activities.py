"""The driver of bare Temporal activities: plain functions as activities, without toolseam.

Every scenario — durable or not — runs the way Temporal's documentation writes it: one
workflow whose code executes one activity per call (``@activity.defn`` wrapping the tool's
plain async function), one after another, or gathered at once when every tool of the batch
may run concurrently (``max_parallel`` at a time). The activity heartbeats from a task of
its own (``activity.heartbeat()`` every `HEARTBEAT_INTERVAL`, with a heartbeat timeout),
which is how an activity hears of a cancellation: the SDK throws ``CancelledError`` into it
at a heartbeat. The workflow waits for a cancelled activity to finish
(``ActivityCancellationType.WAIT_CANCELLATION_COMPLETED``, Temporal's best answer; its
default, ``TRY_CANCEL``, does not wait at all). A body's failure is a non-retryable
``ApplicationError`` (a tool error goes back to the model; Temporal's default retry policy
would run it again forever); anything else keeps Temporal's default retry policy.

Temporal offers one way to stop work from outside, the workflow's cancel (through the
client), so that is the kit's stop. The workflow's code turns an activity's failure into
the call's outcome and lets a cancellation go on, so a cancelled workflow returns nothing:
its outcomes are
what its history holds for each call's activity — its result (``ok``), its failure
(``error``), or its cancellation (``cancelled``: Temporal does not say whether the body
ran). ``then="replay"`` replays the history with ``temporalio.worker.Replayer``;
``then="recover"`` makes the last call's first attempt fail after its body ran, as a
worker dying there leaves it, and Temporal runs the activity again, as it does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection, Mapping, Sequence
from datetime import timedelta
from typing import Any, Final, final

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.workflow import ActivityCancellationType

from .._driver import Capability, Outcome, Scenario
from ._common import TaskListen, versions
from ._temporal import CRASH, CallRow, Live, OutcomeRow, missing, row, run_workflow, warm_up

__all__ = ["HEARTBEAT_INTERVAL", "TemporalActivitiesDriver"]

HEARTBEAT_INTERVAL: Final = 0.05
"""Seconds between two heartbeats of a running activity (the same as toolseam's driver)."""

_LACKING: Final[Mapping[str, str]] = {
    "host_cancel": (
        "a Temporal workflow runs on its worker: cancelling the task that awaits its result "
        "does not reach it"
    ),
    "sync_bodies": "not driven: the kit's bodies run as async activities",
    "timeouts": (
        "not driven: an activity's start-to-close timeout fails the attempt on the server "
        "(and is retried); this driver does not give the kit's per-tool deadlines to it"
    ),
    "nested": "an activity cannot start another activity",
    "approval": "Temporal has no approval stage",
    "around_dispatch": "Temporal has no around-dispatch stage (an interceptor is not per tool)",
    "pre_execute": "Temporal has no pre-execute stage",
    "post_execute": "Temporal has no post-execute stage",
    "result_observer": "Temporal has no result observer",
    "progress": "Temporal has no progress reporting from an activity (heartbeat details are not)",
    "elicitation": "Temporal has no elicitation",
    "process": "Temporal has no process helper",
    "ptc": "Temporal has no code-running tool",
}


def _fail(message: str) -> Exception:
    return ApplicationError(message, non_retryable=True)


async def _beat() -> None:
    while True:
        await asyncio.sleep(HEARTBEAT_INTERVAL)
        activity.heartbeat()


@final
class TemporalActivitiesDriver:
    """Drives bare Temporal (``temporalio``): each call one activity of a workflow."""

    def __init__(self) -> None:
        warm_up()

    @property
    def subject(self) -> str:
        """``"temporal-activities"``."""
        return "temporal-activities"

    @property
    def capabilities(self) -> Collection[Capability]:
        """Batches (several activities in one workflow) and durable workflows."""
        return ("batch", "durable")

    @property
    def lacking(self) -> Mapping[str, str]:
        """Why the other capabilities are missing."""
        return _LACKING

    @property
    def backends(self) -> Sequence[str]:
        """Asyncio only: Temporal runs workflows and activities on asyncio."""
        return ("asyncio",)

    def versions(self) -> Mapping[str, str]:
        """Temporal's Python SDK."""
        return versions("temporalio")

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        """Run the scenario's calls as one workflow of bare activities."""
        tools = {tool.name: tool for tool in scenario.tools}
        parallel = all(tool.parallel for tool in scenario.tools)
        ids = [call.call_id for call in scenario.calls]
        crash = scenario.durable is not None and scenario.durable.then == "recover"
        last = ids[-1] if ids else None

        @activity.defn(name="tool")
        async def tool(call_id: str, name: str, arguments: dict[str, str]) -> Any:
            scripted = tools.get(name)
            if scripted is None:
                raise _fail(f"unknown tool {name!r}")
            beating = asyncio.create_task(_beat())
            try:
                value = await scripted.run(arguments, TaskListen(_fail))
            finally:
                beating.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await beating
            if crash and call_id == last and activity.info().attempt == 1:
                raise ApplicationError(CRASH)  # the worker "dies" after the body ran
            return value

        async def one(call: CallRow) -> OutcomeRow:
            call_id, name, arguments = call
            try:
                value = await workflow.execute_activity(
                    tool,
                    args=[call_id, name, arguments],
                    start_to_close_timeout=timedelta(minutes=10),
                    heartbeat_timeout=timedelta(seconds=2),
                    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200)),
                    cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                )
            except ActivityError as error:
                if isinstance(error.cause, CancelledError):
                    raise  # the workflow was cancelled: it ends cancelled
                cause = error.cause or error
                return row(Outcome(call_id, "error", f"{type(cause).__name__}: {cause}"))
            return row(Outcome(call_id, "ok", value=value))

        async def code(calls: list[CallRow], max_parallel: int) -> list[OutcomeRow]:
            if not parallel:
                return [await one(call) for call in calls]
            turns = asyncio.Semaphore(max_parallel)

            async def limited(call: CallRow) -> OutcomeRow:
                async with turns:
                    return await one(call)

            return list(await asyncio.gather(*(limited(call) for call in calls)))

        async def journal(client: Client, workflow_id: str) -> Sequence[Outcome]:
            return missing(await _history(client, workflow_id), ids)

        return await run_workflow(scenario, Live(code, journal, [tool]))


async def _history(client: Client, workflow_id: str) -> list[Outcome]:
    """What a workflow's history holds for each call's activity, in the order it ended."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    converter = client.data_converter
    scheduled: dict[int, str] = {}
    recorded: list[Outcome] = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attributes = event.activity_task_scheduled_event_attributes
            call_id, _, _ = await converter.decode(attributes.input.payloads)
            scheduled[event.event_id] = str(call_id)
        elif event.HasField("activity_task_completed_event_attributes"):
            completed = event.activity_task_completed_event_attributes
            [value] = await converter.decode(completed.result.payloads)
            recorded.append(Outcome(scheduled[completed.scheduled_event_id], "ok", value=value))
        elif event.HasField("activity_task_failed_event_attributes"):
            failed = event.activity_task_failed_event_attributes
            message = failed.failure.message
            recorded.append(Outcome(scheduled[failed.scheduled_event_id], "error", message))
        elif event.HasField("activity_task_canceled_event_attributes"):
            canceled = event.activity_task_canceled_event_attributes
            detail = "the activity was cancelled (ActivityTaskCanceled)"
            recorded.append(Outcome(scheduled[canceled.scheduled_event_id], "cancelled", detail))
        elif event.HasField("activity_task_timed_out_event_attributes"):
            timed_out = event.activity_task_timed_out_event_attributes
            message = timed_out.failure.message
            recorded.append(Outcome(scheduled[timed_out.scheduled_event_id], "error", message))
    return recorded
