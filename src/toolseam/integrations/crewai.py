"""CrewAI: a registry's tools as CrewAI tools, run on an event loop of their own, with a stop.

Needs the optional ``crewai`` extra (``pip install "toolseam[crewai]"``); ``import toolseam``
never imports CrewAI. See contract §10 and ``docs/integrations/crewai.md``.

CrewAI runs tools in threads: a turn's native tool calls go to a ``ThreadPoolExecutor`` (up
to eight at once), each calling the tool's synchronous ``run``; nothing there can be
cancelled, and ``BaseTool.run`` runs an async body with an ``asyncio.run`` of its own per
call. So the tools `registry_tools` makes do neither: each call is handed to one event loop
that a `ToolLoop` owns (a thread of its own, asyncio or trio), where it runs
`ToolRegistry.execute`, and CrewAI's thread waits for its one result. The host owns the
loop's stop: `ToolLoop.stop` aborts the signal every call carries and returns once every
running call has ended (thread bodies too) and published its result; a call that arrives
afterwards answers ``ABORTED_BEFORE_DISPATCH`` without running, until `ToolLoop.reset`.

What the agent reads: a success's text, or for a failure a CrewAI ``ToolFailure`` (CrewAI's
own declaration that a call did not succeed), which CrewAI shows the model as
``"<text> (code: <code>)"``, records on ``TaskOutput.tool_failures`` and emits as a
``ToolFailureDetectedEvent``: the host finds the code in ``failure.code`` and the result's
durable form in ``failure.details["toolseam"]``.

Progress and logs: each ``exec.progress`` and ``exec.log`` of a body (and of its nested
calls) is emitted on CrewAI's event bus as a `ToolProgressEvent` or `ToolLogEvent`, in
order, each handled before the next is emitted and all of them before CrewAI receives the
call's result. A caller's own `ToolHost` (``host=``) sees them too and answers
``exec.elicit`` and ``exec.sample``.
"""

from __future__ import annotations

import importlib.util as _importlib_util

if _importlib_util.find_spec("crewai") is None:  # pragma: no cover - only without it
    raise ImportError('toolseam.integrations.crewai needs CrewAI: pip install "toolseam[crewai]"')

import contextlib
import copy
import functools
import uuid
import warnings
from collections import deque
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Final, Literal, final

import anyio
import anyio.lowlevel
import anyio.to_thread
from anyio.from_thread import BlockingPortal, start_blocking_portal

with warnings.catch_warnings():
    # Importing CrewAI warns (ImportWarning: its crewai.rag module refuses the attribute
    # Python sets for a submodule); a test suite that turns warnings into errors would fail.
    warnings.simplefilter("ignore", ImportWarning)
    from crewai.events.base_events import BaseEvent
    from crewai.events.event_bus import crewai_event_bus
    from crewai.tools import BaseTool
    from crewai.tools.tool_failure import ToolFailure as CrewToolFailure
    from crewai.tools.tool_failure import ToolFailureReason
from typing import Self

from pydantic import BaseModel, ConfigDict, PrivateAttr
from typing_extensions import override

from .._capabilities import LogEvent, ToolEvent
from .._json import JsonValue
from .._registry import ToolRegistry
from .._results import ToolFailure, ToolResult
from .._signals import AbortController, AbortSignal
from .._views import ToolExecution, ToolExecutionInput, ToolHost
from ._common import plain, result_text
from ._events import call_events, check_host

__all__ = ["DETAILS_KEY", "ToolLogEvent", "ToolLoop", "ToolProgressEvent", "registry_tools"]

DETAILS_KEY: Final = "toolseam"
"""The key of a CrewAI ``ToolFailure.details`` that holds the result's durable form."""

_STOPPED: Final = "the tool loop was stopped"


class ToolProgressEvent(BaseEvent):
    """A body's ``exec.progress(...)``, emitted on CrewAI's event bus.

    Listen with ``@crewai_event_bus.on(ToolProgressEvent)``.
    """

    type: str = "toolseam_tool_progress"
    call_id: str
    """The toolseam call that reported it (the CrewAI tool call's own, or a nested one)."""
    root_call_id: str
    """The toolseam call the CrewAI tool call started."""
    tool: str
    """The name of the reporting call's tool."""
    progress: float
    total: float | None = None
    message: str | None = None


class ToolLogEvent(BaseEvent):
    """A body's ``exec.log(...)``, emitted on CrewAI's event bus.

    Listen with ``@crewai_event_bus.on(ToolLogEvent)``.
    """

    type: str = "toolseam_tool_log"
    call_id: str
    """The toolseam call that logged (the CrewAI tool call's own, or a nested one)."""
    root_call_id: str
    """The toolseam call the CrewAI tool call started."""
    tool: str
    """The name of the logging call's tool."""
    level: str
    data: Any
    """What was logged, as plain JSON."""
    logger: str | None = None


@final
class ToolLoop:
    """The event loop a crew's registry calls run on, and the host's stop for them.

    A thread of its own runs the loop (anyio's blocking portal) from `start` (or entering
    ``with``) to `close` (or leaving it). Every call of the tools `registry_tools` made
    for this loop runs there, carrying the loop's current signal, so one `stop` reaches
    every running call. Use one loop per run you want to stop on its own.

    Thread-safety: `stop`, `reset` and the calls may come from any thread but the loop's
    own; `start` and `close` from one thread (the host's).

    Args:
        backend: The loop's async library, ``"asyncio"`` or ``"trio"`` (installed
            separately): the registry's bodies run on it.
        backend_options: anyio's options for that backend (``{"use_uvloop": True}``, say).

    Raises:
        ValueError: ``backend`` is neither ``"asyncio"`` nor ``"trio"``.
    """

    def __init__(
        self,
        *,
        backend: Literal["asyncio", "trio"] = "asyncio",
        backend_options: Mapping[str, Any] | None = None,
    ) -> None:
        if backend not in ("asyncio", "trio"):
            raise ValueError(f'backend must be "asyncio" or "trio", got {backend!r}')
        self._backend = backend
        self._options = dict(backend_options or {})
        self._exit: contextlib.ExitStack | None = None
        self._portal: BlockingPortal | None = None
        self._controller = AbortController()
        self._running = 0
        self._idle: anyio.Event | None = None  # set when `_running` drops to 0
        self._gate = _Gate()

    def start(self) -> Self:
        """Start the loop's thread; the tools can run calls from now on.

        Raises:
            RuntimeError: The loop was started already.
        """
        if self._exit is not None:
            raise RuntimeError("the tool loop was started already")
        with contextlib.ExitStack() as stack:
            self._portal = stack.enter_context(
                start_blocking_portal(self._backend, self._options or None)
            )
            self._exit = stack.pop_all()
        return self

    def close(self) -> None:
        """Stop every running call (see `stop`), then end the loop and its thread.

        Idempotent. Calls that arrive afterwards raise ``RuntimeError`` in CrewAI's thread.
        """
        exit, self._exit = self._exit, None
        if exit is None:
            return
        try:
            self._stop("the tool loop closed")
        finally:
            self._portal = None
            exit.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def stopped(self) -> bool:
        """Whether the current signal has aborted (`stop` was called since `reset`)."""
        return self._controller.signal.aborted

    def stop(self, reason: object = _STOPPED) -> None:
        """Abort every call's signal, and return once every running call has ended.

        Each running body is told through ``exec.signal`` and awaited until it returns (a
        thread body too), each call publishes its one result (``ABORTED``, or
        ``ABORTED_BEFORE_DISPATCH`` for one that had not started its body) and answers
        CrewAI with it. Until `reset`, a new call answers ``ABORTED_BEFORE_DISPATCH``
        without running. Idempotent; call it from any thread but the loop's.

        Args:
            reason: The abort's reason, which the bodies see as ``exec.signal.reason``.

        Raises:
            RuntimeError: The loop is not running.
        """
        self._stop(reason)

    def reset(self) -> None:
        """Give calls that start from now on a fresh signal (after a `stop`, for a new run).

        Calls already running keep the signal they have.
        """
        self._controller = AbortController()

    def _stop(self, reason: object) -> None:
        self._live_portal().call(self._stop_async, reason)

    async def _stop_async(self, reason: object) -> None:
        self._controller.abort(reason)
        while self._running:
            idle = self._idle = self._idle or anyio.Event()
            await idle.wait()
        await anyio.lowlevel.checkpoint()

    def _live_portal(self) -> BlockingPortal:
        portal = self._portal
        if portal is None:
            raise RuntimeError("the tool loop is not running: start it (or enter `with`) first")
        return portal

    def _run(
        self, registry: ToolRegistry, name: str, arguments: JsonValue, host: ToolHost | None
    ) -> ToolResult:
        """Run one call on the loop; block CrewAI's thread until its one result."""
        return self._live_portal().call(self._execute, registry, name, arguments, host)

    async def _execute(
        self, registry: ToolRegistry, name: str, arguments: JsonValue, user: ToolHost | None
    ) -> ToolResult:
        self._running += 1
        try:
            signal = self._controller.signal
            async with call_events(_emit, user) as host:
                # CrewAI hands a tool no id of the model's call: the call gets one of its own.
                call = ToolExecutionInput(
                    call_id=f"crewai_{uuid.uuid4().hex}",
                    name=name,
                    arguments=arguments,
                    signal=signal,
                    host=host,
                )
                exclusive = registry.execution_mode(call) == "exclusive"
                if not await self._gate.enter(exclusive, signal):
                    # contract §7: stopped while waiting for its turn; the registry answers
                    # the pre-aborted call ABORTED_BEFORE_DISPATCH without running it.
                    return await registry.execute(call)
                try:
                    return await registry.execute(call)
                finally:
                    self._gate.leave()
        finally:
            self._running -= 1
            if not self._running and self._idle is not None:
                self._idle.set()
                self._idle = None


@final
class _Gate:
    """Admits calls in arrival order: parallel ones together, an exclusive one alone.

    CrewAI's parallel tool calls arrive from its threads at once; the registry's per-call
    `ToolRegistry.execution_mode` says which may overlap. An exclusive call waits until
    every call admitted before it has finished and holds back every call after it.
    """

    __slots__ = ("_exclusive", "_queue", "_running")

    def __init__(self) -> None:
        self._running = 0
        self._exclusive = False
        self._queue: deque[tuple[bool, anyio.Event]] = deque()

    def _admits(self, exclusive: bool) -> bool:
        return self._running == 0 or not (exclusive or self._exclusive)

    def _take(self, exclusive: bool) -> None:
        self._running += 1
        self._exclusive = exclusive

    async def enter(self, exclusive: bool, signal: AbortSignal) -> bool:
        """Wait for the call's turn; ``False`` (and no turn) once ``signal`` aborts first."""
        if not self._queue and self._admits(exclusive):
            self._take(exclusive)
            await anyio.lowlevel.checkpoint()
            return True
        entry = (exclusive, anyio.Event())
        self._queue.append(entry)
        async with anyio.create_task_group() as group:

            async def admitted() -> None:
                await entry[1].wait()
                group.cancel_scope.cancel()

            group.start_soon(admitted)
            await signal.wait()  # a stop ends the wait; no body is involved yet
            group.cancel_scope.cancel()
        if entry[1].is_set():
            return True
        self._queue.remove(entry)
        self._wake()
        return False

    def leave(self) -> None:
        """A call admitted by `enter` has finished."""
        self._running -= 1
        self._wake()

    def _wake(self) -> None:
        queue = self._queue
        while queue and self._admits(queue[0][0]):
            exclusive, event = queue.popleft()
            self._take(exclusive)
            event.set()


async def _emit(exec: ToolExecution, event: ToolEvent) -> None:
    """Emit one body event on CrewAI's bus; return once its handlers have run."""
    crew_event: BaseEvent
    if isinstance(event, LogEvent):
        crew_event = ToolLogEvent(
            call_id=exec.call_id,
            root_call_id=exec.root_call_id,
            tool=exec.name,
            level=event.level,
            data=copy.deepcopy(event.data),  # plain containers, thawed iteratively
            logger=event.logger,
        )
    else:
        crew_event = ToolProgressEvent(
            call_id=exec.call_id,
            root_call_id=exec.root_call_id,
            tool=exec.name,
            progress=event.progress,
            total=event.total,
            message=event.message,
        )
    handled = crewai_event_bus.emit(exec, crew_event)
    if handled is not None:
        # The bus runs handlers in its own threads: wait, so the next event (and the
        # result) comes after this one was handled.
        await anyio.to_thread.run_sync(handled.result)


class _Arguments(BaseModel):
    """The arguments of a registry tool, as CrewAI sees them: anything, validated later.

    CrewAI validates a tool's arguments against ``args_schema`` only when it has fields;
    this one has none, so the registry validates them (contract §5). Its JSON schema, what
    CrewAI sends the model, is the registry's (set per tool by `_arguments_model`).
    """

    model_config = ConfigDict(extra="allow")


def _arguments_model(name: str, parameters: dict[str, Any]) -> type[_Arguments]:
    def registry_schema(schema: dict[str, Any]) -> None:
        schema.clear()
        schema.update(copy.deepcopy(parameters))

    config = ConfigDict(extra="allow", json_schema_extra=registry_schema)
    return type(f"{name}_arguments", (_Arguments,), {"model_config": config})


def _never_cache(_arguments: Any = None, _result: Any = None) -> bool:
    """CrewAI's cache would answer a repeated call without the registry: never cache."""
    return False


@final
class _RegistryTool(BaseTool):
    """One registered tool as a CrewAI tool (see `registry_tools`)."""

    _registry: ToolRegistry = PrivateAttr()
    _loop: ToolLoop = PrivateAttr()
    _host: ToolHost | None = PrivateAttr()

    def __init__(
        self,
        registry: ToolRegistry,
        loop: ToolLoop,
        name: str,
        description: str,
        parameters: dict[str, Any],
        host: ToolHost | None,
    ) -> None:
        super().__init__(
            name=name,
            description=description,
            args_schema=_arguments_model(name, parameters),
            cache_function=_never_cache,
        )
        self._registry = registry
        self._loop = loop
        self._host = host

    @override
    def _run(self, *args: Any, **arguments: Any) -> Any:
        return _answer(self._loop._run(self._registry, self.name, arguments, self._host))

    @override
    async def _arun(self, *args: Any, **arguments: Any) -> Any:
        # CrewAI's async paths await this on their own loop: wait for the call in a thread,
        # like its sync path. A cancellation of the awaiting task takes effect once the call
        # has ended; `ToolLoop.stop` is what ends it early.
        run = functools.partial(self._loop._run, self._registry, self.name, arguments, self._host)
        return _answer(await anyio.to_thread.run_sync(run))

    @override
    def format_output_for_agent(self, raw_result: Any) -> str:
        if isinstance(raw_result, CrewToolFailure):
            return raw_result.as_agent_message()
        return str(raw_result)


def _answer(result: ToolResult) -> str | CrewToolFailure:
    """What CrewAI gets for one result: the text, or a CrewAI ``ToolFailure`` with the code."""
    text = result_text(result)
    if not isinstance(result, ToolFailure):
        return text
    return CrewToolFailure(
        message=text,
        reason=ToolFailureReason.TOOL_REPORTED,
        code=result.code,
        details={DETAILS_KEY: plain(result.to_json())},
    )


def registry_tools(
    registry: ToolRegistry, loop: ToolLoop, *, host: ToolHost | None = None
) -> list[BaseTool]:
    """One CrewAI tool per tool registered on ``registry`` now, in registration order.

    Each tool has the registry's ``name`` and ``description``, and its parameters schema is
    what CrewAI sends the model (CrewAI sends it strict, closing its objects). A call
    runs `ToolRegistry.execute` on ``loop`` with the loop's current signal and a
    ``call_id`` of its own (``"crewai_<hex>"``: CrewAI hands a tool no id of the model's
    call), and CrewAI's thread waits for its one result: a success answers its text, a
    failure a CrewAI ``ToolFailure`` with the text as ``message``, the code as ``code``
    and ``result.to_json()`` under ``details[DETAILS_KEY]``. CrewAI's result cache is off
    for these tools (``cache_function`` answers ``False``): a repeated call reaches the
    registry, and an aborted or failed result never answers another call. Tools
    registered later are not in the list; a tool removed later answers ``UNKNOWN_TOOL``.

    Args:
        registry: The registry whose tools to expose, and that runs every call.
        loop: The `ToolLoop` the calls run on; it must be running when CrewAI calls a
            tool. Its `ToolLoop.stop` stops them.
        host: The caller's own `ToolHost` for every call: its ``on_progress`` and
            ``on_log`` see the events too (beside CrewAI's bus), its ``elicit`` and
            ``sample`` answer the body's ``exec.elicit`` and ``exec.sample`` (without one,
            those fail with ``CAPABILITY_UNAVAILABLE``). Its sinks run in the loop's thread.

    Returns:
        The tools, as CrewAI ``BaseTool`` objects.

    Raises:
        TypeError: ``registry`` is not a `ToolRegistry`, ``loop`` not a `ToolLoop`, or
            ``host`` not a `ToolHost`.
    """
    if not isinstance(registry, ToolRegistry):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"registry must be a ToolRegistry, got {type(registry).__name__}")
    if not isinstance(loop, ToolLoop):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"loop must be a ToolLoop, got {type(loop).__name__}")
    check_host(host)
    if host is not None and not isinstance(host, ToolHost):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"host must be a ToolHost or None, got {type(host).__name__}")
    return [
        _RegistryTool(
            registry, loop, schema.name, schema.description, plain(schema.parameters), host
        )
        for schema in registry.schemas()
    ]
