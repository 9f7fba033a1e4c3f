"""`ToolRegistry`: the pipeline every tool call goes through (SPEC §5).

One call runs in stages that the batch executor can also drive one by one:
`_start` (snapshot, materialize, pre-aborted entry), `_before_dispatch` (pre-execute,
approval, guards), `_dispatch` (around-dispatch chain and body), `_after_dispatch`
(post-execute), `_publish` (finalize content, observers). Nothing here races a stage
against cancellation: every stage is awaited to completion and the *caller's* signal,
captured outside anything a wrapper can touch, is read after it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, Literal, cast, final

import anyio.lowlevel

from ._approval import ApprovalRequest, ApprovalService
from ._decisions import Accept, Allow, Ask, Block, Deny, PostDecision, PreDecision, ReplaceValue
from ._define import DefinedTool
from ._definitions import ToolDefinition, ToolSchema, check_timeout
from ._errors import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    AbortError,
    ToolNotFoundError,
    ToolOutputError,
    safe_str,
)
from ._json import JsonValue, MaterializationError, materialize
from ._registration import Registration
from ._results import (
    ToolFailure,
    ToolResult,
    ToolSuccess,
    aborted_result,
    failure_from_exception,
    materialized_success,
    render_value,
)
from ._run import DispatchView, Run
from ._signals import AbortSignal, abort_owned, fuse_owned
from ._stages import (
    AroundDispatch,
    Guard,
    Listeners,
    PostExecuteListener,
    PreExecuteListener,
    ResultObserver,
)
from ._views import ToolExecutionInput, mint_token

__all__ = ["ToolRegistry"]

logger = logging.getLogger("toolseam")

ARGUMENTS_NOT_JSON = "tool execution arguments must be losslessly JSON-serializable"
_ALLOW = Allow()
_ACCEPT = Accept()
_RESULT_TYPES = (ToolSuccess, ToolFailure)
_CANCELLATION_CODES = frozenset((TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH))


def _denied(reason: str) -> ToolFailure:
    return ToolFailure.from_message(f"tool call denied: {reason}")


def _with_contexts(result: ToolResult, contexts: Sequence[JsonValue]) -> ToolResult:
    if tuple(contexts) == tuple(result.additional_contexts):
        return result
    return replace(result, additional_contexts=contexts)


@final
class _Next:
    """One ``next`` of a chain: calling it starts the rest of the chain, once.

    A plain object rather than a closure per link plus a coroutine per call: ``next()``
    returns the inner awaitable itself, so a chain of n listeners costs n + 1 small
    objects and no extra coroutine frames. Each listener is called as
    ``listener(*leading, next)``.
    """

    __slots__ = ("_index", "_innermost", "_leading", "_listeners", "_used")

    def __init__(
        self,
        listeners: tuple[Any, ...],
        index: int,
        leading: tuple[Any, ...],
        innermost: Callable[[], Awaitable[Any]],
    ) -> None:
        self._listeners = listeners
        self._index = index
        self._leading = leading
        self._innermost = innermost
        self._used = False

    def __call__(self) -> Awaitable[Any]:
        if self._used:
            raise RuntimeError("next() may be called only once per stage listener")
        self._used = True
        index = self._index
        listeners = self._listeners
        if index < len(listeners):
            leading = self._leading
            step: Awaitable[Any] = listeners[index](
                *leading, _Next(listeners, index + 1, leading, self._innermost)
            )
            return step
        return self._innermost()


def _chain(
    listeners: tuple[Any, ...],
    leading: tuple[Any, ...],
    innermost: Callable[[], Awaitable[Any]],
) -> Callable[[], Awaitable[Any]]:
    """Compose listeners into one ``next``: the first listener is outermost.

    Each listener is called as ``listener(*leading, next)``. Each ``next`` may be called
    once; a second call is a bug in the listener and raises.
    """
    return _Next(listeners, 0, leading, innermost)


async def _default_pre() -> PreDecision:
    return _ALLOW


async def _default_post() -> PostDecision:
    return _ACCEPT


@final
class ToolRegistry:
    """Registers tools and runs every call through the cancellation-aware pipeline.

    Args:
        approval: Decides calls a pre-execute listener answers with `Ask`. Without one,
            `Ask` is a denial.

    Registration methods are meant for setup; they are safe to call while calls run (each
    call snapshots the listeners it uses) but not from several threads at once.
    """

    __slots__ = ("_approval", "_guards", "_observers", "_post", "_pre", "_tools", "_wrappers")

    def __init__(self, approval: ApprovalService | None = None) -> None:
        self._approval = approval
        self._tools: dict[str, ToolDefinition[Any, Any]] = {}
        self._pre: Listeners[PreExecuteListener] = Listeners("pre-execute listener")
        self._wrappers: Listeners[AroundDispatch] = Listeners("around-dispatch wrapper")
        self._post: Listeners[PostExecuteListener] = Listeners("post-execute listener")
        self._observers: Listeners[ResultObserver] = Listeners("result observer")
        self._guards: Listeners[Guard] = Listeners("guard")

    # -- setup -------------------------------------------------------------------------

    def register(self, definition: ToolDefinition[Any, Any]) -> Registration:
        """Register a tool.

        Args:
            definition: A `ToolDefinition`, from `define_tool` or written by hand.

        Returns:
            A `Registration` that unregisters this definition.

        Raises:
            ValueError: A tool of the same name is already registered.
            TypeError: ``definition`` lacks a member of the `ToolDefinition` protocol.
        """
        name = getattr(definition, "name", None)
        if not isinstance(name, str) or not name:
            raise TypeError(f"a tool definition needs a non-empty str `name`, got {name!r}")
        for member in (
            "parse_arguments",
            "run",
            "serialize_output",
            "render",
            "is_concurrency_safe",
            "finalize_content",
        ):
            if not callable(getattr(definition, member, None)):
                raise TypeError(f'tool "{name}": the definition has no callable `{member}`')
        if not isinstance(getattr(definition, "description", None), str):
            raise TypeError(f'tool "{name}": the definition needs a str `description`')
        check_timeout(name, getattr(definition, "timeout", None))
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

    def schemas(self) -> list[ToolSchema]:
        """Name, description and parameters of every tool, in registration order."""
        return [ToolSchema(d.name, d.description, d.parameters) for d in self._tools.values()]

    def on_pre_execute(
        self, listener: PreExecuteListener, *, prepend: bool = False
    ) -> Registration:
        """Add a pre-execute listener; the first added is outermost unless ``prepend``."""
        return self._pre.add(listener, prepend=prepend)

    def on_execute(self, wrapper: AroundDispatch, *, prepend: bool = False) -> Registration:
        """Add an around-dispatch wrapper; the first added is outermost unless ``prepend``."""
        return self._wrappers.add(wrapper, prepend=prepend)

    def on_post_execute(
        self, listener: PostExecuteListener, *, prepend: bool = False
    ) -> Registration:
        """Add a post-execute listener; the first added is outermost unless ``prepend``."""
        return self._post.add(listener, prepend=prepend)

    def on_result(self, observer: ResultObserver) -> Registration:
        """Add a result observer: it sees every published result exactly once."""
        return self._observers.add(observer)

    def add_guard(self, guard: Guard) -> Registration:
        """Add a guard: after an allowing pre-execute chain, a returned string denies."""
        return self._guards.add(guard)

    # -- classification ----------------------------------------------------------------

    def execution_mode(self, input: ToolExecutionInput) -> Literal["parallel", "exclusive"]:
        """Whether a call may overlap others: ``"parallel"`` only on an exact ``True``.

        Unknown tools, unparseable arguments and a raising ``is_concurrency_safe`` all
        mean ``"exclusive"``.
        """
        definition = self._tools.get(input.name)
        if definition is None:
            return "exclusive"
        if isinstance(definition, DefinedTool) and not definition.has_concurrency_option:
            return "exclusive"  # nothing to ask: skip parsing the arguments
        try:
            args = definition.parse_arguments(materialize(input.arguments))
            safe: object = definition.is_concurrency_safe(args)
        except Exception:
            return "exclusive"
        return "parallel" if safe is True else "exclusive"

    # -- execution ---------------------------------------------------------------------

    async def execute(self, input: ToolExecutionInput) -> ToolResult:
        """Run one call through the pipeline and return its one published result.

        Never raises for anything a tool, a stage or the arguments do: every outcome is a
        result. If the awaiting task is cancelled by its host, the call still publishes
        exactly one result (`ABORTED` or `ABORTED_BEFORE_DISPATCH`) and the cancellation
        is re-raised unchanged.

        Raises:
            TypeError: ``input`` is not a `ToolExecutionInput` with an `AbortSignal`.
        """
        run = self._start(input)
        # The three stages below (`_stage_before`, `_stage_dispatch`, `_stage_after`), inlined
        # with the same handlers: calling the stage methods instead costs about 5% of an
        # echo call (measured interleaved on asyncio and trio, ~0.5 us of ~11 us). Keep the
        # two copies in step; tests/test_batch.py drives the stage methods, everything
        # else this path.
        if not run._final:
            try:
                if self._pre.items or self._guards.items:
                    await self._before_dispatch(run)
                elif run._caller_signal._aborted:
                    # _before_dispatch without listeners: only its cancellation check.
                    self._finish(run, aborted_result(body_invoked=False))
            except Exception as error:
                self._fail_unexpectedly(run, error)
            except BaseException:
                self._settle_interrupted(run)
                raise
        if not (run._final or run._result is not None):
            try:
                if self._wrappers.items:
                    await self._dispatch(run)
                else:
                    self._dispatched(run, await self._invoke_body(run))
            except Exception as error:
                self._fail_unexpectedly(run, error)
            except BaseException:
                self._settle_interrupted(run)
                raise
        try:
            if not run._final:
                if self._post.items:
                    await self._after_dispatch(run)
                else:
                    self._after_dispatch_tail(run)
            else:
                # A call settled early (pre-aborted, bad arguments, a raising stage) may not
                # have awaited anything: keep execute() a checkpoint on that path too.
                await anyio.lowlevel.checkpoint()
        except Exception as error:
            self._fail_unexpectedly(run, error)
        except BaseException:
            self._settle_interrupted(run)
            raise
        return self._publish(run)

    # The stages below are what `run_tool_calls` drives one by one. Each settles and
    # publishes the call's one result if the awaiting task is cancelled inside it.

    async def _stage_before(self, run: Run) -> None:
        if run._final:
            return
        try:
            if self._pre.items or self._guards.items:
                await self._before_dispatch(run)
            elif run._caller_signal._aborted:
                # _before_dispatch without listeners: only its cancellation check.
                self._finish(run, aborted_result(body_invoked=False))
        except Exception as error:
            self._fail_unexpectedly(run, error)
        except BaseException:
            self._settle_interrupted(run)
            raise

    async def _stage_dispatch(self, run: Run) -> None:
        if run._final or run._result is not None:
            return
        try:
            if self._wrappers.items:
                await self._dispatch(run)
            else:
                self._dispatched(run, await self._invoke_body(run))
        except Exception as error:
            self._fail_unexpectedly(run, error)
        except BaseException:
            self._settle_interrupted(run)
            raise

    async def _stage_after(
        self, run: Run, ready: Callable[[], Awaitable[object]] | None = None
    ) -> ToolResult:
        try:
            if ready is not None:
                await ready()
            if not run._final:
                if self._post.items:
                    await self._after_dispatch(run)
                else:
                    self._after_dispatch_tail(run)
            elif ready is None:
                # A call settled early (pre-aborted, bad arguments, a raising stage) may not
                # have awaited anything: keep execute() a checkpoint on that path too.
                await anyio.lowlevel.checkpoint()
        except Exception as error:
            self._fail_unexpectedly(run, error)
        except BaseException:
            self._settle_interrupted(run)
            raise
        return self._publish(run)

    def _fail_unexpectedly(self, run: Run, error: Exception) -> None:
        """An exception got past a stage's own handling: still exactly one failure.

        Stages turn what listeners, bodies and services raise into results themselves; this
        is the last line for what slips through (a hostile object, a bug). It is never
        mistaken for cancellation.
        """
        logger.error("call %r: unexpected error in the pipeline", run._call_id, exc_info=error)
        run._in_body = False
        run._signal = run._caller_signal
        self._finish(run, failure_from_exception(error, additional_contexts=run._contexts))

    def _skip(self, input: ToolExecutionInput) -> ToolResult:
        """Publish `ABORTED_BEFORE_DISPATCH` for a call a batch never started."""
        run = self._new_run(input, input.call_id, input.name, input.signal)
        # Observers see ``None`` arguments when they are not JSON: the call never started.
        with contextlib.suppress(MaterializationError):
            run._arguments = materialize(input.arguments)
        self._finish(run, aborted_result(body_invoked=False))
        return self._publish(run)

    def _new_run(
        self, input: ToolExecutionInput, call_id: str, name: str, signal: AbortSignal
    ) -> Run:
        # SPEC §5.1: the definition visible *now* supplies finalize_content.
        definition = self._tools.get(name)
        return Run(
            token=mint_token(),
            call_id=call_id,
            root_call_id=input.root_call_id or call_id,
            name=name,
            agent=input.agent,
            parent=input.parent,
            signal=signal,
            finalizer=None if definition is None else definition.finalize_content,
        )

    def _start(self, input: ToolExecutionInput) -> Run:
        # SPEC §5.1: read every input field exactly once.
        if type(input) is not ToolExecutionInput:
            raise TypeError(f"execute() expects a ToolExecutionInput, got {type(input).__name__}")
        call_id = input.call_id
        name = input.name
        arguments = input.arguments
        signal = input.signal
        if type(signal) is not AbortSignal:
            raise TypeError(
                f"ToolExecutionInput.signal must be an AbortSignal, got {type(signal).__name__}"
            )
        run = self._new_run(input, call_id, name, signal)
        try:
            run._arguments = materialize(arguments)
        except MaterializationError as error:
            logger.debug("call %r: arguments rejected: %s", call_id, error)
            return self._finish(run, ToolFailure.from_message(ARGUMENTS_NOT_JSON))
        if signal._aborted:
            return self._finish(run, aborted_result(body_invoked=False))
        return run

    @staticmethod
    def _finish(run: Run, result: ToolResult) -> Run:
        """Fix the result: no later stage runs."""
        run._result = result
        run._final = True
        return run

    async def _before_dispatch(self, run: Run) -> None:
        caller = run._caller_signal
        pre = self._pre.items
        decision: object = _ALLOW
        if pre:
            try:
                decision = await _chain(pre, (run,), _default_pre)()
            except Exception as error:
                self._finish(run, failure_from_exception(error))
                return
        if type(decision) is Ask:
            if caller._aborted:
                self._finish(run, aborted_result(body_invoked=False))
                return
            decision = await self._ask(run, decision.reason)
            if run._final:
                return
        if type(decision) is Deny:
            run._result = _denied(safe_str(decision.reason))
            run._denied = True
            return
        if type(decision) is not Allow:
            self._finish(
                run,
                ToolFailure.from_message(
                    f"pre-execute chain returned {type(decision).__name__}, not Allow, Deny or Ask"
                ),
            )
            return
        for guard in self._guards.items:
            try:
                verdict = guard(run)
            except Exception as error:
                self._finish(run, failure_from_exception(error))
                return
            if verdict is not None:
                run._result = _denied(safe_str(verdict))
                run._denied = True
                return
        if caller._aborted:
            self._finish(run, aborted_result(body_invoked=False))

    async def _ask(self, run: Run, reason: object) -> PreDecision:
        reason = None if reason is None else safe_str(reason)
        service = self._approval
        if service is None:
            detail = f" ({reason})" if reason else ""
            return Deny(f"approval required{detail} but no approval service is configured")
        request = ApprovalRequest(execution=run, reason=reason, signal=run._caller_signal)
        try:
            # An untyped service may answer anything (cast: keep pyright from narrowing).
            answer = cast("object", await service.request(request))
        except Exception as error:
            self._finish(run, failure_from_exception(error))
            return _ALLOW
        # Compare only exact strings: a hostile object's __eq__ could raise.
        text = answer if type(answer) is str else None
        if text == "allowed-once":
            return _ALLOW
        if text == "rejected":
            return Deny("rejected by approval")
        if text == "unavailable":
            return Deny("approval unavailable")
        if text == "cancelled":
            if run._caller_signal._aborted:
                self._finish(run, aborted_result(body_invoked=False))
                return _ALLOW
            return Deny("approval cancelled")
        self._finish(
            run,
            ToolFailure.from_message(
                f"approval service answered {safe_str(answer)!r}, not an approval answer"
            ),
        )
        return _ALLOW

    async def _dispatch(self, run: Run) -> None:
        wrappers = self._wrappers.items
        if not wrappers:
            self._dispatched(run, await self._invoke_body(run))
            return
        view = DispatchView(run)
        try:
            result: object = await _chain(wrappers, (view,), lambda: self._invoke_body(run))()
        except Exception as error:
            self._finish(run, failure_from_exception(error, additional_contexts=run._contexts))
            return
        finally:
            # The seed's rule: restore the caller's signal unconditionally.
            run._signal = run._caller_signal
        if type(result) not in _RESULT_TYPES:
            self._finish(
                run,
                ToolFailure.from_message(
                    f"around-dispatch wrapper returned {type(result).__name__}, not a ToolResult",
                    additional_contexts=run._contexts,
                ),
            )
            return
        assert isinstance(result, _RESULT_TYPES)
        self._dispatched(run, result)

    @staticmethod
    def _dispatched(run: Run, result: ToolResult) -> None:
        """Record what the dispatch chain returned: contexts merged, cancellation applied."""
        if run._contexts:
            result = _with_contexts(result, (*run._contexts, *result.additional_contexts))
        if not result.is_error and run._caller_signal._aborted:
            result = aborted_result(
                body_invoked=run._body_invoked, additional_contexts=result.additional_contexts
            )
        run._result = result

    async def _invoke_body(self, run: Run) -> ToolResult:
        """The innermost ``next`` of the around-dispatch chain."""
        caller = run._caller_signal
        handed: object = run._signal
        if caller._aborted:
            return aborted_result(body_invoked=False)
        if type(handed) is not AbortSignal:
            return ToolFailure.from_message(
                f"around-dispatch wrapper set exec.signal to {type(handed).__name__}, "
                "not an AbortSignal"
            )
        if handed._aborted:
            return aborted_result(body_invoked=False)
        definition = self._tools.get(run._name)
        if definition is None:
            return failure_from_exception(ToolNotFoundError(run._name))
        result: ToolResult
        # The body's signal is a registry-owned fusion: host cancellation aborts it, so
        # whatever the body handed its signal to (a thread, nested work) hears of it
        # (SPEC §5, host cancellation). The caller's signal itself is never aborted.
        with fuse_owned(caller, handed) as fused:
            run._host = fused.signal
            run._signal = fused.signal
            run._in_body = True
            # SPEC §5.6: "body invoked" is recorded immediately before the body is called;
            # argument validation is part of the body call.
            run._body_invoked = True
            try:
                args = definition.parse_arguments(run._arguments)
                output = await definition.run(args, run)
                raw = definition.serialize_output(output)
                try:
                    value = materialize(raw)
                except MaterializationError as error:
                    raise ToolOutputError(
                        f'tool "{run._name}" returned output that is not losslessly '
                        f"JSON-serializable ({error})"
                    ) from None
                result = materialized_success(value, definition.render(args, value))
            except Exception as error:
                # Re-read through the property: mypy would keep the narrowing of
                # ``caller._aborted`` from before the await.
                if caller.aborted and (
                    isinstance(error, AbortError)
                    or error is caller._reason
                    or error is fused.signal._reason
                ):
                    # The body stopped because it was told to: that is the cancellation
                    # outcome, not a tool failure.
                    result = aborted_result(body_invoked=True)
                else:
                    result = failure_from_exception(error)
            except BaseException:
                abort_owned(fused.signal, AbortError("the call was cancelled by its host"))
                raise
            finally:
                run._in_body = False
                run._signal = handed
        if not result.is_error and caller.aborted:
            result = aborted_result(body_invoked=True)
        run._body_result = result
        return result

    async def _after_dispatch(self, run: Run) -> None:
        dispatched = run._result
        assert dispatched is not None
        result = dispatched
        post = self._post.items
        if post:
            try:
                decision: object = await _chain(post, (run, dispatched), _default_post)()
                result = self._apply_post(result, decision, denied=run._denied)
            except Exception as error:
                self._finish(
                    run,
                    failure_from_exception(error, additional_contexts=result.additional_contexts),
                )
                return
        if not result.is_error and run._caller_signal._aborted:
            result = aborted_result(
                body_invoked=run._body_invoked, additional_contexts=result.additional_contexts
            )
        run._result = result

    @staticmethod
    def _after_dispatch_tail(run: Run) -> None:
        """`_after_dispatch` without post-execute listeners: only the cancellation check."""
        result = run._result
        assert result is not None
        if not result.is_error and run._caller_signal._aborted:
            run._result = aborted_result(
                body_invoked=run._body_invoked, additional_contexts=result.additional_contexts
            )

    @staticmethod
    def _apply_post(result: ToolResult, decision: object, *, denied: bool) -> ToolResult:
        kind = type(decision)
        if kind is Accept:
            assert isinstance(decision, Accept)
            if decision.content is None and not decision.additional_contexts:
                return result  # a plain Accept() changes nothing
            contexts = (*result.additional_contexts, *decision.additional_contexts)
            if decision.content is None:
                return _with_contexts(result, contexts)
            return replace(result, content=decision.content, additional_contexts=contexts)
        if kind is ReplaceValue:
            assert isinstance(decision, ReplaceValue)
            if denied:
                # SPEC §5: nothing after a denial can turn it back into permission.
                logger.warning("post-execute ReplaceValue ignored: the call was denied")
                return _with_contexts(
                    result, (*result.additional_contexts, *decision.additional_contexts)
                )
            return ToolSuccess(
                value=decision.value,
                content=render_value(decision.value),
                additional_contexts=(
                    *result.additional_contexts,
                    *decision.additional_contexts,
                ),
            )
        if kind is Block:
            assert isinstance(decision, Block)
            return ToolFailure.from_message(
                safe_str(decision.feedback),
                additional_contexts=(*result.additional_contexts, *decision.additional_contexts),
            )
        raise TypeError(
            f"post-execute chain returned {kind.__name__}, not Accept, ReplaceValue or Block"
        )

    def _settle_interrupted(self, run: Run) -> None:
        """Publish the one result of a call whose awaiting task was cancelled by its host.

        A failure already established — the call's result, or the body's own failure that
        a wrapper was still holding — stays (SPEC §5: cancellation never replaces a
        failure); otherwise the call is `ABORTED` or `ABORTED_BEFORE_DISPATCH`.
        """
        run._in_body = False
        run._signal = run._caller_signal
        result = run._result
        if result is None:
            body = run._body_result
            if isinstance(body, ToolFailure) and body.code not in _CANCELLATION_CODES:
                self._finish(run, _with_contexts(body, (*run._contexts, *body.additional_contexts)))
            else:
                self._finish(
                    run,
                    aborted_result(
                        body_invoked=run._body_invoked, additional_contexts=run._contexts
                    ),
                )
        elif not (run._final or result.is_error):
            self._finish(
                run,
                aborted_result(
                    body_invoked=run._body_invoked,
                    additional_contexts=result.additional_contexts,
                ),
            )
        self._publish(run)

    def _publish(self, run: Run) -> ToolResult:
        result = run._result
        assert result is not None
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
        run._result = result
        for observer in self._observers.items:
            try:
                observer(run, result)
            except Exception:
                logger.exception("result observer %r raised; contained", observer)
        return result

    def __repr__(self) -> str:
        return f"<ToolRegistry tools={list(self._tools)!r}>"
