"""The staged engine of `ToolRegistry`: every stage of one call (contract §5).

One call runs in stages that the batch executor can also drive one by one:
`_start` (snapshot, materialize, pre-aborted entry, the caller's scopes), `_before_dispatch`
(pre-execute, approval, guards), `_dispatch` (around-dispatch chain and body),
`_after_dispatch` (post-execute), `_publish` (finalize content, observers). Nothing here
races a stage against cancellation: every stage is awaited to completion and the
*caller's* signal, captured outside anything a wrapper can touch, is read after it.

`Engine` is a base of `ToolRegistry` (`_registry`, the public API and its state), which
drives these stages in `execute`; `run_tool_calls` drives the same ones (`_batch`,
`_sequencer`). The outcome rules are `_outcomes`' pure functions; the reference pipeline
that every fast path here is equal to is `toolseam.reference`.
"""

from __future__ import annotations

import contextlib
import logging
import operator
from collections.abc import Awaitable, Sequence
from dataclasses import replace
from typing import Any, Literal, cast

import anyio.lowlevel

from . import _hooks  # tracing hook
from ._approval import ApprovalRequest, ApprovalService
from ._chain import Chain
from ._decisions import Accept, Allow, Ask, Deny, PostDecision, PreDecision, ReplaceValue
from ._define import DefinedTool
from ._definitions import ToolDefinition
from ._delivery import Delivery
from ._errors import (
    ToolNotFoundError,
    ToolOutputError,
    exact_str,
    safe_str,
    type_name,
)
from ._idle import Generations
from ._json import JsonValue, MaterializationError, materialize, materialize_arguments
from ._outcomes import (
    after_abort,
    apply_post,
    approval_outcome,
    classify,
    denied,
    interrupted,
    no_approval_service,
    stage_raised,
)
from ._principal import Principal, missing_scopes
from ._results import (
    ToolFailure,
    ToolResult,
    ToolSuccess,
    failure_from_exception,
    materialized_success,
    rendered_success,
)
from ._run import CallState, DispatchView, _body_failure, _is_abort_reason, _told_to_stop
from ._signals import AbortSignal
from ._stages import (
    AroundDispatch,
    EventListener,
    Guard,
    Listeners,
    PostExecuteListener,
    PreExecuteListener,
    ResultObserver,
)
from ._threads import abort_for_host
from ._timeouts import Deadline, TimeoutPolicyBase
from ._views import ExecutionToken, ToolExecutionInput, ToolHost

__all__ = ["Engine"]

logger = logging.getLogger("toolseam")

ARGUMENTS_NOT_JSON = "tool execution arguments must be losslessly JSON-serializable"
# What register() gets when someone forgets @define_tool.
_ALLOW = Allow()
_ACCEPT = Accept()
_RESULT_TYPES = (ToolSuccess, ToolFailure)
_ROOT_TYPES = (str, type(None))
# A snapshot of the arguments and whether all their text is UTF-8 (materialize_arguments).
_Snapshot = tuple[JsonValue, bool]


def _with_contexts(result: ToolResult, contexts: Sequence[JsonValue]) -> ToolResult:
    current = result.additional_contexts
    # Compared by identity: equality of two deep contexts would recurse.
    if len(contexts) == len(current) and all(map(operator.is_, contexts, current)):
        return result
    return replace(result, additional_contexts=contexts)


async def _default_pre(_: object) -> PreDecision:
    return _ALLOW


async def _default_post(_: object) -> PostDecision:
    return _ACCEPT


class Engine(Generations):
    """The stages of one call, over the state of the `ToolRegistry` that subclasses it.

    The state's slots are `ToolRegistry`'s (declared there, typed here); `wait_idle`'s
    are `Generations`'.
    """

    __slots__ = ()

    _approval: ApprovalService | None
    _timeouts: bool
    _tools: dict[str, ToolDefinition[Any, Any]]
    _scopes: dict[str, frozenset[str]]
    _pre: Listeners[PreExecuteListener]
    _wrappers: Listeners[AroundDispatch]
    _post: Listeners[PostExecuteListener]
    _observers: Listeners[ResultObserver]
    _guards: Listeners[Guard]
    _events: Listeners[EventListener]
    _hooks: tuple[_hooks.CallHook, ...]  # tracing hook: see _hooks
    _only_the_tool_reads: bool

    def _mode(self, input: ToolExecutionInput) -> tuple[Literal["parallel", "exclusive"], Any]:
        """`execution_mode`, and the arguments' snapshot it took (for `_start`), if any."""
        try:
            name = exact_str(input.name)
            definition = None if name is None else self._tools.get(name)
            if definition is None:
                return "exclusive", None
            if type(definition) is DefinedTool:
                # Fast path ≡ the else branch, i.e. `ReferenceRegistry.execution_mode`, for
                # define_tool's own definitions (no option: no parse; _parse reuses the snapshot's
                # UTF-8 flag); pinned by tests/test_reference_differential.py::
                # test_execution_mode_matches; its speed by benchmarks/bench_batch.py.
                if definition._is_concurrency_safe is None:
                    return "exclusive", None  # nothing to ask: skip parsing the arguments
                snapshot = materialize_arguments(input.arguments)
                args = definition._parse(*snapshot)
            else:
                snapshot = materialize_arguments(input.arguments)
                args = definition.parse_arguments(snapshot[0])
            safe: object = definition.is_concurrency_safe(args)
        except Exception:
            return "exclusive", None
        return ("parallel" if safe is True else "exclusive"), snapshot

    # `execute` and `run_tool_calls` both drive the stages below, in this order, then
    # `_publish`. Each stage returns ``None`` when it has completed without awaiting
    # anything, or an awaitable that completes it: a stage with no listeners costs no
    # coroutine. An awaited stage settles and publishes the call's one result if the
    # awaiting task is cancelled inside it.

    def _stage_before(self, run: CallState) -> Awaitable[object] | None:
        """Pre-execute, approval and guards; then the caller's signal decides."""
        if run._result is not None:
            return None
        if self._pre.items or self._guards.items:
            return self._before_dispatch(run)
        if run._caller_signal._aborted:
            # Fast path ≡ `ReferenceRegistry._before_dispatch` with no listener (its last check,
            # contract §5.4), without a coroutine; pinned by tests/test_reference_differential.py::
            # test_an_abort_between_the_start_and_before_dispatch_matches; its speed by
            # benchmarks/bench_overhead.py "define_tool".
            run._result = classify(body_invoked=False)
        return None

    def _stage_dispatch(self, run: CallState) -> Awaitable[object] | None:
        """The around-dispatch chain and the body, unless a result is already fixed."""
        if run._result is not None:
            return None
        wrappers: tuple[object, ...] = self._wrappers.items
        if wrappers and not (
            len(wrappers) == 1
            and isinstance(sole := wrappers[0], TimeoutPolicyBase)
            and sole.registry is self
            and self._timeouts
        ):
            return self._dispatch(run)
        # A timeout policy over this registry as the only wrapper is innermost, where it does what
        # the built-in timeout does (see policies.timeout_policy): `_enter_body` arms the same
        # deadline. Fast path ≡ `_dispatch` with that one wrapper, i.e. the built-in deadline of
        # `ReferenceRegistry._invoke_body`; pinned by tests/test_reference_differential.py::
        # test_a_sole_timeout_policy_matches_the_built_in_deadline; its speed by
        # benchmarks/bench_targets.py "timeout_policy registered".
        if self._hooks:  # tracing hook
            return self._invoke_hooked(run, True)
        # Fast path ≡ `ReferenceRegistry._dispatch` with an empty chain: the body's dispatch is the
        # whole stage (`stage=True`), one coroutine; pinned by
        # tests/test_reference_differential.py::test_fast_paths_match ("no around-dispatch
        # wrapper"); its speed by benchmarks/bench_overhead.py "define_tool".
        return self._invoke_body(run, True)

    def _stage_after(self, run: CallState, *, checkpoint: bool = True) -> Awaitable[object] | None:
        """Post-execute, then `_publish` is next.

        A call settled early (pre-aborted, bad arguments, a raising stage) may not have
        awaited anything: with ``checkpoint`` this stage then awaits one, so that
        `execute` is always a checkpoint.
        """
        if run._final:
            return self._guarded(run, anyio.lowlevel.checkpoint()) if checkpoint else None
        if self._post.items:
            return self._after_dispatch(run)
        # Fast path ≡ `ReferenceRegistry._after_dispatch` with no listener: only
        # `_outcomes.after_abort`, called only when the caller aborted; pinned by
        # tests/test_reference_differential.py::test_fast_paths_match ("no post-execute listener");
        # its speed by benchmarks/bench_overhead.py "define_tool".
        result = run._result
        if result is not None and run._caller_signal._aborted:
            run._result = _after_abort(run, result)
        return None

    async def _guarded(self, run: CallState, step: Awaitable[None]) -> None:
        """Await one stage: what escapes it still ends in the call's one result."""
        try:
            await step
        except Exception as error:
            self._fail_unexpectedly(run, error)
        except BaseException:
            self._settle_interrupted(run)
            raise

    def _fail_unexpectedly(self, run: CallState, error: Exception) -> None:
        """An exception got past a stage's own handling: still exactly one failure.

        Stages turn what listeners, bodies and services raise into results themselves; this
        is the last line for what slips through (a hostile object, a bug). It is never
        mistaken for cancellation.
        """
        _log(logging.ERROR, "call %r: unexpected error in the pipeline", run._call_id, error)
        run._in_body = False
        run._pending = None
        run._signal = run._caller_signal
        self._finish(run, failure_from_exception(error, additional_contexts=run._contexts))

    def _skip_run(self, input: ToolExecutionInput) -> CallState:
        """The run of a call a batch never started, settled `ABORTED_BEFORE_DISPATCH`.

        Its one result is still to be published (`_publish`).
        """
        call_id, name, root_call_id, _problem = _text_fields(
            input.call_id, input.name, input.root_call_id
        )
        run = self._new_run(input, call_id, name, root_call_id, input.signal, input.host)
        principal: object = input.principal
        if type(principal) is Principal:
            run._principal = principal
        # Observers see ``None`` arguments when they are not JSON: the call never started.
        with contextlib.suppress(MaterializationError):
            run._arguments = materialize(input.arguments)
        return self._finish(run, classify(body_invoked=False))

    def _new_run(
        self,
        input: ToolExecutionInput,
        call_id: str,
        name: str,
        root_call_id: str,
        signal: AbortSignal,
        host: object,
    ) -> CallState:
        # contract §5.1: the definition visible *now* supplies finalize_content.
        definition = self._tools.get(name)
        if definition is None:
            finalizer = None
        elif type(definition) is DefinedTool:
            # Fast path ≡ `definition.finalize_content` (`ReferenceRegistry._start`), but None
            # without the option: nothing to call at publish; pinned by
            # tests/test_reference_differential.py::test_fast_paths_match (its "plain" tool has no
            # option); its speed by benchmarks/bench_overhead.py "define_tool".
            finalizer = definition._finalize
        else:
            finalizer = definition.finalize_content
        parent = input.parent
        listeners = self._events.items
        # A call nobody listens to carries no Delivery: exec.progress() then costs a check.
        if host is None:
            reach = Delivery(None, listeners) if listeners else None
        else:
            # An untyped caller's garbage is left out here and fails the call in _start.
            reach = Delivery(host if type(host) is ToolHost else None, listeners)
        # wait_idle(): counted into the current generation. Read and increment with nothing
        # between that could let another thread's wait_idle() run (no call: see _left).
        epoch = self._epoch
        self._in_flight[epoch] += 1
        run = CallState(
            # A nested call inherits its parent's thread level (see _threads).
            parent._thread_level if type(parent) is ExecutionToken else 0,
            call_id,
            root_call_id,
            name,
            input.agent,
            parent,
            signal,
            finalizer,
            epoch,
            reach,
        )
        if self._hooks:  # tracing hook: the call's span opens at entry (contract §12)
            _hooks.started(self._hooks, run)
        return run

    def _start(self, input: ToolExecutionInput, snapshot: _Snapshot | None = None) -> CallState:
        """5.1 to 5.3: a run for ``input``, with its result fixed if it ends here.

        ``snapshot``: the arguments' snapshot that `execution_mode` took already.
        """
        # contract §5.1: read every input field exactly once.
        if type(input) is not ToolExecutionInput:
            raise TypeError(f"execute() expects a ToolExecutionInput, got {type_name(type(input))}")
        signal = input.signal
        if type(signal) is not AbortSignal:
            raise TypeError(
                f"ToolExecutionInput.signal must be an AbortSignal, got {type_name(type(signal))}"
            )
        call_id = input.call_id
        name = input.name
        root_call_id = input.root_call_id
        problem: str | None = None
        if type(call_id) is str and type(name) is str and type(root_call_id) in _ROOT_TYPES:
            # Fast path ≡ `_text_fields` (`reference._text`) for exact strings; pinned by
            # tests/test_reference_differential.py::test_hostile_input_fields_match; its speed by
            # benchmarks/bench_overhead.py "define_tool".
            root_call_id = root_call_id or call_id
        else:
            call_id, name, root_call_id, problem = _text_fields(call_id, name, root_call_id)
        host: object = input.host  # an untyped caller may pass anything
        principal: object = input.principal
        run = self._new_run(input, call_id, name, root_call_id, signal, host)
        checked: Principal | None = None
        if principal is not None:
            if type(principal) is Principal:
                run._principal = checked = principal
            else:
                wrong = type_name(type(principal))
                problem = (f"{problem}; " if problem else "") + (
                    f"ToolExecutionInput.principal must be a Principal, got {wrong}"
                )
        try:
            if snapshot is None:
                # Arguments no stage reads before a define_tool body: a private plain copy,
                # frozen only if read (CallState.arguments), validated as it is (contract §5.2).
                # A hand-written body reads the snapshot itself: freeze it now, once.
                run._arguments, run._utf8 = materialize_arguments(
                    input.arguments,
                    self._only_the_tool_reads and type(self._tools.get(name)) is DefinedTool,
                )
            else:
                run._arguments, run._utf8 = snapshot
        except MaterializationError as error:
            # contract §5.2: a materialization failure wins over everything else.
            return self._finish(run, ToolFailure.from_message(f"{ARGUMENTS_NOT_JSON} ({error})"))
        if host is not None and type(host) is not ToolHost:
            problem = (
                f"{problem}; " if problem else ""
            ) + f"ToolExecutionInput.host must be a ToolHost, got {type_name(type(host))}"
        if problem is not None:
            return self._finish(run, ToolFailure.from_message(problem))
        if signal._aborted:
            return self._finish(run, classify(body_invoked=False))
        if checked is not None:
            needed = self._scopes.get(name)
            if needed is not None:
                # contract §14: a principal without the tool's scopes is denied before any
                # stage; the denial still goes through post-execute, as a guard's does.
                missing = missing_scopes(needed, checked)
                if missing is not None:
                    run._result = denied(missing)
                    run._denied = True
        return run

    @staticmethod
    def _finish(run: CallState, result: ToolResult) -> CallState:
        """Fix the result: no later stage runs, post-execute included."""
        run._result = result
        run._final = True
        return run

    async def _before_dispatch(self, run: CallState) -> None:
        try:
            caller = run._caller_signal
            pre = self._pre.items
            decision: object = _ALLOW
            if pre:
                chain = Chain(pre, (run,), _default_pre, "pre-execute listener")
                try:
                    decision = await chain.start()
                except BaseException as error:
                    if not _stage_raised(run, error):
                        raise
                    return
                finally:
                    chain.close()
            if type(decision) is Ask:
                if caller._aborted:
                    # contract §5.4: cancelled before dispatch, and still through post-execute.
                    run._result = classify(body_invoked=False)
                    return
                decision = await self._ask(run, decision.reason)
                if run._result is not None:
                    return
            if type(decision) is Deny:
                run._result = denied(safe_str(decision.reason))
                run._denied = True
                return
            if type(decision) is not Allow:
                self._finish(
                    run,
                    ToolFailure.from_message(
                        f"pre-execute chain returned {type_name(type(decision))}, "
                        "not Allow, Deny or Ask"
                    ),
                )
                return
            for guard in self._guards.items:
                try:
                    verdict = guard(run)
                except BaseException as error:
                    if not _stage_raised(run, error):
                        raise
                    return
                if verdict is not None:
                    run._result = denied(safe_str(verdict))
                    run._denied = True
                    return
            if caller._aborted:
                # contract §5.4: cancelled before dispatch, and still through post-execute.
                run._result = classify(body_invoked=False)
        except Exception as error:
            self._fail_unexpectedly(run, error)
        except BaseException:
            self._settle_interrupted(run)
            raise

    async def _ask(self, run: CallState, reason: object) -> PreDecision:
        """Ask the approval service; a fixed outcome is left in ``run._result``."""
        reason = None if reason is None else safe_str(reason)
        service = self._approval
        if service is None:
            return no_approval_service(reason)
        request = ApprovalRequest(execution=run, reason=reason, signal=run._caller_signal)
        try:
            # An untyped service may answer anything (cast: keep pyright from narrowing).
            answer = cast("object", await service.request(request))
        except BaseException as error:
            if not _stage_raised(run, error):
                raise
            return _ALLOW
        outcome = approval_outcome(answer, caller_aborted=run._caller_signal._aborted)
        if type(outcome) is Deny:
            return outcome
        if type(outcome) is ToolFailure:
            self._finish(run, outcome)  # not an approval answer
        elif outcome == "aborted":
            # contract §5.4: cancelled before dispatch, and still through post-execute.
            run._result = classify(body_invoked=False)
        return _ALLOW

    async def _dispatch(self, run: CallState) -> None:
        try:
            chain = Chain(
                self._wrappers.items,
                (DispatchView(run),),
                self._invoke_hooked if self._hooks else self._invoke_body,  # tracing hook
                "around-dispatch wrapper",
                run,
            )
            try:
                result: object = await chain.start()
            except BaseException as error:
                body = run._body_result
                if body is not None:  # what the wrapper held: the body's, with all contexts
                    body = _with_contexts(body, (*run._contexts, *body.additional_contexts))
                if not _stage_raised(run, error, run._contexts, body):
                    raise
                return
            finally:
                chain.close()
                # The seed's rule: restore the caller's signal unconditionally.
                run._signal = run._caller_signal
            if type(result) not in _RESULT_TYPES:
                self._finish(
                    run,
                    ToolFailure.from_message(
                        f"around-dispatch wrapper returned {type_name(type(result))}, "
                        "not a ToolResult",
                        additional_contexts=run._contexts,
                    ),
                )
                return
            self._dispatched(run, cast("ToolResult", result))
        except Exception as error:
            self._fail_unexpectedly(run, error)
        except BaseException:
            self._settle_interrupted(run)
            raise

    @staticmethod
    def _dispatched(run: CallState, result: ToolResult) -> None:
        """Record what the dispatch chain returned: contexts merged, cancellation applied."""
        if run._contexts:
            result = _with_contexts(result, (*run._contexts, *result.additional_contexts))
        if run._caller_signal._aborted:  # _after_abort only when it can change anything
            result = _after_abort(run, result)
        run._result = result

    async def _invoke_body(self, run: CallState, stage: bool = False) -> ToolResult:
        """The innermost ``next`` of the around-dispatch chain: 5.6, the body.

        With ``stage`` (no wrappers) this is the whole dispatch stage: the result is
        recorded in the run, and what escapes still ends in the call's one result. One
        coroutine either way, with few locals: every frame between the loop and the body is
        paid again each time the body resumes, and kept in memory while it waits.
        """
        try:
            handed: object = run._signal
            definition = self._enter_body(run, handed)
            if type(definition) is ToolFailure:
                result: ToolResult = definition
            else:
                try:
                    if type(definition) is DefinedTool:
                        # Fast path ≡ `parse_arguments` (`ReferenceRegistry._invoke_body`), reusing
                        # the snapshot's UTF-8 flag, and validating the private plain copy if there
                        # is one (the same outcome: see CallState.arguments); pinned by
                        # tests/test_reference_differential.py::test_arguments_are_validated_alike;
                        # its speed by bench_overhead.py "define_tool" and bench_shapes.py.
                        args = definition._parse(run._arguments, run._utf8)
                    else:
                        args = definition.parse_arguments(run.arguments)
                    output = await definition.run(args, run)
                    result = _body_success(run, definition, args, output)
                except Exception as error:
                    result = _body_failure(run, error)
                except BaseException as error:
                    if not _is_abort_reason(run, error):
                        _host_cancelled_body(run)
                        raise
                    # contract §5: a caller's BaseException reason, raised by the body that
                    # was told to stop, is a reason like any other.
                    result = _body_failure(run, error)
                finally:
                    _leave_body(run, handed)
                result = _body_settled(run, result)
        except Exception as error:
            if not stage:
                raise
            self._fail_unexpectedly(run, error)
            return cast("ToolResult", run._result)
        except BaseException:
            if stage:
                self._settle_interrupted(run)
            raise
        if stage:
            self._dispatched(run, result)
        return result

    async def _invoke_hooked(self, run: CallState, stage: bool = False) -> ToolResult:
        """`_invoke_body` bracketed by the call hooks (tracing hook; see _hooks).

        The call's span is current while the body runs, in the task that awaits it. A frame
        of its own, only for an instrumented registry: `_invoke_body`'s frame is what every
        call in flight keeps in memory.
        """
        entered = _hooks.enter_body(self._hooks, run)
        try:
            return await self._invoke_body(run, stage)
        finally:
            if entered is not None:
                _hooks.leave_body(entered, run)

    def _enter_body(self, run: CallState, handed: object) -> ToolDefinition[Any, Any] | ToolFailure:
        """Whether the body may be invoked: its definition, set up to run, or why not."""
        if run._result is not None:
            # A wrapper called next() in time but awaited what it returned only after the
            # dispatch stage ended (contract §5.6: never a body after the result).
            raise RuntimeError(
                f'tool "{run._name}" (call {run._call_id!r}): an around-dispatch wrapper '
                "awaited what next() returned after the wrappers returned; the call has "
                "ended, so the tool body will not run"
            )
        caller = run._caller_signal
        if caller._aborted:
            return classify(body_invoked=False)
        if type(handed) is not AbortSignal:
            return ToolFailure.from_message(
                f"around-dispatch wrapper set exec.signal to {type_name(type(handed))}, "
                "not an AbortSignal"
            )
        if handed._aborted:
            return classify(body_invoked=False)
        definition = self._tools.get(run._name)
        if definition is None:
            return failure_from_exception(ToolNotFoundError(run._name))
        # A policy that saw the call first owns its timeout (contract §5: never twice).
        if run._deadline is None and self._timeouts:
            seconds = definition.timeout
            if seconds is not None:
                # contract §5: as if timeout_policy were the innermost wrapper.
                run._deadline = Deadline(seconds, caller, handed)
        # The body's signal is a registry-owned fusion of the caller's and this one
        # (contract §5.6), made when the body first reads it (CallState._body_signal): host
        # cancellation aborts it, so whatever the body handed it to hears of it. The
        # caller's signal itself is never aborted.
        # contract §5.6: "body invoked" is recorded immediately before the body is called;
        # argument validation is part of the body call. A sync body's thread job that never
        # started clears it again (CallState._never_started, see _threads).
        run._invoke(handed)
        return definition

    async def _after_dispatch(self, run: CallState) -> None:
        try:
            dispatched = run._result
            assert dispatched is not None
            result = dispatched
            chain = Chain(
                self._post.items, (run, dispatched), _default_post, "post-execute listener"
            )
            try:
                decision: object = await chain.start()
                result = self._apply_post(result, decision, denied=run._denied)
            except BaseException as error:
                if not _stage_raised(run, error, result.additional_contexts, result):
                    raise
                return
            finally:
                chain.close()
            if run._caller_signal._aborted:  # _after_abort only when it can change anything
                result = _after_abort(run, result)
            run._result = result
        except Exception as error:
            self._fail_unexpectedly(run, error)
        except BaseException:
            self._settle_interrupted(run)
            raise

    @staticmethod
    def _apply_post(result: ToolResult, decision: object, *, denied: bool) -> ToolResult:
        """`apply_post`, and the log line of a `ReplaceValue` a denial refused."""
        if type(decision) is Accept:
            accept: Accept = decision
            if accept.content is None and not accept.additional_contexts:
                # Fast path ≡ `_outcomes.apply_post` with a plain `Accept()` (the result as it is),
                # without its call; pinned by tests/test_outcomes.py::test_post_execute_decisions
                # and tests/test_reference_differential.py::test_an_event_at_every_stage_matches;
                # its speed by benchmarks/bench_overhead.py "define_tool+4".
                return result
        elif denied and type(decision) is ReplaceValue:
            # contract §5: nothing after a denial can turn it back into permission.
            _log(logging.WARNING, "post-execute ReplaceValue ignored: the call was denied")
        return apply_post(result, decision, denied=denied)

    def _settle_interrupted(self, run: CallState) -> None:
        """Publish the one result of a call whose awaiting task was cancelled by its host.

        A failure already established — the call's result, or the body's own failure that
        a wrapper was still holding — stays (contract §5: cancellation never replaces a
        failure); otherwise the call is `ABORTED` or `ABORTED_BEFORE_DISPATCH`.
        """
        run._in_body = False
        run._pending = None
        run._signal = run._caller_signal
        self._finish(
            run,
            interrupted(
                run._result,
                final=run._final,
                body_result=run._body_result,
                body_invoked=run._body_invoked,
                contexts=run._contexts,
            ),
        )
        self._publish(run)

    def _publish(self, run: CallState) -> ToolResult:
        """Finalize the content, then hand the one result to every observer.

        Nothing here may cost the call its result: a finalizer's exception becomes the
        result; an observer's is logged. A ``KeyboardInterrupt`` or ``SystemExit`` (from
        either) is raised only after every observer has seen the result.
        """
        result = run._result
        assert result is not None
        interrupt: BaseException | None = None
        finalizer = run._finalizer
        if finalizer is not None:
            try:
                content = finalizer(run, result)
                if content is not None:
                    result = replace(result, content=content)
            except Exception as error:
                result = failure_from_exception(
                    error, additional_contexts=result.additional_contexts
                )
            except BaseException as error:
                interrupt = error
                result = failure_from_exception(
                    error, additional_contexts=result.additional_contexts
                )
        run._result = result
        try:
            for observer in self._observers.items:
                try:
                    observer(run, result)
                except Exception as error:
                    _log(logging.ERROR, "result observer %r raised; contained", observer, error)
                except BaseException as error:
                    interrupt = interrupt or error
        finally:
            if self._hooks:  # tracing hook: the call's span ends with its one result
                _hooks.published(self._hooks, run, result)
            # wait_idle(): this call has left its generation. Counted out inline, without the
            # lock: `_left` only when an older generation empties, the one case with a waiter
            # to wake (see `_left`); pinned by benchmarks/bench_overhead.py "define_tool".
            epoch = run._epoch
            count = self._in_flight[epoch] - 1
            if count or epoch == self._epoch:
                self._in_flight[epoch] = count
            else:
                self._left(epoch)
        if interrupt is not None:
            raise interrupt
        return result


def _text_fields(
    raw_call_id: object, raw_name: object, raw_root: object
) -> tuple[str, str, str, str | None]:
    """``call_id``, ``name`` and the resolved ``root_call_id`` as exact strings.

    A ``str`` subclass is copied into a plain ``str`` (its ``__hash__``, ``__eq__`` or
    ``__bool__`` may raise, and views promise ``str``). An untyped caller's non-``str``
    value becomes a placeholder, and the fourth item says what was wrong: the call then
    ends in one failure.
    """
    problems: list[str] = []

    def text(field: str, value: object) -> str:
        exact = exact_str(value)
        if exact is not None:
            return exact
        problems.append(f"ToolExecutionInput.{field} must be a str, got {type_name(type(value))}")
        return f"<{type_name(type(value))}>"

    call_id = text("call_id", raw_call_id)
    name = text("name", raw_name)
    root = call_id if raw_root is None else text("root_call_id", raw_root) or call_id
    return call_id, name, root, "; ".join(problems) or None


def _body_success(
    run: CallState, definition: ToolDefinition[Any, Any], args: object, output: object
) -> ToolResult:
    """The body's output, validated, frozen and rendered (contract §6)."""
    raw = definition.serialize_output(output)
    try:
        # Fast path ≡ `materialize(raw)` (`reference._body_success`), which returns an exact str as
        # it is; pinned by tests/test_reference_differential.py::test_fast_paths_match (its "plain"
        # tool returns a str); its speed by benchmarks/bench_overhead.py "define_tool".
        value = raw if type(raw) is str else materialize(raw)
    except MaterializationError as error:
        raise ToolOutputError(
            f'tool "{run._name}" returned output that is not losslessly JSON-serializable ({error})'
        ) from None
    if type(definition) is DefinedTool and definition._render is None:
        # Fast path ≡ the line below (its render is `render_value`), i.e. `reference._body_success`,
        # built in one go; pinned by tests/test_reference_differential.py::
        # test_an_event_at_every_stage_matches; its speed by benchmarks/bench_overhead.py
        # "define_tool".
        return rendered_success(value)
    return materialized_success(value, definition.render(args, value))


def _host_cancelled_body(run: CallState) -> None:
    """The host cancelled the call (or an interrupt) while the body ran.

    Tell the body's signal (if the body ever looked at it) and keep a failure already
    established (a thread body's own, see _threads); the caller re-raises.
    """
    deadline = run._deadline
    if deadline is not None and deadline.owns(run._host):
        run._body_result = deadline.timed_out(classify(body_invoked=True))
    run._pending = None
    host = run._host
    if host is not None:  # a body that never looked holds nothing to tell
        abort_for_host(host)


def _leave_body(run: CallState, handed: object) -> None:
    """The body has settled: its signal detached, the wrapper's signal back, no timer."""
    run._in_body = False
    run._pending = None
    run._signal = handed
    fusion = run._fusion
    if fusion is not None:
        fusion.close()
    deadline = run._deadline
    if deadline is not None:
        deadline.cancel()


def _body_settled(run: CallState, result: ToolResult) -> ToolResult:
    """The body's outcome: a timeout if the deadline came first, cancellation applied."""
    deadline = run._deadline
    # Most deadlines never pass: only one that did can own the body's signal.
    if type(deadline) is Deadline and deadline._reason is not None and deadline.owns(run._host):
        result = deadline.timed_out(result)
    if run._caller_signal._aborted:  # _after_abort only when it can change anything
        result = _after_abort(run, result)
    run._body_result = result
    return result


def _after_abort(run: CallState, result: ToolResult) -> ToolResult:
    """`_outcomes.after_abort` for ``run``: what the caller's abort makes of ``result``.

    For an abort that lands while the body, a wrapper or post-execute runs (contract §5);
    every stage applies it through this function. Host cancellation is `_settle_interrupted`'s.
    """
    return after_abort(
        result, caller_aborted=run._caller_signal._aborted, body_invoked=run._body_invoked
    )


def _stage_raised(
    run: CallState,
    error: BaseException,
    contexts: Sequence[JsonValue] = (),
    held: ToolResult | None = None,
) -> bool:
    """Settle a call whose stage raised ``error``; ``False`` when ``error`` must propagate.

    For a pre-execute listener, a guard, the approval service, an around-dispatch wrapper
    or a post-execute listener: the rule is `_outcomes.stage_raised` (contract §5, a stage
    that raises its abort), told whether ``error`` is the caller's abort by the body's own
    test (`_is_abort_reason`). ``held`` is a failure already established: the body's
    failure a wrapper held, or the dispatched result a post-execute listener saw.
    """
    decided = stage_raised(
        error,
        is_abort=_told_to_stop(run, error),
        body_invoked=run._body_invoked,
        contexts=contexts,
        held=held,
    )
    if decided is None:
        return False
    run._result = decided.result
    if decided.final:
        run._final = True
    return True


def _log(level: int, message: str, *args: object) -> None:
    """Log without ever raising: a hostile exception must not break the handler's caller.

    The last argument, when it is an exception, is logged as ``exc_info``.
    """
    exc_info: BaseException | None = None
    last = args[-1] if args else None
    if isinstance(last, BaseException):
        exc_info = last
        args = args[:-1]
    with contextlib.suppress(Exception):
        logger.log(level, message, *args, exc_info=exc_info)
