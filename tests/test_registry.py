"""Contract §5: the registry pipeline, one call in order."""

from __future__ import annotations

import json
import logging
import typing
from typing import Any

import anyio
import pytest

from support import Published, TextArgs, code_of, make_input, registry_with_echo
from toolseam import (
    INVALID_ARGS,
    TOOL_ABORTED_BEFORE_DISPATCH,
    UNKNOWN_TOOL,
    AbortController,
    AbortSignal,
    Accept,
    Allow,
    ApprovalAnswer,
    ApprovalRequest,
    Ask,
    Block,
    Deny,
    ErrorInfo,
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
    ToolSchema,
    ToolSuccess,
    define_tool,
)


class TestRegistration:
    def test_register_get_and_schemas(self) -> None:
        registry, _, _ = registry_with_echo()
        definition = registry.get("echo")
        assert definition is not None
        assert registry.get("missing") is None
        [schema] = registry.schemas()
        assert isinstance(schema, ToolSchema)
        assert schema.name == "echo"
        assert schema.description == "Echo the text."
        assert schema.parameters["properties"] == {"text": {"title": "Text", "type": "string"}}
        assert set(schema.to_json()) == {"name", "description", "parameters"}

    def test_duplicate_name_is_a_value_error_naming_the_tool(self) -> None:
        registry, _, _ = registry_with_echo()

        @define_tool(name="echo", description="again")
        async def echo(args: TextArgs, exec: ToolRunContext) -> str:
            return ""

        with pytest.raises(ValueError, match=r'^tool "echo" is already registered$'):
            registry.register(echo)

    def test_registration_remove_unregisters_and_is_idempotent(self) -> None:
        registry = ToolRegistry()

        @define_tool(name="t", description="")
        async def t(args: TextArgs, exec: ToolRunContext) -> str:
            return ""

        registration = registry.register(t)
        registration.remove()
        registration.remove()
        assert registry.get("t") is None
        registry.register(t)  # the name is free again

    def test_registration_is_a_context_manager(self) -> None:
        registry = ToolRegistry()
        seen: list[object] = []
        with registry.on_result(lambda exec, result: seen.append(result)):
            pass
        assert registry._observers.items == ()

    def test_register_rejects_an_object_that_is_not_a_definition(self) -> None:
        registry = ToolRegistry()
        with pytest.raises(TypeError, match=r"with a non-empty str `name`, got object$"):
            registry.register(object())  # type: ignore[arg-type]

    def test_non_callable_listener_is_a_type_error(self) -> None:
        registry = ToolRegistry()
        with pytest.raises(TypeError, match=r"^pre-execute listener must be callable, got int$"):
            registry.on_pre_execute(1)  # type: ignore[arg-type]

    async def test_hand_written_definition_is_accepted(self) -> None:
        class Upper:
            name = "upper"
            description = "Upper-case the text."
            parameters: typing.ClassVar = {"type": "object"}
            timeout = None

            def parse_arguments(self, arguments: Any, /) -> str:
                return str(arguments["text"])

            async def run(self, args: str, exec: ToolRunContext, /) -> str:
                return args.upper()

            def serialize_output(self, output: str, /) -> Any:
                return output

            def render(self, args: str, value: Any, /) -> Any:
                return [{"type": "text", "text": value}]

            def is_concurrency_safe(self, args: str, /) -> bool:
                return True

            def finalize_content(self, exec: Any, result: Any, /) -> None:
                return None

        registry = ToolRegistry()
        registry.register(Upper())
        result = await registry.execute(make_input("upper"))
        assert not result.is_error
        assert result.value == "HI"
        assert registry.execution_mode(make_input("upper")) == "parallel"


class TestOrderOfOneCall:
    async def test_stages_run_in_order_and_the_same_result_is_published_and_returned(
        self,
    ) -> None:
        registry, published, trace = registry_with_echo()

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            trace.append("pre")
            return await next()

        def guard(exec: ToolExecution) -> None:
            trace.append("guard")

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            trace.append("wrap>")
            result = await next()
            trace.append("<wrap")
            return result

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            trace.append("post")
            return await next()

        registry.on_pre_execute(pre)
        registry.add_guard(guard)
        registry.on_execute(wrap)
        registry.on_post_execute(post)
        registry.on_result(lambda exec, result: trace.append("observer"))
        result = await registry.execute(make_input())
        assert trace == ["pre", "guard", "wrap>", "body", "<wrap", "post", "observer"]
        assert published.only is result
        assert isinstance(result, ToolSuccess)
        assert result.value == "hi"
        assert [dict(block) for block in result.content] == [{"type": "text", "text": "hi"}]

    async def test_first_registered_listener_is_outermost_and_prepend_makes_outermost(
        self,
    ) -> None:
        registry, _, trace = registry_with_echo()

        def make(label: str) -> Any:
            async def listener(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
                trace.append(f"{label}>")
                decision = await next()
                trace.append(f"<{label}")
                return decision

            return listener

        registry.on_pre_execute(make("a"))
        registry.on_pre_execute(make("b"))
        registry.on_pre_execute(make("first"), prepend=True)
        await registry.execute(make_input())
        assert trace == ["first>", "a>", "b>", "<b", "<a", "<first", "body"]

    async def test_input_fields_are_read_once_and_root_call_id_resolves(self) -> None:
        registry, _, _ = registry_with_echo()
        seen: list[tuple[str, str, str, object]] = []

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            seen.append((exec.call_id, exec.root_call_id, exec.name, exec.agent))
            return await next()

        registry.on_pre_execute(pre)
        agent = object()
        await registry.execute(make_input(call_id="c1", agent=agent))
        await registry.execute(make_input(call_id="c2", root_call_id="root"))
        assert seen == [("c1", "c1", "echo", agent), ("c2", "root", "echo", None)]

    async def test_each_execution_mints_a_fresh_hashable_token(self) -> None:
        registry, published, _ = registry_with_echo()
        await registry.execute(make_input())
        await registry.execute(make_input())
        first, second = published.tokens
        assert first is not second
        assert first != second
        assert len({first, second}) == 2

    async def test_finalize_content_is_captured_at_entry_and_runs_once_per_result(
        self,
    ) -> None:
        registry = ToolRegistry()
        calls: list[str] = []
        gate = anyio.Event()

        def finalize(exec: ToolExecution, result: ToolResult) -> list[dict[str, str]]:
            calls.append(exec.call_id)
            return [{"type": "text", "text": "final"}]

        @define_tool(name="t", description="", finalize_content=finalize)
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            await gate.wait()
            return "v"

        @define_tool(name="t", description="")
        async def replacement(args: TextArgs, exec: ToolRunContext) -> str:
            return "other"

        registration = registry.register(tool)
        async with anyio.create_task_group() as tg:
            results: list[ToolResult] = []

            async def call() -> None:
                results.append(await registry.execute(make_input("t")))

            tg.start_soon(call)
            await anyio.wait_all_tasks_blocked()
            registration.remove()
            registry.register(replacement)
            gate.set()
        [result] = results
        assert calls == ["call_1"]
        assert [dict(b) for b in result.content] == [{"type": "text", "text": "final"}]

    async def test_tool_is_resolved_at_dispatch(self) -> None:
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)

        @define_tool(name="late", description="")
        async def late(args: TextArgs, exec: ToolRunContext) -> str:
            return "registered during pre-execute"

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            registry.register(late)
            return await next()

        registry.on_pre_execute(pre)
        result = await registry.execute(make_input("late"))
        assert isinstance(result, ToolSuccess)
        assert result.value == "registered during pre-execute"


class TestMaterialization:
    async def test_stages_and_body_see_a_frozen_snapshot_equal_to_the_input(self) -> None:
        registry = ToolRegistry()
        arguments = {"text": "a", "nested": [1, {"k": [True, None]}]}
        seen: list[object] = []

        @define_tool(name="t", description="")
        async def tool(args: dict[str, object], exec: ToolRunContext) -> str:
            seen.append(exec.arguments)
            return "ok"

        registry.register(tool)
        await registry.execute(make_input("t", arguments))
        [snapshot] = seen
        assert snapshot == arguments
        assert json.dumps(snapshot) == json.dumps(arguments)
        with pytest.raises(TypeError):
            snapshot["text"] = "b"  # type: ignore[index]
        assert arguments == {"text": "a", "nested": [1, {"k": [True, None]}]}

    async def test_tuple_arguments_become_arrays(self) -> None:
        registry, _, _ = registry_with_echo()
        seen: list[object] = []

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            seen.append(exec.arguments)
            return await next()

        registry.on_pre_execute(pre)
        await registry.execute(make_input(arguments={"text": "x", "list": (1, 2)}))
        assert seen == [{"text": "x", "list": [1, 2]}]

    async def test_caller_mutation_after_execute_starts_changes_nothing(self) -> None:
        registry = ToolRegistry()
        arguments: dict[str, Any] = {"text": "approved"}
        started = anyio.Event()
        release = anyio.Event()
        seen: list[str] = []

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            started.set()
            await release.wait()
            seen.append(args["text"])
            return args["text"]

        registry.register(tool)
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("t", arguments))
            await started.wait()
            arguments["text"] = "tampered"
            release.set()
        assert seen == ["approved"]

    async def test_materialization_failure_wins_over_a_pre_aborted_signal(self) -> None:
        registry, published, trace = registry_with_echo()
        pre_calls: list[str] = []

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            pre_calls.append("pre")
            return await next()

        registry.on_pre_execute(pre)
        signal = AbortSignal.aborted_signal()
        result = await registry.execute(make_input(arguments={"x": float("nan")}, signal=signal))
        assert isinstance(result, ToolFailure)
        assert result.error.message == (
            "tool execution arguments must be losslessly JSON-serializable "
            "($.x: float nan is not JSON)"
        )
        assert result.error.info is None
        assert published.only is result
        assert pre_calls == []
        assert trace == []


class TestPreExecute:
    async def test_deny_is_a_denial_result_and_the_body_never_runs(self) -> None:
        registry, published, trace = registry_with_echo()

        async def deny(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            return Deny("not today")

        registry.on_pre_execute(deny)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolFailure)
        assert result.error.message == "tool call denied: not today"
        assert [dict(b) for b in result.content] == [
            {"type": "text", "text": "Error: tool call denied: not today"}
        ]
        assert trace == []
        assert published.only is result

    async def test_post_execute_sees_denials(self) -> None:
        registry, _, _ = registry_with_echo()
        seen: list[str] = []

        async def deny(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            return Deny("no")

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            assert result.is_error
            seen.append(result.error.message)
            return await next()

        registry.on_pre_execute(deny)
        registry.on_post_execute(post)
        await registry.execute(make_input())
        assert seen == ["tool call denied: no"]

    async def test_raising_pre_execute_listener_is_a_final_error_without_post_execute(
        self,
    ) -> None:
        registry, published, trace = registry_with_echo()

        async def boom(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            raise RuntimeError("policy exploded")

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            trace.append("post")
            return await next()

        registry.on_pre_execute(boom)
        registry.on_post_execute(post)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolFailure)
        assert result.error.message == "policy exploded"
        assert result.error.info is None
        assert trace == []
        assert published.only is result

    async def test_calling_next_twice_is_an_error_result(self) -> None:
        registry, _, trace = registry_with_echo()

        async def twice(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            await next()
            return await next()

        registry.on_pre_execute(twice)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolFailure)
        assert result.error.message == "next() may be called only once per stage listener"
        assert trace == []

    async def test_non_decision_from_pre_execute_is_an_error_result(self) -> None:
        registry, _, trace = registry_with_echo()

        async def odd(exec: ToolExecution, next: Next[PreDecision]) -> Any:
            return "yes"

        registry.on_pre_execute(odd)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolFailure)
        assert result.error.message == "pre-execute chain returned str, not Allow, Deny or Ask"
        assert trace == []


class TestGuards:
    async def test_guard_string_denies_and_later_listeners_cannot_undo_it(self) -> None:
        registry, published, trace = registry_with_echo()
        guard_calls: list[str] = []

        async def allow(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            await next()
            return Allow()

        registry.on_pre_execute(allow)
        registry.add_guard(lambda exec: guard_calls.append("g1") or "path outside workspace")
        registry.add_guard(lambda exec: guard_calls.append("g2") or None)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolFailure)
        assert result.error.message == "tool call denied: path outside workspace"
        assert guard_calls == ["g1"]
        assert trace == []
        assert published.only is result

    async def test_guards_do_not_run_when_pre_execute_denies(self) -> None:
        registry, _, _ = registry_with_echo()
        guard_calls: list[str] = []

        async def deny(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            return Deny("no")

        registry.on_pre_execute(deny)
        registry.add_guard(lambda exec: guard_calls.append("g") or None)
        await registry.execute(make_input())
        assert guard_calls == []

    async def test_raising_guard_is_a_final_error(self) -> None:
        registry, published, trace = registry_with_echo()

        def guard(exec: ToolExecution) -> str | None:
            raise ValueError("guard broke")

        registry.add_guard(guard)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolFailure)
        assert result.error.message == "guard broke"
        assert trace == []
        assert published.only is result


class Approver:
    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.requests: list[ApprovalRequest] = []

    async def request(self, request: ApprovalRequest, /) -> ApprovalAnswer:
        self.requests.append(request)
        await anyio.lowlevel.checkpoint()
        return self.answer  # type: ignore[return-value]


async def _ask(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
    await next()
    return Ask("writes files")


class TestApproval:
    async def test_allowed_once_dispatches_and_the_request_carries_the_caller_signal(
        self,
    ) -> None:
        approver = Approver("allowed-once")
        registry = ToolRegistry(approval=approver)
        registry.on_pre_execute(_ask)

        @define_tool(name="echo", description="")
        async def echo(args: TextArgs, exec: ToolRunContext) -> str:
            return args["text"]

        registry.register(echo)
        controller = AbortController()
        result = await registry.execute(make_input(signal=controller.signal))
        assert not result.is_error
        [request] = approver.requests
        assert request.signal is controller.signal
        assert request.reason == "writes files"
        assert request.execution.name == "echo"

    @pytest.mark.parametrize(
        ("answer", "message"),
        [
            ("rejected", "tool call denied: rejected by approval"),
            ("unavailable", "tool call denied: approval unavailable"),
            ("cancelled", "tool call denied: approval cancelled"),
            ("maybe", "approval service answered 'maybe', not an approval answer"),
        ],
    )
    async def test_other_answers_deny(self, answer: str, message: str) -> None:
        registry = ToolRegistry(approval=Approver(answer))
        registry.on_pre_execute(_ask)
        trace: list[str] = []

        @define_tool(name="echo", description="")
        async def echo(args: TextArgs, exec: ToolRunContext) -> str:
            trace.append("body")
            return ""

        registry.register(echo)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolFailure)
        assert result.error.message == message
        assert trace == []

    async def test_ask_without_a_service_is_a_denial(self) -> None:
        registry, _, trace = registry_with_echo()
        registry.on_pre_execute(_ask)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolFailure)
        assert result.error.message == (
            "tool call denied: approval required (writes files) "
            "but no approval service is configured"
        )
        assert trace == []

    async def test_raising_approval_service_is_a_final_error(self) -> None:
        class Broken:
            async def request(self, request: ApprovalRequest, /) -> ApprovalAnswer:
                raise OSError("approval backend down")

        registry = ToolRegistry(approval=Broken())
        registry.on_pre_execute(_ask)
        published = Published()
        registry.on_result(published)
        result = await registry.execute(make_input("whatever"))
        assert isinstance(result, ToolFailure)
        assert result.error.message == "approval backend down"
        assert published.only is result


class TestAroundDispatch:
    async def test_wrapper_short_circuit_skips_the_body(self) -> None:
        registry, published, trace = registry_with_echo()

        async def cache(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            return ToolSuccess(value="cached", content=[{"type": "text", "text": "cached"}])

        registry.on_execute(cache)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolSuccess)
        assert result.value == "cached"
        assert trace == []
        assert published.only is result

    async def test_next_returns_tool_failures_instead_of_raising(self) -> None:
        registry = ToolRegistry()
        seen: list[ToolResult] = []

        @define_tool(name="fails", description="")
        async def fails(args: TextArgs, exec: ToolRunContext) -> str:
            raise RuntimeError("disk full")

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            result = await next()
            seen.append(result)
            return result

        registry.register(fails)
        registry.on_execute(wrap)
        result = await registry.execute(make_input("fails"))
        assert seen == [result]
        assert isinstance(result, ToolFailure)
        assert result.error.message == "disk full"

    async def test_raising_wrapper_is_a_final_error_without_post_execute(self) -> None:
        registry, published, trace = registry_with_echo()

        async def boom(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            await next()
            raise RuntimeError("wrapper broke")

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            trace.append("post")
            return await next()

        registry.on_execute(boom)
        registry.on_post_execute(post)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolFailure)
        assert result.error.message == "wrapper broke"
        assert trace == ["body"]
        assert published.only is result

    async def test_wrapper_returning_a_non_result_is_a_clear_failure(self) -> None:
        registry, published, _ = registry_with_echo()

        async def odd(exec: ToolDispatchExecution, next: Next[ToolResult]) -> Any:
            await next()
            return {"value": 1}

        registry.on_execute(odd)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolFailure)
        assert result.error.message == "around-dispatch wrapper returned dict, not a ToolResult"
        assert published.only is result

    async def test_unknown_tool_is_resolved_at_dispatch(self) -> None:
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)
        result = await registry.execute(make_input("nope"))
        assert isinstance(result, ToolFailure)
        assert result.error.message == 'unknown tool "nope"'
        assert result.error.info == ErrorInfo("ToolNotFoundError", UNKNOWN_TOOL)
        assert published.only is result


class TestPostExecute:
    async def test_accept_replaces_content_and_adds_contexts(self) -> None:
        registry, _, _ = registry_with_echo()

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            return Accept(content=[{"type": "text", "text": "new"}], additional_contexts=["c"])

        registry.on_post_execute(post)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolSuccess)
        assert result.value == "hi"
        assert [dict(b) for b in result.content] == [{"type": "text", "text": "new"}]
        assert list(result.additional_contexts) == ["c"]

    async def test_replace_value_makes_a_success(self) -> None:
        registry, _, _ = registry_with_echo()

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            return ReplaceValue({"redacted": True})

        registry.on_post_execute(post)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolSuccess)
        assert result.value == {"redacted": True}
        assert [dict(b) for b in result.content] == [{"type": "text", "text": '{"redacted": true}'}]

    async def test_block_makes_a_failure_with_the_feedback(self) -> None:
        registry, _, _ = registry_with_echo()

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            return Block("output contained a secret")

        registry.on_post_execute(post)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolFailure)
        assert result.error.message == "output contained a secret"

    async def test_post_execute_runs_for_tool_failures(self) -> None:
        registry = ToolRegistry()
        seen: list[str] = []

        @define_tool(name="fails", description="")
        async def fails(args: TextArgs, exec: ToolRunContext) -> str:
            raise RuntimeError("nope")

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            assert result.is_error
            seen.append(result.error.message)
            return await next()

        registry.register(fails)
        registry.on_post_execute(post)
        await registry.execute(make_input("fails"))
        assert seen == ["nope"]

    async def test_raising_post_execute_listener_is_an_error_result(self) -> None:
        registry, published, _ = registry_with_echo()

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            raise KeyError("missing")

        registry.on_post_execute(post)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolFailure)
        assert result.error.message == "'missing'"
        assert published.only is result


class TestFinalizeAndPublish:
    async def test_raising_finalizer_turns_the_result_into_that_error(self) -> None:
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)

        def finalize(exec: ToolExecution, result: ToolResult) -> None:
            raise RuntimeError("finalizer broke")

        @define_tool(name="t", description="", finalize_content=finalize)
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            return "v"

        registry.register(tool)
        result = await registry.execute(make_input("t"))
        assert isinstance(result, ToolFailure)
        assert result.error.message == "finalizer broke"
        assert published.only is result

    async def test_finalizer_runs_for_a_pre_aborted_call(self) -> None:
        registry = ToolRegistry()
        seen: list[str | None] = []

        def finalize(exec: ToolExecution, result: ToolResult) -> list[dict[str, str]]:
            seen.append(code_of(result))
            return [{"type": "text", "text": "stopped by the user"}]

        @define_tool(name="t", description="", finalize_content=finalize)
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            return "v"

        registry.register(tool)
        result = await registry.execute(make_input("t", signal=AbortSignal.aborted_signal()))
        assert seen == [TOOL_ABORTED_BEFORE_DISPATCH]
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert [dict(b) for b in result.content] == [
            {"type": "text", "text": "stopped by the user"}
        ]

    async def test_raising_observer_is_logged_and_others_still_see_the_result(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        registry, published, _ = registry_with_echo()

        def bad(exec: ToolExecution, result: ToolResult) -> None:
            raise RuntimeError("observer broke")

        after = Published()
        registry.on_result(bad)
        registry.on_result(after)
        with caplog.at_level(logging.ERROR, logger="toolseam"):
            result = await registry.execute(make_input())
        assert not result.is_error
        assert published.only is result
        assert after.only is result
        assert any("observer" in r.getMessage() for r in caplog.records)


class TestExecutionMode:
    def test_only_exact_true_is_parallel(self) -> None:
        registry = ToolRegistry()
        answers: dict[str, object] = {"yes": True, "truthy": 1, "no": False}

        for label, answer in answers.items():

            @define_tool(name=label, description="", is_concurrency_safe=lambda args, a=answer: a)
            async def tool(args: TextArgs, exec: ToolRunContext) -> str:
                return ""

            registry.register(tool)

        def boom(args: object) -> bool:
            raise RuntimeError

        @define_tool(name="raises", description="", is_concurrency_safe=boom)
        async def raises(args: TextArgs, exec: ToolRunContext) -> str:
            return ""

        registry.register(raises)
        assert registry.execution_mode(make_input("yes")) == "parallel"
        assert registry.execution_mode(make_input("truthy")) == "exclusive"
        assert registry.execution_mode(make_input("no")) == "exclusive"
        assert registry.execution_mode(make_input("raises")) == "exclusive"
        assert registry.execution_mode(make_input("unknown")) == "exclusive"
        assert registry.execution_mode(make_input("yes", {"text": 1})) == "exclusive"
        assert registry.execution_mode(make_input("yes", {"x": {1}})) == "exclusive"


class TestInputValidation:
    async def test_execute_rejects_a_non_input(self) -> None:
        registry = ToolRegistry()
        with pytest.raises(TypeError, match=r"^execute\(\) expects a ToolExecutionInput"):
            await registry.execute({"name": "x"})  # type: ignore[arg-type]

    async def test_execute_rejects_a_missing_signal(self) -> None:
        registry = ToolRegistry()
        call = make_input()
        object.__setattr__(call, "signal", None)
        with pytest.raises(
            TypeError, match=r"^ToolExecutionInput.signal must be an AbortSignal, got NoneType$"
        ):
            await registry.execute(call)

    async def test_invalid_args_count_as_body_invoked(self) -> None:
        registry, _, trace = registry_with_echo()
        result = await registry.execute(make_input(arguments={"text": 3}))
        assert code_of(result) == INVALID_ARGS
        assert trace == []


class TestSameListenerTwice:
    """contract §5: each registration removes its own entry, even of a callable added twice."""

    async def test_removing_the_second_registration_keeps_the_first_in_place(self) -> None:
        registry, _, _ = registry_with_echo()
        order: list[str] = []

        async def audit(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            order.append("audit")
            return await next()

        async def retry(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            order.append("retry")
            return await next()

        registry.on_execute(audit)
        registry.on_execute(retry)
        second = registry.on_execute(audit)
        await registry.execute(make_input())
        assert order == ["audit", "retry", "audit"]
        second.remove()
        order.clear()
        await registry.execute(make_input())
        assert order == ["audit", "retry"]
