"""The public API: ``__all__``, module paths, final classes, docstrings."""

from __future__ import annotations

import inspect

import pytest

import toolseam

FINAL_CLASSES = [
    "AbortController",
    "AbortSignal",
    "FusedSignal",
    "Registration",
    "ExecutionToken",
    "ToolExecutionInput",
    "ToolRegistry",
    "ToolSuccess",
    "ToolFailure",
    "ToolErrorDetail",
    "ErrorInfo",
    "Allow",
    "Deny",
    "Ask",
    "Accept",
    "ReplaceValue",
    "Block",
    "ApprovalRequest",
    "ToolSchema",
    "ToolDecorator",
    "FrozenDict",
    "FrozenList",
    "ToolCall",
    "CallOutcome",
    "ToolHost",
    "ProgressEvent",
    "LogEvent",
    "ElicitationRequest",
    "Elicited",
    "SamplingRequest",
    "Sampled",
]


def test_all_matches_the_public_names_exactly() -> None:
    public = {name for name in vars(toolseam) if not name.startswith("_")}
    # Submodules imported as a side effect are not part of the API.
    public -= {name for name, value in vars(toolseam).items() if inspect.ismodule(value)}
    assert set(toolseam.__all__) == public
    assert len(toolseam.__all__) == len(set(toolseam.__all__))


@pytest.mark.parametrize("name", toolseam.__all__)
def test_every_public_name_has_a_docstring(name: str) -> None:
    value = getattr(toolseam, name)
    if isinstance(value, str):  # the Final codes are documented in the module
        return
    if not (inspect.isclass(value) or inspect.isfunction(value)):
        return  # type aliases
    assert inspect.getdoc(value), name


@pytest.mark.parametrize("name", toolseam.__all__)
def test_public_classes_and_functions_report_the_public_module(name: str) -> None:
    value = getattr(toolseam, name)
    if inspect.isclass(value) or inspect.isfunction(value):
        assert value.__module__ == "toolseam", name


@pytest.mark.parametrize("name", FINAL_CLASSES)
def test_classes_users_must_not_subclass_are_final(name: str) -> None:
    cls = getattr(toolseam, name)
    assert getattr(cls, "__final__", False) is True, name


def test_codes_are_final_literals() -> None:
    # Bare `Final` (inferred Literal types); the static suite checks what checkers infer.
    annotations = toolseam._errors.__annotations__
    for code in (
        "TOOL_ABORTED",
        "TOOL_ABORTED_BEFORE_DISPATCH",
        "TOOL_TIMEOUT",
        "UNKNOWN_TOOL",
        "INVALID_ARGS",
        "INVALID_TOOL_OUTPUT",
        "TOOL_ERROR_WITHOUT_CODE",
    ):
        assert annotations[code] == "Final", code
    for code in ("CAPABILITY_UNAVAILABLE", "CAPABILITY_FAILED"):
        assert toolseam._capabilities.__annotations__[code] == "Final", code
