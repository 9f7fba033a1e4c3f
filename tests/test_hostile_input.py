"""Contract §8: bad input never crashes the registry and never loses a result."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from support import Published, TextArgs, make_input, registry_with_echo
from toolseam import (
    AbortSignal,
    ApprovalAnswer,
    ApprovalRequest,
    Ask,
    Next,
    PostDecision,
    PreDecision,
    ToolDispatchExecution,
    ToolExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
)

ARGS_MESSAGE = "tool execution arguments must be losslessly JSON-serializable"


def _cycle_list() -> object:
    items: list[object] = []
    items.append(items)
    return {"x": items}


def _cycle_dict() -> object:
    mapping: dict[str, object] = {}
    mapping["self"] = mapping
    return mapping


# Each non-JSON input, and the "where: what" detail its failure message must end with.
NON_JSON: dict[str, tuple[Callable[[], object], str]] = {
    "nan": (lambda: {"x": math.nan}, "$.x: float nan is not JSON"),
    "+inf": (lambda: {"x": math.inf}, "$.x: float inf is not JSON"),
    "-inf": (lambda: {"x": -math.inf}, "$.x: float -inf is not JSON"),
    "-0.0": (lambda: {"x": -0.0}, "$.x: -0.0 is not losslessly JSON"),
    "bytes": (lambda: {"x": b"raw"}, "$.x: bytes is not JSON"),
    "set": (lambda: {"x": {1, 2}}, "$.x: set is not JSON"),
    "object": (lambda: {"x": object()}, "$.x: object is not JSON"),
    "non-str key": (lambda: {1: "one"}, "$: dict key 1 (int) is not a string"),
    "cycle through list": (_cycle_list, "$.x[0]: cycle detected"),
    "cycle through dict": (_cycle_dict, "$.self: cycle detected"),
    "top-level set": (lambda: {1}, "$: set is not JSON"),
}


class Hostile(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ refuses")

    def __repr__(self) -> str:
        raise RuntimeError("__repr__ refuses")


@pytest.mark.parametrize("kind", list(NON_JSON))
@pytest.mark.parametrize("pre_aborted", [False, True])
async def test_non_json_arguments_yield_one_failure_and_no_stage_runs(
    kind: str, pre_aborted: bool
) -> None:
    registry, published, trace = registry_with_echo()

    async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        trace.append("pre")
        return await next()

    registry.on_pre_execute(pre)
    signal = AbortSignal.aborted_signal() if pre_aborted else None
    build, detail = NON_JSON[kind]
    result = await registry.execute(make_input(arguments=build(), signal=signal))
    assert isinstance(result, ToolFailure)
    assert result.error.message == f"{ARGS_MESSAGE} ({detail})"
    assert published.only is result
    assert trace == []


async def test_depth_100k_arguments_do_not_raise_recursion_error() -> None:
    registry = ToolRegistry()
    depths: list[int] = []

    @define_tool(name="deep", description="")
    async def deep(args: dict[str, Any], exec: ToolRunContext) -> str:
        return "ok"

    async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        node: Any = exec.arguments
        depth = 0
        while isinstance(node, dict) and "child" in node:
            node = node["child"]
            depth += 1
        depths.append(depth)
        return await next()

    registry.register(deep)
    registry.on_pre_execute(pre)
    value: dict[str, Any] = {}
    root = value
    for _ in range(100_000):
        child: dict[str, Any] = {}
        value["child"] = child
        value = child
    published = Published()
    registry.on_result(published)
    # Validation of a 100k-deep value is pydantic's business; the registry must not crash.
    result = await registry.execute(make_input("deep", root))
    assert depths == [100_000]
    assert published.only is result


async def test_exception_whose_str_and_repr_raise() -> None:
    registry = ToolRegistry()
    published = Published()
    registry.on_result(published)

    @define_tool(name="t", description="")
    async def tool(args: TextArgs, exec: ToolRunContext) -> str:
        raise Hostile

    registry.register(tool)
    result = await registry.execute(make_input("t"))
    assert isinstance(result, ToolFailure)
    assert result.error.message == "<unprintable Hostile>"
    assert published.only is result


def _raise(error: BaseException) -> Any:
    raise error


class _RaisingApprover:
    async def request(self, request: ApprovalRequest, /) -> ApprovalAnswer:
        raise Hostile


async def _ask(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
    return Ask()


def _install(registry: ToolRegistry, where: str) -> None:
    if where == "pre-execute":

        async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
            raise Hostile

        registry.on_pre_execute(pre)
    elif where == "guard":
        registry.add_guard(lambda exec: _raise(Hostile()))
    elif where == "around-dispatch":

        async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            raise Hostile

        registry.on_execute(wrap)
    elif where == "post-execute":

        async def post(
            exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
        ) -> PostDecision:
            raise Hostile

        registry.on_post_execute(post)
    elif where == "observer":
        registry.on_result(lambda exec, result: _raise(Hostile()))
    else:  # pragma: no cover
        raise AssertionError(where)


@pytest.mark.parametrize(
    "where", ["pre-execute", "guard", "around-dispatch", "post-execute", "observer"]
)
async def test_raising_stage_yields_exactly_one_published_result(where: str) -> None:
    registry, published, _ = registry_with_echo()
    _install(registry, where)
    result = await registry.execute(make_input())
    assert published.only is result
    if where == "observer":
        assert not result.is_error
    else:
        assert isinstance(result, ToolFailure)
        assert result.error.message == "<unprintable Hostile>"


async def test_raising_approval_yields_exactly_one_result() -> None:
    registry = ToolRegistry(approval=_RaisingApprover())
    registry.on_pre_execute(_ask)
    published = Published()
    registry.on_result(published)
    result = await registry.execute(make_input())
    assert isinstance(result, ToolFailure)
    assert published.only is result


async def test_raising_finalizer_yields_exactly_one_result() -> None:
    registry = ToolRegistry()
    published = Published()
    registry.on_result(published)

    def finalize(exec: ToolExecution, result: ToolResult) -> None:
        raise Hostile

    @define_tool(name="t", description="", finalize_content=finalize)
    async def tool(args: TextArgs, exec: ToolRunContext) -> str:
        return ""

    registry.register(tool)
    for signal in (None, AbortSignal.aborted_signal()):
        result = await registry.execute(make_input("t", signal=signal))
        assert isinstance(result, ToolFailure)
        assert result.error.message == "<unprintable Hostile>"
    assert len(published.results) == 2


async def test_finalizer_returning_garbage_content_is_an_error_result() -> None:
    registry = ToolRegistry()

    def finalize(exec: ToolExecution, result: ToolResult) -> Any:
        return [object()]

    @define_tool(name="t", description="", finalize_content=finalize)
    async def tool(args: TextArgs, exec: ToolRunContext) -> str:
        return ""

    registry.register(tool)
    result = await registry.execute(make_input("t"))
    assert isinstance(result, ToolFailure)
    assert result.error.message.startswith("content[0] must be losslessly JSON-serializable")


async def test_execute_never_raises_for_many_hostile_calls_at_once() -> None:
    registry, published, _ = registry_with_echo()
    _install(registry, "observer")
    kinds = list(NON_JSON)

    async with anyio.create_task_group() as tg:
        for index, kind in enumerate(kinds):
            tg.start_soon(
                registry.execute, make_input(arguments=NON_JSON[kind][0](), call_id=f"c{index}")
            )
    assert len(published.results) == len(kinds)
