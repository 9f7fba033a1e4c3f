"""The reference pipeline: one call and one batch, written the way docs/pipeline.md draws them.

Read this module top to bottom to learn what toolseam does with a call; read
`toolseam._outcomes` for every rule that decides an outcome. `ReferenceRegistry` runs the
same stages as `ToolRegistry`, in plain ``async def`` functions, and a differential test
(tests/test_reference_differential.py) requires both to publish the same results, contexts
and stage sequences. It is never on a hot path: use `ToolRegistry`.

Three things are borrowed from the engine because the public types have no constructor for
them, and each is data rather than a decision: the run object that is every stage's view
(`ToolExecution`, `ToolDispatchExecution`, `ToolRunContext`: it mints the token, fuses the
body's signal and runs ``define_tool``'s synchronous bodies in worker threads), the deadline
of a tool's ``timeout``, and the JSON snapshot of arguments and outputs.

Not covered: ``timeout_policy`` registered by hand (it needs a `ToolRegistry`), tracing hooks,
``register()``'s checks of a malformed definition, and ``wait_idle()`` across several event
loops in several threads.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, final

import anyio
import anyio.lowlevel

from . import _outcomes as rules
from ._approval import ApprovalRequest, ApprovalService
from ._batch import CallOutcome, ToolCall
from ._decisions import Accept, Allow, Ask, Deny, ReplaceValue
from ._definitions import ToolDefinition, check_timeout, scopes_of
from ._delivery import Delivery
from ._errors import ToolNotFoundError, ToolOutputError, exact_str, safe_str, type_name
from ._json import MaterializationError, materialize
from ._principal import Principal, missing_scopes
from ._registration import Registration
from ._results import (
    ToolFailure,
    ToolResult,
    ToolSuccess,
    failure_from_exception,
    materialized_success,
)
from ._run import CallState, DispatchView
from ._signals import AbortController, AbortSignal
from ._stages import (
    AroundDispatch,
    EventListener,
    Guard,
    PostExecuteListener,
    PreExecuteListener,
    ResultObserver,
)
from ._threads import abort_for_host
from ._timeouts import Deadline
from ._views import ExecutionToken, ToolExecutionInput, ToolHost

__all__ = ["ReferenceRegistry", "run_tool_calls"]

_logger = logging.getLogger("toolseam")

_ARGUMENTS_NOT_JSON = "tool execution arguments must be losslessly JSON-serializable"


@dataclass(eq=False)
class _Call:
    """One call's decisions so far; ``run`` is the view every stage receives."""

    run: CallState
    caller: AbortSignal  # captured at entry: every cancellation decision reads it (§5)
    result: ToolResult | None = None
    final: bool = False  # no later stage runs, post-execute included
    denied: bool = False  # a denial: post-execute may not turn it into a success
    published: bool = False

    def settle(self, result: ToolResult, *, final: bool = False) -> None:
        self.result = result
        self.final = self.final or final

    def told_to_stop(self, error: BaseException) -> bool:
        """Whether ``error`` is the caller's abort (or the body signal's host abort)."""
        caller, host = self.caller, self.run._host
        return rules.is_abort(
            error,
            caller_reason=caller.reason,
            caller_aborted=caller.aborted,
            host_reason=_reason(host),
        )


@final
class ReferenceRegistry:
    """The registry of docs/pipeline.md as readable code; the same API as `ToolRegistry`.

    Args:
        approval: Decides calls a pre-execute listener answers with `Ask`.
        timeouts: Enforce each tool's ``timeout`` around its body (contract §5).
    """

    def __init__(self, approval: ApprovalService | None = None, *, timeouts: bool = True) -> None:
        self._approval = approval
        self._timeouts = timeouts
        self._tools: dict[str, ToolDefinition[Any, Any]] = {}
        self._pre: list[PreExecuteListener] = []
        self._wrappers: list[AroundDispatch] = []
        self._post: list[PostExecuteListener] = []
        self._guards: list[Guard] = []
        self._observers: list[ResultObserver] = []
        self._events: list[EventListener] = []
        self._in_flight: set[_Call] = set()
        self._idle_waiters: list[tuple[set[_Call], AbortController]] = []

    # -- setup: every stage list is snapshotted by each call (contract §5) ----------------

    def register(self, definition: ToolDefinition[Any, Any]) -> Registration:
        """Register a tool; a name already taken raises `ValueError`."""
        name = definition.name
        check_timeout(name, definition.timeout)
        scopes_of(name, definition)  # read again per call: the definition visible then
        if name in self._tools:
            raise ValueError(f'tool "{name}" is already registered')
        self._tools[name] = definition

        def unregister() -> None:
            if self._tools.get(name) is definition:
                del self._tools[name]

        return Registration(unregister)

    def get(self, name: str) -> ToolDefinition[Any, Any] | None:
        """The definition registered under ``name``, or ``None``."""
        return self._tools.get(name)

    def on_pre_execute(
        self, listener: PreExecuteListener, *, prepend: bool = False
    ) -> Registration:
        """Add a pre-execute listener; the first added is outermost unless ``prepend``."""
        return _add(self._pre, listener, prepend)

    def on_execute(self, wrapper: AroundDispatch, *, prepend: bool = False) -> Registration:
        """Add an around-dispatch wrapper; the first added is outermost unless ``prepend``."""
        return _add(self._wrappers, wrapper, prepend)

    def on_post_execute(
        self, listener: PostExecuteListener, *, prepend: bool = False
    ) -> Registration:
        """Add a post-execute listener; the first added is outermost unless ``prepend``."""
        return _add(self._post, listener, prepend)

    def on_result(self, observer: ResultObserver) -> Registration:
        """Add a result observer: it sees every published result exactly once."""
        return _add(self._observers, observer, False)

    def add_guard(self, guard: Guard) -> Registration:
        """Add a guard: after an allowing pre-execute chain, a returned string denies."""
        return _add(self._guards, guard, False)

    def on_event(self, listener: EventListener) -> Registration:
        """Add an event listener: it sees each progress and log event a body reports."""
        return _add(self._events, listener, False)

    def execution_mode(self, input: ToolExecutionInput) -> Literal["parallel", "exclusive"]:
        """``"parallel"`` only when the tool's ``is_concurrency_safe`` answers exactly True."""
        try:
            definition = self._tools.get(input.name)
            if definition is None:
                return "exclusive"
            args = definition.parse_arguments(materialize(input.arguments))
            safe: object = definition.is_concurrency_safe(args)
        except Exception:
            return "exclusive"
        return "parallel" if safe is True else "exclusive"

    async def wait_idle(self) -> None:
        """Return once every call started so far has published its one result."""
        pending = set(self._in_flight)
        if not pending:
            await anyio.lowlevel.checkpoint()
            return
        waiter = AbortController()
        self._idle_waiters.append((pending, waiter))
        await waiter.signal.wait()

    # -- one call: docs/pipeline.md, top to bottom ----------------------------------------

    async def execute(self, input: ToolExecutionInput) -> ToolResult:
        """Run one call through the pipeline and return its one published result.

        Raises:
            TypeError: ``input`` is not a `ToolExecutionInput` with an `AbortSignal`.
        """
        call = self._start(input)  # 1-3
        if call.result is None:
            await self._stage(call, self._before_dispatch)  # 4
        if call.result is None:
            await self._stage(call, self._dispatch)  # 5-6
        if not call.final:
            await self._stage(call, self._after_dispatch)  # 7
        else:
            await self._stage(call, _checkpoint)  # execute() is always a checkpoint
        return self._publish(call)  # 8-9

    async def _stage(self, call: _Call, stage: Callable[[_Call], Awaitable[None]]) -> None:
        """Await one stage; whatever escapes it still ends in the call's one result (§5)."""
        try:
            await stage(call)
        except Exception as error:  # a bug or a hostile object slipped through the stage
            _log(
                logging.ERROR, "call %r: unexpected error in the pipeline", call.run.call_id, error
            )
            contexts = tuple(call.run._contexts)
            call.settle(failure_from_exception(error, additional_contexts=contexts), final=True)
        except BaseException:  # the host's cancellation, or an interrupt: settle, re-raise
            self._settle_interrupted(call)
            raise

    def _start(self, input: ToolExecutionInput, *, skipped: bool = False) -> _Call:
        """1. Snapshot the input, capture finalize_content; 2. materialize; 3. pre-aborted."""
        if type(input) is not ToolExecutionInput:
            raise TypeError(f"execute() expects a ToolExecutionInput, got {type_name(type(input))}")
        signal = input.signal
        if type(signal) is not AbortSignal:
            raise TypeError(
                f"ToolExecutionInput.signal must be an AbortSignal, got {type_name(type(signal))}"
            )
        # Texts are copied into exact strings; a field that is not one fails the call.
        problems: list[str] = []
        call_id = _text("call_id", input.call_id, problems)
        name = _text("name", input.name, problems)
        raw_root = input.root_call_id
        root_call_id = call_id if raw_root is None else _text("root_call_id", raw_root, problems)
        host: object = input.host  # an untyped caller may pass anything
        principal: object = input.principal
        parent = input.parent
        definition = self._tools.get(name)
        # contract §5.1: the definition visible *now* supplies finalize_content.
        finalizer = None if definition is None else definition.finalize_content
        reach = None
        if type(host) is ToolHost or self._events:
            reach = Delivery(host if type(host) is ToolHost else None, tuple(self._events))
        run = CallState(
            parent._thread_level if type(parent) is ExecutionToken else 0,
            call_id,
            root_call_id or call_id,
            name,
            input.agent,
            parent,
            signal,
            finalizer,
            0,
            reach,
        )
        if type(principal) is Principal:
            run._principal = principal
        call = _Call(run, signal)
        self._in_flight.add(call)
        try:
            run._arguments = materialize(input.arguments)
        except MaterializationError as error:
            if skipped:  # observers see None arguments: the call never started
                call.settle(rules.classify(body_invoked=False), final=True)
                return call
            # contract §5.2: a materialization failure wins over everything else.
            call.settle(ToolFailure.from_message(f"{_ARGUMENTS_NOT_JSON} ({error})"), final=True)
            return call
        if host is not None and type(host) is not ToolHost:
            problems.append(
                f"ToolExecutionInput.host must be a ToolHost, got {type_name(type(host))}"
            )
        if principal is not None and type(principal) is not Principal:
            problems.append(
                "ToolExecutionInput.principal must be a Principal, "
                f"got {type_name(type(principal))}"
            )
        if problems and not skipped:
            call.settle(ToolFailure.from_message("; ".join(problems)), final=True)
            return call
        if skipped or signal.aborted:
            # contract §5.3 (and §7: a call a batch never started): no stage runs.
            call.settle(rules.classify(body_invoked=False), final=True)
            return call
        if type(principal) is Principal and definition is not None:
            # contract §14: a principal without the tool's scopes is denied before any
            # stage; like any denial, it still goes through post-execute.
            missing = missing_scopes(scopes_of(name, definition), principal)
            if missing is not None:
                call.denied = True
                call.settle(rules.denied(missing))
        return call

    async def _before_dispatch(self, call: _Call) -> None:
        """4. Pre-execute chain, approval on `Ask`, guards; then the caller's signal decides."""
        run = call.run
        try:
            decision: object = await _run_chain(
                list(self._pre), (run,), _allow, "pre-execute listener"
            )
        except BaseException as error:
            return self._stage_raised(call, error)
        if type(decision) is Ask:
            if call.caller.aborted:  # the service is not asked for a cancelled call
                return call.settle(rules.classify(body_invoked=False))
            decision = await self._ask(call, decision.reason)
            if call.result is not None:
                return None
        if type(decision) is Deny:
            call.denied = True
            return call.settle(rules.denied(safe_str(decision.reason)))
        if type(decision) is not Allow:
            message = (
                f"pre-execute chain returned {type_name(type(decision))}, not Allow, Deny or Ask"
            )
            return call.settle(ToolFailure.from_message(message), final=True)
        for guard in list(self._guards):
            try:
                verdict = guard(run)
            except BaseException as error:
                return self._stage_raised(call, error)
            if verdict is not None:  # the first string wins
                call.denied = True
                return call.settle(rules.denied(safe_str(verdict)))
        if call.caller.aborted:  # contract §5.4: still through post-execute
            call.settle(rules.classify(body_invoked=False))
        return None

    async def _ask(self, call: _Call, reason: object) -> object:
        """Approval: the service's answer, through the answer table (`approval_outcome`)."""
        text = None if reason is None else safe_str(reason)
        if self._approval is None:
            return rules.no_approval_service(text)
        request = ApprovalRequest(execution=call.run, reason=text, signal=call.caller)
        try:
            answer: object = await self._approval.request(request)
        except BaseException as error:
            self._stage_raised(call, error)
            return None
        outcome = rules.approval_outcome(answer, caller_aborted=call.caller.aborted)
        if outcome == "allow":
            return Allow()
        if outcome == "aborted":
            call.settle(rules.classify(body_invoked=False))
        elif type(outcome) is ToolFailure:
            call.settle(outcome, final=True)
        return outcome

    async def _dispatch(self, call: _Call) -> None:
        """5. The around-dispatch chain; its innermost ``next`` is `_invoke_body`."""
        run = call.run
        try:
            result: object = await _run_chain(
                list(self._wrappers),
                (DispatchView(run),),
                lambda: self._invoke_body(call),
                "around-dispatch wrapper",
            )
        except BaseException as error:
            held = run._body_result  # what a wrapper held: the body's, with all contexts
            if held is not None:
                held = replace(
                    held, additional_contexts=(*run._contexts, *held.additional_contexts)
                )
            return self._stage_raised(call, error, tuple(run._contexts), held)
        finally:
            run._signal = call.caller  # after the chain, exec.signal is the caller's
        if type(result) not in (ToolSuccess, ToolFailure):
            message = (
                f"around-dispatch wrapper returned {type_name(type(result))}, not a ToolResult"
            )
            failure = ToolFailure.from_message(message, additional_contexts=tuple(run._contexts))
            return call.settle(failure, final=True)
        dispatched: ToolResult = result  # type: ignore[assignment]
        if run._contexts:  # deferred by the body first, then the wrappers'
            dispatched = replace(
                dispatched, additional_contexts=(*run._contexts, *dispatched.additional_contexts)
            )
        call.settle(self._after_abort(call, dispatched))
        return None

    async def _invoke_body(self, call: _Call) -> ToolResult:
        """6. The body: checks, "body invoked", arguments, the body awaited, its output."""
        run = call.run
        if call.result is not None:  # contract §5.6: never a body after the result
            raise RuntimeError(
                f'tool "{run.name}" (call {run.call_id!r}): an around-dispatch wrapper '
                "awaited what next() returned after the wrappers returned; the call has "
                "ended, so the tool body will not run"
            )
        handed: object = run._signal  # what the wrappers left on exec.signal
        if call.caller.aborted:
            return rules.classify(body_invoked=False)
        if type(handed) is not AbortSignal:
            return ToolFailure.from_message(
                f"around-dispatch wrapper set exec.signal to {type_name(type(handed))}, "
                "not an AbortSignal"
            )
        if handed.aborted:
            return rules.classify(body_invoked=False)
        definition = self._tools.get(run.name)  # looked up now
        if definition is None:
            return failure_from_exception(ToolNotFoundError(run.name))
        deadline = None
        if self._timeouts and definition.timeout is not None:
            deadline = run._deadline = Deadline(definition.timeout, call.caller, handed)
        # The body's signal: fuse(caller, host, handed), when read; "body invoked" is
        # recorded immediately before the body call (contract §5.6).
        run._invoke(handed)
        try:
            # A define_tool `def` body runs in a worker thread (toolseam._threads) and is
            # awaited until the thread returns; it is told through this same signal: the
            # caller's abort reaches it through the fusion, and on host cancellation the
            # handler below aborts the fusion while the thread job waits, shielded, for the
            # thread to return before the cancellation reaches this frame.
            args = definition.parse_arguments(run.arguments)
            output = await definition.run(args, run)
            result = _body_success(run.name, definition, args, output)
        except Exception as error:
            result = self._body_raised(call, error)
        except BaseException as error:
            if not call.told_to_stop(error):  # the host cancels: tell the body's signal
                if deadline is not None and deadline.owns(run._host):
                    run._body_result = deadline.timed_out(rules.classify(body_invoked=True))
                if run._host is not None:
                    abort_for_host(run._host)
                raise
            result = self._body_raised(call, error)
        finally:
            run._in_body = False
            run._pending = None
            run._signal = handed  # after the body, exec.signal is the wrapper's again
            if run._fusion is not None:
                run._fusion.close()
            if deadline is not None:
                deadline.cancel()
        if deadline is not None and deadline.owns(run._host):
            result = deadline.timed_out(result)  # TOOL_TIMEOUT only if it aborted first
        result = self._after_abort(call, result)
        run._body_result = result
        return result

    def _body_raised(self, call: _Call, error: BaseException) -> ToolFailure:
        told = call.told_to_stop(error)
        if told and (error is call.caller.reason or error is _reason(call.run._host)):
            BaseException.with_traceback(error, None)  # a shared reason keeps no frames
        return rules.body_raised(error, body_invoked=call.run._body_invoked, told_to_stop=told)

    async def _after_dispatch(self, call: _Call) -> None:
        """7. The post-execute chain, then the caller's signal decides."""
        run = call.run
        dispatched = call.result
        assert dispatched is not None
        try:
            decision = await _run_chain(
                list(self._post), (run, dispatched), _accept, "post-execute listener"
            )
            result = rules.apply_post(dispatched, decision, denied=call.denied)
            if call.denied and type(decision) is ReplaceValue:
                _log(logging.WARNING, "post-execute ReplaceValue ignored: the call was denied")
        except BaseException as error:
            contexts = dispatched.additional_contexts
            return self._stage_raised(call, error, contexts, dispatched)
        call.settle(self._after_abort(call, result))
        return None

    def _stage_raised(
        self,
        call: _Call,
        error: BaseException,
        contexts: Sequence[Any] = (),
        held: ToolResult | None = None,
    ) -> None:
        """A stage raised: the caller's abort, its failure, or propagate (`stage_raised`)."""
        told = call.told_to_stop(error)  # the caller's abort: as if the stage had returned
        if told and (error is call.caller.reason or error is _reason(call.run._host)):
            BaseException.with_traceback(error, None)
        decided = rules.stage_raised(
            error, is_abort=told, body_invoked=call.run._body_invoked, contexts=contexts, held=held
        )
        if decided is None:
            raise error
        call.settle(decided.result, final=decided.final)

    @staticmethod
    def _after_abort(call: _Call, result: ToolResult) -> ToolResult:
        return rules.after_abort(
            result, caller_aborted=call.caller.aborted, body_invoked=call.run._body_invoked
        )

    def _settle_interrupted(self, call: _Call) -> None:
        """Host cancellation: the one result of an interrupted call (`interrupted`)."""
        run = call.run
        run._in_body = False
        run._pending = None
        run._signal = call.caller
        call.result = rules.interrupted(
            call.result,
            final=call.final,
            body_result=run._body_result,
            body_invoked=run._body_invoked,
            contexts=tuple(run._contexts),
        )
        call.final = True
        self._publish(call)

    def _publish(self, call: _Call) -> ToolResult:
        """8. finalize_content of the captured definition; 9. every observer, once."""
        run, result = call.run, call.result
        assert result is not None
        assert not call.published
        call.published = True
        interrupt: BaseException | None = None
        if run._finalizer is not None:
            try:
                content = run._finalizer(run, result)
                if content is not None:
                    result = replace(result, content=content)
            except BaseException as error:
                if not isinstance(error, Exception):
                    interrupt = error
                result = failure_from_exception(
                    error, additional_contexts=result.additional_contexts
                )
        call.result = result
        for observer in list(self._observers):
            try:
                observer(run, result)
            except Exception as error:
                _log(logging.ERROR, "result observer %r raised; contained", observer, error)
            except BaseException as error:
                interrupt = interrupt or error
        self._in_flight.discard(call)
        for pending, waiter in list(self._idle_waiters):
            pending.discard(call)
            if not pending:
                self._idle_waiters.remove((pending, waiter))
                waiter.abort()
        if interrupt is not None:
            raise interrupt
        return result


# -- the batch (contract §7): an anyio task group ------------------------------------------


async def run_tool_calls(
    registry: ReferenceRegistry,
    calls: Iterable[ToolCall],
    *,
    signal: AbortSignal,
    max_parallel: int = 10,
    agent: object | None = None,
    parent: ExecutionToken | None = None,
    root_call_id: str | None = None,
    host: ToolHost | None = None,
    principal: Principal | None = None,
) -> list[CallOutcome]:
    """Run one turn's tool calls; one outcome per call, in model order (contract §7).

    Consecutive ``"parallel"`` calls overlap in dispatch (at most ``max_parallel``);
    pre- and post-execute run in model order, one stage at a time; an ``"exclusive"`` call
    runs alone. Once ``signal`` aborts no further call starts, and every call never started
    gets `ABORTED_BEFORE_DISPATCH` with ``dispatched=False``.
    """
    calls = list(calls)
    if len({c.call_id for c in calls}) != len(calls):
        raise ValueError("run_tool_calls: two calls share a call_id")
    if max_parallel < 1:
        raise ValueError("run_tool_calls: max_parallel must be at least 1")

    def input_of(c: ToolCall) -> ToolExecutionInput:
        return ToolExecutionInput(
            call_id=c.call_id,
            name=c.name,
            arguments=c.arguments,
            signal=signal,
            root_call_id=root_call_id,
            agent=agent,
            parent=parent,
            host=host,
            principal=principal,
        )

    results: dict[int, CallOutcome] = {}
    # An interrupt (a BaseException other than the host's cancellation) raised for a call
    # once it has its result stops the batch like an abort, and is raised at the end (§7).
    held: list[BaseException] = []
    stages = anyio.Lock()  # pre- and post-execute never overlap
    slots = anyio.CapacityLimiter(max_parallel)
    index = 0
    while index < len(calls):
        # One group: consecutive parallel calls, or one exclusive call alone.
        async with anyio.create_task_group() as group:
            previous: anyio.Event | None = None
            while index < len(calls):
                c = calls[index]
                if signal.aborted or held:
                    break
                mode = registry.execution_mode(input_of(c))
                if mode == "exclusive" and previous is not None:
                    break  # a barrier: wait for the group first
                async with stages:
                    call = registry._start(input_of(c))
                    try:
                        if call.result is None:
                            await registry._stage(call, registry._before_dispatch)
                    except anyio.get_cancelled_exc_class():
                        raise
                    except BaseException as interrupt:  # the call has published its result
                        held.append(interrupt)
                        results[index] = CallOutcome(c, _published(call), True)
                        break
                posted = anyio.Event()
                group.start_soon(
                    _dispatch_and_post,
                    registry,
                    call,
                    c,
                    index,
                    results,
                    stages,
                    slots,
                    previous,
                    posted,
                    held,
                )
                previous = posted
                index += 1
                if mode == "exclusive":
                    break
        if signal.aborted or held:
            break
    for skipped, c in enumerate(calls):
        if skipped not in results:  # never started: the history stays balanced (§7)
            call = registry._start(input_of(c), skipped=True)
            results[skipped] = CallOutcome(c, registry._publish(call), False)
    if held:
        raise held[0]
    return [results[i] for i in range(len(calls))]


async def _dispatch_and_post(
    registry: ReferenceRegistry,
    call: _Call,
    c: ToolCall,
    index: int,
    results: dict[int, CallOutcome],
    stages: anyio.Lock,
    slots: anyio.CapacityLimiter,
    previous: anyio.Event | None,
    posted: anyio.Event,
    held: list[BaseException],
) -> None:
    """One started call of a batch: its dispatch (overlapping), then post in model order."""
    try:
        if call.result is None:
            async with slots:
                await registry._stage(call, registry._dispatch)
        if previous is not None:
            await previous.wait()
        async with stages:
            if not call.final:
                await registry._stage(call, registry._after_dispatch)
        results[index] = CallOutcome(c, registry._publish(call), True)
    except anyio.get_cancelled_exc_class():
        if not call.published:  # the host's cancellation: still the call's one result
            registry._settle_interrupted(call)
        raise
    except BaseException as interrupt:  # held until every started call has its result
        if not call.published:
            registry._settle_interrupted(call)
        held.append(interrupt)
        results[index] = CallOutcome(c, _published(call), True)
    finally:
        posted.set()


# -- small helpers --------------------------------------------------------------------------


def _published(call: _Call) -> ToolResult:
    assert call.published
    assert call.result is not None
    return call.result


async def _checkpoint(call: _Call) -> None:
    await anyio.lowlevel.checkpoint()


async def _allow() -> Allow:
    return Allow()


async def _accept() -> Accept:
    return Accept()


async def _run_chain(
    listeners: list[Any],
    leading: tuple[Any, ...],
    innermost: Callable[[], Awaitable[Any]],
    what: str,
) -> Any:
    """Run a listener chain, first listener outermost; each ``next`` may be called once.

    A ``next`` kept and called after the chain returned raises: the rest of the chain (and
    for the around-dispatch chain, the body) never runs after the stage ended (§5.6).
    """
    closed = False

    def next_at(position: int) -> Callable[[], Awaitable[Any]]:
        used = False

        def next_() -> Awaitable[Any]:
            nonlocal used
            if closed:
                name, call_id = leading[0].name, leading[0].call_id
                body = ", and the tool body," if what == "around-dispatch wrapper" else ""
                article = "an" if what[0] in "aeiou" else "a"
                raise RuntimeError(
                    f'tool "{name}" (call {call_id!r}): {article} {what} called next() after '
                    f"the {what}s returned; the call has ended, so the rest of the chain{body} "
                    "will not run"
                )
            if used:
                raise RuntimeError("next() may be called only once per stage listener")
            used = True
            if position < len(listeners):
                return listeners[position](*leading, next_at(position + 1))  # type: ignore[no-any-return]
            return innermost()

        return next_

    try:
        if not listeners:
            return await innermost()
        return await listeners[0](*leading, next_at(1))
    finally:
        closed = True


def _body_success(
    name: str, definition: ToolDefinition[Any, Any], args: object, output: object
) -> ToolResult:
    """The body's output, validated, frozen and rendered (contract §6)."""
    raw = definition.serialize_output(output)
    try:
        value = materialize(raw)
    except MaterializationError as error:
        raise ToolOutputError(
            f'tool "{name}" returned output that is not losslessly JSON-serializable ({error})'
        ) from None
    return materialized_success(value, definition.render(args, value))


def _text(field: str, value: object, problems: list[str]) -> str:
    """``value`` as an exact ``str`` (a subclass's hooks may raise), or a placeholder."""
    exact = exact_str(value)
    if exact is not None:
        return exact
    problems.append(f"ToolExecutionInput.{field} must be a str, got {type_name(type(value))}")
    return f"<{type_name(type(value))}>"


def _reason(signal: AbortSignal | None) -> object:
    return None if signal is None else signal.reason


def _add(items: list[Any], item: object, prepend: bool) -> Registration:
    if not callable(item):
        raise TypeError(f"expected a callable, got {type_name(type(item))}")
    if prepend:
        items.insert(0, item)
    else:
        items.append(item)

    def remove() -> None:
        if item in items:
            items.remove(item)

    return Registration(remove)


def _log(level: int, message: str, *args: object) -> None:
    """Log on the ``toolseam`` logger, never raising; a last exception is ``exc_info``."""
    exc_info = args[-1] if args and isinstance(args[-1], BaseException) else None
    if exc_info is not None:
        args = args[:-1]
    with contextlib.suppress(Exception):
        _logger.log(level, message, *args, exc_info=exc_info)
