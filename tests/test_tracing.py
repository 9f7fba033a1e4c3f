"""Contract §12: `toolseam.tracing.instrument` opens one GenAI ``execute_tool`` span per call.

Every test records into a private SDK ``TracerProvider`` and ``InMemorySpanExporter`` (the
global tracer provider is never touched) and runs on asyncio and trio, except
`TestUnderPydanticAI`: pydantic-ai runs agents on asyncio only (see
tests/test_integration_pydantic_ai.py), so that class pins ``anyio_backend`` to asyncio.
"""

from __future__ import annotations

import datetime
import json
import logging
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import anyio
import anyio.from_thread
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, StatusCode
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import Instrumentation, ValidatedToolArgs, WrapToolExecuteHandler
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import ToolDefinition

from support import TextArgs, make_input
from toolseam import (
    INVALID_ARGS,
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    TOOL_TIMEOUT,
    UNKNOWN_TOOL,
    AbortController,
    Allow,
    Next,
    PreDecision,
    Principal,
    ToolCall,
    ToolError,
    ToolExecution,
    ToolExecutionInput,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
    nested_input,
    run_tool_calls,
)
from toolseam.integrations.pydantic_ai import RegistryToolset
from toolseam.tracing import instrument


class Traced:
    """A private tracer provider whose finished spans stay in memory."""

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = provider or TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @property
    def spans(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    @property
    def only(self) -> ReadableSpan:
        spans = self.spans
        assert len(spans) == 1, [span.name for span in spans]
        return spans[0]

    def named(self, name: str) -> ReadableSpan:
        [span] = [span for span in self.spans if span.name == name]
        return span


@pytest.fixture
def traced() -> Iterator[Traced]:
    traced = Traced()
    yield traced
    traced.provider.shutdown()


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def _scope(span: ReadableSpan) -> str:
    scope = span.instrumentation_scope
    return "" if scope is None else scope.name


def _call_id(span: ReadableSpan) -> object:
    return _attributes(span)["gen_ai.tool.call.id"]


def _span_id(span: ReadableSpan) -> int:
    context = span.context
    assert context is not None
    return context.span_id


def _children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[str]:
    return sorted(span.name for span in spans if _parent_id(span) == _span_id(parent))


@define_tool(name="echo", description="Echo the text.")
async def echo(args: TextArgs, exec: ToolRunContext) -> str:
    return args["text"]


def _instrumented(traced: Traced, *tools: Any, capture_content: bool = False) -> ToolRegistry:
    registry = ToolRegistry()
    for tool in tools or (echo,):
        registry.register(tool)
    instrument(registry, tracer_provider=traced.provider, capture_content=capture_content)
    return registry


def _current_records() -> bool:
    return trace.get_current_span().is_recording()


def _error_type(span: ReadableSpan) -> object:
    return _attributes(span).get("error.type")


class TestOneSpanPerCall:
    async def test_success_carries_the_genai_attributes_and_no_status(self, traced: Traced) -> None:
        registry = _instrumented(traced)
        result = await registry.execute(make_input("echo", call_id="c1", root_call_id="r0"))
        assert not result.is_error
        span = traced.only
        assert span.name == "execute_tool echo"
        assert span.kind is SpanKind.INTERNAL
        assert span.status.status_code is StatusCode.UNSET
        assert _attributes(span) == {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "echo",
            "gen_ai.tool.call.id": "c1",
            "gen_ai.tool.type": "function",
            "gen_ai.tool.description": "Echo the text.",
            "toolseam.body_invoked": True,
            "toolseam.root_call_id": "r0",
        }
        assert _scope(span) == "toolseam"

    async def test_the_principal_is_recorded_by_name_only(self, traced: Traced) -> None:
        """Contract §14: the caller's name, never its claims (a principal holds no token)."""
        registry = _instrumented(traced)
        secret = "claim-that-must-not-leak"
        alice = Principal("alice", ["tools"], {"tenant": secret})
        result = await registry.execute(make_input("echo", principal=alice))
        assert not result.is_error
        attributes = _attributes(traced.only)
        assert attributes["enduser.id"] == "alice"
        assert not any(secret in str(value) for value in attributes.values())
        await registry.execute(make_input("echo"))  # an in-process caller: no attribute
        assert "enduser.id" not in _attributes(traced.spans[-1])

    async def test_the_span_closes_when_the_result_is_published(self, traced: Traced) -> None:
        registry = _instrumented(traced)
        seen: list[int] = []
        # An observer runs while the result is published: the span is still open then.
        registry.on_result(lambda exec, result: seen.append(len(traced.spans)))
        await registry.execute(make_input("echo"))
        assert seen == [0]
        assert len(traced.spans) == 1

    async def test_root_call_id_defaults_to_the_call_id(self, traced: Traced) -> None:
        registry = _instrumented(traced)
        await registry.execute(make_input("echo", call_id="c7"))
        assert _attributes(traced.only)["toolseam.root_call_id"] == "c7"

    async def test_parent_is_the_span_current_where_the_call_entered(self, traced: Traced) -> None:
        registry = _instrumented(traced)
        tracer = traced.provider.get_tracer("test")
        with tracer.start_as_current_span("agent turn"):
            await registry.execute(make_input("echo"))
        turn, call = traced.named("agent turn"), traced.named("execute_tool echo")
        assert _parent_id(call) == _span_id(turn)
        assert call.context is not None
        assert turn.context is not None
        assert call.context.trace_id == turn.context.trace_id

    async def test_a_sampled_out_call_records_nothing_and_still_runs(self) -> None:
        traced = Traced(TracerProvider(sampler=ALWAYS_OFF))
        registry = _instrumented(traced)
        result = await registry.execute(make_input("echo"))
        assert not result.is_error
        assert traced.spans == ()

    async def test_two_instrumentations_give_two_spans(self, traced: Traced) -> None:
        other = Traced()
        registry = _instrumented(traced)
        instrument(registry, tracer_provider=other.provider)
        await registry.execute(make_input("echo"))
        assert traced.only.name == other.only.name == "execute_tool echo"


class TestOutcomes:
    """Status ERROR and `error.type` = the result's code, or `_OTHER` without one."""

    async def _ended(self, traced: Traced, result: ToolResult, code: str) -> ReadableSpan:
        assert result.is_error
        assert result.code == (None if code == "_OTHER" else code)
        span = traced.only
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description is None  # the message is content (capture_content)
        assert _error_type(span) == code
        return span

    async def test_aborted_mid_call(self, traced: Traced) -> None:
        started = anyio.Event()

        @define_tool(name="wait", description="Wait until aborted.")
        async def wait(args: TextArgs, exec: ToolRunContext) -> str:
            started.set()
            await exec.signal.wait()
            exec.signal.raise_if_aborted()
            return "unreachable"

        registry = _instrumented(traced, wait)
        controller = AbortController()
        results: list[ToolResult] = []

        async def call() -> None:
            results.append(await registry.execute(make_input("wait", signal=controller.signal)))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await started.wait()
            assert traced.spans == ()  # still open while the body runs
            controller.abort()
        span = await self._ended(traced, results[0], TOOL_ABORTED)
        assert _attributes(span)["toolseam.body_invoked"] is True

    async def test_pre_aborted_entry_gets_its_span(self, traced: Traced) -> None:
        registry = _instrumented(traced)
        controller = AbortController()
        controller.abort()
        result = await registry.execute(make_input("echo", signal=controller.signal))
        span = await self._ended(traced, result, TOOL_ABORTED_BEFORE_DISPATCH)
        assert span.name == "execute_tool echo"
        assert _attributes(span)["toolseam.body_invoked"] is False

    async def test_aborted_in_pre_execute_is_before_dispatch(self, traced: Traced) -> None:
        registry = _instrumented(traced)
        controller = AbortController()

        async def stop(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            controller.abort()
            return Allow()

        registry.on_pre_execute(stop)
        result = await registry.execute(make_input("echo", signal=controller.signal))
        span = await self._ended(traced, result, TOOL_ABORTED_BEFORE_DISPATCH)
        assert _attributes(span)["toolseam.body_invoked"] is False

    async def test_tool_timeout(self, traced: Traced) -> None:
        @define_tool(name="slow", description="", timeout=0.01)
        async def slow(args: TextArgs, exec: ToolRunContext) -> str:
            await exec.signal.wait()
            exec.signal.raise_if_aborted()
            return "unreachable"

        registry = _instrumented(traced, slow)
        span = await self._ended(traced, await registry.execute(make_input("slow")), TOOL_TIMEOUT)
        assert _attributes(span)["toolseam.body_invoked"] is True
        assert "gen_ai.tool.description" not in _attributes(span)  # empty: not recorded

    async def test_invalid_args(self, traced: Traced) -> None:
        registry = _instrumented(traced)
        result = await registry.execute(make_input("echo", {"text": 1}))
        span = await self._ended(traced, result, INVALID_ARGS)
        assert _attributes(span)["toolseam.body_invoked"] is True  # validation is the body

    async def test_a_plain_exception_is_other(self, traced: Traced) -> None:
        @define_tool(name="boom", description="Raise.")
        async def boom(args: TextArgs, exec: ToolRunContext) -> str:
            raise RuntimeError("secret detail")

        registry = _instrumented(traced, boom)
        span = await self._ended(traced, await registry.execute(make_input("boom")), "_OTHER")
        assert _attributes(span)["toolseam.body_invoked"] is True

    async def test_a_tool_error_code_is_the_error_type(self, traced: Traced) -> None:
        class QuotaError(ToolError):
            code = "QUOTA_EXCEEDED"

        @define_tool(name="quota", description="")
        async def quota(args: TextArgs, exec: ToolRunContext) -> str:
            raise QuotaError("over quota")

        registry = _instrumented(traced, quota)
        await self._ended(traced, await registry.execute(make_input("quota")), "QUOTA_EXCEEDED")

    async def test_unknown_tool(self, traced: Traced) -> None:
        registry = _instrumented(traced)
        span = await self._ended(traced, await registry.execute(make_input("nope")), UNKNOWN_TOOL)
        assert span.name == "execute_tool nope"
        assert "gen_ai.tool.description" not in _attributes(span)
        assert _attributes(span)["toolseam.body_invoked"] is False

    async def test_arguments_that_are_not_json_get_their_span(self, traced: Traced) -> None:
        registry = _instrumented(traced, capture_content=True)
        when = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
        result = await registry.execute(make_input("echo", {"when": when}))
        assert result.is_error
        span = traced.only
        assert span.status.status_code is StatusCode.ERROR
        assert _error_type(span) == "_OTHER"
        assert _attributes(span)["toolseam.body_invoked"] is False
        # The arguments were never materialized: there are none to record.
        assert "gen_ai.tool.call.arguments" not in _attributes(span)
        assert span.status.description == result.error.message

    async def test_denial_is_other(self, traced: Traced) -> None:
        registry = _instrumented(traced)
        registry.add_guard(lambda exec: "not today")
        await self._ended(traced, await registry.execute(make_input("echo")), "_OTHER")

    async def test_host_cancellation_ends_the_span(self, traced: Traced) -> None:
        started = anyio.Event()

        @define_tool(name="wait", description="")
        async def wait(args: TextArgs, exec: ToolRunContext) -> str:
            started.set()
            await exec.signal.wait()
            exec.signal.raise_if_aborted()
            return "unreachable"

        registry = _instrumented(traced, wait)
        async with anyio.create_task_group() as group:
            group.start_soon(registry.execute, make_input("wait"))
            await started.wait()
            group.cancel_scope.cancel()
        span = traced.only
        assert _error_type(span) == TOOL_ABORTED
        assert _attributes(span)["toolseam.body_invoked"] is True


class TestCaptureContent:
    async def test_off_by_default(self, traced: Traced) -> None:
        registry = _instrumented(traced)
        await registry.execute(make_input("echo", {"text": "private"}))
        assert not any("private" in str(value) for value in _attributes(traced.only).values())

    async def test_arguments_and_result_as_json_text(self, traced: Traced) -> None:
        registry = _instrumented(traced, capture_content=True)
        await registry.execute(make_input("echo", {"text": "héllo"}))
        attributes = _attributes(traced.only)
        assert json.loads(attributes["gen_ai.tool.call.arguments"]) == {"text": "héllo"}
        assert json.loads(attributes["gen_ai.tool.call.result"]) == "héllo"

    async def test_a_failure_records_its_message_and_no_result(self, traced: Traced) -> None:
        @define_tool(name="boom", description="")
        async def boom(args: TextArgs, exec: ToolRunContext) -> str:
            raise RuntimeError("the detail")

        registry = _instrumented(traced, boom, capture_content=True)
        await registry.execute(make_input("boom", {"text": "x"}))
        span = traced.only
        assert span.status.description == "the detail"
        assert "gen_ai.tool.call.result" not in _attributes(span)
        assert json.loads(_attributes(span)["gen_ai.tool.call.arguments"]) == {"text": "x"}

    async def test_deep_arguments_never_recurse(self, traced: Traced) -> None:
        registry = _instrumented(traced, capture_content=True)
        deep: object = "leaf"
        for _ in range(100_000):
            deep = [deep]
        await registry.execute(make_input("nope", {"deep": deep}))
        text = _attributes(traced.only)["gen_ai.tool.call.arguments"]
        assert text.startswith('{"deep": [[[')
        assert text.endswith("]]]}")


class TestNesting:
    """A nested call's span is a child of its parent call's span (contract §12)."""

    async def test_async_body_nested_call_and_own_span(self, traced: Traced) -> None:
        registry = ToolRegistry()
        tracer = traced.provider.get_tracer("test")

        @define_tool(name="outer", description="")
        async def outer(args: TextArgs, exec: ToolRunContext) -> str:
            with tracer.start_as_current_span("body work"):
                pass
            by_token = nested_input(exec, call_id="n1", name="echo", arguments={"text": "a"})
            await registry.execute(by_token)
            # No parent given: the span current in the body is the parent.
            await registry.execute(make_input("echo", call_id="n2"))
            return "done"

        registry.register(outer)
        registry.register(echo)
        instrument(registry, tracer_provider=traced.provider)
        await registry.execute(make_input("outer", call_id="c1"))
        spans = traced.spans
        outer_span = traced.named("execute_tool outer")
        assert _children(spans, outer_span) == [
            "body work",
            "execute_tool echo",
            "execute_tool echo",
        ]
        assert _parent_id(outer_span) is None

    async def test_thread_body_sees_its_span_and_nests_through_from_thread(
        self, traced: Traced
    ) -> None:
        registry = ToolRegistry()
        current: list[trace.Span] = []

        @define_tool(name="outer", description="")
        def outer(args: TextArgs, exec: ToolRunContext) -> str:
            current.append(trace.get_current_span())
            by_token = nested_input(exec, call_id="n1", name="echo", arguments={"text": "a"})
            anyio.from_thread.run(registry.execute, by_token)
            anyio.from_thread.run(registry.execute, make_input("echo", call_id="n2"))
            return "done"

        registry.register(outer)
        registry.register(echo)
        instrument(registry, tracer_provider=traced.provider)
        result = await registry.execute(make_input("outer"))
        assert not result.is_error
        outer_span = traced.named("execute_tool outer")
        assert [span.get_span_context().span_id for span in current] == [_span_id(outer_span)]
        assert _children(traced.spans, outer_span) == ["execute_tool echo", "execute_tool echo"]

    async def test_a_nested_call_run_by_another_task_finds_its_parent(self, traced: Traced) -> None:
        """The parent's token names the parent span, whatever context runs the call."""
        registry = ToolRegistry()
        send, receive = anyio.create_memory_object_stream[ToolExecutionInput](1)
        done = anyio.Event()

        async def worker() -> None:
            # Started before any call: its context never holds a call's span.
            async with receive:
                async for call in receive:
                    await registry.execute(call)
                    done.set()

        @define_tool(name="delegate", description="")
        async def delegate(args: TextArgs, exec: ToolRunContext) -> str:
            await send.send(nested_input(exec, call_id="n1", name="echo", arguments=args))
            await done.wait()
            return "delegated"

        registry.register(delegate)
        registry.register(echo)
        instrument(registry, tracer_provider=traced.provider)
        async with anyio.create_task_group() as group:
            group.start_soon(worker)
            await registry.execute(make_input("delegate"))
            send.close()
        outer = traced.named("execute_tool delegate")
        assert _children(traced.spans, outer) == ["execute_tool echo"]

    async def test_nested_sync_tools_two_levels_deep(self, traced: Traced) -> None:
        registry = ToolRegistry()

        @define_tool(name="middle", description="")
        def middle(args: TextArgs, exec: ToolRunContext) -> str:
            call = nested_input(exec, call_id="leaf", name="echo", arguments={"text": "a"})
            anyio.from_thread.run(registry.execute, call)
            return "middle"

        @define_tool(name="top", description="")
        def top(args: TextArgs, exec: ToolRunContext) -> str:
            call = nested_input(exec, call_id="middle", name="middle", arguments={"text": "a"})
            anyio.from_thread.run(registry.execute, call)
            return "top"

        for tool in (top, middle, echo):
            registry.register(tool)
        instrument(registry, tracer_provider=traced.provider)
        await registry.execute(make_input("top", call_id="root"))
        spans = traced.spans
        top_span = traced.named("execute_tool top")
        middle_span = traced.named("execute_tool middle")
        assert _children(spans, top_span) == ["execute_tool middle"]
        assert _children(spans, middle_span) == ["execute_tool echo"]
        assert {_attributes(span)["toolseam.root_call_id"] for span in spans} == {"root"}

    async def test_the_span_is_not_current_outside_the_body(self, traced: Traced) -> None:
        registry = _instrumented(traced)
        seen: list[bool] = []

        async def before(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            seen.append(_current_records())
            return await next()

        registry.on_pre_execute(before)
        registry.on_result(lambda exec, result: seen.append(_current_records()))
        await registry.execute(make_input("echo"))
        assert seen == [False, False]
        assert not _current_records()


class TestBatch:
    async def test_interleaved_calls_each_parent_their_own_nested_calls(
        self, traced: Traced
    ) -> None:
        """Calls of one turn interleave in one task: no call becomes another's parent."""
        registry = ToolRegistry()
        tracer = traced.provider.get_tracer("test")
        arrived = 0
        all_in = anyio.Event()

        @define_tool(name="fan", description="", is_concurrency_safe=lambda args: True)
        async def fan(args: TextArgs, exec: ToolRunContext) -> str:
            nonlocal arrived
            arrived += 1
            if arrived == 3:
                all_in.set()
            await all_in.wait()  # every call is in its body before any goes on
            call = nested_input(exec, call_id=f"{exec.call_id}.n", name="echo", arguments=args)
            await registry.execute(call)
            return args["text"]

        registry.register(fan)
        registry.register(echo)
        instrument(registry, tracer_provider=traced.provider)
        calls = [ToolCall(f"c{i}", "fan", {"text": str(i)}) for i in range(3)]
        with tracer.start_as_current_span("agent turn"):
            outcomes = await run_tool_calls(registry, calls, signal=AbortController().signal)
        assert [outcome.result.is_error for outcome in outcomes] == [False] * 3
        spans = traced.spans
        turn = traced.named("agent turn")
        assert _children(spans, turn) == ["execute_tool fan"] * 3
        by_call = {_call_id(span): span for span in spans if span.name != "agent turn"}
        for index in range(3):
            assert _parent_id(by_call[f"c{index}.n"]) == _span_id(by_call[f"c{index}"])

    async def test_calls_a_stopped_batch_skipped_get_their_spans(self, traced: Traced) -> None:
        controller = AbortController()

        @define_tool(name="stop", description="Press stop.")
        async def stop(args: TextArgs, exec: ToolRunContext) -> str:
            controller.abort()
            return "stopped"

        registry = _instrumented(traced, stop, echo)
        calls = [
            ToolCall("c0", "stop", {"text": "x"}),
            ToolCall("c1", "echo", {"text": "y"}),
            ToolCall("c2", "echo", {"text": "z"}),
        ]
        outcomes = await run_tool_calls(registry, calls, signal=controller.signal)
        assert [outcome.dispatched for outcome in outcomes] == [True, False, False]
        by_call = {_call_id(span): span for span in traced.spans}
        assert set(by_call) == {"c0", "c1", "c2"}
        assert _error_type(by_call["c0"]) == TOOL_ABORTED  # stopped its own success
        for skipped in ("c1", "c2"):
            assert _error_type(by_call[skipped]) == TOOL_ABORTED_BEFORE_DISPATCH
            assert _attributes(by_call[skipped])["toolseam.body_invoked"] is False


class TestRemove:
    async def test_no_spans_after_remove(self, traced: Traced) -> None:
        registry = ToolRegistry()
        registry.register(echo)
        registration = instrument(registry, tracer_provider=traced.provider)
        await registry.execute(make_input("echo"))
        registration.remove()
        registration.remove()  # idempotent
        await registry.execute(make_input("echo"))
        assert len(traced.spans) == 1
        assert registry._hooks == ()

    async def test_a_call_in_flight_at_remove_still_ends_its_span(self, traced: Traced) -> None:
        started, release = anyio.Event(), anyio.Event()

        @define_tool(name="wait", description="")
        async def wait(args: TextArgs, exec: ToolRunContext) -> str:
            started.set()
            await release.wait()
            return "late"

        registry = ToolRegistry()
        registry.register(wait)
        registry.register(echo)
        registration = instrument(registry, tracer_provider=traced.provider)
        async with anyio.create_task_group() as group:
            group.start_soon(registry.execute, make_input("wait"))
            await started.wait()
            registration.remove()
            await registry.execute(make_input("echo"))  # after remove: no span
            assert registry._hooks != ()  # still there for the call in flight
            release.set()
        assert [span.name for span in traced.spans] == ["execute_tool wait"]
        assert registry._hooks == ()

    async def test_context_manager_scopes_instrumentation(self, traced: Traced) -> None:
        registry = ToolRegistry()
        registry.register(echo)
        with instrument(registry, tracer_provider=traced.provider):
            await registry.execute(make_input("echo"))
        await registry.execute(make_input("echo"))
        assert len(traced.spans) == 1


class _NoToolSpans(Instrumentation):
    """pydantic-ai's instrumentation without its tool spans (the recipe of docs/tracing.md)."""

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        return await handler(args)


class TestUnderPydanticAI:
    """A host that opens its own ``execute_tool`` span: what the trace shows (asyncio only)."""

    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"

    @staticmethod
    def _registry(traced: Traced) -> ToolRegistry:
        class OutOfStock(ToolError):
            code = "OUT_OF_STOCK"

        @define_tool(name="order", description="Order an item.")
        async def order(args: TextArgs, exec: ToolRunContext) -> str:
            raise OutOfStock("none left")

        return _instrumented(traced, echo, order)

    async def test_both_instrumented_nest_two_spans_that_disagree(self, traced: Traced) -> None:
        registry = self._registry(traced)
        settings = InstrumentationSettings(tracer_provider=traced.provider)
        agent = Agent(
            TestModel(),
            toolsets=[RegistryToolset(registry)],
            capabilities=[Instrumentation(settings)],
        )
        await agent.run("go")
        spans: dict[tuple[str, str], ReadableSpan] = {}
        for span in traced.spans:
            if span.name.startswith("execute_tool "):
                spans[_scope(span), span.name.removeprefix("execute_tool ")] = span
        assert sorted(spans) == [
            ("pydantic-ai", "echo"),
            ("pydantic-ai", "order"),
            ("toolseam", "echo"),
            ("toolseam", "order"),
        ]
        for tool in ("echo", "order"):
            host, ours = spans["pydantic-ai", tool], spans["toolseam", tool]
            assert _parent_id(ours) == _span_id(host)
            assert _call_id(ours) == _call_id(host)
        # The toolset answers the model with the failure's text: the host's span is no error.
        assert spans["pydantic-ai", "order"].status.status_code is StatusCode.UNSET
        assert spans["toolseam", "order"].status.status_code is StatusCode.ERROR
        assert _error_type(spans["toolseam", "order"]) == "OUT_OF_STOCK"

    async def test_the_recipe_leaves_one_tool_span_per_call(self, traced: Traced) -> None:
        registry = self._registry(traced)
        settings = InstrumentationSettings(tracer_provider=traced.provider)
        agent = Agent(
            TestModel(),
            toolsets=[RegistryToolset(registry)],
            capabilities=[_NoToolSpans(settings)],
        )
        await agent.run("go")
        tool_spans = [span for span in traced.spans if span.name.startswith("execute_tool ")]
        assert sorted(span.name for span in tool_spans) == [
            "execute_tool echo",
            "execute_tool order",
        ]
        [run] = [span for span in traced.spans if span.name.startswith("invoke_agent")]
        for span in tool_spans:
            assert _scope(span) == "toolseam"
            assert _parent_id(span) == _span_id(run)


class _BrokenTracerProvider(trace.TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _BrokenTracer()


class _BrokenTracer(trace.NoOpTracer):
    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        raise RuntimeError("exporter on fire")


class TestRobustness:
    async def test_a_raising_tracer_never_costs_the_call_its_result(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        registry = ToolRegistry()
        registry.register(echo)
        instrument(registry, tracer_provider=_BrokenTracerProvider())
        with caplog.at_level(logging.ERROR, logger="toolseam"):
            result = await registry.execute(make_input("echo"))
        assert not result.is_error
        assert result.value == "hi"
        assert any("exporter on fire" in (record.exc_text or "") for record in caplog.records)

    def test_instrument_checks_its_arguments(self) -> None:
        with pytest.raises(TypeError, match="expects a ToolRegistry"):
            instrument(object())  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="capture_content"):
            instrument(ToolRegistry(), capture_content=1)  # type: ignore[arg-type]

    @pytest.mark.parametrize("backend", ["asyncio", "trio"])
    def test_the_global_provider_set_later_is_used_from_then_on(self, backend: str) -> None:
        # In a process of its own: the global provider can be set once per process.
        probe = f"""
import anyio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from toolseam import AbortController, ToolExecutionInput, ToolRegistry, ToolRunContext, define_tool
from toolseam.tracing import instrument
from typing_extensions import TypedDict

class Args(TypedDict):
    text: str

@define_tool(name="echo", description="")
async def echo(args: Args, exec: ToolRunContext) -> str:
    return args["text"]

async def main() -> None:
    registry = ToolRegistry()
    registry.register(echo)
    instrument(registry)  # the global provider: unset, so far
    def call(i: int) -> ToolExecutionInput:
        return ToolExecutionInput(
            call_id=f"c{{i}}", name="echo", arguments={{"text": "x"}},
            signal=AbortController().signal,
        )
    await registry.execute(call(1))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    await registry.execute(call(2))
    spans = exporter.get_finished_spans()
    print([span.attributes["gen_ai.tool.call.id"] for span in spans])

anyio.run(main, backend={backend!r})
"""
        completed = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
        )
        assert completed.returncode == 0, completed.stderr
        assert completed.stdout.splitlines() == ["['c2']"]

    def test_import_toolseam_never_imports_opentelemetry(self) -> None:
        probe = (
            "import sys, toolseam, toolseam.policies; "
            "assert not [m for m in sys.modules if m.startswith('opentelemetry')], "
            "sorted(sys.modules)"
        )
        subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)


def test_an_uninstrumented_registry_has_no_hooks() -> None:
    assert ToolRegistry()._hooks == ()


async def test_inputs_are_plain_calls_too(traced: Traced) -> None:
    # ToolExecutionInput built by hand, no support helpers: the span names the call.
    registry = _instrumented(traced)
    call = ToolExecutionInput(
        call_id="x", name="echo", arguments={"text": "t"}, signal=AbortController().signal
    )
    await registry.execute(call)
    assert traced.only.name == "execute_tool echo"


class TestEvents:
    """Progress and log events are span events of their call's span (contract §12)."""

    @staticmethod
    def _registry() -> ToolRegistry:
        registry = ToolRegistry()

        @define_tool(name="reports", description="")
        async def reports(args: TextArgs, exec: ToolRunContext) -> str:
            exec.progress(1, 2, "half way")
            exec.log("warning", {"disk": "low"}, logger="fs")
            exec.progress(2)
            return "done"

        @define_tool(name="sync_reports", description="")
        def sync_reports(args: TextArgs, exec: ToolRunContext) -> str:
            exec.progress(1, 1)
            return "done"

        registry.register(reports)
        registry.register(sync_reports)
        return registry

    async def test_without_content(self, traced: Traced) -> None:
        registry = self._registry()
        instrument(registry, tracer_provider=traced.provider)
        await registry.execute(make_input("reports"))
        events = [(event.name, dict(event.attributes or {})) for event in traced.only.events]
        assert events == [
            ("toolseam.progress", {"toolseam.progress": 1, "toolseam.progress.total": 2}),
            ("toolseam.log", {"toolseam.log.level": "warning", "toolseam.log.logger": "fs"}),
            ("toolseam.progress", {"toolseam.progress": 2}),
        ]

    async def test_with_content(self, traced: Traced) -> None:
        registry = self._registry()
        instrument(registry, tracer_provider=traced.provider, capture_content=True)
        await registry.execute(make_input("reports"))
        progress, log, _ = traced.only.events
        assert dict(progress.attributes or {})["toolseam.progress.message"] == "half way"
        assert dict(log.attributes or {})["toolseam.log.data"] == '{"disk": "low"}'

    async def test_from_a_worker_thread(self, traced: Traced) -> None:
        registry = self._registry()
        instrument(registry, tracer_provider=traced.provider)
        await registry.execute(make_input("sync_reports"))
        assert [event.name for event in traced.only.events] == ["toolseam.progress"]

    async def test_removing_the_instrumentation_stops_listening(self, traced: Traced) -> None:
        registry = self._registry()
        instrument(registry, tracer_provider=traced.provider).remove()
        assert registry._events.items == ()
        assert registry._hooks == ()
