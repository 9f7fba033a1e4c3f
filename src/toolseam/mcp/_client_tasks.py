"""The client's half of the MCP tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663).

On MCP 2026-07-28 the server decides which calls become tasks: a client that declares the
extension may get a ``CreateTaskResult`` (``resultType: "task"``, a task id) instead of
its ``CallToolResult``, and a tool the server marks ``required`` is refused (-32021) to a
client that does not declare it. toolseam's client declares it through `TasksExtension`
(a ``ClientExtension`` of the SDK's ``Client``, which the gateway gives every upstream
connection) and follows a created task to its end (`follow_task`):

- It polls ``tasks/get`` at the task's ``pollIntervalMs`` (at least `MIN_POLL` seconds;
  `DEFAULT_POLL` when the server names none), waiting on the call's signal in between,
  never in a busy loop.
- A task that is ``input_required`` has its questions answered through the same path as
  an ``InputRequiredResult``'s (the call's ``exec.elicit``/``exec.sample``), sent back with
  ``tasks/update``; each question once.
- The call's signal aborting sends ``tasks/cancel`` once, then keeps polling until the
  task's status is final: the remote tool returns only once the server reports the task
  ``cancelled`` (or finished anyway). A toolseam server reports that only after its body
  has been awaited; another server's ``cancelled`` may be an acknowledgement only.
- Exactly one outcome: the task's inlined ``CallToolResult`` (``completed``, or
  ``cancelled`` by the server itself), a protocol error (``failed``), or, when the call
  was aborted and the task ended ``cancelled``, ``None`` (the caller raises its abort
  reason, so the local result is ``ABORTED`` whether or not the remote body ever ran).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, Final, Literal, cast

import anyio
from mcp import ClientSession, MCPError, types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, TypeAdapter

from .._signals import AbortSignal, in_loop

__all__ = [
    "DEFAULT_POLL",
    "EXTENSION",
    "MIN_POLL",
    "CreateTaskResult",
    "TasksExtension",
    "follow_task",
    "legacy_task_refusal",
    "missing_extension_hint",
]

EXTENSION: Final = "io.modelcontextprotocol/tasks"
"""The extension's identifier, under ``capabilities.extensions``."""

DEFAULT_POLL: Final = 1.0
"""Seconds between two ``tasks/get`` when the server names no ``pollIntervalMs``."""

MIN_POLL: Final = 0.05
"""The shortest wait between two ``tasks/get``, whatever the server names."""

# A cancellation of the call by its host (not its signal): the courtesy tasks/cancel is
# bounded, as the SDK bounds its own notifications/cancelled.
_COURTESY: Final = 5.0
_FINAL: Final = frozenset({"completed", "failed", "cancelled"})
_ANY: Final = TypeAdapter(dict[str, Any])
_INPUT_REQUESTS: Final = TypeAdapter(types.InputRequests)

Answer = Callable[[types.InputRequest], Awaitable[types.InputResponse]]
"""How a task's question is answered (the remote tool's ``_answer``, bound to the call)."""


class CreateTaskResult(types.Result):
    """A ``tools/call`` answered with a task (``resultType: "task"``), as parsed by the SDK."""

    model_config = ConfigDict(extra="allow")

    result_type: Literal["task"] = "task"
    """Always ``"task"``."""
    task_id: str
    """The task's id, for ``tasks/get``, ``tasks/update`` and ``tasks/cancel``."""
    status: str = "working"
    """The task's status when it was created."""
    poll_interval_ms: int | None = None
    """How often the server would like to be polled, in milliseconds."""


class _TaskRequest(types.Request[dict[str, Any], str]):
    """A ``tasks/*`` request; its ``Mcp-Name`` header names the task (SEP-2663)."""

    name_param: ClassVar[str | None] = "taskId"


async def _request(session: ClientSession, method: str, params: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = await session.send_request(
        _TaskRequest(method=method, params=params), cast("Any", _ANY)
    )
    return answer


def _dump(responses: Mapping[str, types.InputResponse]) -> dict[str, Any]:
    return {
        key: response.model_dump(by_alias=True, mode="json", exclude_none=True)
        for key, response in responses.items()
    }


def _interval(detail: Mapping[str, Any]) -> float:
    value = detail.get("pollIntervalMs")
    if type(value) is not int and type(value) is not float:
        return DEFAULT_POLL
    return max(MIN_POLL, float(cast("float", value)) / 1000)


async def follow_task(
    session: ClientSession,
    created: CreateTaskResult,
    *,
    signal: AbortSignal | None,
    answer: Answer | None,
) -> types.CallToolResult | None:
    """Poll a created task to its final status (``None``: aborted, and ``cancelled``).

    Raises:
        MCPError: The task ``failed`` (its JSON-RPC error), or a ``tasks/*`` request failed.
        RuntimeError: The task asked for input and there is no ``answer``, or it ended
            ``cancelled`` without a result the caller did not ask for.
        Exception: What ``answer`` raised, unless ``signal`` had aborted (the task is
            cancelled first, and its final status awaited).
    """
    task_id = created.task_id
    detail: dict[str, Any] = created.model_dump(by_alias=True, mode="json", exclude_none=True)
    aborted = anyio.Event()
    # Runs at once on a signal that has already aborted.
    listener = None if signal is None else signal.add_listener(in_loop(aborted.set))
    cancel_sent = False
    answered: set[str] = set()
    # Why the task is cancelled though the signal did not abort (raised once it is final).
    failure: Exception | None = None
    try:
        while detail.get("status") not in _FINAL:
            if (aborted.is_set() or failure is not None) and not cancel_sent:
                await _request(session, "tasks/cancel", {"taskId": task_id})
                cancel_sent = True
            elif detail.get("status") == "input_required" and not cancel_sent:
                asked = _INPUT_REQUESTS.validate_python(detail.get("inputRequests") or {})
                fresh = {key: q for key, q in asked.items() if key not in answered}
                if fresh:
                    if answer is None:
                        failure = RuntimeError(
                            "the task asked for input, which this caller cannot answer"
                        )
                        continue
                    try:
                        responses = {key: await answer(q) for key, q in fresh.items()}
                    except Exception as error:
                        # Not answered (the abort reached the question first, or the
                        # caller cannot answer it): the task is cancelled, then this is
                        # raised once it is final.
                        if not aborted.is_set():
                            failure = error
                        continue
                    answered.update(fresh)
                    update = {"taskId": task_id, "inputResponses": _dump(responses)}
                    await _request(session, "tasks/update", update)
                    detail = await _request(session, "tasks/get", {"taskId": task_id})
                    continue
            if cancel_sent or aborted.is_set():
                await anyio.sleep(_interval(detail))
            else:
                with anyio.move_on_after(_interval(detail)):
                    await aborted.wait()  # the signal ends the wait early
            detail = await _request(session, "tasks/get", {"taskId": task_id})
    except anyio.get_cancelled_exc_class():
        if not cancel_sent:  # the host cancelled the call: tell the server, bounded
            # A courtesy: whatever becomes of it, the cancellation goes on.
            with (
                anyio.CancelScope(shield=True),
                anyio.move_on_after(_COURTESY),
                contextlib.suppress(Exception),
            ):
                await _request(session, "tasks/cancel", {"taskId": task_id})
        raise
    finally:
        if listener is not None:
            listener.remove()
    status = detail["status"]
    if status == "failed":
        found: object = detail.get("error")
        data = cast("dict[str, Any]", found) if isinstance(found, dict) else {}
        code = data.get("code")
        message = data.get("message")
        raise MCPError(
            code if type(code) is int else -32603,
            message if isinstance(message, str) else "the task failed",
            data.get("data"),
        )
    if failure is not None:
        raise failure
    if status == "cancelled" and aborted.is_set():
        return None
    result = detail.get("result")
    if not isinstance(result, dict):
        raise RuntimeError(f"the server {status} the task without a result")
    outcome = types.CallToolResult.model_validate(result, by_name=False)
    if status == "cancelled" and not outcome.is_error:
        outcome.is_error = True  # cancelled by the server: never a success
    return outcome


async def _resolve(created: CreateTaskResult, context: ClaimContext) -> types.CallToolResult:
    """The SDK's ``Client.call_tool`` on a task: followed to its end, no questions answered."""
    outcome = await follow_task(context.session, created, signal=None, answer=None)
    assert outcome is not None  # no signal: never None
    return outcome


class TasksExtension(ClientExtension):
    """Declares the MCP tasks extension on an SDK ``Client`` and parses the tasks it gets.

    Give it to the ``Client`` whose session `register_mcp_tools` uses
    (``Client(target, extensions=[TasksExtension()])``): on a 2026-07-28 connection the
    client then declares ``io.modelcontextprotocol/tasks``, so a server may answer a call
    with a task, and toolseam's remote tools follow it (``tasks/get``, ``tasks/update``,
    ``tasks/cancel``) under the call's signal. Such a ``Client``'s own ``call_tool`` follows a
    task to its end too, but cannot answer its questions (the task is cancelled, and the
    call raises). On a 2025-11-25 connection it declares nothing.
    """

    identifier = EXTENSION

    def claims(self) -> Sequence[ResultClaim[Any]]:
        """The ``resultType: "task"`` answer of ``tools/call``, on 2026-07-28."""
        return (
            ResultClaim(
                result_type="task",
                model=CreateTaskResult,
                resolve=_resolve,
                protocol_versions=frozenset(MODERN_PROTOCOL_VERSIONS),
            ),
        )


def legacy_task_refusal(session: ClientSession, tool: types.Tool) -> str | None:
    """Why a tool that requires tasks cannot be called on this connection, or ``None``.

    A 2025-11-25 server that lists ``execution.taskSupport: "required"`` wants that
    revision's draft tasks (a ``task`` parameter, ``tasks/result``), which toolseam's client
    does not speak: the call is refused before anything is sent.
    """
    execution = tool.execution
    if execution is None or execution.task_support != "required":
        return None
    if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None
    return (
        f"the server requires task-augmented calls of this tool at MCP "
        f"{session.protocol_version} (its draft tasks), which toolseam's client does not "
        "speak; nothing was sent (a server at 2026-07-28 with the tasks extension can be "
        "called)"
    )


def missing_extension_hint(error: MCPError) -> str:
    """What to add to a -32021 that names the tasks extension (else nothing)."""
    if error.error.code != MISSING_REQUIRED_CLIENT_CAPABILITY:
        return ""
    found: object = error.error.data
    for key in ("requiredCapabilities", "extensions"):
        found = cast("Mapping[str, object]", found).get(key) if isinstance(found, Mapping) else None
    if not isinstance(found, Mapping) or EXTENSION not in found:
        return ""
    return (
        " (this tool runs only as a task: create the session's Client with "
        "extensions=[toolseam.mcp.TasksExtension()])"
    )
