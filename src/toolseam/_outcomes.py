"""Every outcome rule of one call, as pure functions (contract §5).

Each function decides one thing from plain facts — "was the body invoked?", "has the
caller's signal aborted?", the result so far — and returns the result or the decision. None
reads a signal, a listener or the clock, so each can be read, and tested, on its own. The
reference pipeline (`toolseam.reference`) calls them at every point where docs/pipeline.md
draws a decision.

Both engines call them; the fast engine (`_engine`, `_run`) reads its facts off the run
and calls, at each decision point: `classify` wherever it makes a cancellation result
(`_start`, `_skip_run`, `_stage_before`, `_before_dispatch`, `_ask`, `_enter_body`,
`_host_cancelled_body`); `denied` for a denial; `approval_outcome` and `no_approval_service`
in `Engine._ask`; `apply_post` in `Engine._apply_post` (which keeps a plain
`Accept()` inline: see its fast-path comment); `after_abort` through `_engine._after_abort`;
`stage_raised` through `_engine._stage_raised`; `body_raised` through `_run._body_failure`;
`is_abort` through `_run._is_abort_reason` (for the body and every stage);
`interrupted` in `Engine._settle_interrupted`. None of these is on the path of a call
that neither aborts nor has a post-execute listener. The batch (`_batch`, `_sequencer`)
decides no outcome of its own: it drives the registry's stages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal, final

from ._decisions import Accept, Block, Deny, ReplaceValue
from ._errors import TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH, AbortError, safe_str, type_name
from ._json import JsonValue, MaterializationError, materialize
from ._results import (
    ToolFailure,
    ToolResult,
    ToolSuccess,
    aborted_result,
    failure_from_exception,
    render_value,
)

__all__ = [
    "CANCELLATION_CODES",
    "StageRaised",
    "after_abort",
    "apply_post",
    "approval_outcome",
    "body_raised",
    "classify",
    "denied",
    "interrupted",
    "is_abort",
    "is_established_failure",
    "no_approval_service",
    "stage_raised",
]

CANCELLATION_CODES = frozenset((TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH))
"""The two codes of a cancellation result (contract §4)."""


def classify(*, body_invoked: bool, contexts: Sequence[JsonValue] = ()) -> ToolFailure:
    """The cancellation result of a call (contract §5, classification and precedence).

    One fact decides, never the stage that noticed the abort: `ABORTED` once the body was
    invoked, `ABORTED_BEFORE_DISPATCH` otherwise. The contexts gathered so far are kept;
    content, value and meta are dropped.
    """
    return aborted_result(body_invoked=body_invoked, additional_contexts=tuple(contexts))


def is_established_failure(result: ToolResult | None) -> bool:
    """Whether ``result`` is a failure that cancellation never replaces (contract §5).

    A denial, a tool or wrapper failure, ``TOOL_TIMEOUT``, ``INVALID_ARGS`` and the like
    are; a cancellation result is not (it may be re-classified with later contexts).
    """
    return type(result) is ToolFailure and result.code not in CANCELLATION_CODES


def after_abort(result: ToolResult, *, caller_aborted: bool, body_invoked: bool) -> ToolResult:
    """What the caller's abort makes of ``result`` once a stage produced it (contract §5).

    Precedence: a failure stays (failures are never replaced by cancellation); a success is
    replaced by the cancellation result, classified by whether the body was invoked, with
    the success's contexts.
    """
    if result.is_error or not caller_aborted:
        return result
    return classify(body_invoked=body_invoked, contexts=result.additional_contexts)


def denied(reason: str) -> ToolFailure:
    """The failure of a call a pre-execute listener, a guard or approval refused (§5.4)."""
    return ToolFailure.from_message(f"tool call denied: {reason}")


ApprovalOutcome = Literal["allow", "aborted"] | Deny | ToolFailure


def approval_outcome(answer: object, *, caller_aborted: bool) -> ApprovalOutcome:
    """The approval answer table (contract §5, approval).

    Returns:
        ``"allow"`` for ``"allowed-once"`` (the guards run next); a `Deny` for
        ``"rejected"``, ``"unavailable"`` and — while the caller has not aborted —
        ``"cancelled"``; ``"aborted"`` (`ABORTED_BEFORE_DISPATCH`, post-execute still runs)
        for ``"cancelled"`` once the caller aborted; a final `ToolFailure` for anything that
        is not an approval answer. Only exact strings are compared: a hostile object's
        ``__eq__`` could raise.
    """
    text = answer if type(answer) is str else None
    if text == "allowed-once":
        return "allow"
    if text == "rejected":
        return Deny("rejected by approval")
    if text == "unavailable":
        return Deny("approval unavailable")
    if text == "cancelled":
        return "aborted" if caller_aborted else Deny("approval cancelled")
    return ToolFailure.from_message(
        f"approval service answered {safe_str(answer)!r}, not an approval answer"
    )


def no_approval_service(reason: str | None) -> Deny:
    """`Ask` without an approval service is a denial that says so (contract §5)."""
    detail = f" ({reason})" if reason else ""
    return Deny(f"approval required{detail} but no approval service is configured")


def apply_post(result: ToolResult, decision: object, *, denied: bool) -> ToolResult:
    """The result after a post-execute decision (contract §5, post-execute).

    `Accept` keeps the result (new content if given), `ReplaceValue` makes a success of its
    value — refused after a denial (contract §5: nothing turns a denial into permission;
    the caller logs it) — and `Block` a failure with its feedback. Each decision's contexts
    are appended to the result's.

    Raises:
        TypeError: ``decision`` is none of the three.
        ValueError: a `ReplaceValue` value is not losslessly JSON-serializable.
    """
    kind = type(decision)
    if kind is Accept:
        accept: Accept = decision  # type: ignore[assignment]
        if accept.content is None and not accept.additional_contexts:
            return result
        contexts = (*result.additional_contexts, *accept.additional_contexts)
        if accept.content is None:
            return replace(result, additional_contexts=contexts)
        return replace(result, content=accept.content, additional_contexts=contexts)
    if kind is ReplaceValue:
        replacement: ReplaceValue = decision  # type: ignore[assignment]
        contexts = (*result.additional_contexts, *replacement.additional_contexts)
        if denied:
            return replace(result, additional_contexts=contexts)
        try:
            value = materialize(replacement.value)
        except MaterializationError as error:
            raise ValueError(
                f"ReplaceValue.value must be losslessly JSON-serializable ({error})"
            ) from None
        return ToolSuccess(value=value, content=render_value(value), additional_contexts=contexts)
    if kind is Block:
        block: Block = decision  # type: ignore[assignment]
        return ToolFailure.from_message(
            safe_str(block.feedback),
            additional_contexts=(*result.additional_contexts, *block.additional_contexts),
        )
    raise TypeError(
        f"post-execute chain returned {type_name(kind)}, not Accept, ReplaceValue or Block"
    )


def is_abort(
    error: BaseException,
    *,
    caller_reason: object,
    caller_aborted: bool,
    host_reason: object = None,
) -> bool:
    """Whether ``error`` is a stage or body stopping because the caller asked (contract §5).

    Only once the caller's signal has aborted: an `AbortError`, the caller's very reason, or
    ``host_reason`` (the reason of the body's own signal, when the registry aborted it).
    Only ``type(error)`` is trusted (``isinstance`` consults a hostile ``__class__``).
    """
    if not caller_aborted:
        return False
    return (
        issubclass(type(error), AbortError)
        or error is caller_reason
        or (host_reason is not None and error is host_reason)
    )


def body_raised(error: BaseException, *, body_invoked: bool, told_to_stop: bool) -> ToolFailure:
    """The outcome of a body that raised ``error`` (contract §5.6).

    ``told_to_stop``: `is_abort` for the caller's signal, or ``error`` is the reason of the
    body's own signal that the registry aborted. A body told to stop that raised its abort
    is cancelled (`ABORTED`); a thread job withdrawn before it started (an `AbortError`
    while the body was not invoked) is `ABORTED_BEFORE_DISPATCH`; anything else is the
    tool's failure.
    """
    if not body_invoked and issubclass(type(error), AbortError):
        return classify(body_invoked=False)
    if told_to_stop:
        return classify(body_invoked=body_invoked)
    return failure_from_exception(error)


@final
class StageRaised:
    """What `stage_raised` decided: the result, and whether it is final (no post-execute)."""

    __slots__ = ("final", "result")

    def __init__(self, result: ToolResult, *, final: bool) -> None:
        self.result = result
        self.final = final


def stage_raised(
    error: BaseException,
    *,
    is_abort: bool,
    body_invoked: bool,
    contexts: Sequence[JsonValue] = (),
    held: ToolResult | None = None,
) -> StageRaised | None:
    """A pre-/post-execute listener, guard, approval service or wrapper raised (§5).

    The caller's abort raised by a stage (``is_abort``) ends the call as if the stage had
    returned and the caller's signal were then read: the cancellation result classified by
    whether the body was invoked, with ``contexts`` — unless ``held`` is an established
    failure, which stays; not final, so post-execute still runs if it has not. Any other
    `Exception` is the stage's failure, final. Anything else (the host's cancellation, an
    interrupt) is ``None``: it must propagate.
    """
    if is_abort:
        if held is not None and is_established_failure(held):
            return StageRaised(held, final=False)
        return StageRaised(classify(body_invoked=body_invoked, contexts=contexts), final=False)
    if not issubclass(type(error), Exception):
        return None
    return StageRaised(failure_from_exception(error, additional_contexts=contexts), final=True)


def interrupted(
    result: ToolResult | None,
    *,
    final: bool,
    body_result: ToolResult | None,
    body_invoked: bool,
    contexts: Sequence[JsonValue],
) -> ToolResult:
    """The one result of a call whose host cancelled it (contract §5, host cancellation).

    A failure already established stays — the call's result, or, before the dispatch chain
    returned, the body's own failure a wrapper still held (with every context gathered);
    a final result stays; anything else becomes the cancellation result.
    """
    if result is None:
        if body_result is not None and is_established_failure(body_result):
            return replace(
                body_result, additional_contexts=(*contexts, *body_result.additional_contexts)
            )
        return classify(body_invoked=body_invoked, contexts=contexts)
    if final or result.is_error:
        return result
    return classify(body_invoked=body_invoked, contexts=result.additional_contexts)
