"""The MCP tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) under the contract.

On MCP 2026-07-28, a server may answer a ``tools/call`` with a ``CreateTaskResult`` (a task
id) and let the client poll ``tasks/get`` for the call's status and, once it is terminal,
its result; ``tasks/update`` answers the questions the call asked (``input_required``),
``tasks/cancel`` asks it to stop. toolseam serves it for the tools the server is told
support tasks (``create_server(tasks={name: "optional" | "required"})``), to clients that
declare the extension (on the request's ``_meta`` client capabilities):

- The call is an ordinary registry call (``registry.execute``, the pipeline, its own
  `AbortController`) that no request waits for: it runs in the server's lifespan, like a
  2026 call suspended at a question (``_rounds``), and its questions surface on
  ``tasks/get`` as ``inputRequests`` instead of an ``InputRequiredResult``.
- ``tasks/cancel`` aborts the call's signal and acknowledges at once. The task stays
  ``working`` until the body has been awaited; it is then ``cancelled``, and its ``result``
  says whether the body ran (``ABORTED``) or never started (``ABORTED_BEFORE_DISPATCH``),
  stronger than the extension's eventually-consistent acknowledgement.
- Exactly one final status and result per task: the one result the registry published.
  A tool's own failure is ``completed`` with ``result.isError``; a body that crashed (an
  exception that is no `ToolError`) or asked for a capability the client lacks is
  ``failed`` with a JSON-RPC ``error``.
- Bounded: at most ``max_tasks`` unfinished tasks per server, and `MAX_TASKS_PER_PRINCIPAL`
  of one authenticated principal (beyond, the ``tools/call`` is refused with a clear error
  and runs nothing); a finished task is kept ``task_ttl``
  seconds (the ``ttlMs`` it announced) and then forgotten (``tasks/get`` says so).
- A task belongs to the caller that created it (the same keyed digest of the authenticated
  principal as a request state): anyone else is told it does not exist.
- With ``create_server(durable=DurableTools(...))`` every task is a DBOS workflow instead
  (``_durable``): it lives in the system database, outlives a crash of the server, and
  ``tasks/*`` read and cancel it there; it asks no questions. The per-principal share
  counts the durable tasks this process runs.
"""

from __future__ import annotations

import hmac
import itertools
import secrets
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, cast, final

import anyio
import anyio.lowlevel
from mcp import MCPError, types
from mcp.server.context import ServerRequestContext
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from .._errors import TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH, AbortError
from .._results import ToolFailure, ToolResult
from ._host import missing_capability_error
from ._wire import call_tool_result

if TYPE_CHECKING:
    from dbos import WorkflowStatus
    from mcp.server.lowlevel.server import Server

    from .._principal import Principal
    from ._durable import DurableTasks
    from ._host import RequestHost
    from ._rounds import MakeInput, RoundCall, Rounds

__all__ = [
    "EXTENSION",
    "MAX_TASKS",
    "MAX_TASKS_PER_PRINCIPAL",
    "TASK_TTL",
    "TaskSupport",
    "Tasks",
    "check_tasks",
]

EXTENSION: Final = "io.modelcontextprotocol/tasks"
"""The extension's identifier, under ``capabilities.extensions``."""

MAX_TASKS: Final = 256
"""How many unfinished tasks one server holds at once (default)."""

# A task runs on after its request answered, out of reach of the per-principal call cap
# (`HttpLimits`): one principal gets at most as many tasks as that cap's default.
MAX_TASKS_PER_PRINCIPAL: Final = 64
"""How many unfinished tasks one authenticated principal holds on one server at once."""

TASK_TTL: Final = 3600.0
"""Seconds a finished task stays readable with ``tasks/get`` (default)."""

TaskSupport: TypeAlias = Literal["optional", "required", "after-input"]
"""Whether a tool's calls become tasks: ``optional`` (only for clients that declare the
extension), ``required`` (a client that does not is refused with -32021), or
``after-input`` (required; the call's first questions travel as an ``InputRequiredResult``,
and the retry that answers them makes it a task: SEP-2663's MRTR-then-task composition)."""

_POLL_MS: Final = 500
_HEADER_MISMATCH: Final = -32020
_CANCELLED: Final = "the MCP client cancelled the task"
_CREATE_CANCELLED: Final = "the MCP client cancelled the call before it learnt the task's id"
_WORKFLOW_PREFIX: Final = "toolseam-task-"  # `_durable.workflow_id`


def check_tasks(tasks: object, max_tasks: object, task_ttl: object) -> None:
    """The server's task settings checked; raises ``ValueError`` saying what is wrong."""
    if not isinstance(tasks, Mapping):
        raise ValueError(f"`tasks` must map tool names to a TaskSupport, got {tasks!r}")
    for name, support in cast("Mapping[object, object]", tasks).items():
        if type(name) is not str or support not in ("optional", "required", "after-input"):
            raise ValueError(
                "`tasks` must map tool names to 'optional', 'required' or 'after-input', got "
                f"{name!r}: {support!r}"
            )
    if type(max_tasks) is not int or max_tasks < 1:
        raise ValueError(f"`max_tasks` must be a positive int, got {max_tasks!r}")
    if type(task_ttl) not in (int, float) or not 0 < cast("float", task_ttl) < float("inf"):
        raise ValueError(f"`task_ttl` must be a positive number of seconds, got {task_ttl!r}")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _iso(epoch_ms: int | None) -> str:
    if epoch_ms is None:
        return _now()
    moment = datetime.fromtimestamp(epoch_ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _finished_ago(status: WorkflowStatus) -> float:
    """Seconds since a durable task's workflow status last changed."""
    if status.updated_at is None:
        return 0.0
    return max(0.0, datetime.now(UTC).timestamp() - status.updated_at / 1000)


class TaskParams(types.RequestParams):
    """The params of ``tasks/get`` and ``tasks/cancel``."""

    task_id: str = Field(alias="taskId")


class TaskUpdateParams(types.RequestParams):
    """The params of ``tasks/update``: answers to the task's questions, by key."""

    task_id: str = Field(alias="taskId")
    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


@final
class _Task:
    """One task: its call, and when it was created, last changed and finished."""

    __slots__ = ("call", "created", "finished", "id", "updated")

    def __init__(self, call: RoundCall) -> None:
        self.id = secrets.token_urlsafe(16)
        self.call = call
        self.created = self.updated = _now()
        self.finished: float | None = None  # anyio.current_time() once its result is read


def _declares(ctx: ServerRequestContext[Any]) -> bool:
    declared = ctx.session.client_capabilities
    return declared is not None and EXTENSION in (declared.extensions or {})


def _share_taken() -> MCPError:
    return MCPError(
        INVALID_REQUEST,
        f"this MCP server already runs {MAX_TASKS_PER_PRINCIPAL} tasks of this "
        "principal, its share; the call was not run: retry once one has finished",
    )


def _missing() -> MCPError:
    return MCPError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"this request needs the {EXTENSION} extension, which the MCP client did not declare",
        {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


def _check_name(ctx: ServerRequestContext[Any], task_id: str) -> None:
    """SEP-2663: an ``Mcp-Name`` header on a tasks request must name its task."""
    request: object = ctx.request
    headers: object = getattr(request, "headers", None)
    getter: object = getattr(headers, "get", None)
    if not callable(getter):
        return
    value: object = getter("mcp-name")
    if isinstance(value, str) and value.strip() != task_id:
        raise MCPError(_HEADER_MISMATCH, "the Mcp-Name header does not match params.taskId")


@final
class Tasks:
    """The tasks of one server. Event loop thread only."""

    __slots__ = ("_durable", "_ids", "_max", "_principal", "_rounds", "_support", "_tasks", "_ttl")

    def __init__(
        self,
        rounds: Rounds,
        support: Mapping[str, TaskSupport],
        max_tasks: int,
        ttl: float,
        durable: DurableTasks | None = None,
        principal: Callable[[ServerRequestContext[Any]], Principal | None] | None = None,
    ) -> None:
        self._durable = durable
        self._principal = principal
        self._rounds = rounds
        self._support = dict(support)
        self._max = max_tasks
        self._ttl = ttl
        self._tasks: dict[str, _Task] = {}
        self._ids = itertools.count()

    def install(self, server: Server[Any]) -> None:
        """Advertise the extension and serve its methods (``tasks/result``/``list`` are gone)."""
        if not self._support:
            return
        server.extensions[EXTENSION] = {}
        server.add_request_handler("tasks/get", TaskParams, self._get)
        server.add_request_handler("tasks/cancel", TaskParams, self._cancel)
        server.add_request_handler("tasks/update", TaskUpdateParams, self._update)

    # -- tools/call ---------------------------------------------------------------------

    async def call(
        self,
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        make_host: Callable[[ServerRequestContext[Any], RoundCall], RequestHost],
        make_input: MakeInput,
    ) -> dict[str, Any] | None:
        """A ``CreateTaskResult`` for a task-supporting call; ``None`` to serve it as usual."""
        support = self._support.get(params.name)
        if support is None or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return None
        if not _declares(ctx):
            if support != "optional":
                raise _missing()
            return None  # an optional task runs as an ordinary call
        if support == "after-input" and params.request_state is None:
            return None  # its first questions travel as an InputRequiredResult (`_rounds`)
        if support != "after-input" and params.request_state is not None:
            return None  # a retry of a call that asked before it became a task: not one
        self._expire()
        live = sum(1 for task in self._tasks.values() if task.call.result is None)
        if self._durable is not None:
            live = self._durable.live()
        if live >= self._max:
            raise MCPError(
                INVALID_REQUEST,
                f"this MCP server already runs {self._max} tasks, its limit; the call was not "
                "run: retry once one has finished",
            )
        if self._durable is not None:
            if self._durable.held_by_caller() >= MAX_TASKS_PER_PRINCIPAL:
                raise _share_taken()
            return await self._start_durable(ctx, params)
        who = self._rounds.key.principal()
        held = sum(
            1
            for task in self._tasks.values()
            if who is not None and task.call.result is None and task.call.principal == who
        )
        if held >= MAX_TASKS_PER_PRINCIPAL:
            raise _share_taken()
        if support == "after-input":
            # The retry that answers the call's first questions makes it a task.
            call: RoundCall | None = self._rounds.resume_task(ctx, params)
        else:
            call = self._rounds.start_task(ctx, params, make_host, make_input)
        if call is None:
            return None
        host = call.host
        assert host is not None
        try:
            await host.flush()  # a task's notifications have no request to travel on: dropped
            task = _Task(call)
            self._tasks[task.id] = task
            await anyio.lowlevel.checkpoint()
        except anyio.get_cancelled_exc_class():
            # The client cancelled the call that creates the task before it learnt the
            # task's id: nobody could cancel it, so it is cancelled here (told, awaited).
            call.controller.abort(AbortError(_CREATE_CANCELLED))
            raise
        return {"resultType": "task", **self._envelope(task, "working")}

    async def _start_durable(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> dict[str, Any]:
        durable = self._durable
        assert durable is not None
        assert self._principal is not None
        status = await durable.start(
            secrets.token_urlsafe(16),
            str(ctx.request_id),
            params.name,
            {} if params.arguments is None else params.arguments,
            self._principal(ctx),
        )
        task_id = status.workflow_id.removeprefix(_WORKFLOW_PREFIX)
        return {"resultType": "task", **self._durable_envelope(task_id, status, "working")}

    # -- tasks/* ------------------------------------------------------------------------

    def _expire(self) -> None:
        now = anyio.current_time()
        for key, task in list(self._tasks.items()):
            if task.finished is None and task.call.result is not None:
                task.finished = now
                task.updated = _now()
            if task.finished is not None and now - task.finished >= self._ttl:
                del self._tasks[key]

    def _find(self, ctx: ServerRequestContext[Any], task_id: str) -> _Task:
        if not _declares(ctx):
            raise _missing()
        _check_name(ctx, task_id)
        self._expire()
        task = self._tasks.get(task_id)
        principal = self._rounds.key.principal()
        owner = None if task is None else task.call.principal
        if task is None or not (
            (owner is None and principal is None)
            or (
                owner is not None
                and principal is not None
                and hmac.compare_digest(owner, principal)
            )
        ):
            raise MCPError(
                INVALID_PARAMS,
                f"no task {task_id!r} on this server (never created here, or finished more "
                f"than {self._ttl:g} s ago and forgotten)",
            )
        return task

    def _envelope(self, task: _Task, status: str) -> dict[str, Any]:
        return {
            "taskId": task.id,
            "status": status,
            "createdAt": task.created,
            "lastUpdatedAt": task.updated,
            "ttlMs": max(1, round(self._ttl * 1000)),
            "pollIntervalMs": _POLL_MS,
        }

    def _durable_envelope(self, task_id: str, status: WorkflowStatus, state: str) -> dict[str, Any]:
        return {
            "taskId": task_id,
            "status": state,
            "createdAt": _iso(status.created_at),
            "lastUpdatedAt": _iso(status.updated_at),
            "ttlMs": max(1, round(self._ttl * 1000)),
            "pollIntervalMs": _POLL_MS,
        }

    async def _find_durable(self, ctx: ServerRequestContext[Any], task_id: str) -> WorkflowStatus:
        if not _declares(ctx):
            raise _missing()
        _check_name(ctx, task_id)
        assert self._durable is not None
        return await self._durable.find(task_id, self._ttl)

    async def _get_durable(self, ctx: ServerRequestContext[Any], task_id: str) -> dict[str, Any]:
        durable = self._durable
        assert durable is not None
        status = await self._find_durable(ctx, task_id)
        result, why = await durable.final(status)
        if why is not None:
            error = {"code": INTERNAL_ERROR, "message": why}
            return {**self._durable_envelope(task_id, status, "failed"), "error": error}
        if result is None:
            return self._durable_envelope(task_id, status, "working")
        if _finished_ago(status) >= self._ttl:
            raise MCPError(
                INVALID_PARAMS,
                f"no task {task_id!r} on this server (never created here, or finished more "
                f"than {self._ttl:g} s ago and forgotten)",
            )
        if isinstance(result, ToolFailure) and result.error.info is None:
            # An exception that is no ToolError: the body crashed, a protocol-level failure.
            error = {"code": INTERNAL_ERROR, "message": result.error.message}
            return {**self._durable_envelope(task_id, status, "failed"), "error": error}
        answer = call_tool_result(result).model_dump(by_alias=True, mode="json", exclude_none=True)
        return {**self._durable_envelope(task_id, status, _status(result)), "result": answer}

    async def _get(self, ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
        if self._durable is not None:
            return await self._get_durable(ctx, params.task_id)
        task = self._find(ctx, params.task_id)
        call = task.call
        result = call.result
        if result is None:
            pending = [] if call.controller.signal.aborted else call.pending()
            if pending:
                detail = self._envelope(task, "input_required")
                detail["inputRequests"] = {
                    question.key: question.request.model_dump(
                        by_alias=True, mode="json", exclude_none=True
                    )
                    for question in pending
                }
                return detail
            return self._envelope(task, "working")
        final = self._final(call, result)
        status = "failed" if "error" in final else _status(result)
        return {**self._envelope(task, status), **final}

    def _final(self, call: RoundCall, result: ToolResult) -> dict[str, Any]:
        host = call.host
        refusal = None if host is None else missing_capability_error(host, result)
        if refusal is not None:
            error = refusal.error
            return {"error": error.model_dump(by_alias=True, mode="json", exclude_none=True)}
        if isinstance(result, ToolFailure) and result.error.info is None:
            # An exception that is no ToolError: the body crashed, a protocol-level failure.
            return {"error": {"code": INTERNAL_ERROR, "message": result.error.message}}
        answer = call_tool_result(result)
        return {"result": answer.model_dump(by_alias=True, mode="json", exclude_none=True)}

    async def _cancel(self, ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
        if self._durable is not None:
            status = await self._find_durable(ctx, params.task_id)
            if status.status not in ("SUCCESS", "CANCELLED", "ERROR"):
                await self._durable.cancel(params.task_id)
            return {}
        task = self._find(ctx, params.task_id)
        if task.call.result is None:
            task.call.controller.abort(AbortError(_CANCELLED))
            task.updated = _now()
        return {}

    async def _update(
        self, ctx: ServerRequestContext[Any], params: TaskUpdateParams
    ) -> dict[str, Any]:
        if self._durable is not None:
            await self._find_durable(ctx, params.task_id)  # a durable task asks nothing
            return {}
        task = self._find(ctx, params.task_id)
        if task.call.result is None:
            task.call.answer(params.input_responses)
            task.updated = _now()
        return {}


def _status(result: ToolResult) -> str:
    """``cancelled`` for an aborted call (its result says whether the body ran)."""
    info = result.error.info if isinstance(result, ToolFailure) else None
    if info is not None and info.code in (TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH):
        return "cancelled"
    return "completed"
