"""One ``run_code`` call: the program in its sandbox, and every nested call it makes.

One **driver thread** per run steps the sandbox, one suspension at a time, and answers what
it can itself: an ``await tool(...)`` gets its future at once, an ``asyncio.sleep`` its
deadline. Each tool call the program makes is posted to the event loop without waiting
(the dispatcher task there makes it a nested dispatch of the ``run_code`` call through the
registry's whole pipeline, contract §7, nested dispatch); the driver waits only where the
program waits: a ``tool_sync(...)`` call, or an ``await`` of futures none of which has
settled. So a suspension costs the sandbox's own round trip and no thread hop, and the event
loop runs nested calls while the program goes on.

Every nested call runs with the run's signal: the ``run_code`` call's own, fused with the
run's internal stop (its limits, a host cancellation, the pool closing). Stopping follows one
order, whatever stopped the run (contract §5: work that has started is awaited, never
abandoned):

1. the run's signal aborts: every nested call in flight hears of it through its signal;
2. they are awaited until they settle; a call the program makes from then on is dispatched
   with the aborted signal, so it ends ``ABORTED_BEFORE_DISPATCH`` without running, and the
   program sees each of these failures raised at its call site — that is the request to stop;
3. the program has ``grace`` seconds to end by itself, then its worker process is killed;
4. the run returns only once that process has exited.

The nested-call limit stops the run at the program's call past it: that call is not made
(neither listed nor published), and the program is never resumed from it, so it gets no grace.

Host cancellation takes the same path: the work runs shielded, the cancellation aborts the
run's stop, and it is re-raised once the run has settled.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, final

import anyio
import anyio.from_thread
import anyio.to_thread
from anyio.abc import TaskGroup
from pydantic_monty import (
    ExternalException,
    ExternalFuture,
    ExternalReturnValue,
    FunctionSnapshot,
    FutureSnapshot,
    Monty,
    MontyCrashedError,
    MontyError,
    MontyRuntimeError,
    MontySyntaxError,
    NameLookupSnapshot,
)

from .._json import JsonValue, MaterializationError, materialize
from .._nested import nested_input
from .._principal import Principal
from .._registry import ToolRegistry
from .._results import ToolFailure, ToolResult, ToolSuccess
from .._signals import AbortController, AbortSignal, fuse
from .._views import ExecutionToken, ToolExecutionInput, ToolHost, ToolRunContext
from ._errors import PtcCrashError, PtcLimitError, PtcProgramError
from ._output import bounded, bounded_output
from ._sandbox import Completed, Sandbox, Step

__all__ = ["CONTEXT_KEY", "Run", "RunConfig"]

CONTEXT_KEY: Final = "toolseam/ptc"
"""The key of the context every ``run_code`` result carries (its ``additional_contexts``)."""

_OK: Final = "OK"
_ERROR: Final = "ERROR"  # a failure without a code (a denial, a plain exception)
_STOP_MESSAGE: Final = "run_code is stopping: no further tool call runs"
_CHANGED: Final = object()  # the reason of a `_changed` notification (no AbortError to build)
_RUNG: Final = object()  # the reason of a doorbell's ring
_FUTURE: Final = ExternalFuture(future=...)
_ERROR_CHARS: Final = 300  # a nested failure's message in the nested-call list

Resume = Callable[[], Any]
"""What the driver hands the sandbox: the answer to one suspension, applied."""


class _HostCancelled(Exception):
    """The stop of a run whose host cancelled it (the cancellation itself is re-raised)."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """What every run of one ``run_code`` tool shares."""

    registry: ToolRegistry
    pool: Monty
    limiter: anyio.CapacityLimiter
    tools: Mapping[str, str]  # sandbox function name -> tool name (both spellings)
    positional: Mapping[str, tuple[str, ...]]  # tool name -> what positional arguments map to
    wall_clock: float | None
    max_memory: int | None
    nested_calls: int | None
    max_parallel: int
    grace: float
    output_chars: int


@final
class _Parent:
    """The ``run_code`` call as its nested calls see it: its execution, with the run's signal.

    What `nested_input` forwards (parent token, root call, agent, host, principal: the
    program's calls are checked against their tools' scopes as ``run_code`` was) comes from the
    ``run_code`` call itself; the signal is the run's own (the call's, fused with its stop).
    """

    __slots__ = (
        "agent",
        "arguments",
        "call_id",
        "host",
        "name",
        "parent",
        "principal",
        "root_call_id",
        "signal",
        "token",
    )

    def __init__(self, exec: ToolRunContext, signal: AbortSignal) -> None:
        self.token: ExecutionToken = exec.token
        self.call_id: str = exec.call_id
        self.root_call_id: str = exec.root_call_id
        self.name: str = exec.name
        self.arguments: JsonValue = exec.arguments
        self.agent: object | None = exec.agent
        self.parent: ExecutionToken | None = exec.parent
        self.host: ToolHost | None = exec.host
        self.principal: Principal | None = exec.principal
        self.signal: AbortSignal = signal


@final
class _Nested:
    """One nested call, from the moment the program made it: it always gets its result.

    Made in the driver thread; its `result` and `settled` are written in the event loop's,
    under the run's condition, and read by the driver only after `settled`.
    """

    __slots__ = ("arguments", "call_id", "index", "name", "result", "settled", "waited")

    def __init__(
        self, call_id: str, index: int, name: str, arguments: dict[str, Any], *, waited: bool
    ) -> None:
        self.call_id = call_id
        self.index = index
        self.name = name
        self.arguments = arguments
        self.waited = waited  # `tool_sync(...)`: the program is stopped at the call
        self.result: ToolResult | None = None
        self.settled = False

    def ready(self, now: float, stopping: bool) -> bool:
        return self.settled

    def code(self) -> str:
        result = self.result
        if result is None:
            return _ERROR  # execute raised (an interrupt): it has no result to tell
        if isinstance(result, ToolSuccess):
            return _OK
        return result.code or _ERROR

    def to_json(self) -> dict[str, JsonValue]:
        entry: dict[str, JsonValue] = {
            "call_id": self.call_id,
            "name": self.name,
            "arguments": _json_or_repr(self.arguments, 1000),
            "code": self.code(),
        }
        if isinstance(self.result, ToolFailure):
            entry["error"] = bounded(self.result.error.message, _ERROR_CHARS)
        return entry

    def answer(self) -> ExternalReturnValue | ExternalException:
        """What the program's call site receives: the value, or the failure raised."""
        result = self.result
        if isinstance(result, ToolSuccess):
            return ExternalReturnValue(return_value=result.value)
        message = "the call ended without a result" if result is None else result.error.message
        return ExternalException(exception=RuntimeError(f"{self.code()}: {message}"))


@final
class _Sleep:
    """An ``asyncio.sleep`` of the program: a pending future that is not a nested call."""

    __slots__ = ("deadline", "stopped")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.stopped = False

    def ready(self, now: float, stopping: bool) -> bool:
        self.stopped = stopping
        return stopping or now >= self.deadline

    def answer(self) -> ExternalReturnValue | ExternalException:
        if self.stopped:
            return ExternalException(exception=RuntimeError(_STOP_MESSAGE))
        return ExternalReturnValue(return_value=None)


def _json_or_repr(value: object, limit: int) -> JsonValue:
    try:
        return materialize(value)
    except (MaterializationError, RecursionError):
        return bounded(repr(value), limit)


def _stand_in(name: str) -> Callable[..., None]:
    """What a tool's name is bound to when the program reads it without calling it.

    The sandbox turns a host function into one of its own, named by ``__name__``; calling
    it suspends the program as calling the name itself does (``f = search; f(q=...)``).
    """

    def tool(*args: object, **kwargs: object) -> None:  # pragma: no cover - never called
        raise AssertionError("the sandbox calls its own stand-in, never this one")

    tool.__name__ = tool.__qualname__ = name
    return tool


class Run:
    """One program in its sandbox; `run` is the ``run_code`` body.

    Two sides share it: the event loop (the body, the dispatcher, the watcher) and the driver
    thread (`_driver` and what it calls). What they share is guarded by ``_cond``: the
    outbox of calls the program made, each call's settlement, the doorbell.
    """

    def __init__(self, config: RunConfig, exec: ToolRunContext, code: str) -> None:
        self._config = config
        self._exec = exec
        self._code = code
        self._stop = AbortController()
        self._stop_error: Exception | None = None
        self.signal: AbortSignal = exec.signal  # fused with `_stop` once the run starts
        self._parent = _Parent(exec, exec.signal)  # with that signal, once the run starts
        self._sandbox = Sandbox(
            config.pool,
            config.limiter,
            max_memory=config.max_memory,
            output_chars=config.output_chars,
        )
        self._calls: list[_Nested] = []
        # Shared by both sides, under `_cond`.
        self._cond = threading.Condition(threading.Lock())
        self._outbox: list[_Nested] = []
        self._doorbell = AbortController()  # rung (aborted) by the driver: calls to begin
        self._rung = True  # until the dispatcher first looks, nothing needs ringing
        self._driver_done = False
        # The driver's own: the futures the program has not collected yet.
        self._pending: dict[int, _Nested | _Sleep] = {}
        # The event loop's own.
        self._in_flight = 0
        self._live = 0  # nested calls dispatched before the stop, not settled yet
        self._settled = 0
        self._exclusive = False
        self._changed: AbortController | None = None  # while a task waits for a settlement
        self._done = anyio.Event()
        self._parked = anyio.Event()  # the program is held at a call past the limit, for good
        self._output: object = None
        self._failure: Exception | None = None
        self._tg: TaskGroup | None = None

    # The stop.

    def stop(self, error: Exception) -> None:
        """Stop the run with ``error`` as its outcome (a limit, the pool closing).

        Called in the event loop's thread.
        """
        if not self._stop.signal.aborted:
            self._stop_error = error
            self._stop.abort(error)

    def nested_calls(self) -> JsonValue:
        """Every nested call so far, with its outcome code (a frozen JSON list)."""
        with self._cond:
            calls = list(self._calls)
        return materialize([call.to_json() for call in calls])

    def record(self, nested_calls: JsonValue) -> dict[str, JsonValue]:
        """The context this run adds to its ``run_code`` result, whatever that result is."""
        return {
            CONTEXT_KEY: {
                "worker_pid": self._sandbox.pid,
                "stdout": self._sandbox.output.text,
                "nested_calls": nested_calls,
            }
        }

    # The body.

    async def run(self) -> JsonValue:
        """Run the program to its end or its stop; the value, or the run's failure raised."""
        exec = self._exec
        with fuse(exec.signal, self._stop.signal) as fusion:
            self.signal = fusion.signal
            self._parent = _Parent(exec, fusion.signal)
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._shielded)
                    try:
                        await self._done.wait()
                    except anyio.get_cancelled_exc_class():
                        # Host cancellation: told to the run like any stop, awaited shielded
                        # (the task group waits for `_shielded`), then re-raised unchanged.
                        self.stop(_HostCancelled("the host cancelled the run"))
                        raise
            finally:
                # Frozen once: the result's value and its context share the snapshot.
                nested_calls = self.nested_calls()
                exec.defer_context(self.record(nested_calls))
        reason = self.signal.reason if self.signal.aborted else None
        if reason is not None and reason is not self._stop_error:
            exec.signal.raise_if_aborted()  # the caller's abort (or deadline) came first
        if self._stop_error is not None and reason is self._stop_error:
            raise self._stop_error
        if self._failure is not None:
            raise self._failure
        return {
            "output": bounded_output(self._output, self._config.output_chars),
            "stdout": self._sandbox.output.text,
            "nested_calls": nested_calls,
        }

    async def _shielded(self) -> None:
        with anyio.CancelScope(shield=True):
            try:
                await self._work()
            finally:
                self._done.set()

    async def _work(self) -> None:
        watcher = anyio.CancelScope()
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._dispatch)
            tg.start_soon(self._watch, watcher)
            try:
                await self._drive()
            finally:
                # The program is over and its process closed or gone; the dispatcher begins
                # the calls it made last, and this task group awaits every nested call.
                watcher.cancel()

    async def _watch(self, scope: anyio.CancelScope) -> None:
        with scope:
            seconds = self._config.wall_clock
            with anyio.move_on_after(math.inf if seconds is None else seconds):
                await self.signal.wait()
            if not self.signal.aborted:  # the wall clock ran out first
                limit = PtcLimitError(f"the program ran past its wall-clock limit of {seconds:g}s")
                self.stop(limit)
            self._sandbox.doom()
            self._wake_driver()  # a driver asleep or waiting for a future hears of the stop
            # Every nested call that was running has been told through its signal: await
            # them. Calls made from now on never run, so none of them is waited for.
            while self._live:
                await self._wait_change(stoppable=False)
            # The program has heard of the stop at its call sites and may end by itself
            # meanwhile (then `_drive` is over, and this task is cancelled with the helpers).
            # A program held at a call past the nested-call limit is never resumed: it gets
            # no grace (or what is left of it).
            with anyio.move_on_after(self._config.grace):
                await self._parked.wait()
            self._sandbox.kill()
            self._wake_driver()

    # Driving the sandbox: the event loop's side.

    async def _drive(self) -> None:
        sandbox = self._sandbox
        try:
            completed = await anyio.to_thread.run_sync(self._driver, limiter=self._config.limiter)
            if completed is not None:
                self._output = completed.output
        except MontyCrashedError as crash:
            if not sandbox.killed:
                self._failure = PtcCrashError(f"the sandbox process died: {crash}")
        except MontyRuntimeError as error:
            self._failure = self._program_failure(error)
        except MontySyntaxError as error:
            self._failure = PtcProgramError(bounded(error.display(), self._config.output_chars))
        except MontyError as error:
            self._failure = PtcProgramError(bounded(str(error), self._config.output_chars))
        finally:
            with self._cond:
                self._driver_done = True
                bell = self._ring()
            if bell is not None:
                bell.abort(_RUNG)
            await sandbox.close()
            self._notify()

    def _program_failure(self, error: MontyRuntimeError) -> Exception:
        exception = error.exception()
        limit = self._config.max_memory
        if limit is not None and type(exception).__name__ == "MemoryError":
            # Only the sandbox's heap limit ends with this limit's own figure; any other
            # MemoryError (one the program raised itself) is the program's error.
            text = str(exception)
            if text.startswith("memory limit exceeded") and text.endswith(f"> {limit} bytes"):
                return PtcLimitError(
                    f"the program ran past its memory limit of {limit} bytes ({text})"
                )
        return PtcProgramError(bounded(error.display(), self._config.output_chars))

    def _wake_driver(self) -> None:
        with self._cond:
            self._cond.notify_all()

    # Driving the sandbox: the driver thread's side.

    def _driver(self) -> Completed | None:
        """Step the program to its end (`Completed`), or until it is killed (``None``)."""
        sandbox = self._sandbox
        try:
            step: Step = sandbox.start(self._code)
            while not isinstance(step, Completed):
                resume = self._answer(step)
                if resume is None or sandbox.killed:
                    return None
                step = sandbox.step(resume)
            return step
        finally:
            sandbox.close_session()

    def _answer(self, step: Step) -> Resume | None:
        """What resumes the program from ``step``; ``None``: killed while it waited."""
        if isinstance(step, FutureSnapshot):
            return self._collect(step)
        if isinstance(step, NameLookupSnapshot):
            name = step.variable_name
            if name in self._config.tools:  # `f = search`: a tool read, not called yet
                return lambda: step.resume(value=_stand_in(name))
            return step.resume  # an undefined name: the program gets its NameError
        assert isinstance(step, FunctionSnapshot)
        name = step.function_name
        if step.is_os_function:
            return self._os_call(step, name)
        tool = self._config.tools.get(name)
        if tool is None:
            error = NameError(f"name {name!r} is not defined")
            return lambda: step.resume(ExternalException(exception=error))
        arguments = self._arguments(tool, step.args, step.kwargs)
        if isinstance(arguments, TypeError):
            return lambda: step.resume(ExternalException(exception=arguments))
        limit = self._config.nested_calls
        if limit is not None and len(self._calls) >= limit:  # `_calls` grows in this thread
            self._park(tool, limit)
            return None
        call = self._post(tool, arguments, waited=name != tool)
        if not call.waited:  # `await tool(...)`: a future the program awaits when it likes
            self._pending[step.call_id] = call
            return lambda: step.resume(_FUTURE)
        if not self._wait_for(call):
            return None
        return lambda: step.resume(call.answer())

    def _park(self, tool: str, limit: int) -> None:
        """A call past the nested-call limit: never made, and the program never resumed.

        The run stops with `PtcLimitError` at once (no call begins from then on); the
        program stays suspended at this call, so it makes no further call and has nothing
        to wrap up: once the calls in flight have settled, its worker is killed without a
        grace. Returns once that kill is sent.
        """
        anyio.from_thread.run_sync(self._limit_reached, tool, limit)
        with self._cond:
            while not self._sandbox.killed:
                self._cond.wait()

    def _limit_reached(self, tool: str, limit: int) -> None:
        """In the event loop: stop the run for a call past the limit, which is not made."""
        self.stop(
            PtcLimitError(
                f"the program reached its limit of {limit} tool calls: it was ended at its "
                f"next call ({tool}), which was not made"
            )
        )
        self._parked.set()

    def _post(self, tool: str, arguments: dict[str, Any], *, waited: bool) -> _Nested:
        """Record one nested call and hand it to the dispatcher; never waits."""
        with self._cond:
            index = len(self._calls) + 1
            call = _Nested(f"{self._exec.call_id}.{index}", index, tool, arguments, waited=waited)
            self._calls.append(call)
            self._outbox.append(call)
            bell = self._ring()
        if bell is not None:
            bell.abort(_RUNG)
        return call

    def _ring(self) -> AbortController | None:
        """The doorbell to ring (outside the lock) unless rung already; under `_cond`."""
        if self._rung:
            return None
        self._rung = True
        return self._doorbell

    def _wait_for(self, call: _Nested) -> bool:
        """Wait until ``call`` settled; ``False``: the sandbox was killed meanwhile."""
        with self._cond:
            while not call.settled:
                if self._sandbox.killed:
                    return False
                self._cond.wait()
        return True

    def _collect(self, step: FutureSnapshot) -> Resume | None:
        """Answer the futures the program awaits, as soon as one or more are ready."""
        pending = self._pending
        with self._cond:
            while True:
                if self._sandbox.killed:
                    return None
                now = time.monotonic()
                stopping = self.signal.aborted
                settled: dict[int, _Nested | _Sleep] = {}
                timeout: float | None = None
                for call_id in step.pending_call_ids:
                    item = pending.get(call_id)
                    if item is None:
                        continue
                    if item.ready(now, stopping):
                        settled[call_id] = item
                    elif isinstance(item, _Sleep):
                        left = item.deadline - now
                        timeout = left if timeout is None else min(timeout, left)
                if settled:
                    break
                self._cond.wait(timeout)
        for call_id in settled:
            del pending[call_id]
        return lambda: step.resume({call_id: item.answer() for call_id, item in settled.items()})

    def _os_call(self, step: FunctionSnapshot, name: str) -> Resume | None:
        if name == "time.sleep":
            deadline = time.monotonic() + float(step.args[0])
            with self._cond:
                while not self.signal.aborted and (left := deadline - time.monotonic()) > 0:
                    if self._sandbox.killed:
                        return None
                    self._cond.wait(left)
            if self.signal.aborted:
                return lambda: step.resume(ExternalException(exception=RuntimeError(_STOP_MESSAGE)))
            return lambda: step.resume(ExternalReturnValue(return_value=None))
        if name == "asyncio.sleep":
            self._pending[step.call_id] = _Sleep(time.monotonic() + float(step.args[0]))
            return lambda: step.resume(_FUTURE)
        # Files, environment, clock overrides: whatever Monty does without a host handler
        # (its default refuses them), so the program reaches nothing of the host's.
        return step.resume_not_handled

    def _arguments(
        self, tool: str, args: Sequence[object], kwargs: Mapping[str, object]
    ) -> dict[str, Any] | TypeError:
        arguments = dict(kwargs)
        if args:
            names = self._config.positional.get(tool, ())
            if len(args) > len(names):
                return TypeError(
                    f"{tool}() takes at most {len(names)} positional arguments "
                    f"({', '.join(names) or 'none'}); pass keyword arguments"
                )
            for name, value in zip(names, args, strict=False):
                if name in arguments:
                    return TypeError(f"{tool}() got multiple values for argument {name!r}")
                arguments[name] = value
        return arguments

    # Nested calls: the event loop's side.

    async def _dispatch(self) -> None:
        """Begin every call the program makes, in its order, until the program is over."""
        while True:
            doorbell: AbortController | None = None
            with self._cond:
                calls, self._outbox = self._outbox, []
                if not calls:
                    if self._driver_done:
                        return
                    self._doorbell = doorbell = AbortController()
                    self._rung = False
            for call in calls:
                await self._begin(call)
            if doorbell is not None:
                await doorbell.signal.wait()

    async def _begin(self, call: _Nested) -> None:
        """Make one nested call: now, or once its turn comes."""
        # A nested dispatch of the run_code call (parent token, root call, agent, host), with
        # the run's signal: the run_code call's own, fused with the run's stop.
        call_input = nested_input(
            self._parent, call_id=call.call_id, name=call.name, arguments=call.arguments
        )
        await self._gate(call, call_input)
        self._in_flight += 1
        live = not self.signal.aborted
        self._live += live
        if call.waited:
            # The program waits for this call: nothing else can begin meanwhile.
            await self._execute(call, call_input, live)
        else:
            assert self._tg is not None
            self._tg.start_soon(self._execute, call, call_input, live)

    async def _gate(self, call: _Nested, call_input: ToolExecutionInput) -> None:
        """Wait for the call's turn: an exclusive call runs alone (contract §7, batches)."""
        if self.signal.aborted:
            return  # it ends ABORTED_BEFORE_DISPATCH at once
        if call.waited and not self._in_flight:
            # Alone already, and nothing begins before it settles: its mode changes nothing.
            return
        exclusive = self._config.registry.execution_mode(call_input) == "exclusive"
        while not self.signal.aborted:
            if exclusive and not self._in_flight:
                self._exclusive = True
                return
            if (
                not exclusive
                and not self._exclusive
                and self._in_flight < self._config.max_parallel
            ):
                return
            await self._wait_change(stoppable=True)

    async def _execute(self, call: _Nested, call_input: ToolExecutionInput, live: bool) -> None:
        try:
            call.result = await self._config.registry.execute(call_input)
        finally:
            self._in_flight -= 1
            self._live -= live
            if not self._in_flight:
                self._exclusive = False
            with self._cond:
                call.settled = True
                self._cond.notify_all()
            self._notify()
            self._settled += 1
            self._exec.progress(
                self._settled, message=f"{call.call_id} {call.name} -> {call.code()}"
            )

    def _notify(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.abort(_CHANGED)

    async def _wait_change(self, *, stoppable: bool) -> None:
        """Wait for the next nested call to settle; ``stoppable``: or the stop."""
        if self._changed is None:
            self._changed = AbortController()
        changed = self._changed.signal
        if stoppable:
            with fuse(changed, self.signal) as fused:
                await fused.signal.wait()
        else:
            await changed.wait()
