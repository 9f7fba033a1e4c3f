"""The driver of `toolseam.reference`: the readable reference pipeline (issue 38).

The same scenario plumbing as toolseam's own driver (`prepare`, `define`), on a
`ReferenceRegistry`, with the reference's own ``execute`` and ``run_tool_calls``. It offers
what the reference implements: every clause but programs (``ptc``) and durable execution
(``durable``), which are built on `ToolRegistry` only.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Collection, Mapping, Sequence
from typing import cast, final

from toolseam import AbortController, ToolCall, ToolExecutionInput, ToolRegistry
from toolseam.reference import ReferenceRegistry, run_tool_calls

from .._driver import CAPABILITIES, Capability, Outcome, Scenario
from ._toolseam import OVER_MCP, _Approval, outcome_of, prepare

__all__ = ["ReferenceDriver"]

_LACKING: Mapping[str, str] = {
    "ptc": "toolseam.ptc runs programs on a ToolRegistry; the reference pipeline has none",
    "durable": "toolseam.durable wraps a ToolRegistry; the reference pipeline has no journal",
    **OVER_MCP,
}


@final
class ReferenceDriver:
    """Drives `toolseam.reference.ReferenceRegistry`: `execute`, `run_tool_calls`, every stage."""

    @property
    def subject(self) -> str:
        """``"toolseam-reference"``."""
        return "toolseam-reference"

    @property
    def capabilities(self) -> Collection[Capability]:
        """Every capability but ``ptc`` and ``durable``."""
        return tuple(c for c in CAPABILITIES if c not in _LACKING)

    @property
    def lacking(self) -> Mapping[str, str]:
        """Why ``ptc`` and ``durable`` are missing."""
        return _LACKING

    @property
    def backends(self) -> Sequence[str]:
        """Asyncio and trio."""
        return ("asyncio", "trio")

    def versions(self) -> Mapping[str, str]:
        """Toolseam and anyio."""
        return {name: importlib.metadata.version(name) for name in ("toolseam", "anyio")}

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        """Run the scenario on a fresh reference registry."""
        registry = ReferenceRegistry(_Approval(scenario) if scenario.approval else None)
        # The reference has ToolRegistry's registration API: the same plumbing sets it up.
        host = prepare(cast("ToolRegistry", registry), scenario)
        controller = AbortController()
        scenario.stop.connect(controller.abort)
        if scenario.batch:
            calls = [ToolCall(c.call_id, c.tool, dict(c.arguments)) for c in scenario.calls]
            outcomes = await run_tool_calls(
                registry,
                calls,
                signal=controller.signal,
                max_parallel=scenario.max_parallel,
                host=host,
            )
            return [outcome_of(o.call.call_id, o.result) for o in outcomes]
        (call,) = scenario.calls
        result = await registry.execute(
            ToolExecutionInput(
                call_id=call.call_id,
                name=call.tool,
                arguments=dict(call.arguments),
                signal=controller.signal,
                host=host,
            )
        )
        return [outcome_of(call.call_id, result)]
