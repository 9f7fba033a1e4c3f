"""The toolseam driver's code call (capability ``ptc``): `toolseam.ptc`'s ``run_code``.

Imported only for a scenario with a program, so the kit needs pydantic-monty only then.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, cast

from toolseam import AbortSignal, JsonValue, ToolExecutionInput, ToolRegistry, ToolSuccess
from toolseam.ptc import CONTEXT_KEY, PtcTool, ptc_tool

from .._driver import Outcome, Scenario, Status
from ._common import monty_program

__all__ = ["GRACE", "run_program"]

GRACE: Final = 0.05
"""Seconds a stopped program keeps its sandbox before the kill (the kit's programs spin)."""

_STATUS: Final[Mapping[str, Status]] = {
    "OK": "ok",
    "ABORTED": "aborted",
    "ABORTED_BEFORE_DISPATCH": "aborted_before_dispatch",
    "TOOL_TIMEOUT": "timeout",
}


async def run_program(
    registry: ToolRegistry,
    scenario: Scenario,
    signal: AbortSignal,
    *,
    build: Callable[..., PtcTool] = ptc_tool,
) -> Sequence[Outcome]:
    """Run the scenario's program with ``run_code``; its outcome, then the nested calls'.

    ``build`` makes the ``run_code`` tool (`ptc_tool`'s arguments).
    """
    from ._toolseam import outcome_of  # a cycle otherwise: _toolseam imports this lazily

    program = scenario.program
    assert program is not None
    (call,) = scenario.calls
    tools = [tool.name for tool in scenario.tools]
    async with build(registry, tools=tools, grace=GRACE) as run_code:
        registry.register(run_code)
        context: Mapping[str, Any] = {}
        try:
            result = await registry.execute(
                ToolExecutionInput(
                    call_id=call.call_id,
                    name=run_code.name,
                    arguments={"code": monty_program(program)},
                    signal=signal,
                )
            )
            context = _context(result.additional_contexts)
        finally:
            # The moment run_code returned (or let a host's cancellation go on): closing the
            # tool below waits for anything it left behind, which must not count.
            if scenario.code_returned is not None:
                pid = context.get("worker_pid")
                scenario.code_returned([pid] if isinstance(pid, int) else [])
    if isinstance(result, ToolSuccess):
        value = cast("Mapping[str, JsonValue]", result.value)
        outcomes = [Outcome(call.call_id, "ok", value=value["output"])]
    else:
        outcomes = [outcome_of(call.call_id, result)]
    # What run_code tells the model about each nested call (its list of calls).
    listed = cast("Sequence[Mapping[str, Any]]", context.get("nested_calls") or ())
    for entry in listed:
        key = cast("Mapping[str, object]", entry["arguments"]).get("key")
        code = str(entry["code"])
        outcomes.append(Outcome(str(key), _STATUS.get(code, "error"), "run_code's list of calls"))
    return outcomes


def _context(contexts: Sequence[JsonValue]) -> Mapping[str, Any]:
    """The context run_code adds to every result of a run that started (`CONTEXT_KEY`)."""
    for context in contexts:
        if isinstance(context, Mapping) and CONTEXT_KEY in context:
            return cast("Mapping[str, Any]", context[CONTEXT_KEY])
    return {}
