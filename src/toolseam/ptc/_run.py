"""One ``run_code`` call: the program in its sandbox, and every nested call it makes.

The run drives the sandbox from the host, one suspension at a time: each tool call the
program makes is a nested dispatch of the ``run_code`` call through the registry's whole
pipeline (contract §7, nested dispatch), with the run's signal — the ``run_code`` call's own,
fused with the run's internal stop (its limits, a host cancellation, the pool closing).

Stopping follows one order, whatever stopped the run (contract §5: work that has started is
awaited, never abandoned):

1. the run's signal aborts: every nested call in flight hears of it through its signal;
2. they are awaited until they settle; a call the program makes from then on is dispatched
   with the aborted signal, so it ends ``ABORTED_BEFORE_DISPATCH`` without running, and the
   program sees each of these failures raised at its call site — that is the request to stop;
3. the program has ``grace`` seconds to end by itself, then its worker process is killed;
4. the run returns only once that process has exited.

Host cancellation takes the same path: the work runs shielded, the cancellation aborts the
run's stop, and it is re-raised once the run has settled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, final

import anyio
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
from .._registry import ToolRegistry
from .._results import ToolFailure, ToolResult, ToolSuccess
from .._signals import AbortController, AbortSignal, fuse
from .._views import ToolExecutionInput, ToolRunContext
from ._errors import PtcCrashError, PtcLimitError, PtcProgramError
from ._sandbox import Completed, Sandbox, Step

__all__ = ["CONTEXT_KEY", "Run", "RunConfig", "bounded"]

CONTEXT_KEY: Final = "toolseam/ptc"
"""The key of the context every ``run_code`` result carries (its ``additional_contexts``)."""

_OK: Final = "OK"
_ERROR: Final = "ERROR"  # a failure without a code (a denial, a plain exception)
_STOP_MESSAGE: Final = "run_code is stopping: no further tool call runs"
_CHANGED: Final = object()  # the reason of a `_changed` notification (no AbortError to build)
_FUTURE: Final = ExternalFuture(future=...)
_ERROR_CHARS: Final = 300  # a nested failure's message in the nested-call list


class _HostCancelled(Exception):
    """The stop of a run whose host cancelled it (the cancellation itself is re-raised)."""


def bounded(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its head and its tail."""
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    return f"{text[:head]}\n... ({len(text) - limit} characters cut) ...\n{text[-tail:]}"


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
class _Nested:
    """One nested call, from the moment the program made it: it always gets its result."""

    __slots__ = ("arguments", "call_id", "name", "result", "settled")

    def __init__(self, call_id: str, name: str, arguments: dict[str, Any]) -> None:
        self.call_id = call_id
        self.name = name
        self.arguments = arguments
        self.result: ToolResult | None = None
        self.settled = False

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

    __slots__ = ("settled", "stopped")

    def __init__(self) -> None:
        self.settled = False
        self.stopped = False

    def answer(self) -> ExternalReturnValue | ExternalException:
        if self.stopped:
            return ExternalException(exception=RuntimeError(_STOP_MESSAGE))
        return ExternalReturnValue(return_value=None)


def _json_or_repr(value: object, limit: int) -> JsonValue:
    try:
        return materialize(value)
    except (MaterializationError, RecursionError):
        return bounded(repr(value), limit)


@final
class Run:
    """One program in its sandbox; `run` is the ``run_code`` body."""

    def __init__(self, config: RunConfig, exec: ToolRunContext, code: str) -> None:
        self._config = config
        self._exec = exec
        self._code = code
        self._stop = AbortController()
        self._stop_error: Exception | None = None
        self.signal: AbortSignal = exec.signal  # fused with `_stop` once the run starts
        self._sandbox = Sandbox(
            config.pool,
            config.limiter,
            max_memory=config.max_memory,
            output_bytes=config.output_chars,
        )
        self._calls: list[_Nested] = []
        self._pending: dict[int, _Nested | _Sleep] = {}
        self._in_flight = 0
        self._exclusive = False
        self._changed = AbortController()
        self._done = anyio.Event()
        self._output: object = None
        self._failure: Exception | None = None
        self._tg: TaskGroup | None = None

    # The stop.

    def stop(self, error: Exception) -> None:
        """Stop the run with ``error`` as its outcome (a limit, the pool closing)."""
        if not self._stop.signal.aborted:
            self._stop_error = error
            self._stop.abort(error)

    @property
    def nested_calls(self) -> list[dict[str, JsonValue]]:
        """Every nested call so far, with its outcome code."""
        return [call.to_json() for call in self._calls]

    def record(self) -> dict[str, JsonValue]:
        """The context this run adds to its ``run_code`` result, whatever that result is."""
        return {
            CONTEXT_KEY: {
                "worker_pid": self._sandbox.pid,
                "stdout": self._sandbox.output.output,
                "nested_calls": self.nested_calls,
            }
        }

    # The body.

    async def run(self) -> JsonValue:
        """Run the program to its end or its stop; the value, or the run's failure raised."""
        exec = self._exec
        with fuse(exec.signal, self._stop.signal) as fusion:
            self.signal = fusion.signal
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
                exec.defer_context(self.record())
        reason = self.signal.reason if self.signal.aborted else None
        if reason is not None and reason is not self._stop_error:
            exec.signal.raise_if_aborted()  # the caller's abort (or deadline) came first
        if self._stop_error is not None and reason is self._stop_error:
            raise self._stop_error
        if self._failure is not None:
            raise self._failure
        return {
            "output": _json_or_repr(self._output, self._config.output_chars),
            "stdout": self._sandbox.output.output,
            "nested_calls": self.nested_calls,
        }

    async def _shielded(self) -> None:
        with anyio.CancelScope(shield=True):
            try:
                await self._work()
            finally:
                self._done.set()

    async def _work(self) -> None:
        helpers: list[anyio.CancelScope] = []
        async with anyio.create_task_group() as tg:
            self._tg = tg
            helpers.append(anyio.CancelScope())
            tg.start_soon(self._watch, helpers[-1])
            if self._config.wall_clock is not None:
                helpers.append(anyio.CancelScope())
                tg.start_soon(self._wall_clock, helpers[-1], self._config.wall_clock)
            try:
                await self._drive()
            finally:
                # The program is over and its process closed or gone; nested calls it left
                # running are still awaited by this task group.
                for scope in helpers:
                    scope.cancel()

    async def _watch(self, scope: anyio.CancelScope) -> None:
        with scope:
            await self.signal.wait()
            self._sandbox.doom()
            # Every nested call in flight has been told through its signal: await them.
            while self._in_flight:
                await self._wait_change(stoppable=False)
            # The program has heard of the stop at its call sites and may end by itself
            # meanwhile (then `_drive` is over, and this task is cancelled with the helpers).
            await anyio.sleep(self._config.grace)
            self._sandbox.kill()

    async def _wall_clock(self, scope: anyio.CancelScope, seconds: float) -> None:
        with scope:
            await anyio.sleep(seconds)
            self.stop(PtcLimitError(f"the program ran past its wall-clock limit of {seconds:g}s"))

    # Driving the sandbox.

    async def _drive(self) -> None:
        sandbox = self._sandbox
        try:
            step: Step = await sandbox.start(self._code)
            while not isinstance(step, Completed):
                resume = await self._answer(step)
                if sandbox.killed:
                    break
                step = await sandbox.step(resume)
            else:
                self._output = step.output
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
            await sandbox.close()
            self._notify()

    def _program_failure(self, error: MontyRuntimeError) -> Exception:
        exception = error.exception()
        if self._config.max_memory is not None and type(exception).__name__ == "MemoryError":
            text = str(exception)
            if text.startswith("memory limit exceeded"):
                return PtcLimitError(
                    f"the program ran past its memory limit of {self._config.max_memory} "
                    f"bytes ({text})"
                )
        return PtcProgramError(bounded(error.display(), self._config.output_chars))

    async def _answer(self, step: Step) -> Callable[[], Any]:
        """What resumes the program from ``step``: a call's answer, or an error raised."""
        if isinstance(step, FutureSnapshot):
            return await self._settle(step)
        if isinstance(step, NameLookupSnapshot):
            return step.resume  # an undefined name: the program gets its NameError
        assert isinstance(step, FunctionSnapshot)
        name = step.function_name
        if step.is_os_function:
            return await self._os_call(step, name)
        tool = self._config.tools.get(name)
        if tool is None:
            error = NameError(f"name {name!r} is not defined")
            return lambda: step.resume(ExternalException(exception=error))
        arguments = self._arguments(tool, step.args, step.kwargs)
        if isinstance(arguments, TypeError):
            return lambda: step.resume(ExternalException(exception=arguments))
        call = await self._begin(tool, arguments)
        if name == tool:  # `await tool(...)`: a future the program awaits when it likes
            self._pending[step.call_id] = call
            return lambda: step.resume(_FUTURE)
        while not call.settled:  # `tool_sync(...)`: the program waits here
            await self._wait_change(stoppable=False)
        return lambda: step.resume(call.answer())

    async def _settle(self, step: FutureSnapshot) -> Callable[[], Any]:
        """Answer the futures the program awaits, as soon as one or more have settled."""
        pending = self._pending
        while True:
            settled = {
                call_id: item
                for call_id in step.pending_call_ids
                if (item := pending.get(call_id)) is not None and item.settled
            }
            if settled:
                break
            await self._wait_change(stoppable=False)
        for call_id in settled:
            del pending[call_id]
        return lambda: step.resume({call_id: item.answer() for call_id, item in settled.items()})

    async def _os_call(self, step: FunctionSnapshot, name: str) -> Callable[[], Any]:
        if name == "time.sleep":
            stopped = await self._sleep(float(step.args[0]))
            if stopped:
                return lambda: step.resume(ExternalException(exception=RuntimeError(_STOP_MESSAGE)))
            return lambda: step.resume(ExternalReturnValue(return_value=None))
        if name == "asyncio.sleep":
            sleep = _Sleep()
            self._pending[step.call_id] = sleep
            self._spawn(self._sleep_future, sleep, float(step.args[0]))
            return lambda: step.resume(_FUTURE)
        # Files, environment, clock overrides: whatever Monty does without a host handler
        # (its default refuses them), so the program reaches nothing of the host's.
        return step.resume_not_handled

    async def _sleep(self, seconds: float) -> bool:
        """Sleep ``seconds``, or less when the run stops; whether it stopped."""
        with anyio.move_on_after(seconds):
            await self.signal.wait()
        return self.signal.aborted

    async def _sleep_future(self, sleep: _Sleep, seconds: float) -> None:
        sleep.stopped = await self._sleep(seconds)
        sleep.settled = True
        self._notify()

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

    # Nested calls.

    async def _begin(self, tool: str, arguments: dict[str, Any]) -> _Nested:
        """Make one nested call: recorded now, executed now or once its turn comes."""
        config = self._config
        index = len(self._calls) + 1
        call = _Nested(f"{self._exec.call_id}.{index}", tool, arguments)
        self._calls.append(call)
        if config.nested_calls is not None and index > config.nested_calls:
            self.stop(PtcLimitError(f"the program made more than {config.nested_calls} tool calls"))
        # Built by nested_input (parent token, root call, agent and what else it forwards),
        # with the run's signal: the run_code call's own, fused with the run's stop.
        call_input = dataclasses.replace(
            nested_input(self._exec, call_id=call.call_id, name=tool, arguments=arguments),
            signal=self.signal,
        )
        await self._gate(call_input)
        self._in_flight += 1
        self._spawn(self._execute, call, call_input)
        return call

    async def _gate(self, call_input: ToolExecutionInput) -> None:
        """Wait for the call's turn: an exclusive call runs alone (contract §7, batches)."""
        if self.signal.aborted:
            return  # it ends ABORTED_BEFORE_DISPATCH at once
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

    async def _execute(self, call: _Nested, call_input: ToolExecutionInput) -> None:
        try:
            call.result = await self._config.registry.execute(call_input)
        finally:
            call.settled = True
            self._in_flight -= 1
            if not self._in_flight:
                self._exclusive = False
            self._notify()

    def _spawn(self, work: Callable[..., Any], *args: object) -> None:
        assert self._tg is not None
        self._tg.start_soon(work, *args)

    def _notify(self) -> None:
        changed, self._changed = self._changed, AbortController()
        changed.abort(_CHANGED)

    async def _wait_change(self, *, stoppable: bool) -> None:
        """Wait for the next nested call (or sleep) to settle; ``stoppable``: or the stop."""
        changed = self._changed.signal
        if stoppable:
            with fuse(changed, self.signal) as fused:
                await fused.signal.wait()
        else:
            await changed.wait()
