"""Security properties: denials are final, approved arguments are what the body gets, and
no stage can change a call's identity."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import pytest

from support import Published, code_of, make_input
from toolseam import (
    Accept,
    Allow,
    ApprovalAnswer,
    ApprovalRequest,
    Ask,
    Next,
    PostDecision,
    PreDecision,
    ReplaceValue,
    ToolDispatchExecution,
    ToolExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
)


def _registry(body_calls: list[Any], **kw: Any) -> ToolRegistry:
    registry = ToolRegistry(**kw)

    @define_tool(name="rm", description="Delete a path.")
    async def rm(args: dict[str, Any], exec: ToolRunContext) -> str:
        body_calls.append(json.dumps(args, sort_keys=True))
        return "deleted"

    registry.register(rm)
    return registry


class TestDenialsAreFinal:
    @pytest.mark.parametrize("post_decision", ["replace", "accept"])
    async def test_guard_denial_survives_every_later_listener(
        self, post_decision: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        body_calls: list[Any] = []
        registry = _registry(body_calls)

        async def permissive(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            await next()
            return Allow()  # tries to override whatever came from inside

        async def overrule(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            await next()
            if post_decision == "replace":
                return ReplaceValue("deleted anyway")
            return Accept(content=[{"type": "text", "text": "all good"}])

        registry.on_pre_execute(permissive)
        registry.add_guard(lambda exec: "outside the workspace")
        registry.on_post_execute(overrule)
        with caplog.at_level(logging.WARNING, logger="toolseam"):
            result = await registry.execute(make_input("rm", {"path": "/"}))
        assert isinstance(result, ToolFailure)
        assert result.error.message == "tool call denied: outside the workspace"
        assert body_calls == []

    @pytest.mark.parametrize("answer", ["rejected", "unavailable", "cancelled"])
    async def test_approval_refusal_survives_a_replacing_post_listener(self, answer: str) -> None:
        class Approver:
            async def request(self, request: ApprovalRequest, /) -> ApprovalAnswer:
                return answer  # type: ignore[return-value]

        body_calls: list[Any] = []
        registry = _registry(body_calls, approval=Approver())

        async def ask(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            return Ask("destructive")

        async def overrule(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            return ReplaceValue("deleted anyway")

        registry.on_pre_execute(ask)
        registry.on_post_execute(overrule)
        result = await registry.execute(make_input("rm", {"path": "/"}))
        assert result.is_error
        assert body_calls == []


class TestApprovedArgumentsAreWhatTheBodyGets:
    async def test_caller_mutation_after_approval_changes_nothing(self) -> None:
        approved: list[str] = []
        body_calls: list[Any] = []
        arguments: dict[str, Any] = {"path": "/tmp/scratch", "opts": {"recursive": False}}
        mutate = anyio.Event()
        resume = anyio.Event()

        class Approver:
            async def request(self, request: ApprovalRequest, /) -> ApprovalAnswer:
                approved.append(json.dumps(request.execution.arguments, sort_keys=True))
                mutate.set()
                await resume.wait()
                return "allowed-once"

        registry = _registry(body_calls, approval=Approver())

        async def ask(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            return Ask()

        registry.on_pre_execute(ask)
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("rm", arguments))
            await mutate.wait()
            arguments["path"] = "/"  # the caller changes its object mid-flight
            arguments["opts"]["recursive"] = True
            resume.set()
        assert body_calls == approved  # byte for byte

    async def test_no_stage_can_mutate_the_arguments(self) -> None:
        body_calls: list[Any] = []
        registry = _registry(body_calls)
        attempts: list[str] = []

        async def tamper(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            arguments: Any = exec.arguments
            for attempt in (
                lambda: arguments.__setitem__("path", "/"),
                lambda: arguments["opts"].__setitem__("recursive", True),
                lambda: arguments["opts"].update(recursive=True),
                lambda: arguments.pop("path"),
                lambda: arguments.clear(),
            ):
                try:
                    attempt()
                except TypeError:
                    attempts.append("refused")
            return await next()

        registry.on_pre_execute(tamper)
        await registry.execute(make_input("rm", {"path": "/tmp/x", "opts": {"recursive": False}}))
        assert attempts == ["refused"] * 5
        assert body_calls == [json.dumps({"opts": {"recursive": False}, "path": "/tmp/x"})]


class TestIdentityIsFixed:
    async def test_no_stage_can_change_name_arguments_token_or_call_id(self) -> None:
        body_calls: list[Any] = []
        registry = _registry(body_calls)
        published = Published()
        registry.on_result(published)
        identities: list[tuple[object, ...]] = []

        def identity(exec: Any) -> tuple[object, ...]:
            return (exec.name, exec.call_id, exec.token, json.dumps(exec.arguments))

        def try_to_change(exec: Any) -> None:
            for field, value in (
                ("name", "other"),
                ("call_id", "forged"),
                ("token", None),
                ("arguments", {"path": "/"}),
            ):
                with pytest.raises(AttributeError):
                    setattr(exec, field, value)
            identities.append(identity(exec))

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            try_to_change(exec)
            return await next()

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            try_to_change(exec)
            return await next()

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            try_to_change(exec)
            return await next()

        registry.on_pre_execute(pre)
        registry.on_execute(wrap)
        registry.on_post_execute(post)
        registry.add_guard(lambda exec: try_to_change(exec))
        registry.on_result(lambda exec, result: try_to_change(exec))
        result = await registry.execute(make_input("rm", {"path": "/tmp/x"}, call_id="c-1"))
        assert code_of(result) is None
        assert not result.is_error
        assert len(identities) == 5
        assert len(set(identities)) == 1
        assert identities[0][:2] == ("rm", "c-1")
        assert identities[0][2] is published.tokens[0]
