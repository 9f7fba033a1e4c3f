"""The toolseam driver's durable scenarios (capability ``durable``): `toolseam.durable`.

Imported only for a scenario with `Durable`, so the kit needs DBOS only then. The calls run
as one `DurableTools.run_tool_calls` batch inside the kit's DBOS workflow (`_dbos`); after a
cancel, the outcomes are those `recorded_outcomes` reads from the journal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from toolseam import AbortController, ToolCall, ToolHost, ToolRegistry
from toolseam.durable import DurableTools, recorded_outcomes

from .._driver import Outcome, Scenario
from ._dbos import CallRow, Live, OutcomeRow, missing, row, run_workflow
from ._toolseam import outcome_of

__all__ = ["POLL_INTERVAL", "run_durable"]

POLL_INTERVAL: Final = 0.02
"""Seconds between two reads of the workflows' status: how soon a cancel reaches a body."""


async def run_durable(
    registry: ToolRegistry,
    scenario: Scenario,
    host: ToolHost | None,
    *,
    make: Callable[[ToolRegistry], Any] | None = None,
) -> Sequence[Outcome]:
    """Run the scenario's calls as one durable batch of a DBOS workflow (see `Durable`).

    ``make(registry)`` builds the `DurableTools` (by default with `POLL_INTERVAL`).
    """
    durable: DurableTools = (
        make(registry) if make is not None else DurableTools(registry, poll_interval=POLL_INTERVAL)
    )
    ids = [call.call_id for call in scenario.calls]

    async def code(key: str, calls: list[CallRow], max_parallel: int) -> list[OutcomeRow]:
        outcomes = await durable.run_tool_calls(
            [ToolCall(*call) for call in calls],
            signal=AbortController().signal,  # the turn's own: never aborted here
            max_parallel=max_parallel,
            host=host,
        )
        return [row(outcome_of(o.call.call_id, o.result)) for o in outcomes]

    async def journal(workflow_id: str) -> Sequence[Outcome]:
        recorded = await recorded_outcomes(workflow_id)
        return missing([outcome_of(o.call.call_id, o.result) for o in recorded], ids)

    try:
        return await run_workflow(scenario, Live(code, journal))
    finally:
        durable.close()
