"""What the journal holds for a call: its outcome, and the marker of its dispatch.

A call takes two step ids of its workflow, drawn in model order: first its *dispatch
marker* (written, for a tool that is not idempotent, just before its body may start), then
its *outcome*, the toolseam result. Both are plain JSON (frozen snapshots thawed), so that
any DBOS serializer, the default pickle or the portable JSON one, stores them as they are:

* outcome, step ``toolseam:<tool name>``: ``{"toolseam": 1, "call_id", "name", "arguments",
  "dispatched", "result": result.to_json(), "value"}`` (``value`` only for a success, since
  ``to_json`` leaves it out);
* marker, step ``toolseam.dispatch:<tool name>``: ``{"toolseam": 1, "marker": call_id}``.

A call's outcome step is the step right after its marker's (the two are drawn together), so
the journal alone says which dispatched call has no outcome (`settle_cancelled`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, cast

import anyio

from .._batch import CallOutcome, ToolCall
from .._json import JsonValue, MaterializationError, materialize
from .._results import (
    ErrorInfo,
    ToolErrorDetail,
    ToolFailure,
    ToolResult,
    ToolSuccess,
    failure_from_exception,
)
from ._errors import OutcomeUnknownError

# DBOS is imported where it is used: the Temporal engine shares this module without DBOS.
if TYPE_CHECKING:
    from dbos import DBOSClient, StepInfo

__all__ = [
    "VERSION",
    "decode_outcome",
    "encode_marker",
    "encode_outcome",
    "marker_step_name",
    "outcome_step_name",
    "outcomes_from_steps",
    "recorded_outcomes",
    "settle_cancelled",
]

VERSION: Final = 1
_OUTCOME_PREFIX: Final = "toolseam:"
_MARKER_PREFIX: Final = "toolseam.dispatch:"


def outcome_step_name(tool: str) -> str:
    """The name of the step that records a call of ``tool``."""
    return _OUTCOME_PREFIX + tool


def marker_step_name(tool: str) -> str:
    """The name of the step that marks a call of ``tool`` as dispatched."""
    return _MARKER_PREFIX + tool


def _plain(value: object) -> Any:
    # deepcopy thaws frozen snapshots into plain containers without recursing.
    return copy.deepcopy(value)


def _arguments(arguments: object) -> JsonValue:
    """The call's arguments as JSON, or ``None`` when they are not JSON (the call failed)."""
    try:
        return cast("JsonValue", _plain(materialize(arguments)))
    except MaterializationError:
        return None


def encode_marker(call_id: str) -> dict[str, Any]:
    """The marker of a call's dispatch."""
    return {"toolseam": VERSION, "marker": call_id}


def encode_outcome(outcome: CallOutcome) -> dict[str, Any]:
    """A call's outcome as the journal records it."""
    call, result = outcome.call, outcome.result
    payload: dict[str, Any] = {
        "toolseam": VERSION,
        "call_id": call.call_id,
        "name": call.name,
        "arguments": _arguments(call.arguments),
        "dispatched": outcome.dispatched,
        "result": _plain(result.to_json()),
    }
    if isinstance(result, ToolSuccess):
        payload["value"] = _plain(result.value)
    return payload


def _result(data: Mapping[str, Any], value: object) -> ToolResult:
    common: dict[str, Any] = {
        "content": data["content"],
        "meta": data["meta"],
        "additional_contexts": data["additional_contexts"],
    }
    if data["is_error"] is False:
        return ToolSuccess(value=cast("JsonValue", value), **common)
    error = data["error"]
    info = error["info"]
    return ToolFailure(
        error=ToolErrorDetail(
            error["message"], None if info is None else ErrorInfo(info["name"], info["code"])
        ),
        **common,
    )


def decode_outcome(payload: object) -> CallOutcome:
    """The `CallOutcome` a recorded outcome holds.

    Raises:
        ValueError: ``payload`` is not a toolseam outcome of a version this module reads.
    """
    if not isinstance(payload, Mapping):
        raise ValueError(f"not a toolseam outcome: {type(payload).__name__}")
    data = cast("Mapping[str, Any]", payload)
    if data.get("toolseam") != VERSION or "result" not in data:
        raise ValueError(f"not a toolseam outcome (version {data.get('toolseam')!r})")
    try:
        call = ToolCall(data["call_id"], data["name"], data["arguments"])
        return CallOutcome(call, _result(data["result"], data.get("value")), data["dispatched"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"a malformed toolseam outcome: {error!r}") from None


def outcomes_from_steps(steps: Iterable[StepInfo]) -> list[CallOutcome]:
    """The recorded outcome of every toolseam call among a workflow's steps, in step order.

    ``steps`` as `DBOS.list_workflow_steps` or `DBOSClient.list_workflow_steps` return them
    (with their outputs loaded). Markers and every other step are left out.

    Raises:
        ValueError: A toolseam step holds something else than a toolseam outcome.
    """
    return [
        decode_outcome(step["output"])
        for step in steps
        if step["function_name"].startswith(_OUTCOME_PREFIX)
    ]


async def recorded_outcomes(workflow_id: str) -> list[CallOutcome]:
    """The recorded outcome of every toolseam call of a workflow, in step order.

    Reads the journal through DBOS, which must be launched in this process; from a process
    that only has a `DBOSClient`, pass its ``list_workflow_steps(workflow_id)`` to
    `outcomes_from_steps`. Call it outside a workflow: inside one, DBOS records the read
    itself as a step.

    Raises:
        RuntimeError: Not on asyncio.
        ValueError: A toolseam step holds something else than a toolseam outcome.
    """
    # Imported here: the Temporal engine shares this module without DBOS installed.
    from dbos import DBOS

    from . import _engine

    _engine.require_asyncio("recorded_outcomes")
    return outcomes_from_steps(await DBOS.list_workflow_steps_async(workflow_id))


# Statuses of a workflow that an execution may still be running (or will run).
_ACTIVE: Final = frozenset({"PENDING", "ENQUEUED", "DELAYED"})


async def settle_cancelled(
    workflow_id: str, *, client: DBOSClient | None = None
) -> list[CallOutcome]:
    """Record `OUTCOME_UNKNOWN` for each call of a stopped workflow dispatched without outcome.

    For a workflow cancelled while its worker was dead (DBOS recovers only the workflows
    left ``PENDING``, so no execution of it runs again), or stopped for good in any other
    way: every call whose dispatch marker is in the journal and whose outcome is not gets
    the outcome `OUTCOME_UNKNOWN` (``dispatched=True``), recorded as a cancelled batch
    records it. Nothing runs, and nothing else is written. Idempotent, and safe beside
    any other writer: a call that has an outcome keeps it. A call of a worker still alive
    and finishing its body (a cancel while it ran) keeps the outcome it records first;
    recorded later, it yields to `OUTCOME_UNKNOWN`, which stays true.

    Through the DBOS launched in this process, or ``client`` (a `DBOSClient`); call it
    outside a workflow.

    Args:
        workflow_id: The workflow.
        client: A `DBOSClient` of the system database, instead of this process's DBOS.

    Returns:
        The recorded outcome of every toolseam call of the workflow, in step order.

    Raises:
        RuntimeError: Not on asyncio.
        ValueError: No such workflow, or it is ``PENDING``, ``ENQUEUED`` or ``DELAYED`` (an
            execution may run it still: its calls are its own to record); or a toolseam
            step holds something else than a toolseam record.
    """
    from . import _engine

    _engine.require_asyncio("settle_cancelled")
    status = await anyio.to_thread.run_sync(_engine.workflow_status, workflow_id, client)
    if status is None:
        raise ValueError(f"settle_cancelled: no workflow {workflow_id!r}")
    if status in _ACTIVE:
        raise ValueError(
            f"settle_cancelled: workflow {workflow_id!r} is {status}: an execution may still "
            "run it, and record its calls"
        )
    steps = await _steps(workflow_id, client)
    recorded = {step["function_id"] for step in steps}
    for step in steps:
        name = step["function_name"]
        if not name.startswith(_MARKER_PREFIX) or step["function_id"] + 1 in recorded:
            continue
        marker = cast("object", step["output"])
        call_id = (
            cast("Mapping[str, Any]", marker).get("marker") if isinstance(marker, Mapping) else None
        )
        if type(call_id) is not str:
            raise ValueError(f"not a toolseam dispatch marker: step {step['function_id']}")
        tool = name[len(_MARKER_PREFIX) :]
        unknown = failure_from_exception(OutcomeUnknownError(tool, call_id))
        payload = encode_outcome(CallOutcome(ToolCall(call_id, tool, None), unknown, True))
        # A False return: another writer recorded the call meanwhile; its outcome stands.
        await anyio.to_thread.run_sync(
            _engine.record_after_cancel,
            workflow_id,
            step["function_id"] + 1,
            outcome_step_name(tool),
            payload,
            client,
        )
    return outcomes_from_steps(await _steps(workflow_id, client))


async def _steps(workflow_id: str, client: DBOSClient | None) -> list[StepInfo]:
    from dbos import DBOS

    if client is None:
        return await DBOS.list_workflow_steps_async(workflow_id)
    return await client.list_workflow_steps_async(workflow_id)
