"""Everything the Temporal engine asks of ``temporalio`` below its everyday API, in one place.

The common path is Temporal's public API: `workflow.start_activity` schedules a call's
activity, the activity returns the call's outcome, and Temporal's history records it (a
replay returns it without running the activity). Three things go beneath it; each is a
function here, so that a ``temporalio`` upgrade is checked in one module:

* **Heartbeats the activity sends itself.** `activity.heartbeat` hands details to the
  SDK's core, which sends them later (throttled) and, on a cancellation, throws
  ``CancelledError`` into the activity's task. toolseam needs the opposite on both counts:
  a dispatch marker that is *known* to be recorded before the body starts, and a
  cancellation that aborts the body's signal instead of tearing it down. So the activity
  calls the server's ``RecordActivityTaskHeartbeat`` itself (`heartbeat`): the server
  answers once it has stored the details, and its answer says whether a cancellation was
  requested. The SDK's core never hears of these heartbeats, so it never cancels the task.
* **Reading the outcomes back** from a workflow's history (`history_outcomes`): the
  scheduled and completed events of the toolseam activities, decoded by the client's data
  converter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from temporalio.api.common.v1 import Payloads
from temporalio.api.workflowservice.v1 import RecordActivityTaskHeartbeatRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

__all__ = ["ACTIVITY", "ActivityGone", "heartbeat", "history_outcomes"]

ACTIVITY: Final = "toolseam.call"
"""The activity type of every toolseam call (the tool's name is in its input)."""


class ActivityGone(Exception):
    """The server no longer has the activity: it timed out, or its workflow closed."""


async def heartbeat(client: Client, task_token: bytes, details: Sequence[Any]) -> bool:
    """Record a heartbeat of the activity with ``task_token``; wait for the server's answer.

    Returns:
        Whether a cancellation of the activity was requested.

    Raises:
        ActivityGone: The server no longer has the activity (it timed out, or its workflow
            closed): nothing it does will be recorded.
        RPCError: Another error of the server.
    """
    payloads = await client.data_converter.encode(list(details)) if details else []
    request = RecordActivityTaskHeartbeatRequest(
        task_token=task_token,
        details=Payloads(payloads=payloads) if payloads else None,
        identity=client.identity,
        namespace=client.namespace,
    )
    try:
        response = await client.workflow_service.record_activity_task_heartbeat(request)
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise ActivityGone(error.message) from None
        raise
    return response.cancel_requested


async def history_outcomes(
    client: Client, workflow_id: str, run_id: str | None
) -> list[tuple[dict[str, Any], object]]:
    """The toolseam activities of a workflow run that completed: ``(input, result)`` pairs.

    In the order of the history's events (a completion's); an activity that did not
    complete (cancelled before it started, timed out, failed) is left out.
    """
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    scheduled: dict[int, Any] = {}
    completed: list[tuple[dict[str, Any], object]] = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduling = event.activity_task_scheduled_event_attributes
            if scheduling.activity_type.name == ACTIVITY:
                scheduled[event.event_id] = scheduling.input
        elif event.HasField("activity_task_completed_event_attributes"):
            completion = event.activity_task_completed_event_attributes
            payloads = scheduled.get(completion.scheduled_event_id)
            if payloads is None:
                continue
            [request] = await client.data_converter.decode(payloads.payloads)
            [result] = await client.data_converter.decode(completion.result.payloads)
            completed.append((request, result))
    return completed
