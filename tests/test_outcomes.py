"""The outcome rules as pure functions (toolseam._outcomes, contract §5): no event loop."""

from __future__ import annotations

from toolseam import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    AbortError,
    Accept,
    Block,
    Deny,
    ReplaceValue,
    ToolError,
    ToolFailure,
    ToolSuccess,
)
from toolseam import _outcomes as rules


def test_classification_depends_only_on_whether_the_body_was_invoked() -> None:
    assert rules.classify(body_invoked=True).code == TOOL_ABORTED
    assert rules.classify(body_invoked=False, contexts=("c",)).code == TOOL_ABORTED_BEFORE_DISPATCH
    assert rules.classify(body_invoked=False, contexts=("c",)).additional_contexts == ("c",)


def test_cancellation_replaces_a_success_never_a_failure() -> None:
    success = ToolSuccess(value=1, additional_contexts=("x",))
    failure = ToolFailure.from_message("no")
    aborted = rules.after_abort(success, caller_aborted=True, body_invoked=True)
    assert aborted.code == TOOL_ABORTED  # type: ignore[union-attr]
    assert aborted.additional_contexts == ("x",)
    assert rules.after_abort(success, caller_aborted=False, body_invoked=True) is success
    assert rules.after_abort(failure, caller_aborted=True, body_invoked=True) is failure


def test_the_approval_answer_table() -> None:
    assert rules.approval_outcome("allowed-once", caller_aborted=True) == "allow"
    assert rules.approval_outcome("rejected", caller_aborted=False) == Deny("rejected by approval")
    assert rules.approval_outcome("unavailable", caller_aborted=True) == Deny(
        "approval unavailable"
    )
    assert rules.approval_outcome("cancelled", caller_aborted=True) == "aborted"
    assert rules.approval_outcome("cancelled", caller_aborted=False) == Deny("approval cancelled")
    bogus = rules.approval_outcome("maybe", caller_aborted=False)
    assert isinstance(bogus, ToolFailure)
    assert bogus.error.message == "approval service answered 'maybe', not an approval answer"


def test_post_execute_decisions() -> None:
    result = ToolSuccess(value=1, additional_contexts=("a",))
    assert rules.apply_post(result, Accept(), denied=False) is result
    replaced = rules.apply_post(result, ReplaceValue(2, additional_contexts=("b",)), denied=False)
    assert isinstance(replaced, ToolSuccess)
    assert replaced.value == 2
    assert replaced.additional_contexts == ("a", "b")
    denial = rules.denied("no")
    kept = rules.apply_post(denial, ReplaceValue(2), denied=True)
    assert kept.is_error
    blocked = rules.apply_post(result, Block("stop"), denied=False)
    assert blocked.is_error
    assert blocked.additional_contexts == ("a",)


def test_a_stage_that_raises_the_callers_abort_is_cancelled_and_not_final() -> None:
    decided = rules.stage_raised(AbortError(), is_abort=True, body_invoked=False)
    assert decided is not None
    assert decided.result.code == TOOL_ABORTED_BEFORE_DISPATCH  # type: ignore[union-attr]
    assert not decided.final
    held = ToolFailure.from_message("held")
    decided = rules.stage_raised(AbortError(), is_abort=True, body_invoked=True, held=held)
    assert decided is not None
    assert decided.result is held
    failed = rules.stage_raised(RuntimeError("x"), is_abort=False, body_invoked=True)
    assert failed is not None
    assert failed.final
    assert rules.stage_raised(KeyboardInterrupt(), is_abort=False, body_invoked=True) is None


def test_a_body_that_raised() -> None:
    told = rules.body_raised(AbortError(), body_invoked=True, told_to_stop=True)
    assert told.code == TOOL_ABORTED
    withdrawn = rules.body_raised(AbortError(), body_invoked=False, told_to_stop=False)
    assert withdrawn.code == TOOL_ABORTED_BEFORE_DISPATCH
    failed = rules.body_raised(ToolError("x", code="X"), body_invoked=True, told_to_stop=False)
    assert failed.code == "X"


def test_an_interrupted_call_keeps_an_established_failure() -> None:
    body = ToolFailure.from_message("body", additional_contexts=("b",))
    kept = rules.interrupted(
        None, final=False, body_result=body, body_invoked=True, contexts=("d",)
    )
    assert kept.error.message == "body"  # type: ignore[union-attr]
    assert kept.additional_contexts == ("d", "b")
    success = ToolSuccess(value=1, additional_contexts=("s",))
    aborted = rules.interrupted(
        success, final=False, body_result=None, body_invoked=True, contexts=()
    )
    assert aborted.code == TOOL_ABORTED  # type: ignore[union-attr]
    assert aborted.additional_contexts == ("s",)
    assert (
        rules.interrupted(success, final=True, body_result=None, body_invoked=True, contexts=())
        is success
    )


def test_what_counts_as_stopping_because_the_caller_asked() -> None:
    reason, host_reason = RuntimeError("stop"), AbortError("host")
    other = RuntimeError("other")

    def told(error: BaseException, *, aborted: bool = True) -> bool:
        return rules.is_abort(
            error, caller_reason=reason, caller_aborted=aborted, host_reason=host_reason
        )

    assert told(reason)
    assert told(AbortError())  # any AbortError, once the caller aborted
    assert told(host_reason)  # the body's own signal, aborted by the registry
    assert not told(other)
    assert not told(reason, aborted=False)  # never before the caller aborted
    assert not told(AbortError(), aborted=False)
    assert not rules.is_abort(other, caller_reason=reason, caller_aborted=True)
