"""Hostile behaviour at the boundaries between stages, threads and entry points.

Each class guards one hole an adversarial probe found (issue 25): something crossing from
one stage, thread or entry point to the next that cost a call its one result, hung it, or
escaped in another shape than it was raised. docs/reliability.md's hostile-behaviour table
names the test that proves each row. Every test runs on asyncio and trio; ``GUARD`` only
turns a hang into a failure, it decides no ordering.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Callable
from typing import cast

import anyio
import anyio.from_thread
import anyio.lowlevel
import pytest
from typing_extensions import TypedDict

from support import Published, TextArgs, code_of, make_input
from toolseam import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    AbortController,
    Accept,
    Next,
    PostDecision,
    PreDecision,
    ToolCall,
    ToolDispatchExecution,
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

GUARD = 10  # seconds: a hang guard, never an ordering


class _ClassRaises(Exception):
    """An exception whose ``__class__`` raises: ``isinstance`` on it raises."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("__class__ refuses")


class _WithTracebackRaises(Exception):
    """An exception whose ``with_traceback`` raises (trio's thread hand-off calls it)."""

    def with_traceback(self, tb: object) -> _WithTracebackRaises:
        raise RuntimeError("with_traceback refuses")


class TestHostileExceptionsLeaveWorkerThreads:
    """Contract §5, §8: what a synchronous body raises never reaches the thread machinery.

    anyio's asyncio worker asks ``isinstance(error, StopIteration)`` in a loop callback, and
    trio's thread hand-off calls ``error.with_traceback``: a hostile exception made either
    raise there, so the thread's outcome was never delivered and the call hung for ever.
    """

    @pytest.mark.parametrize("error", [_ClassRaises, _WithTracebackRaises])
    async def test_a_sync_body_raising_it_ends_in_one_failure(
        self, error: Callable[[], Exception]
    ) -> None:
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)

        @define_tool(name="s", description="")
        def tool(args: TextArgs, exec: ToolRunContext) -> str:
            raise error()

        registry.register(tool)
        with anyio.fail_after(GUARD):
            result = await registry.execute(make_input("s"))
        assert isinstance(result, ToolFailure)
        assert type(result.error.message) is str
        assert published.only is result


class _TracebackSetterRaises(Exception):
    """An exception whose ``__traceback__`` cannot be assigned from Python."""

    @property
    def __traceback__(self) -> None:
        return None

    @__traceback__.setter
    def __traceback__(self, value: object) -> None:
        raise RuntimeError("__traceback__ refuses")


class _BaseTracebackSetterRaises(BaseException):
    """The same as a ``BaseException`` reason (``except BaseException as e: abort(e)``)."""

    @property
    def __traceback__(self) -> None:
        return None

    @__traceback__.setter
    def __traceback__(self, value: object) -> None:
        raise RuntimeError("__traceback__ refuses")


HOSTILE_REASONS: dict[str, Callable[[], BaseException]] = {
    "with_traceback raises": _WithTracebackRaises,
    "__traceback__ setter raises": _TracebackSetterRaises,
    "BaseException whose __traceback__ setter raises": _BaseTracebackSetterRaises,
}


class TestHostileAbortReasons:
    """Contract §2, §5: a body that stops by raising its caller's reason ends ``ABORTED``,
    whatever the reason object does.

    The registry drops the traceback of a shared reason, and ``raise_if_aborted`` raises the
    reason with a fresh one; both went through the reason's own ``with_traceback`` or
    ``__traceback__`` setter, so a reason whose hook raises turned the abort into a tool
    failure carrying the hook's error.
    """

    @pytest.mark.parametrize("entry", ["execute", "run_tool_calls"])
    @pytest.mark.parametrize("how", ["raise_if_aborted", "raise reason"])
    @pytest.mark.parametrize("body", ["async", "sync"])
    @pytest.mark.parametrize("reason", list(HOSTILE_REASONS))
    async def test_the_body_raising_it_ends_aborted(
        self, reason: str, body: str, how: str, entry: str
    ) -> None:
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)
        entered = anyio.Event()

        def stop(exec: ToolRunContext) -> None:
            if how == "raise_if_aborted":
                exec.signal.raise_if_aborted()
            raise cast("BaseException", exec.signal.reason)

        if body == "async":

            @define_tool(name="t", description="")
            async def tool(args: TextArgs, exec: ToolRunContext) -> str:
                entered.set()
                await exec.signal.wait()
                stop(exec)
                return "unreachable"

        else:

            @define_tool(name="t", description="")
            def tool(args: TextArgs, exec: ToolRunContext) -> str:
                anyio.from_thread.run_sync(entered.set)
                exec.signal.wait_sync()
                stop(exec)
                return "unreachable"

        registry.register(tool)
        caller = AbortController()
        async with anyio.create_task_group() as tg:
            if entry == "execute":
                tg.start_soon(registry.execute, make_input("t", signal=caller.signal))
            else:
                calls = [ToolCall("c", "t", {"text": "x"})]
                tg.start_soon(
                    functools.partial(run_tool_calls, signal=caller.signal), registry, calls
                )
            await entered.wait()
            caller.abort(HOSTILE_REASONS[reason]())
        assert code_of(published.only) == TOOL_ABORTED


_FINALIZER_READS_VIEWS = """
import gc, sys
import anyio
from typing_extensions import TypedDict
from toolseam import AbortController, ToolExecutionInput, ToolRegistry, ToolRunContext, define_tool

class Args(TypedDict, total=False):
    n: int

held = []  # executions whose signal and token nobody has read yet
inside = []  # finalizers that ran while this thread fused a signal or minted a token
budget = [0]

class Garbage:
    def __init__(self):
        self.me = self  # a cycle: only the cyclic collector frees it

    def __del__(self):
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_name in ("_body_signal", "_the_token"):
                inside.append(frame.f_code.co_name)
                break
            frame = frame.f_back
        if held:
            execution = held.pop()
            # The first read of each fuses the body's signal or mints the token.
            execution.signal if len(held) % 2 else execution.token
        if budget[0] > 0:
            budget[0] -= 1
            Garbage()  # garbage for the next collection

async def main():
    registry = ToolRegistry()
    gate = anyio.Event()
    published = []
    registry.on_result(lambda exec, result: published.append(result))

    @define_tool(name="hold", description="")
    async def hold(args: Args, exec: ToolRunContext) -> str:
        held.append(exec)
        await gate.wait()
        return "held"

    @define_tool(name="reader", description="")
    async def reader(args: Args, exec: ToolRunContext) -> str:
        budget[0] = 10_000
        Garbage()
        exec.signal
        exec.token
        budget[0] = 0
        return "read"

    registry.register(hold)
    registry.register(reader)
    async with anyio.create_task_group() as tg:
        for index in range(300):
            call = ToolExecutionInput(
                call_id=f"h{index}", name="hold", arguments={}, signal=AbortController().signal
            )
            tg.start_soon(registry.execute, call)
        await anyio.wait_all_tasks_blocked()
        gc.set_threshold(1)  # collect at nearly every allocation
        for index in range(20):
            call = ToolExecutionInput(
                call_id=f"r{index}", name="reader", arguments={}, signal=AbortController().signal
            )
            result = await registry.execute(call)
            assert not result.is_error, result
        gc.set_threshold(700)
        gate.set()
    assert inside, "no finalizer ran while a signal was fused or a token minted"
    assert len(published) == 320
    print("ok")

anyio.run(main, backend=sys.argv[1])
"""


class TestFinalizersNeverDeadlockTheViews:
    """Contract §2, §3: a finalizer reading an execution's ``signal`` or ``token`` never
    deadlocks, whenever the cyclic collector runs it.

    The body's signal is fused, and the token minted, on first read under a lock. A garbage
    collection inside that lock — at any allocation — may run a finalizer that reads another
    execution's ``signal`` or ``token`` for the first time (a collected body coroutine whose
    ``finally`` checks ``exec.signal.aborted``): with a plain lock that thread waited for
    itself for ever. Run in a subprocess with a bound, like the signal module's tests.
    """

    @pytest.mark.parametrize("backend", ["asyncio", "trio"])
    def test_a_finalizer_reading_signals_and_tokens_while_one_is_made(self, backend: str) -> None:
        completed = subprocess.run(
            [sys.executable, "-c", _FINALIZER_READS_VIEWS, backend],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr
        assert completed.stdout.splitlines()[-1] == "ok"


_FINALIZER_ENDS_CALLS_IN_WAIT_IDLE = """
import gc, sys
import anyio
from typing_extensions import TypedDict
from toolseam import AbortController, ToolExecutionInput, ToolRegistry, ToolRunContext, define_tool

class Args(TypedDict, total=False):
    n: int

suspended = []  # coroutines of calls suspended in their body, referenced only here
inside = []
budget = [0]

class Garbage:
    def __init__(self):
        self.me = self  # a cycle: only the cyclic collector frees it

    def __del__(self):
        frame = sys._getframe(0)
        while frame is not None and frame.f_code.co_name != "wait_idle":
            frame = frame.f_back
        # Once wait_idle() has started a new generation (under its lock).
        if frame is not None and "target" in frame.f_locals and suspended:
            inside.append(True)
            # The collector finalizing an abandoned call: it settles and publishes here.
            suspended.pop().close()
        if budget[0] > 0:
            budget[0] -= 1
            Garbage()  # garbage for the next collection

async def main():
    registry = ToolRegistry()
    published = []
    registry.on_result(lambda exec, result: published.append(result))

    @define_tool(name="stuck", description="")
    async def stuck(args: Args, exec: ToolRunContext) -> str:
        await anyio.sleep_forever()
        return "never"

    registry.register(stuck)
    for index in range(20):
        call = ToolExecutionInput(
            call_id=f"c{index}", name="stuck", arguments={}, signal=AbortController().signal
        )
        coroutine = registry.execute(call)
        coroutine.send(None)  # suspended in the body, in a generation of its own
        suspended.append(coroutine)
        del coroutine
        budget[0] = 10_000
        gc.set_threshold(1)  # collect at nearly every allocation
        Garbage()
        waiting = registry.wait_idle()
        try:
            waiting.send(None)
        except StopIteration:
            pass
        waiting.close()
        gc.set_threshold(700)
        budget[0] = 0
    assert inside, "no call was finalized during wait_idle()"
    assert len(published) == len(inside), (len(published), len(inside))
    with anyio.fail_after(5):
        await registry.wait_idle()
    print("ok")

anyio.run(main, backend=sys.argv[1])
"""


class TestFinalizersNeverDeadlockWaitIdle:
    """Contract §5 (waiting for quiet): a call the cyclic collector finalizes while
    ``wait_idle()`` does its bookkeeping publishes, and nothing deadlocks.

    A suspended call abandoned by its host (a fire-and-forget task nobody references) is
    closed by the collector at whichever allocation it runs, and publishes its result; the
    last call of an older generation then takes the registry's idle lock. ``wait_idle()``
    allocated while holding that lock, so the collector could run there, in the same
    thread, and the thread waited for itself for ever.
    """

    @pytest.mark.parametrize("backend", ["asyncio", "trio"])
    def test_a_call_finalized_inside_wait_idle(self, backend: str) -> None:
        completed = subprocess.run(
            [sys.executable, "-c", _FINALIZER_ENDS_CALLS_IN_WAIT_IDLE, backend],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr
        assert completed.stdout.splitlines()[-1] == "ok"


class _StrSubclassMessage(Exception):
    """``str()`` gives a ``str`` subclass whose every hook raises."""

    def __str__(self) -> str:
        class Hostile(str):
            __slots__ = ()

            def __format__(self, spec: str) -> str:
                raise RuntimeError("__format__ refuses")

            def __hash__(self) -> int:
                raise RuntimeError("__hash__ refuses")

            def __eq__(self, other: object) -> bool:
                raise RuntimeError("__eq__ refuses")

        return Hostile("hostile message")


HOSTILE_ERRORS: dict[str, Callable[[], Exception]] = {
    "str() gives a hostile str subclass": _StrSubclassMessage,
    "__class__ raises": _ClassRaises,
    "with_traceback raises": _WithTracebackRaises,
}
STAGES = ("pre", "guard", "wrapper", "body", "sync body", "post", "finalizer")
ENTRY_POINTS = ("run_tool_calls", "nested from an async body", "nested from a sync body")


def _registry_raising(stage: str, error: Callable[[], BaseException]) -> ToolRegistry:
    """A registry whose ``stage`` raises ``error()`` for calls whose id ends in ``!``."""

    def hit(exec: ToolExecution) -> bool:
        return exec.call_id.endswith("!")

    def finalize(exec: ToolExecution, result: ToolResult) -> None:
        if stage == "finalizer" and hit(exec):
            raise error()

    @define_tool(name="t", description="", finalize_content=finalize, is_concurrency_safe=_safe)
    async def tool(args: TextArgs, exec: ToolRunContext) -> str:
        if stage == "body" and hit(exec):
            raise error()
        return "ok"

    @define_tool(name="s", description="", finalize_content=finalize, is_concurrency_safe=_safe)
    def sync_tool(args: TextArgs, exec: ToolRunContext) -> str:
        if stage == "sync body" and hit(exec):
            raise error()
        return "ok"

    async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        if stage == "pre" and hit(exec):
            raise error()
        return await next()

    def guard(exec: ToolExecution) -> str | None:
        if stage == "guard" and hit(exec):
            raise error()
        return None

    async def wrapper(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
        if stage == "wrapper" and hit(exec):
            raise error()
        return await next()

    async def post(
        exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
    ) -> PostDecision:
        if stage == "post" and hit(exec):
            raise error()
        return await next()

    registry = ToolRegistry()
    registry.register(tool)
    registry.register(sync_tool)
    registry.on_pre_execute(pre)
    registry.add_guard(guard)
    registry.on_execute(wrapper)
    registry.on_post_execute(post)
    return registry


def _safe(args: TextArgs) -> bool:
    return True


class TestHostileExceptionsOnEveryEntryPoint:
    """Contract §5, §7, §8: a hostile exception from any stage ends in one published failure
    with a plain ``str`` message on every entry point, and costs no other call anything.

    `TestHostileExceptions` (test_hardening.py) proves it for ``execute``; these prove the
    same for a batch (the hostile call between two siblings) and for nested dispatch from an
    async and from a synchronous body (the composite call still succeeds).
    """

    @pytest.mark.parametrize("entry", ENTRY_POINTS)
    @pytest.mark.parametrize("stage", STAGES)
    @pytest.mark.parametrize("kind", list(HOSTILE_ERRORS))
    async def test_one_plain_failure_and_nothing_else_changes(
        self, kind: str, stage: str, entry: str
    ) -> None:
        registry = _registry_raising(stage, HOSTILE_ERRORS[kind])
        published: dict[str, ToolResult] = {}

        def observe(exec: ToolExecution, result: ToolResult) -> None:
            published.setdefault(exec.call_id, result)

        registry.on_result(observe)
        name = "s" if stage == "sync body" else "t"
        if entry == "run_tool_calls":
            calls = [ToolCall(call_id, name, {"text": "x"}) for call_id in ("a", "hostile!", "b")]
            with anyio.fail_after(GUARD):
                outcomes = await run_tool_calls(registry, calls, signal=AbortController().signal)
            assert [outcome.result for outcome in outcomes] == [
                published["a"],
                published["hostile!"],
                published["b"],
            ]
        else:
            inner: list[ToolResult] = []

            if entry == "nested from an async body":

                @define_tool(name="outer", description="")
                async def outer(args: TextArgs, exec: ToolRunContext) -> str:
                    call = nested_input(
                        exec, call_id="hostile!", name=name, arguments={"text": "x"}
                    )
                    inner.append(await registry.execute(call))
                    return "outer"

            else:

                @define_tool(name="outer", description="")
                def outer(args: TextArgs, exec: ToolRunContext) -> str:
                    call = nested_input(
                        exec, call_id="hostile!", name=name, arguments={"text": "x"}
                    )
                    inner.append(anyio.from_thread.run(registry.execute, call))
                    return "outer"

            registry.register(outer)
            with anyio.fail_after(GUARD):
                result = await registry.execute(make_input("outer", call_id="outer"))
            assert isinstance(result, ToolSuccess)
            assert inner == [published["hostile!"]]
        failure = published.pop("hostile!")
        assert isinstance(failure, ToolFailure)
        assert type(failure.error.message) is str
        assert failure.error.message
        assert all(isinstance(result, ToolSuccess) for result in published.values())


class _OwnBaseException(BaseException):
    """A ``BaseException`` of a tool's own: neither an interrupt nor a cancellation."""


BASE_EXCEPTIONS: dict[str, Callable[[], BaseException]] = {
    "KeyboardInterrupt": KeyboardInterrupt,
    "GeneratorExit": GeneratorExit,
    "own BaseException": _OwnBaseException,
}


class TestBaseExceptionsFromEveryStage:
    """Contract §5: a ``BaseException`` raised by any stage settles its call — one published
    result — and then propagates bare, through ``execute`` and through a nested call's
    composite (whose own call settles too). ``run_tool_calls`` holds it instead:
    test_batch_sequencer.py::test_an_interrupt_from_a_call_is_held_until_every_call_has_its_result.
    """

    @pytest.mark.parametrize("entry", ["execute", "nested from an async body"])
    @pytest.mark.parametrize("stage", [*STAGES, "observer"])
    @pytest.mark.parametrize("kind", list(BASE_EXCEPTIONS))
    async def test_one_result_each_then_it_propagates_bare(
        self, kind: str, stage: str, entry: str
    ) -> None:
        raised = BASE_EXCEPTIONS[kind]()
        registry = _registry_raising(stage, lambda: raised)
        published: list[str] = []

        def observe(exec: ToolExecution, result: ToolResult) -> None:
            published.append(exec.call_id)
            if stage == "observer" and exec.call_id.endswith("!"):
                raise raised

        registry.on_result(observe)
        name = "s" if stage == "sync body" else "t"

        @define_tool(name="outer", description="")
        async def outer(args: TextArgs, exec: ToolRunContext) -> str:
            call = nested_input(exec, call_id="hostile!", name=name, arguments={"text": "x"})
            await registry.execute(call)
            return "outer"

        registry.register(outer)
        if entry == "execute":
            call, expected = make_input(name, call_id="hostile!"), ["hostile!"]
        else:
            call, expected = make_input("outer", call_id="outer"), ["hostile!", "outer"]
        with anyio.fail_after(GUARD), pytest.raises(BaseException) as caught:
            await registry.execute(call)
        assert caught.value is raised
        assert published == expected
        await registry.wait_idle()


DEPTH = 100_000


class _Tree(TypedDict):
    tree: object


def _deep_tree(depth: int) -> dict[str, object]:
    root: dict[str, object] = {}
    node = root
    for _ in range(depth - 1):
        child: dict[str, object] = {}
        node["a"] = child
        node = child
    node["a"] = "leaf"
    return {"tree": root}


def _depth(tree: object) -> int:
    levels = 0
    while isinstance(tree, dict):
        tree = tree["a"]  # pyright: ignore[reportUnknownVariableType]
        levels += 1
    return levels


class TestDeepArgumentsOnEveryEntryPoint:
    """Contract §5.2: arguments 100 000 levels deep reach the body whole on every entry
    point — a batch (whose mode check parses them first), nested dispatch from an async and
    from a synchronous body. `TestDepthIsBoundedOnlyByMemory` (test_hardening.py) proves
    ``execute``; JSON text of that depth, test_jsontext.py and the OpenAI Agents adapter's
    test_arguments_100_000_levels_deep_reach_the_registry."""

    @pytest.mark.parametrize("entry", ENTRY_POINTS)
    async def test_the_body_gets_every_level(self, entry: str) -> None:
        registry = ToolRegistry()
        depths: list[int] = []

        @define_tool(name="deep", description="", is_concurrency_safe=lambda args: True)
        async def deep(args: _Tree, exec: ToolRunContext) -> int:
            depths.append(_depth(args["tree"]))
            return depths[-1]

        @define_tool(name="async_outer", description="")
        async def async_outer(args: TextArgs, exec: ToolRunContext) -> str:
            call = nested_input(exec, call_id="n", name="deep", arguments=_deep_tree(DEPTH))
            return "ok" if not (await registry.execute(call)).is_error else "failed"

        @define_tool(name="sync_outer", description="")
        def sync_outer(args: TextArgs, exec: ToolRunContext) -> str:
            call = nested_input(exec, call_id="n", name="deep", arguments=_deep_tree(DEPTH))
            return "ok" if not anyio.from_thread.run(registry.execute, call).is_error else "no"

        for tool in (deep, async_outer, sync_outer):
            registry.register(tool)
        if entry == "run_tool_calls":
            calls = [ToolCall(f"c{index}", "deep", _deep_tree(DEPTH)) for index in range(2)]
            outcomes = await run_tool_calls(registry, calls, signal=AbortController().signal)
            assert [outcome.result.is_error for outcome in outcomes] == [False, False]
            assert depths == [DEPTH, DEPTH]
        else:
            outer = "async_outer" if entry == "nested from an async body" else "sync_outer"
            result = await registry.execute(make_input(outer, {"text": "x"}))
            assert isinstance(result, ToolSuccess)
            assert result.value == "ok"
            assert depths == [DEPTH]


class TestAbortDuringPreExecuteInABatch:
    """Contract §5.4, §7: an abort that lands while a batch's call is in pre-execute ends
    that call ``ABORTED_BEFORE_DISPATCH`` through post-execute (contexts kept), and no later
    call starts (each ``ABORTED_BEFORE_DISPATCH``, without post-execute)."""

    @pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "exclusive"])
    async def test_the_call_goes_through_post_execute_and_the_rest_never_start(
        self, parallel: bool
    ) -> None:
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)
        caller = AbortController()
        trace: list[str] = []

        @define_tool(name="t", description="", is_concurrency_safe=lambda args: parallel)
        async def tool(args: TextArgs, exec: ToolRunContext) -> str:
            trace.append(f"body {exec.call_id}")
            return "ok"

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            trace.append(f"pre {exec.call_id}")
            if exec.call_id == "b":
                caller.abort("stop")
                await anyio.lowlevel.checkpoint()
            return await next()

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            trace.append(f"post {exec.call_id} {code_of(result)}")
            await next()
            return Accept(additional_contexts=[{"post": exec.call_id}])

        registry.register(tool)
        registry.on_pre_execute(pre)
        registry.on_post_execute(post)
        calls = [ToolCall(call_id, "t", {"text": "x"}) for call_id in ("a", "b", "c")]
        outcomes = await run_tool_calls(registry, calls, signal=caller.signal)
        # In a parallel group ``a`` still waits for its post-execute turn (model order) when
        # the abort comes: its success is not final yet, so it becomes ABORTED (contract §5).
        assert [code_of(outcome.result) for outcome in outcomes] == [
            TOOL_ABORTED if parallel else None,
            TOOL_ABORTED_BEFORE_DISPATCH,
            TOOL_ABORTED_BEFORE_DISPATCH,
        ]
        assert [outcome.dispatched for outcome in outcomes] == [True, True, False]
        assert list(outcomes[1].result.additional_contexts) == [{"post": "b"}]
        assert "pre c" not in trace
        assert "body b" not in trace
        assert f"post b {TOOL_ABORTED_BEFORE_DISPATCH}" in trace
        assert len(published.results) == 3
