"""Contract §3: the execution views, enforced at runtime too."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from support import make_input, registry_with_echo
from toolseam import (
    AbortController,
    ExecutionToken,
    Next,
    PostDecision,
    PreDecision,
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionInput,
    ToolResult,
    ToolRunContext,
    define_tool,
)

FIELDS = ("token", "call_id", "root_call_id", "name", "arguments", "agent", "parent")


class TestToolExecutionInput:
    def test_signal_is_required(self) -> None:
        with pytest.raises(TypeError, match="signal"):
            ToolExecutionInput(call_id="c", name="n", arguments={})  # type: ignore[call-arg]

    def test_input_is_frozen_and_keyword_only(self) -> None:
        call = make_input()
        with pytest.raises(dataclasses.FrozenInstanceError):
            call.signal = AbortController().signal  # type: ignore[misc]
        with pytest.raises(TypeError):
            ToolExecutionInput("c", "n", {}, AbortController().signal)  # type: ignore[misc]

    def test_optional_fields_default_to_none(self) -> None:
        call = make_input()
        assert (call.root_call_id, call.agent, call.parent) == (None, None, None)


class TestExecutionToken:
    def test_token_has_no_public_constructor(self) -> None:
        with pytest.raises(
            TypeError, match=r"^toolseam\.ExecutionToken has no public constructor$"
        ):
            ExecutionToken()  # type: ignore[call-arg]


def _attempt_mutations(view: Any, *, signal_writable: bool) -> list[str]:
    """Try every forbidden write on ``view``; return the ones that did NOT raise."""
    survived: list[str] = []
    attempts: list[tuple[str, Any]] = [(field, None) for field in FIELDS]
    if not signal_writable:
        attempts.append(("signal", AbortController().signal))
    for field, value in attempts:
        try:
            setattr(view, field, value)
        except AttributeError:
            pass
        else:
            survived.append(f"set {field}")
    for field in (*FIELDS, "signal"):
        try:
            delattr(view, field)
        except AttributeError:
            pass
        else:
            survived.append(f"del {field}")
    try:
        view.extra = 1
    except AttributeError:
        pass
    else:
        survived.append("set extra")
    return survived


class TestRuntimeEnforcement:
    async def test_every_stage_view_rejects_writes_and_deletions(self) -> None:
        registry, _, _ = registry_with_echo()
        survivors: dict[str, list[str]] = {}

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            survivors["pre-execute"] = _attempt_mutations(exec, signal_writable=False)
            return await next()

        def guard(exec: ToolExecution) -> None:
            survivors["guard"] = _attempt_mutations(exec, signal_writable=False)

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            survivors["around-dispatch"] = _attempt_mutations(exec, signal_writable=True)
            return await next()

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            survivors["post-execute"] = _attempt_mutations(exec, signal_writable=False)
            return await next()

        def observe(exec: ToolExecution, result: ToolResult) -> None:
            survivors["observer"] = _attempt_mutations(exec, signal_writable=False)

        @define_tool(name="body", description="")
        async def body(args: dict[str, str], exec: ToolRunContext) -> str:
            survivors["body"] = _attempt_mutations(exec, signal_writable=False)
            return ""

        registry.register(body)
        registry.on_pre_execute(pre)
        registry.add_guard(guard)
        registry.on_execute(wrap)
        registry.on_post_execute(post)
        registry.on_result(observe)
        result = await registry.execute(make_input("body"))
        assert not result.is_error, result
        assert survivors == {
            "pre-execute": [],
            "guard": [],
            "around-dispatch": [],
            "body": [],
            "post-execute": [],
            "observer": [],
        }

    async def test_dispatch_view_signal_is_replaceable(self) -> None:
        registry, _, _ = registry_with_echo()
        replaced: list[bool] = []

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            new = AbortController().signal
            exec.signal = new
            replaced.append(exec.signal is new)
            return await next()

        registry.on_execute(wrap)
        await registry.execute(make_input())
        assert replaced == [True]

    async def test_views_expose_the_same_execution(self) -> None:
        registry, _, _ = registry_with_echo()
        seen: dict[str, tuple[object, ...]] = {}

        def snapshot(exec: Any) -> tuple[object, ...]:
            return tuple(getattr(exec, field) for field in FIELDS)

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            seen["pre"] = snapshot(exec)
            return await next()

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            seen["wrap"] = snapshot(exec)
            return await next()

        registry.on_pre_execute(pre)
        registry.on_execute(wrap)
        registry.on_result(lambda exec, result: seen.__setitem__("observer", snapshot(exec)))
        await registry.execute(make_input())
        assert seen["pre"] == seen["wrap"] == seen["observer"]
