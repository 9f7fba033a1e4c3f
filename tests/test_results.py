"""Contract §4: results, codes and error normalization."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from toolseam import (
    INVALID_ARGS,
    INVALID_TOOL_OUTPUT,
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    TOOL_TIMEOUT,
    UNKNOWN_TOOL,
    AbortError,
    ErrorInfo,
    ToolArgsError,
    ToolError,
    ToolErrorDetail,
    ToolFailure,
    ToolNotFoundError,
    ToolOutputError,
    ToolSuccess,
    ToolTimeoutError,
)
from toolseam._results import aborted_result, failure_from_exception


def test_codes_have_their_exact_values() -> None:
    assert (
        TOOL_ABORTED,
        TOOL_ABORTED_BEFORE_DISPATCH,
        TOOL_TIMEOUT,
        UNKNOWN_TOOL,
        INVALID_ARGS,
        INVALID_TOOL_OUTPUT,
    ) == (
        "ABORTED",
        "ABORTED_BEFORE_DISPATCH",
        "TOOL_TIMEOUT",
        "UNKNOWN_TOOL",
        "INVALID_ARGS",
        "INVALID_TOOL_OUTPUT",
    )


class TestResults:
    def test_success_is_frozen_and_deeply_immutable(self) -> None:
        value: dict[str, Any] = {"rows": [1, 2]}
        result = ToolSuccess(value=value, content=[{"type": "text", "text": "t"}], meta={"m": [1]})
        value["rows"].append(3)
        assert result.value == {"rows": [1, 2]}
        with pytest.raises(dataclasses.FrozenInstanceError):
            result.value = 1  # type: ignore[misc]
        with pytest.raises(TypeError):
            result.value["rows"].append(4)  # type: ignore[index, union-attr]
        with pytest.raises(TypeError):
            result.content[0]["text"] = "x"  # type: ignore[index]
        with pytest.raises(TypeError):
            result.meta["m"] = 2  # type: ignore[index]
        assert result.is_error is False

    def test_success_to_json_never_includes_value(self) -> None:
        result = ToolSuccess(value="secret", content=[{"type": "text", "text": "shown"}])
        durable = result.to_json()
        assert "value" not in durable
        assert json.loads(json.dumps(durable)) == {
            "is_error": False,
            "content": [{"type": "text", "text": "shown"}],
            "meta": None,
            "additional_contexts": [],
        }

    def test_failure_has_no_value_and_serializes(self) -> None:
        failure = ToolFailure.from_message("boom", info=ErrorInfo("X", "Y"))
        assert failure.is_error is True
        assert not hasattr(failure, "value")
        assert json.loads(json.dumps(failure.to_json())) == {
            "is_error": True,
            "error": {"message": "boom", "info": {"name": "X", "code": "Y"}},
            "content": [{"type": "text", "text": "Error: boom"}],
            "meta": None,
            "additional_contexts": [],
        }

    def test_non_json_value_is_rejected_at_construction(self) -> None:
        with pytest.raises(ValueError, match=r"^ToolSuccess\.value must be losslessly JSON"):
            ToolSuccess(value={"x": {1, 2}})  # type: ignore[dict-item]

    def test_content_blocks_must_be_objects(self) -> None:
        with pytest.raises(TypeError, match=r"^content\[0\] must be a JSON object, got str$"):
            ToolSuccess(value=1, content=["text"])  # type: ignore[list-item]

    @pytest.mark.parametrize("body_invoked", [True, False])
    def test_aborted_result_shapes(self, body_invoked: bool) -> None:
        result = aborted_result(body_invoked=body_invoked, additional_contexts=["c"])
        code = TOOL_ABORTED if body_invoked else TOOL_ABORTED_BEFORE_DISPATCH
        assert result.error.info == ErrorInfo("AbortError", code)
        assert result.code == code
        assert list(result.additional_contexts) == ["c"]


class TestErrors:
    def test_tool_error_subclasses_carry_their_codes(self) -> None:
        assert ToolNotFoundError("x").code == UNKNOWN_TOOL
        assert str(ToolNotFoundError("x")) == 'unknown tool "x"'
        assert ToolArgsError("m").code == INVALID_ARGS
        assert ToolOutputError("m").code == INVALID_TOOL_OUTPUT
        assert ToolTimeoutError("m").code == TOOL_TIMEOUT
        assert ToolError("m", code="CUSTOM").code == "CUSTOM"

    def test_routable_error_surfaces_type_name_and_code(self) -> None:
        class QuotaExceeded(ToolError):
            def __init__(self) -> None:
                super().__init__("quota exceeded", code="QUOTA")

        failure = failure_from_exception(QuotaExceeded())
        assert failure.error == ToolErrorDetail(
            "quota exceeded", ErrorInfo("QuotaExceeded", "QUOTA")
        )

    def test_other_exceptions_surface_only_their_message(self) -> None:
        failure = failure_from_exception(ValueError("bad value"))
        assert failure.error == ToolErrorDetail("bad value", None)
        assert [dict(b) for b in failure.content] == [{"type": "text", "text": "Error: bad value"}]

    def test_empty_message_falls_back_to_the_type_name(self) -> None:
        assert failure_from_exception(RuntimeError()).error.message == "RuntimeError"

    def test_message_of_a_hostile_exception_never_raises(self) -> None:
        class Hostile(Exception):
            def __str__(self) -> str:
                raise RuntimeError("no str for you")

            def __repr__(self) -> str:
                raise RuntimeError("no repr either")

        failure = failure_from_exception(Hostile())
        assert failure.error.message == "<unprintable Hostile>"

    def test_abort_error_wraps_a_reason(self) -> None:
        assert str(AbortError()) == "operation aborted"
        assert str(AbortError("stop")) == "operation aborted: stop"
        assert AbortError("stop").reason == "stop"


def test_the_registrys_fast_success_equals_the_dataclass_built_one() -> None:
    """``materialized_success`` skips ``__init__``: it must stay in step with the fields."""
    from toolseam._json import materialize
    from toolseam._results import materialized_success, text_content

    value = materialize({"rows": [1, 2]})
    fast = materialized_success(value, text_content("two rows"))
    slow = ToolSuccess(value={"rows": [1, 2]}, content=[{"type": "text", "text": "two rows"}])
    assert fast == slow
    assert [f.name for f in dataclasses.fields(ToolSuccess)] == [
        "value",
        "content",
        "meta",
        "additional_contexts",
        "is_error",
    ]
    assert fast.to_json() == slow.to_json()
