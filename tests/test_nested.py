"""Contract §7: nested dispatch forwards the outer call's signal explicitly."""

from __future__ import annotations

import anyio

from support import Published, TextArgs, code_of, make_input
from toolseam import (
    TOOL_ABORTED,
    AbortController,
    AbortSignal,
    ExecutionToken,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
    nested_input,
)


def _composite_registry() -> tuple[ToolRegistry, Published, list[ToolRunContext]]:
    registry = ToolRegistry()
    published = Published()
    registry.on_result(published)
    seen: list[ToolRunContext] = []

    @define_tool(name="leaf", description="Wait until aborted.")
    async def leaf(args: TextArgs, exec: ToolRunContext) -> str:
        seen.append(exec)
        await exec.signal.wait()
        exec.signal.raise_if_aborted()
        return args["text"]

    @define_tool(name="fan_out", description="Call leaf three times concurrently.")
    async def fan_out(args: TextArgs, exec: ToolRunContext) -> list[str]:
        results: list[ToolResult] = []

        async def one(index: int) -> None:
            call = nested_input(
                exec, call_id=f"{exec.call_id}.{index}", name="leaf", arguments={"text": "x"}
            )
            results.append(await registry.execute(call))

        async with anyio.create_task_group() as tg:
            for index in range(3):
                tg.start_soon(one, index)
        exec.signal.raise_if_aborted()
        return [str(r.is_error) for r in results]

    registry.register(leaf)
    registry.register(fan_out)
    return registry, published, seen


class TestNestedInput:
    async def test_forwards_signal_parent_root_and_agent(self) -> None:
        registry = ToolRegistry()
        built: list[object] = []
        agent = object()

        @define_tool(name="outer", description="")
        async def outer(args: TextArgs, exec: ToolRunContext) -> str:
            call = nested_input(exec, call_id="inner-1", name="other", arguments={"a": 1})
            built.append((call, exec.signal, exec.token))
            return ""

        registry.register(outer)
        await registry.execute(make_input("outer", call_id="c1", agent=agent, root_call_id="r0"))
        [(call, signal, token)] = built
        assert call.signal is signal
        assert call.parent is token
        assert call.root_call_id == "r0"
        assert call.agent is agent
        assert (call.call_id, call.name, call.arguments) == ("inner-1", "other", {"a": 1})


class TestCompositeTools:
    async def test_abort_of_the_outer_call_reaches_every_nested_body(self) -> None:
        registry, published, seen = _composite_registry()
        caller = AbortController()
        results: list[ToolResult] = []

        async def call() -> None:
            results.append(await registry.execute(make_input("fan_out", signal=caller.signal)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.wait_all_tasks_blocked()
            assert len(seen) == 3
            caller.abort("user pressed stop")
        assert code_of(results[0]) == TOOL_ABORTED
        codes = [code_of(r) for r in published.results]
        assert codes == [TOOL_ABORTED] * 4  # three leaves, then the composite
        assert caller.signal._listener_count() == 0

    async def test_parent_tokens_are_visible_to_observers(self) -> None:
        registry, published, _ = _composite_registry()
        caller = AbortController()
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("fan_out", signal=caller.signal))
            await anyio.wait_all_tasks_blocked()
            caller.abort()
        outer_token = published.tokens[-1]
        assert published.parents[-1] is None
        assert published.parents[:3] == [outer_token] * 3
        assert all(isinstance(t, ExecutionToken) for t in published.tokens)

    async def test_nested_root_call_id_is_the_outermost_call(self) -> None:
        registry, _, seen = _composite_registry()
        caller = AbortController()
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                registry.execute, make_input("fan_out", call_id="root", signal=caller.signal)
            )
            await anyio.wait_all_tasks_blocked()
            caller.abort()
        assert [v.root_call_id for v in seen] == ["root"] * 3
        assert sorted(v.call_id for v in seen) == ["root.0", "root.1", "root.2"]

    async def test_pre_aborted_nested_call_never_reaches_its_body(self) -> None:
        registry, published, seen = _composite_registry()
        call = make_input("leaf", signal=AbortSignal.aborted_signal())
        result = await registry.execute(call)
        assert code_of(result) == "ABORTED_BEFORE_DISPATCH"
        assert seen == []
        assert published.only is result
