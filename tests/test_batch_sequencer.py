"""Edges of `run_tool_calls`' sequencer found by an adversarial review (contract §5, §7).

The sequencer runs pre- and post-execute in the task that holds its role, dispatches each
call there, and hands the role to a new task of the group when a body blocks. Each test
names what broke. Tests that rely on asyncio's own task API (``Task.cancel``, task
factories) pin ``anyio_backend`` to asyncio; the rest run on asyncio and trio.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

import anyio
import pytest
from typing_extensions import TypedDict

from support import code_of
from toolseam import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    AbortController,
    Next,
    PreDecision,
    ToolCall,
    ToolExecution,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)


class Id(TypedDict):
    id: str


def _calls(*ids: str) -> list[ToolCall]:
    return [ToolCall(i, "p", {"id": i}) for i in ids]


def _published(registry: ToolRegistry) -> dict[str, str | None]:
    published: dict[str, str | None] = {}

    def observe(exec: ToolExecution, result: ToolResult) -> None:
        assert exec.call_id not in published, f"{exec.call_id} published twice"
        published[exec.call_id] = code_of(result)

    registry.on_result(observe)
    return published


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_holder_cancelled_before_it_ever_ran_loses_no_result() -> None:
    """c1's body has ended and waits for post-execute when the host cancels; the new holder
    (spawned as c2 blocked) is cancelled before its first step, so its own handler never
    runs: c1 is still published, and nothing stays in flight.

    The window is one loop turn wide, and asyncio runs ready callbacks in order: one
    checkpoint after c1's gate opens lets c1 end and the holder start c2 and spawn the next
    holder, which has not run yet when the host cancels.
    """
    registry = ToolRegistry()
    published = _published(registry)
    loop = asyncio.get_running_loop()
    gates = {i: loop.create_future() for i in ("c0", "c1", "c2")}

    @define_tool(name="p", description="", is_concurrency_safe=lambda args: True)
    async def body(args: Id, exec: ToolRunContext) -> str:
        await gates[args["id"]]
        return args["id"]

    registry.register(body)
    host = asyncio.ensure_future(
        run_tool_calls(
            registry, _calls("c0", "c1", "c2"), signal=AbortController().signal, max_parallel=2
        )
    )
    await anyio.wait_all_tasks_blocked()  # c0 and c1 blocked; the holder waits for a slot
    gates["c1"].set_result(None)  # c1's body ends, and wakes the holder (which starts c2)
    await anyio.lowlevel.checkpoint()
    host.cancel()
    with pytest.raises(asyncio.CancelledError):
        await host
    assert sorted(published) == ["c0", "c1", "c2"]
    await registry.wait_idle()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_call_settled_in_its_own_task_does_not_stall_the_batch() -> None:
    """The common "cancel my task when my signal aborts" pattern: calls b and c end in their
    own tasks' dispatch stages (ABORTED, published there); the holder moves past them."""
    registry = ToolRegistry()
    published = _published(registry)
    stop = AbortController()
    blocked = anyio.Event()

    @define_tool(name="p", description="", is_concurrency_safe=lambda args: True)
    async def body(args: Id, exec: ToolRunContext) -> str:
        await anyio.lowlevel.checkpoint()  # blocks once: b and c run in tasks of the group
        if args["id"] == "a":  # in the task awaiting run_tool_calls: it stops as told
            await exec.signal.wait()
            exec.signal.raise_if_aborted()
        task = asyncio.current_task()
        assert task is not None
        exec.signal.add_listener(lambda signal: task.cancel())
        if args["id"] == "c":
            blocked.set()
        await anyio.sleep_forever()
        return args["id"]

    registry.register(body)
    outcomes: list[str | None] = []

    async def batch() -> None:
        result = await run_tool_calls(registry, _calls("a", "b", "c"), signal=stop.signal)
        outcomes.extend(code_of(o.result) for o in result)

    async with anyio.create_task_group() as tg:
        tg.start_soon(batch)
        await blocked.wait()
        await anyio.wait_all_tasks_blocked()
        stop.abort("user pressed stop")
    assert outcomes == [TOOL_ABORTED] * 3
    assert published == {"a": TOOL_ABORTED, "b": TOOL_ABORTED, "c": TOOL_ABORTED}


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_body_that_cancels_its_own_task_does_not_stall_the_batch() -> None:
    registry = ToolRegistry()
    published = _published(registry)

    @define_tool(name="p", description="", is_concurrency_safe=lambda args: True)
    async def body(args: Id, exec: ToolRunContext) -> str:
        await anyio.lowlevel.checkpoint()
        if args["id"] == "b":
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
        await anyio.lowlevel.checkpoint()
        return args["id"]

    registry.register(body)
    outcomes = await run_tool_calls(
        registry, _calls("a", "b", "c"), signal=AbortController().signal
    )
    assert [code_of(o.result) for o in outcomes] == [None, TOOL_ABORTED, None]
    assert published == {"a": None, "b": TOOL_ABORTED, "c": None}


@pytest.mark.parametrize("blocked", [1, 3])
async def test_host_cancellation_propagates_bare(blocked: int) -> None:
    """Contract §5: the host's cancellation comes out unchanged, not in an exception group
    (trio's nursery wraps it), so ``except get_cancelled_exc_class()`` still matches."""
    registry = ToolRegistry()
    published = _published(registry)

    @define_tool(name="p", description="", is_concurrency_safe=lambda args: True)
    async def body(args: Id, exec: ToolRunContext) -> str:
        await exec.signal.wait()
        return args["id"]

    registry.register(body)
    caught: list[BaseException] = []

    async def batch() -> None:
        ids = [f"c{i}" for i in range(blocked)]
        try:
            await run_tool_calls(registry, _calls(*ids), signal=AbortController().signal)
        except anyio.get_cancelled_exc_class() as cancelled:
            caught.append(cancelled)
            raise

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(batch)
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
    assert len(caught) == 1
    assert list(published.values()) == [TOOL_ABORTED] * blocked


async def test_no_call_starts_after_a_host_cancellation_a_stage_deferred() -> None:
    """A pre-execute listener shields its work when the host cancels; afterwards no further
    call starts (on trio a new task runs until its first checkpoint even when cancelled, and
    a body's first yield then looked like blocking: every call of the batch was started)."""
    registry = ToolRegistry()
    published = _published(registry)
    started: list[str] = []
    in_shield = anyio.Event()
    leave_shield = anyio.Event()

    async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        if exec.call_id == "c1":
            with anyio.CancelScope(shield=True):
                in_shield.set()
                await leave_shield.wait()  # an audit write that must complete
        return await next()

    @define_tool(name="p", description="", is_concurrency_safe=lambda args: True)
    async def body(args: Id, exec: ToolRunContext) -> str:
        started.append(args["id"])
        await exec.signal.wait()
        return args["id"]

    registry.register(body)
    registry.on_pre_execute(pre)
    ids = [f"c{i}" for i in range(8)]
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: run_tool_calls(registry, _calls(*ids), signal=AbortController().signal)
            )
            await in_shield.wait()
            scope.cancel()
            leave_shield.set()
    assert started in (["c0"], ["c0", "c1"])  # c1's pre-execute had begun: it may finish
    assert set(published) == set(started) | {"c1"}
    assert all(code in (TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH) for code in published.values())
    await registry.wait_idle()


@pytest.mark.skipif(sys.version_info < (3, 12), reason="asyncio.eager_task_factory: 3.12+")
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_eager_task_factory_and_many_blocked_bodies() -> None:
    """Each new holder ran inside the step of the one before, as deep as bodies blocked:
    400 of them ended in a RecursionError, one result published and bodies abandoned."""
    registry = ToolRegistry()
    published = _published(registry)

    @define_tool(name="p", description="", is_concurrency_safe=lambda args: True)
    async def body(args: Id, exec: ToolRunContext) -> str:
        await anyio.lowlevel.checkpoint()
        return args["id"]

    registry.register(body)
    loop = asyncio.get_running_loop()
    factory = loop.get_task_factory()
    loop.set_task_factory(asyncio.eager_task_factory)  # type: ignore[attr-defined,unused-ignore]
    try:
        ids = [f"c{i}" for i in range(400)]
        outcomes = await run_tool_calls(
            registry, _calls(*ids), signal=AbortController().signal, max_parallel=400
        )
    finally:
        loop.set_task_factory(factory)
    assert [o.result.is_error for o in outcomes] == [False] * 400
    assert len(published) == 400


class _OwnBaseException(BaseException):
    """A ``BaseException`` of a tool's own, neither an interrupt nor a cancellation."""


INTERRUPTS: dict[str, Callable[[], BaseException]] = {
    "KeyboardInterrupt": KeyboardInterrupt,
    "GeneratorExit": GeneratorExit,
    "CancelledError as a value": asyncio.CancelledError,
    "own BaseException": _OwnBaseException,
    "BaseExceptionGroup": lambda: BaseExceptionGroup("two", [KeyboardInterrupt(), ValueError()]),
}


@pytest.mark.parametrize("interrupt", list(INTERRUPTS))
@pytest.mark.parametrize("where", ["body", "blocked body", "pre-execute", "post-execute"])
@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "exclusive"])
async def test_an_interrupt_from_a_call_is_held_until_every_call_has_its_result(
    where: str, parallel: bool, interrupt: str
) -> None:
    """Contract §7: a ``KeyboardInterrupt`` raised for call ``b`` (its body, before or after
    it blocked, or a stage's listener) once ``b`` has its result: ``a`` finishes its work,
    ``c`` never starts and ends ``ABORTED_BEFORE_DISPATCH``, then the interrupt propagates
    bare, the same on both backends (it tore the batch down, or came out in a group).

    Any other ``BaseException`` that is not the host's cancellation (a ``GeneratorExit``, a
    tool's own, a group) is held the same way: before, it tore the batch down, left ``c``
    without a result and came out wrapped in the task group's exception group."""
    error = INTERRUPTS[interrupt]()
    registry = ToolRegistry()
    published = _published(registry)
    a_may_finish = anyio.Event()
    finished: list[str] = []

    @define_tool(name="p", description="", is_concurrency_safe=lambda args: parallel)
    async def body(args: Id, exec: ToolRunContext) -> str:
        if args["id"] == "a" and parallel:
            await a_may_finish.wait()  # still running when b's interrupt comes
        if args["id"] == "b" and where.endswith("body"):
            a_may_finish.set()
            if where == "blocked body":
                await anyio.lowlevel.checkpoint()
            raise error
        finished.append(args["id"])
        return args["id"]

    async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        await anyio.lowlevel.checkpoint()
        if exec.call_id == "b" and where == "pre-execute":
            a_may_finish.set()
            raise error
        return await next()

    async def post(exec: ToolExecution, result: ToolResult, next: Next[object]) -> object:
        await anyio.lowlevel.checkpoint()
        if exec.call_id == "a":
            a_may_finish.set()
        if exec.call_id == "b" and where == "post-execute":
            raise error
        return await next()

    registry.register(body)
    registry.on_pre_execute(pre)
    registry.on_post_execute(post)  # type: ignore[arg-type]
    if where == "post-execute" and parallel:
        a_may_finish.set()
    with pytest.raises(BaseException) as raised:
        await run_tool_calls(registry, _calls("a", "b", "c"), signal=AbortController().signal)
    assert raised.value is error
    assert "a" in finished
    assert sorted(published) == ["a", "b", "c"]
    if parallel and where in ("blocked body", "post-execute"):
        # c may have started meanwhile (b's body blocked, or b waited for its post-execute
        # turn): then it finishes like a; otherwise it never starts.
        assert (published["c"], "c" in finished) in (
            (None, True),
            (TOOL_ABORTED_BEFORE_DISPATCH, False),
        )
    else:
        assert published["c"] == TOOL_ABORTED_BEFORE_DISPATCH
        assert "c" not in finished
    await registry.wait_idle()
