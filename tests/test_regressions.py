"""Regressions found by the contract review; each test names the contract clause it guards."""

from __future__ import annotations

import asyncio
import builtins
import logging
import math
import threading
from typing import Any

import anyio
import pytest

from support import Published, TextArgs, code_of, make_input, registry_with_echo
from toolseam import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    TOOL_ERROR_WITHOUT_CODE,
    AbortController,
    AbortError,
    AbortSignal,
    ApprovalRequest,
    Ask,
    ErrorInfo,
    Next,
    PreDecision,
    ToolCall,
    ToolDispatchExecution,
    ToolError,
    ToolExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
    nested_input,
    run_tool_calls,
)
from toolseam.policies import timeout_policy


async def test_host_cancel_aborts_the_signal_an_async_body_handed_out() -> None:
    """Contract §5, host cancellation: the body's own signal is aborted; nested work hears."""
    registry = ToolRegistry()
    published = Published()
    registry.on_result(published)
    handed_out: list[AbortSignal] = []

    @define_tool(name="t", description="")
    async def tool(args: TextArgs, exec: ToolRunContext) -> str:
        handed_out.append(exec.signal)  # e.g. to a watchdog thread the tool owns
        await anyio.sleep_forever()
        return ""

    registry.register(tool)
    caller = AbortController()
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("t", signal=caller.signal))
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
    [signal] = handed_out
    assert signal.aborted
    assert not caller.signal.aborted  # the registry never aborts the caller's signal
    assert code_of(published.only) == TOOL_ABORTED


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_second_native_task_cancel_does_not_abandon_a_thread_body() -> None:
    """Contract §5, quiescence: a started thread body is awaited, even through repeated cancels."""
    registry = ToolRegistry()
    published = Published()
    registry.on_result(published)
    entered = threading.Event()
    saw_abort = threading.Event()
    release = threading.Event()
    returned = threading.Event()

    @define_tool(name="t", description="")
    def slow(args: TextArgs, exec: ToolRunContext) -> str:
        entered.set()
        exec.signal.wait_sync()
        saw_abort.set()
        release.wait()  # cooperative, but it needs a moment to clean up
        returned.set()
        return "x"

    registry.register(slow)
    task = asyncio.ensure_future(registry.execute(make_input("t")))
    await asyncio.to_thread(entered.wait)
    task.cancel()
    await asyncio.to_thread(saw_abort.wait)
    task.cancel()  # lands while the registry waits for the thread
    for _ in range(20):
        await asyncio.sleep(0)
    assert not task.done(), "execute() gave up on a running thread body"
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert returned.is_set()
    assert code_of(published.only) == TOOL_ABORTED


class HostileCode(ToolError):
    def __init__(self) -> None:
        super().__init__("hostile", code="X")

    @property  # type: ignore[override]
    def code(self) -> str:
        raise RuntimeError("no code for you")

    @code.setter
    def code(self, value: str) -> None:
        pass


async def test_tool_error_with_a_raising_code_is_one_failure_not_a_fake_abort() -> None:
    """Contract §4: turning a thrown value into a message never raises."""
    registry = ToolRegistry()
    published = Published()
    registry.on_result(published)

    @define_tool(name="t", description="")
    async def tool(args: TextArgs, exec: ToolRunContext) -> str:
        raise HostileCode

    registry.register(tool)
    result = await registry.execute(make_input("t"))
    assert isinstance(result, ToolFailure)
    assert result.error.message == "hostile"
    # Its code cannot be read: the failure names the class, coded as having no code.
    assert result.error.info == ErrorInfo("HostileCode", TOOL_ERROR_WITHOUT_CODE)
    assert published.only is result


class Hostile:
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __bool__(self) -> bool:
        raise RuntimeError("bool")

    def __str__(self) -> str:
        return "hostile"

    __hash__ = object.__hash__


async def test_hostile_approval_answer_and_ask_reason_are_one_failure() -> None:
    """Contract §8: whatever an untyped stage does, exactly one published failure."""

    class Approver:
        async def request(self, request: ApprovalRequest, /) -> Any:
            return Hostile()

    registry = ToolRegistry(approval=Approver())
    published = Published()
    registry.on_result(published)

    async def ask(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        return Ask(Hostile())  # type: ignore[arg-type]

    registry.on_pre_execute(ask)
    result = await registry.execute(make_input())
    assert isinstance(result, ToolFailure)
    assert result.error.message == "approval service answered 'hostile', not an approval answer"
    assert published.only is result


async def test_timeout_policy_keeps_an_inner_tool_error_unwrapped() -> None:
    """Contract §4: a raised ToolError surfaces its ErrorInfo (not an ExceptionGroup)."""
    registry = ToolRegistry()

    @define_tool(name="t", description="", timeout=60)
    async def tool(args: TextArgs, exec: ToolRunContext) -> str:
        return ""

    async def quota(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
        raise ToolError("quota exceeded", code="QUOTA")

    registry.register(tool)
    registry.on_execute(timeout_policy(registry))
    registry.on_execute(quota)
    result = await registry.execute(make_input("t"))
    assert isinstance(result, ToolFailure)
    assert result.error.message == "quota exceeded"
    assert code_of(result) == "QUOTA"


@pytest.mark.parametrize("bad", [-1, math.nan, "5"])
def test_register_rejects_a_hand_written_definition_with_a_bad_timeout(bad: object) -> None:
    """Contract §8: a bad timeout raises at setup, naming the tool."""

    class Hand:
        name = "hand"
        description = ""
        parameters: dict[str, Any] = {"type": "object"}  # noqa: RUF012
        timeout = bad

        def parse_arguments(self, a: Any, /) -> Any:
            return a

        async def run(self, a: Any, e: Any, /) -> Any:
            return a

        def serialize_output(self, o: Any, /) -> Any:
            return o

        def render(self, a: Any, v: Any, /) -> Any:
            return []

        def is_concurrency_safe(self, a: Any, /) -> bool:
            return False

        def finalize_content(self, e: Any, r: Any, /) -> None:
            return None

    with pytest.raises((ValueError, TypeError), match=r'^tool "hand": `timeout` must be'):
        ToolRegistry().register(Hand())  # type: ignore[arg-type]


async def test_host_cancel_keeps_a_body_failure_the_wrapper_still_holds() -> None:
    """Contract §5: cancellation never replaces a failure (a tool failure)."""
    registry = ToolRegistry()
    published = Published()
    registry.on_result(published)

    @define_tool(name="t", description="")
    async def tool(args: TextArgs, exec: ToolRunContext) -> str:
        raise OSError("disk full")

    async def slow_wrapper(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
        result = await next()
        await anyio.sleep_forever()
        return result

    registry.register(tool)
    registry.on_execute(slow_wrapper)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("t"))
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
    result = published.only
    assert isinstance(result, ToolFailure)
    assert result.error.message == "disk full"


def test_a_listener_raising_base_exception_is_contained(caplog: pytest.LogCaptureFixture) -> None:
    """Contract §2: other listeners still run; abort() never raises because of a listener."""
    controller = AbortController()
    seen: list[str] = []

    def cancelled(_s: AbortSignal) -> None:
        raise asyncio.CancelledError

    controller.signal.add_listener(cancelled)
    controller.signal.add_listener(lambda _s: seen.append("second"))
    with caplog.at_level(logging.ERROR, logger="toolseam"):
        controller.abort()
    assert seen == ["second"]


def test_keyboard_interrupt_in_a_listener_propagates_after_the_others_ran() -> None:
    controller = AbortController()
    seen: list[str] = []

    def interrupt(_s: AbortSignal) -> None:
        raise KeyboardInterrupt

    controller.signal.add_listener(interrupt)
    controller.signal.add_listener(lambda _s: seen.append("second"))
    with pytest.raises(KeyboardInterrupt):
        controller.abort()
    assert seen == ["second"]
    assert controller.signal.aborted


async def test_batch_reads_each_calls_mode_once() -> None:
    """Contract §7: the mode is read right before each call starts — once."""
    registry = ToolRegistry()
    asked: list[str] = []

    def safe(args: TextArgs) -> bool:
        asked.append(args["text"])
        return args["text"].startswith("p")

    @define_tool(name="t", description="", is_concurrency_safe=safe)
    async def tool(args: TextArgs, exec: ToolRunContext) -> str:
        return args["text"]

    registry.register(tool)
    calls = [ToolCall(c, "t", {"text": c}) for c in ("p1", "p2", "x3", "p4")]
    outcomes = await run_tool_calls(registry, calls, signal=AbortController().signal)
    assert [o.result.is_error for o in outcomes] == [False] * 4
    assert asked == ["p1", "p2", "x3", "p4"]


async def test_warm_execute_imports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hot path: no per-call ``from pydantic import ...`` (about a microsecond each)."""
    registry, _, _ = registry_with_echo()
    await registry.execute(make_input())  # warm
    seen: list[str] = []
    real = builtins.__import__

    def counting(name: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", counting)
    await registry.execute(make_input())
    monkeypatch.undo()
    assert [name for name in seen if name.startswith("pydantic")] == []


@pytest.mark.parametrize("stop", ["reason", "own"])
async def test_host_cancel_of_a_sync_body_that_raises_its_reason_is_aborted(stop: str) -> None:
    """Contract §5, host cancellation: a thread body stopping the idiomatic way is not failing.

    ``exec.signal.raise_if_aborted()`` in the thread raises the host's reason (and a body
    may raise a fresh ``AbortError``); that is the body doing what it was told, so the one
    result is ``ABORTED`` (body invoked), as for an async body, not an uncoded failure.
    """
    registry = ToolRegistry()
    published = Published()
    registry.on_result(published)
    entered = threading.Event()

    @define_tool(name="t", description="")
    def cooperative(args: TextArgs, exec: ToolRunContext) -> str:
        entered.set()
        exec.signal.wait_sync()
        if args["text"] == "own":
            raise AbortError()
        exec.signal.raise_if_aborted()
        return "unreachable"

    registry.register(cooperative)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("t", {"text": stop}))
            await anyio.to_thread.run_sync(entered.wait)
            scope.cancel()
    assert code_of(published.only) == TOOL_ABORTED  # not ABORTED_BEFORE_DISPATCH


async def test_host_cancel_reaching_a_nested_call_through_from_thread_is_aborted() -> None:
    """Contract §5, host cancellation: a nested call's cancellation raised in the thread.

    The outer sync body awaits a nested call with ``anyio.from_thread.run``; host
    cancellation aborts the outer body's signal, and so the nested call's; on asyncio it also
    cancels the nested call's task, and ``from_thread.run`` raises that cancellation into the
    thread. Both calls end ``ABORTED``, neither in a failure.
    """
    registry = ToolRegistry()
    published = Published()
    registry.on_result(published)
    inner_started = anyio.Event()

    @define_tool(name="inner", description="")
    async def inner(args: TextArgs, exec: ToolRunContext) -> str:
        inner_started.set()
        await exec.signal.wait()  # aborted with the outer body's signal (trio) or cancelled
        exec.signal.raise_if_aborted()
        return ""

    @define_tool(name="outer", description="")
    def outer(args: TextArgs, exec: ToolRunContext) -> str:
        nested = nested_input(exec, call_id="inner_1", name="inner", arguments={"text": "x"})
        result = anyio.from_thread.run(registry.execute, nested)
        return "nested: " + str(result.code)

    registry.register(inner)
    registry.register(outer)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("outer"))
            await inner_started.wait()
            scope.cancel()
    assert [code_of(r) for r in published.results] == [TOOL_ABORTED, TOOL_ABORTED]


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
async def test_an_observer_interrupt_in_a_batch_costs_no_sibling_its_result(
    interrupt: type[BaseException],
) -> None:
    """Contract §7, batch executor: an interrupt from publishing one call waits for the batch.

    The observer of call ``a`` raises while ``b`` (parallel) is still in its body: ``b``
    finishes its work and publishes its own result, ``c`` (not started yet) is not started
    and ends ``ABORTED_BEFORE_DISPATCH``, then the interrupt propagates bare.
    """
    registry = ToolRegistry()
    gate = anyio.Event()
    finished: list[str] = []
    published: list[tuple[str, str | None]] = []

    @define_tool(name="par", description="", is_concurrency_safe=lambda args: True)
    async def par(args: TextArgs, exec: ToolRunContext) -> str:
        if args["text"] == "b":
            await gate.wait()
            await anyio.lowlevel.checkpoint()
        finished.append(args["text"])
        return args["text"]

    def observer(exec: ToolExecution, result: ToolResult) -> None:
        published.append((exec.call_id, result.code if isinstance(result, ToolFailure) else None))
        if exec.call_id == "a":
            gate.set()
            raise interrupt

    registry.register(par)
    registry.on_result(observer)
    calls = [
        ToolCall("a", "par", {"text": "a"}),
        ToolCall("b", "par", {"text": "b"}),
        ToolCall("x", "exclusive_missing", {}),  # ends the parallel group
        ToolCall("c", "par", {"text": "c"}),
    ]
    with pytest.raises(interrupt):
        await run_tool_calls(registry, calls, signal=AbortController().signal)
    assert finished == ["a", "b"]
    assert published == [
        ("a", None),
        ("b", None),
        ("x", TOOL_ABORTED_BEFORE_DISPATCH),
        ("c", TOOL_ABORTED_BEFORE_DISPATCH),
    ]
    await registry.wait_idle()  # nothing left in flight


async def test_an_observer_interrupt_after_an_exclusive_call_skips_the_rest() -> None:
    """Contract §7: an exclusive call's interrupt, too, propagates once every call has one."""
    registry, _, _ = registry_with_echo()
    published: list[tuple[str, str | None]] = []

    def observer(exec: ToolExecution, result: ToolResult) -> None:
        published.append((exec.call_id, result.code if isinstance(result, ToolFailure) else None))
        if exec.call_id == "a":
            raise SystemExit(3)

    registry.on_result(observer)
    calls = [ToolCall(i, "echo", {"text": i}) for i in ("a", "b", "c")]  # echo is exclusive
    with pytest.raises(SystemExit) as raised:
        await run_tool_calls(registry, calls, signal=AbortController().signal)
    assert raised.value.code == 3
    assert published == [
        ("a", None),
        ("b", TOOL_ABORTED_BEFORE_DISPATCH),
        ("c", TOOL_ABORTED_BEFORE_DISPATCH),
    ]


@pytest.mark.parametrize("calls", [0, 2])
async def test_run_tool_calls_is_a_checkpoint_even_when_nothing_starts(calls: int) -> None:
    """Contract §7, like ``execute``: an empty or pre-aborted batch still reaches a
    checkpoint, so a host cancellation is seen, and only after every call has its result."""
    registry, published, trace = registry_with_echo()
    stop = AbortController()
    stop.abort()
    batch = [ToolCall(f"c{i}", "echo", {"text": "x"}) for i in range(calls)]
    with anyio.CancelScope() as scope:
        scope.cancel()
        await run_tool_calls(registry, batch, signal=stop.signal)
    assert scope.cancelled_caught
    assert [code_of(r) for r in published.results] == [TOOL_ABORTED_BEFORE_DISPATCH] * calls
    assert trace == []
