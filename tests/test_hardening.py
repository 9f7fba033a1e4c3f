"""Adversarial edges: nothing a tool, a stage, an input or a listener does may cost a call
its one result (contract §2, §5, §8). Each class guards one class of hostile behaviour that
docs/reliability.md lists; every test runs on asyncio and trio unless it says otherwise.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import threading
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import pydantic
import pytest
from typing_extensions import TypedDict

from support import Published, TextArgs, code_of, make_input, registry_with_echo
from toolseam import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    AbortController,
    AbortError,
    Accept,
    Allow,
    ApprovalAnswer,
    ApprovalRequest,
    Ask,
    Next,
    PostDecision,
    PreDecision,
    ReplaceValue,
    ToolCall,
    ToolDispatchExecution,
    ToolError,
    ToolExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    define_tool,
    nested_input,
    run_tool_calls,
)
from toolseam._timeouts import timeout_message as _timeout_message
from toolseam.policies import timeout_policy

DEPTH = 100_000


def _deep(depth: int, leaf: object = "leaf") -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth - 1):
        child: dict[str, Any] = {}
        node["a"] = child
        node = child
    node["a"] = leaf
    return root


def _depth_of(value: object) -> int:
    depth = 0
    while isinstance(value, dict):
        value = value["a"]  # pyright: ignore[reportUnknownVariableType]
        depth += 1
    return depth


def _post_recorder(registry: ToolRegistry, trace: list[str]) -> None:
    async def post(
        exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
    ) -> PostDecision:
        trace.append(f"post:{code_of(result)}")
        await next()
        return Accept(additional_contexts=[{"post": "kept"}])

    registry.on_post_execute(post)


class TestCancelledBeforeDispatchGoesThroughPostExecute:
    """Contract §5.4: cancelled while pre-execute or approval awaits → post-execute runs."""

    async def test_abort_while_pre_execute_awaits(self) -> None:
        registry, published, trace = registry_with_echo()
        caller = AbortController()

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            trace.append("pre")
            caller.abort("stop")
            await anyio.lowlevel.checkpoint()
            return await next()

        registry.on_pre_execute(pre)
        _post_recorder(registry, trace)
        result = await registry.execute(make_input(signal=caller.signal))
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert trace == ["pre", "post:ABORTED_BEFORE_DISPATCH"]
        assert list(result.additional_contexts) == [{"post": "kept"}]
        assert published.only is result

    async def test_abort_while_approval_awaits(self) -> None:
        registry = ToolRegistry(approval=_CancellingApproval())
        trace: list[str] = []

        @define_tool(name="echo", description="")
        async def echo(args: TextArgs, exec: ToolRunContext) -> str:
            trace.append("body")
            return args["text"]

        registry.register(echo)

        async def ask(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            return Ask("confirm")

        registry.on_pre_execute(ask)
        _post_recorder(registry, trace)
        caller = AbortController()
        async with anyio.create_task_group() as tg:
            results: list[ToolResult] = []

            async def run() -> None:
                results.append(await registry.execute(make_input(signal=caller.signal)))

            tg.start_soon(run)
            await anyio.wait_all_tasks_blocked()
            caller.abort("user pressed stop")
        [result] = results
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert trace == ["post:ABORTED_BEFORE_DISPATCH"]

    async def test_abort_seen_after_the_guards(self) -> None:
        registry, _, trace = registry_with_echo()
        caller = AbortController()
        registry.add_guard(_aborting_guard(caller))
        _post_recorder(registry, trace)
        result = await registry.execute(make_input(signal=caller.signal))
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert trace == ["post:ABORTED_BEFORE_DISPATCH"]

    async def test_a_pre_aborted_entry_still_skips_every_stage(self) -> None:
        registry, published, trace = registry_with_echo()
        _post_recorder(registry, trace)
        caller = AbortController()
        caller.abort()
        result = await registry.execute(make_input(signal=caller.signal))
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert trace == []
        assert published.only is result

    async def test_post_execute_cannot_turn_the_cancellation_into_a_success(self) -> None:
        registry, _, trace = registry_with_echo()
        caller = AbortController()
        registry.add_guard(_aborting_guard(caller))

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            return ReplaceValue("made up")

        registry.on_post_execute(post)
        result = await registry.execute(make_input(signal=caller.signal))
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert trace == []


def _aborting_guard(caller: AbortController) -> Callable[[ToolExecution], None]:
    def guard(exec: ToolExecution) -> None:
        caller.abort()

    return guard


class _CancellingApproval:
    """Waits for the caller's signal, then answers "cancelled", as a human prompt would."""

    async def request(self, request: ApprovalRequest) -> ApprovalAnswer:
        await request.signal.wait()
        return "cancelled"


class AnyArgs(TypedDict):
    tree: dict[str, Any]


class TestDepthIsBoundedOnlyByMemory:
    """Contract §5.2: 100k-deep arguments, outputs and replacement values."""

    async def test_deep_arguments_reach_a_dict_any_parameter(self) -> None:
        registry = ToolRegistry()
        seen: list[int] = []

        @define_tool(name="deep", description="")
        async def deep(args: dict[str, Any], exec: ToolRunContext) -> str:
            seen.append(_depth_of(args))
            args["mutable"] = True  # the body gets plain, fresh containers
            return "ok"

        registry.register(deep)
        result = await registry.execute(make_input("deep", _deep(DEPTH)))
        assert isinstance(result, ToolSuccess), result
        assert seen == [DEPTH]

    async def test_deep_arguments_reach_a_nested_any_field(self) -> None:
        registry = ToolRegistry()
        seen: list[int] = []

        @define_tool(name="deep", description="")
        async def deep(args: AnyArgs, exec: ToolRunContext) -> str:
            seen.append(_depth_of(args["tree"]))
            return "ok"

        registry.register(deep)
        result = await registry.execute(make_input("deep", {"tree": _deep(DEPTH)}))
        assert isinstance(result, ToolSuccess), result
        assert seen == [DEPTH]

    async def test_deep_arguments_of_a_recursive_model_are_a_clean_failure(self) -> None:
        registry = ToolRegistry()
        registry.register(_node_tool)
        tree = _deep(DEPTH, None)
        result = await registry.execute(make_input("node", tree))
        assert isinstance(result, ToolFailure)
        assert result.code == "INVALID_ARGS"
        assert "maximum recursion depth" not in result.error.message
        assert result.error.message == (
            'invalid arguments for tool "node": a.a.a.a.a.a.a.a...(239 more)...a.a.a.a.a.a.a.a: '
            "Recursion error - maximum validation depth exceeded"
        )

    @pytest.mark.parametrize("annotated", [True, False])
    async def test_deep_output_is_a_success_with_its_json_as_content(self, annotated: bool) -> None:
        registry = ToolRegistry()
        if annotated:

            @define_tool(name="deep", description="")
            async def deep(args: TextArgs, exec: ToolRunContext) -> dict[str, Any]:
                return _deep(DEPTH)

        else:

            @define_tool(name="deep", description="")
            async def deep(args: TextArgs, exec: ToolRunContext):  # type: ignore[no-untyped-def]
                return _deep(DEPTH)

        registry.register(deep)
        result = await registry.execute(make_input("deep"))
        assert isinstance(result, ToolSuccess), result
        assert _depth_of(result.value) == DEPTH
        [block] = result.content
        text = block["text"]
        assert isinstance(text, str)
        assert text == '{"a": ' * DEPTH + '"leaf"' + "}" * DEPTH

    async def test_deep_output_with_a_non_json_leaf_is_a_clean_invalid_output(self) -> None:
        registry = ToolRegistry()

        @define_tool(name="deep", description="")
        async def deep(args: TextArgs, exec: ToolRunContext) -> dict[str, Any]:
            return _deep(DEPTH, datetime.now(UTC))

        registry.register(deep)
        result = await registry.execute(make_input("deep"))
        assert isinstance(result, ToolFailure)
        assert result.code == "INVALID_TOOL_OUTPUT"
        assert "recursion" not in result.error.message

    async def test_deep_replacement_value_is_a_success(self) -> None:
        registry, _, _ = registry_with_echo()

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            return ReplaceValue(_deep(DEPTH))

        registry.on_post_execute(post)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolSuccess), result
        assert _depth_of(result.value) == DEPTH

    async def test_deep_deferred_context_is_kept(self) -> None:
        registry = ToolRegistry()

        @define_tool(name="ctx", description="")
        async def ctx(args: TextArgs, exec: ToolRunContext) -> str:
            exec.defer_context(_deep(DEPTH))
            return "ok"

        registry.register(ctx)
        result = await registry.execute(make_input("ctx"))
        assert isinstance(result, ToolSuccess)
        [context] = result.additional_contexts
        assert _depth_of(context) == DEPTH


class Node(pydantic.BaseModel):
    a: Node | None = None


@define_tool(name="node", description="")
async def _node_tool(args: Node, exec: ToolRunContext) -> str:
    return "ok"


class TestMaterializationFailuresSayWhereAndWhat:
    """Contract §5.2: the message names the JSON path and what is wrong there."""

    async def _message(self, arguments: object) -> str:
        registry, published, trace = registry_with_echo()
        result = await registry.execute(make_input(arguments=arguments))
        assert isinstance(result, ToolFailure)
        assert published.only is result
        assert trace == []
        return result.error.message

    async def test_a_datetime(self) -> None:
        when = datetime(2026, 12, 1, tzinfo=UTC)
        assert await self._message({"when": when}) == (
            "tool execution arguments must be losslessly JSON-serializable "
            "($.when: datetime is not JSON)"
        )

    async def test_a_pydantic_model_instance(self) -> None:
        assert await self._message({"node": Node()}) == (
            "tool execution arguments must be losslessly JSON-serializable "
            "($.node: Node is not JSON (a pydantic model instance: "
            'pass model.model_dump(mode="json")))'
        )

    async def test_a_dataclass_instance(self) -> None:
        assert await self._message(_Point(1, 2)) == (
            "tool execution arguments must be losslessly JSON-serializable "
            "($: _Point is not JSON (a dataclass instance: pass dataclasses.asdict(instance)))"
        )


@dataclass
class _Point:
    x: int
    y: int


class HostileText(str):
    """A ``str`` subclass whose every hook raises."""

    __slots__ = ()

    def __format__(self, spec: str) -> str:
        raise RuntimeError("__format__ refuses")

    def __hash__(self) -> int:
        raise RuntimeError("__hash__ refuses")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("__eq__ refuses")

    def __bool__(self) -> bool:
        raise RuntimeError("__bool__ refuses")


class FormatHostile(Exception):
    def __str__(self) -> str:
        return HostileText("hostile message")


class ClassHostile(Exception):
    @property  # type: ignore[misc]
    def __class__(self) -> type:  # type: ignore[override]
        raise RuntimeError("__class__ refuses")


class ToolErrorClassHostile(ToolError):
    code = "BOOM"

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # type: ignore[override]
        raise RuntimeError("__class__ refuses")


HOSTILE: dict[str, Callable[[], BaseException]] = {
    "str returns a hostile str subclass": FormatHostile,
    "__class__ raises": ClassHostile,
    "ToolError whose __class__ raises": lambda: ToolErrorClassHostile("boom", code="BOOM"),
}

STAGES = ("pre", "guard", "wrapper", "body", "post", "finalizer")


def _registry_raising_at(stage: str, error: Callable[[], BaseException]) -> ToolRegistry:
    def finalize(exec: ToolExecution, result: ToolResult) -> None:
        if stage == "finalizer":
            raise error()

    @define_tool(name="t", description="", finalize_content=finalize)
    async def tool(args: TextArgs, exec: ToolRunContext) -> str:
        if stage == "body":
            raise error()
        return "ok"

    registry = ToolRegistry()
    registry.register(tool)

    async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        if stage == "pre":
            raise error()
        return await next()

    def guard(exec: ToolExecution) -> str | None:
        if stage == "guard":
            raise error()
        return None

    async def wrapper(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
        if stage == "wrapper":
            raise error()
        return await next()

    async def post(
        exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
    ) -> PostDecision:
        if stage == "post":
            raise error()
        return await next()

    registry.on_pre_execute(pre)
    registry.add_guard(guard)
    registry.on_execute(wrapper)
    registry.on_post_execute(post)
    return registry


class TestHostileExceptions:
    """Contract §5: a hostile exception from any stage still ends in one published result."""

    @pytest.mark.parametrize("stage", STAGES)
    @pytest.mark.parametrize("kind", list(HOSTILE))
    async def test_one_published_failure_with_a_plain_message(self, stage: str, kind: str) -> None:
        registry = _registry_raising_at(stage, HOSTILE[kind])
        published = Published()
        registry.on_result(published)
        result = await registry.execute(make_input("t"))
        assert published.only is result
        assert isinstance(result, ToolFailure)
        message = result.error.message
        assert type(message) is str
        assert message
        [block] = result.content
        assert block["text"] == f"Error: {message}"
        if kind == "str returns a hostile str subclass":
            assert message == "hostile message"
        if kind == "ToolError whose __class__ raises":
            assert result.code == "BOOM"


class _HostileName(str):
    __slots__ = ()

    def __hash__(self) -> int:
        raise RuntimeError("__hash__ refuses")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("__eq__ refuses")


class _HostileTruth(str):
    __slots__ = ()

    def __bool__(self) -> bool:
        raise RuntimeError("__bool__ refuses")


class TestHostileInputFields:
    """Contract §5.1, §8: hostile or untyped input fields still give exactly one result."""

    async def test_a_str_subclass_name_whose_hash_raises_names_its_tool(self) -> None:
        registry, published, trace = registry_with_echo()
        result = await registry.execute(make_input(name=_HostileName("echo")))
        assert isinstance(result, ToolSuccess)
        assert published.only is result
        assert trace == ["body"]

    async def test_an_unknown_hostile_name_is_an_unknown_tool(self) -> None:
        registry, published, _ = registry_with_echo()
        observed: list[type] = []
        registry.on_result(lambda exec, result: observed.append(type(exec.name)))
        result = await registry.execute(make_input(name=_HostileName("nope")))
        assert isinstance(result, ToolFailure)
        assert result.code == "UNKNOWN_TOOL"
        assert result.error.message == 'unknown tool "nope"'
        assert observed == [str]  # the views see an exact str
        assert published.only is result

    async def test_a_root_call_id_whose_truthiness_raises(self) -> None:
        registry, published, _ = registry_with_echo()
        roots: list[str] = []
        registry.on_result(lambda exec, result: roots.append(exec.root_call_id))
        result = await registry.execute(make_input(root_call_id=_HostileTruth("root")))
        assert isinstance(result, ToolSuccess)
        assert roots == ["root"]
        assert published.only is result

    @pytest.mark.parametrize("name", [42, None, ["echo"], b"echo"])
    async def test_an_untyped_non_str_name_is_one_failure(self, name: object) -> None:
        registry, published, trace = registry_with_echo()
        result = await registry.execute(make_input(name=name))  # type: ignore[arg-type]
        assert isinstance(result, ToolFailure)
        assert result.error.message == (
            f"ToolExecutionInput.name must be a str, got {type(name).__name__}"
        )
        assert published.only is result
        assert trace == []

    async def test_a_hostile_call_never_tears_down_its_batch_siblings(self) -> None:
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)
        started = 0
        all_started = anyio.Event()

        @define_tool(name="par", description="", is_concurrency_safe=lambda args: True)
        async def par(args: TextArgs, exec: ToolRunContext) -> str:
            nonlocal started
            started += 1
            if started == 2:
                all_started.set()
            await all_started.wait()
            return args["text"]

        registry.register(par)
        calls = [
            ToolCall("a", "par", {"text": "a"}),
            ToolCall("b", _HostileName("par"), {"text": "h"}),
            ToolCall("c", "par", {"text": "c"}),
            ToolCall("d", 7, {"text": "d"}),  # type: ignore[arg-type]
        ]
        outcomes = await run_tool_calls(registry, calls, signal=AbortController().signal)
        assert [o.call.call_id for o in outcomes] == ["a", "b", "c", "d"]
        assert [o.result.is_error for o in outcomes] == [False, False, False, True]
        assert len(published.results) == 4

    async def test_execution_mode_never_raises(self) -> None:
        registry, _, _ = registry_with_echo()
        assert registry.execution_mode(make_input(name=_HostileName("echo"))) == "exclusive"
        assert registry.execution_mode(make_input(name=["x"])) == "exclusive"  # type: ignore[arg-type]


class TestLateNext:
    """Contract §5.6: a ``next`` kept and called after its wrapper returned never starts
    the body."""

    async def test_a_kept_next_raises_and_the_body_never_runs(self) -> None:
        registry, published, trace = registry_with_echo()
        kept: list[Next[ToolResult]] = []

        async def wrapper(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            kept.append(next)
            return ToolSuccess(value="short-circuit")

        registry.on_execute(wrapper)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolSuccess)
        [late] = kept
        with pytest.raises(
            RuntimeError,
            match=r"^tool \"echo\" \(call 'call_1'\): an "
            r"around-dispatch wrapper called next\(\) after the around-dispatch "
            r"wrappers returned; the call has ended, so the rest of the chain, "
            r"and the tool body, will not run$",
        ):
            late()
        assert trace == []
        assert published.only is result

    @pytest.mark.parametrize("wrappers", [1, 2])
    async def test_next_called_in_time_but_awaited_late_never_runs_the_body(
        self, wrappers: int
    ) -> None:
        registry, published, trace = registry_with_echo()
        kept: list[Awaitable[ToolResult]] = []

        async def keeper(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            kept.append(next())  # called while the wrapper runs, not awaited
            return ToolSuccess(value="short-circuit")

        async def passing(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            return await next()

        for wrapper in [passing] * (wrappers - 1) + [keeper]:
            registry.on_execute(wrapper)
        result = await registry.execute(make_input())
        assert isinstance(result, ToolSuccess)
        [late] = kept
        with pytest.raises(
            RuntimeError,
            match=r"^tool \"echo\" \(call 'call_1'\): an around-dispatch wrapper awaited what "
            r"next\(\) returned after the wrappers returned; the call has ended, so the tool "
            r"body will not run$",
        ):
            await late
        assert trace == []
        assert published.only is result

    async def test_a_kept_pre_execute_next_raises_too(self) -> None:
        registry, _, trace = registry_with_echo()
        kept: list[Next[PreDecision]] = []

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            kept.append(next)
            return await next() if len(kept) > 1 else Allow()

        registry.on_pre_execute(pre)
        await registry.execute(make_input())
        with pytest.raises(RuntimeError, match="pre-execute listener called next"):
            kept[0]()
        assert trace == ["body"]


class TestInterruptsFromFinalizersAndObservers:
    """Contract §5.8-9: the one result is published to every observer, then the
    ``KeyboardInterrupt``/``SystemExit`` propagates."""

    @pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
    async def test_from_a_finalizer(self, interrupt: type[BaseException]) -> None:
        def finalize(exec: ToolExecution, result: ToolResult) -> None:
            raise interrupt

        @define_tool(name="t", description="", finalize_content=finalize)
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            return "ok"

        registry = ToolRegistry()
        registry.register(tool)
        first, second = Published(), Published()
        registry.on_result(first)
        registry.on_result(second)
        with pytest.raises(interrupt):
            await registry.execute(make_input("t"))
        assert len(first.results) == len(second.results) == 1
        assert first.only is second.only
        assert first.only.is_error

    @pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
    async def test_from_an_observer(self, interrupt: type[BaseException]) -> None:
        registry, first, _ = registry_with_echo()
        seen: list[ToolResult] = []

        def raising(exec: ToolExecution, result: ToolResult) -> None:
            seen.append(result)
            raise interrupt

        registry.on_result(raising)
        later = Published()
        registry.on_result(later)
        with pytest.raises(interrupt):
            await registry.execute(make_input())
        assert seen == [first.only] == [later.only]
        assert isinstance(later.only, ToolSuccess)

    def test_from_an_abort_listener_every_other_listener_runs_first(self) -> None:
        controller = AbortController()
        seen: list[str] = []

        def interrupting(signal: object) -> None:
            seen.append("interrupting")
            raise KeyboardInterrupt

        controller.signal.add_listener(interrupting)
        controller.signal.add_listener(lambda s: seen.append(f"other aborted={s.aborted}"))
        with pytest.raises(KeyboardInterrupt):
            controller.abort()
        assert seen == ["interrupting", "other aborted=True"]
        assert controller.signal.aborted

    async def test_host_cancellation_still_waits_for_the_thread_body(self) -> None:
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)
        returned = threading.Event()
        entered = anyio.Event()

        @define_tool(name="t", description="")
        def tool(args: TextArgs, exec: ToolRunContext) -> str:
            def interrupting(signal: object) -> None:
                raise KeyboardInterrupt

            exec.signal.add_listener(interrupting)
            anyio.from_thread.run_sync(entered.set)
            exec.signal.wait_sync()
            returned.set()
            return "done"

        registry.register(tool)
        cancelled = False
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(registry.execute, make_input("t"))
                await entered.wait()
                scope.cancel()
        cancelled = scope.cancelled_caught
        assert cancelled  # the host's cancellation propagated, not the interrupt
        assert returned.is_set()  # and only once the thread had returned
        assert code_of(published.only) == TOOL_ABORTED


class _Interrupt(BaseException):
    """A BaseException reason of the caller's own."""


BASE_REASONS: dict[str, Callable[[], BaseException]] = {
    "KeyboardInterrupt": KeyboardInterrupt,
    "SystemExit": SystemExit,
    "custom BaseException": _Interrupt,
    "asyncio.CancelledError": asyncio.CancelledError,
}


class TestBaseExceptionReasons:
    """Contract §2, §5: a caller's BaseException reason never escapes execute()."""

    @pytest.mark.parametrize("how", ["raise_if_aborted", "raise reason", "thread"])
    @pytest.mark.parametrize("reason", list(BASE_REASONS))
    async def test_is_an_abort_like_any_other(self, reason: str, how: str) -> None:
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)
        entered = anyio.Event()

        if how == "thread":

            @define_tool(name="t", description="")
            def tool(args: TextArgs, exec: ToolRunContext) -> str:
                anyio.from_thread.run_sync(entered.set)
                exec.signal.wait_sync()
                exec.signal.raise_if_aborted()
                return "not reached"

        else:

            @define_tool(name="t", description="")
            async def tool(args: TextArgs, exec: ToolRunContext) -> str:
                entered.set()
                await exec.signal.wait()
                if how == "raise reason":
                    raise exec.signal.reason  # type: ignore[misc]
                exec.signal.raise_if_aborted()
                return "not reached"

        registry.register(tool)
        caller = AbortController()
        results: list[ToolResult] = []

        async def run() -> None:
            results.append(await registry.execute(make_input("t", signal=caller.signal)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await entered.wait()
            caller.abort(BASE_REASONS[reason]())
        assert [code_of(r) for r in results] == [TOOL_ABORTED]
        assert published.only is results[0]

    @pytest.mark.parametrize("reason", list(BASE_REASONS))
    async def test_raised_by_a_stage_is_cancellation(self, reason: str) -> None:
        """Contract §5: a stage raising the caller's reason is cancelled, like a body."""
        registry, published, trace = registry_with_echo()
        caller = AbortController()

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            caller.abort(BASE_REASONS[reason]())
            raise exec.signal.reason  # type: ignore[misc]

        registry.on_pre_execute(pre)
        result = await registry.execute(make_input(signal=caller.signal))
        assert code_of(result) == TOOL_ABORTED_BEFORE_DISPATCH
        assert published.only is result
        assert trace == []

    @pytest.mark.parametrize("anyio_backend", ["asyncio"])
    async def test_the_asyncio_task_is_not_cancelled(self) -> None:
        registry = ToolRegistry()

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            await exec.signal.wait()
            raise exec.signal.reason  # type: ignore[misc]

        registry.register(tool)
        caller = AbortController()
        task = asyncio.ensure_future(registry.execute(make_input("t", signal=caller.signal)))
        await anyio.wait_all_tasks_blocked()
        caller.abort(asyncio.CancelledError())
        result = await task
        assert not task.cancelled()
        assert code_of(result) == TOOL_ABORTED

    def test_raise_if_aborted_wraps_a_base_exception_reason(self) -> None:
        controller = AbortController()
        reason = KeyboardInterrupt()
        controller.abort(reason)
        with pytest.raises(AbortError, match=r"^operation aborted: KeyboardInterrupt$") as info:
            controller.signal.raise_if_aborted()
        assert info.value.reason is reason


class _Marker:
    """Held by a body's frame only: alive as long as that frame is."""


class TestSharedReasonsDoNotHoldBodies:
    """Contract §2: one reason raised from many bodies keeps none of their frames alive."""

    @pytest.mark.parametrize("how", ["raise_if_aborted", "raise reason"])
    async def test_a_thousand_bodies(self, how: str) -> None:
        registry = ToolRegistry()
        markers: list[weakref.ref[_Marker]] = []

        @define_tool(name="t", description="")
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            marker = _Marker()
            markers.append(weakref.ref(marker))
            await exec.signal.wait()
            if how == "raise reason":
                raise exec.signal.reason  # type: ignore[misc]
            exec.signal.raise_if_aborted()
            return "not reached"

        registry.register(tool)
        reason = RuntimeError("user pressed stop")  # one reason, shared by every call
        for index in range(1_000):
            controller = AbortController()
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    registry.execute, make_input("t", signal=controller.signal, call_id=f"c{index}")
                )
                await anyio.wait_all_tasks_blocked()
                controller.abort(reason)
        gc.collect()
        assert [m for m in markers if m() is not None] == []
        depth = 0
        tb = reason.__traceback__
        while tb is not None:
            depth += 1
            tb = tb.tb_next
        assert depth < 50


class TestFinalizersNeverDeadlockTheSignals:
    """Contract §2: re-entering the signal module from a finalizer never deadlocks."""

    def test_a_finalizer_that_removes_and_adds_listeners_while_the_lock_is_held(
        self,
    ) -> None:
        _run_bounded(_REENTRANT_FINALIZER)

    def test_garbage_collected_waiting_tasks(self) -> None:
        _run_bounded(_COLLECTED_WAITERS)


_REENTRANT_FINALIZER = """
from toolseam import AbortController
signal = AbortController().signal
other = AbortController()
later = signal.add_listener(print)
ran = []

class Reenter:
    def __del__(self):
        later.remove()
        signal.add_listener(lambda s: None).remove()
        other.signal.add_listener(lambda s: ran.append("listener"))
        other.abort()

holder = Reenter()
# The lambda's default is the only reference to `holder`: removing the listener (inside the
# module lock) drops it, and its finalizer re-enters the signal module in this thread.
first = signal.add_listener(lambda s, h=holder: None)
del holder
first.remove()
assert ran == ["listener"], ran
print("ok")
"""

_COLLECTED_WAITERS = """
import asyncio, gc
from toolseam import AbortController, fuse

async def main():
    gc.set_threshold(1, 1, 1)  # collect at nearly every allocation
    long_lived = AbortController()
    for round in range(200):
        for _ in range(20):
            with fuse(long_lived.signal, AbortController().signal) as fused:
                # Fire and forget: asyncio keeps only weak references to tasks.
                asyncio.get_running_loop().create_task(fused.signal.wait())
        await asyncio.sleep(0)
        gc.collect()
    assert long_lived.signal._listener_count() == 0
    print("ok")

asyncio.run(main())
"""


def _run_bounded(source: str) -> None:
    import subprocess
    import sys

    completed = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines()[-1] == "ok"


@pytest.fixture
def thread_limit() -> Callable[[int], None]:
    """Set anyio's default thread limit for this test's event loop."""

    def set_limit(tokens: int) -> None:
        anyio.to_thread.current_default_thread_limiter().total_tokens = tokens

    return set_limit


class Depth(TypedDict):
    depth: int


def _composite_registry(
    running: list[int], *, wait_for_abort: bool, all_running: anyio.Event, target: int
) -> ToolRegistry:
    registry = ToolRegistry()
    lock = threading.Lock()

    @define_tool(name="tree", description="")
    def tree(args: Depth, exec: ToolRunContext) -> str:
        depth = args["depth"]
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
            if running[0] == target:
                anyio.from_thread.run_sync(all_running.set)
        try:
            if depth == 0:
                if wait_for_abort:
                    exec.signal.wait_sync()
                return "leaf"
            result = anyio.from_thread.run(
                registry.execute,
                nested_input(
                    exec,
                    call_id=f"{exec.call_id}/{depth}",
                    name="tree",
                    arguments={"depth": depth - 1},
                ),
            )
            return "ok" if not result.is_error else str(code_of(result))
        finally:
            with lock:
                running[0] -= 1

    registry.register(tree)
    return registry


class TestNestedSyncToolsNeverDeadlock:
    """Contract §5, worker threads: composite sync tools complete at any concurrency."""

    @pytest.mark.parametrize("depth", [1, 3])
    async def test_more_composite_calls_than_the_thread_limit(self, depth: int) -> None:
        running = [0, 0]
        registry = _composite_registry(
            running, wait_for_abort=False, all_running=anyio.Event(), target=-1
        )
        published = Published()
        registry.on_result(published)
        calls = 100  # anyio's default limit is 40 threads
        results: list[ToolResult] = []

        async def call(index: int) -> None:
            results.append(
                await registry.execute(make_input("tree", {"depth": depth}, call_id=f"c{index}"))
            )

        async with anyio.create_task_group() as tg:
            for index in range(calls):
                tg.start_soon(call, index)
        assert [r.is_error for r in results] == [False] * calls
        assert len(published.results) == calls * (depth + 1)

    async def test_an_abort_ends_the_whole_tree(self, thread_limit: Callable[[int], None]) -> None:
        thread_limit(3)
        running = [0, 0]
        all_running = anyio.Event()
        # 5 roots, 3 threads per level: 3 roots run, their 3 nested leaves run and wait
        # for the abort; 2 roots queue for a token.
        registry = _composite_registry(
            running, wait_for_abort=True, all_running=all_running, target=6
        )
        published = Published()
        registry.on_result(published)
        caller = AbortController()
        results: list[ToolResult] = []

        async def call(index: int) -> None:
            results.append(
                await registry.execute(
                    make_input("tree", {"depth": 1}, call_id=f"c{index}", signal=caller.signal)
                )
            )

        async with anyio.create_task_group() as tg:
            for index in range(5):
                tg.start_soon(call, index)
            await all_running.wait()
            await anyio.wait_all_tasks_blocked()
            caller.abort()
        codes = sorted(str(code_of(r)) for r in results)
        assert codes == [TOOL_ABORTED] * 3 + [TOOL_ABORTED_BEFORE_DISPATCH] * 2
        assert running == [0, 6]
        assert len(published.results) == 8  # 5 roots and 3 leaves


async def test_a_sync_tool_runs_its_sub_calls_as_a_batch_at_the_thread_limit(
    thread_limit: Callable[[int], None],
) -> None:
    """Contract §5, worker threads; §7: ``run_tool_calls(..., parent=exec.token)``.

    With one worker thread per level, a synchronous composite tool holding the only thread
    of its level runs a batch of synchronous sub-calls: they are its nested calls (their
    ``parent`` and ``root_call_id``), so they use the next level's threads and complete.
    """
    thread_limit(1)
    registry = ToolRegistry()
    published = Published()
    registry.on_result(published)
    roots: list[str] = []

    @define_tool(name="leaf", description="", is_concurrency_safe=lambda args: True)
    def leaf(args: TextArgs, exec: ToolRunContext) -> str:
        roots.append(exec.root_call_id)
        return args["text"]

    @define_tool(name="composite", description="")
    def composite(args: TextArgs, exec: ToolRunContext) -> str:
        calls = [ToolCall(f"sub_{i}", "leaf", {"text": str(i)}) for i in range(3)]
        outcomes = anyio.from_thread.run(
            functools.partial(
                run_tool_calls,
                registry,
                calls,
                signal=exec.signal,
                parent=exec.token,
                root_call_id=exec.root_call_id,
            )
        )
        return ",".join(str(o.result.value) for o in outcomes if isinstance(o.result, ToolSuccess))

    registry.register(leaf)
    registry.register(composite)
    result = await registry.execute(make_input("composite", call_id="top"))
    assert isinstance(result, ToolSuccess)
    assert result.value == "0,1,2"
    composite_token = published.tokens[-1]
    assert published.parents == [composite_token] * 3 + [None]
    assert roots == ["top"] * 3


class TestThreadLimit:
    """Contract §5, worker threads: the limit holds, and a withdrawn job never ran."""

    async def test_host_cancellation_keeps_the_token_until_the_thread_returns(
        self, thread_limit: Callable[[int], None]
    ) -> None:
        thread_limit(2)
        limiter = anyio.to_thread.current_default_thread_limiter()
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)
        release = threading.Event()
        entered = 0
        both = anyio.Event()

        @define_tool(name="stubborn", description="")
        def stubborn(args: TextArgs, exec: ToolRunContext) -> str:
            nonlocal entered

            def count() -> None:
                nonlocal entered
                entered += 1
                if entered == 2:
                    both.set()

            anyio.from_thread.run_sync(count)
            release.wait()  # ignores its signal for a while
            return "done"

        registry.register(stubborn)
        first_calls = anyio.CancelScope()

        async def run_first_calls() -> None:
            with first_calls:
                async with anyio.create_task_group() as tg:
                    for index in range(2):
                        tg.start_soon(registry.execute, make_input("stubborn", call_id=f"a{index}"))

        async with anyio.create_task_group() as outer:
            outer.start_soon(run_first_calls)
            await both.wait()
            first_calls.cancel()
            # Cancelled, but both threads still run: the tokens stay taken ...
            await anyio.wait_all_tasks_blocked()
            assert limiter.borrowed_tokens == 2
            for index in range(2):
                outer.start_soon(registry.execute, make_input("stubborn", call_id=f"b{index}"))
            await anyio.wait_all_tasks_blocked()
            # ... so the next calls wait for them.
            assert limiter.statistics().tasks_waiting == 2
            assert entered == 2
            release.set()
        assert entered == 4
        assert limiter.borrowed_tokens == 0
        assert sorted(str(code_of(r)) for r in published.results) == [
            "ABORTED",
            "ABORTED",
            "None",
            "None",
        ]

    async def test_a_job_withdrawn_before_its_thread_started_never_ran(
        self, thread_limit: Callable[[int], None]
    ) -> None:
        thread_limit(1)
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)
        started: list[str] = []
        busy = anyio.Event()

        @define_tool(name="s", description="")
        def tool(args: TextArgs, exec: ToolRunContext) -> str:
            started.append(exec.call_id)
            anyio.from_thread.run_sync(busy.set)
            exec.signal.wait_sync()
            return "done"

        registry.register(tool)
        holder = AbortController()
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("s", call_id="holder", signal=holder.signal))
            await busy.wait()
            with anyio.CancelScope() as queued:
                async with anyio.create_task_group() as inner:
                    inner.start_soon(registry.execute, make_input("s", call_id="queued"))
                    await anyio.wait_all_tasks_blocked()
                    queued.cancel()
            holder.abort()
        assert started == ["holder"]
        codes = sorted(str(code_of(r)) for r in published.results)
        assert codes == [TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH]

    async def test_a_caller_abort_stops_a_job_queued_for_a_thread(
        self, thread_limit: Callable[[int], None]
    ) -> None:
        thread_limit(1)
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)
        started: list[str] = []
        busy = anyio.Event()

        @define_tool(name="s", description="")
        def tool(args: TextArgs, exec: ToolRunContext) -> str:
            started.append(exec.call_id)
            anyio.from_thread.run_sync(busy.set)
            exec.signal.wait_sync()
            return "done"

        registry.register(tool)
        holder, queued = AbortController(), AbortController()
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("s", call_id="holder", signal=holder.signal))
            await busy.wait()
            tg.start_soon(registry.execute, make_input("s", call_id="queued", signal=queued.signal))
            await anyio.wait_all_tasks_blocked()
            queued.abort()  # while it waits for the one thread token
            await anyio.wait_all_tasks_blocked()
            assert [code_of(r) for r in published.results] == [TOOL_ABORTED_BEFORE_DISPATCH]
            holder.abort()
        assert started == ["holder"]

    async def test_a_wrappers_abort_stops_a_job_queued_for_a_thread(
        self, thread_limit: Callable[[int], None]
    ) -> None:
        """Whichever signal aborts, a job no thread started is ``ABORTED_BEFORE_DISPATCH``."""
        thread_limit(1)
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)
        started: list[str] = []
        busy = anyio.Event()
        own = AbortController()
        seen: list[ToolResult] = []

        @define_tool(name="s", description="")
        def tool(args: TextArgs, exec: ToolRunContext) -> str:
            started.append(exec.call_id)
            anyio.from_thread.run_sync(busy.set)
            exec.signal.wait_sync()
            return "done"

        async def wrapper(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            if exec.call_id == "queued":
                exec.signal = own.signal
            seen.append(await next())
            return seen[-1]

        registry.register(tool)
        registry.on_execute(wrapper)
        holder = AbortController()
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("s", call_id="holder", signal=holder.signal))
            await busy.wait()
            tg.start_soon(registry.execute, make_input("s", call_id="queued"))
            await anyio.wait_all_tasks_blocked()
            own.abort("the wrapper says stop")  # while it waits for the one thread token
            await anyio.wait_all_tasks_blocked()
            assert [code_of(r) for r in seen] == [TOOL_ABORTED_BEFORE_DISPATCH]
            assert [code_of(r) for r in published.results] == [TOOL_ABORTED_BEFORE_DISPATCH]
            holder.abort()
        assert started == ["holder"]

    async def test_a_thread_failure_just_before_host_cancellation_stays(self) -> None:
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)
        scopes: list[anyio.CancelScope] = []

        @define_tool(name="s", description="")
        def tool(args: TextArgs, exec: ToolRunContext) -> str:
            anyio.from_thread.run_sync(scopes[0].cancel)  # the host cancels ...
            raise ToolError("disk full", code="DISK_FULL")  # ... as the body fails

        registry.register(tool)
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await registry.execute(make_input("s"))
        result = published.only
        assert isinstance(result, ToolFailure)
        assert (result.code, result.error.message) == ("DISK_FULL", "disk full")


class TestTimeoutMessage:
    """Contract §7: the timeout is written as Python's repr of the float."""

    @pytest.mark.parametrize(
        ("timeout", "text"),
        [(5, "5.0s"), (0.1234567, "0.1234567s"), (1234567, "1234567.0s"), (0.01, "0.01s")],
    )
    def test_the_text(self, timeout: float, text: str) -> None:
        assert _timeout_message(float(timeout)) == f"tool call timed out after {text}"

    async def test_a_timed_out_call_carries_it(self) -> None:
        registry = ToolRegistry()

        @define_tool(name="slow", description="", timeout=0.0123)
        async def slow(args: TextArgs, exec: ToolRunContext) -> str:
            await exec.signal.wait()
            return "late"

        registry.register(slow)
        registry.on_execute(timeout_policy(registry))
        result = await registry.execute(make_input("slow"))
        assert isinstance(result, ToolFailure)
        assert result.error.message == "tool call timed out after 0.0123s"
