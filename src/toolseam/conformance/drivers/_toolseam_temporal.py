"""The driver of toolseam's Temporal engine: `toolseam.durable.temporal.TemporalTools`.

A durable scenario (capability ``durable``) runs its calls as one
`TemporalTools.run_tool_calls` batch inside the kit's workflow (`_temporal`): each call one
``toolseam.call`` activity on the scenario's worker, the kit's stop the workflow's cancel
through the client, and after a cancel or a deadline the outcomes `recorded_outcomes` reads
from the history. ``then="replay"`` runs the workflow again from its history with
``temporalio.worker.Replayer``. ``then="recover"`` makes the last call's first attempt fail
after its body ran, as a worker dying before the outcome was recorded leaves it: Temporal
runs the activity again with the heartbeat details of the attempt before (the dispatch
marker), which is all a retry after a real death sees. (A workflow reset cannot simulate
it: a reset drops the heartbeat details.)

Every other scenario runs on the registry itself, as the ``toolseam`` driver runs it:
outside a workflow `TemporalTools` runs calls plainly, so those rows are toolseam's.
Temporal runs on asyncio only: on trio the driver lacks ``durable``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Collection, Mapping, Sequence
from datetime import timedelta
from typing import Any, Final, final

from .._driver import CAPABILITIES, Capability, Outcome, Scenario

__all__ = ["HEARTBEAT_INTERVAL", "ToolseamTemporalDriver"]

HEARTBEAT_INTERVAL: Final = 0.05
"""Seconds between two heartbeats of a running call: how soon a cancel reaches a body."""

ACTIVITY: Final = "toolseam.call"
"""The activity type of every call of `TemporalTools` (its documented name)."""


def lacking() -> dict[str, str]:
    """The capabilities this driver lacks here, and why."""
    from ._toolseam import lacking as toolseam_lacking

    why = {k: v for k, v in toolseam_lacking().items() if k != "durable"}
    if importlib.util.find_spec("temporalio") is None:
        why["durable"] = (
            "toolseam.durable.temporal needs Temporal (pip install 'toolseam[temporal]')"
        )
    else:
        import sniffio

        try:
            library: str | None = sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            library = None
        if library == "trio":
            why["durable"] = (
                "toolseam.durable.temporal runs on asyncio only: Temporal runs workflows and "
                "activities on asyncio and cannot host trio"
            )
    return why


@final
class ToolseamTemporalDriver:
    """Drives toolseam with its Temporal engine: durable batches as Temporal activities.

    Making it starts the kit's Temporal dev server in the background (`_temporal.warm_up`).
    """

    def __init__(self) -> None:
        if importlib.util.find_spec("temporalio") is not None:
            from ._temporal import warm_up

            warm_up()

    @property
    def subject(self) -> str:
        """``"toolseam-temporal"``."""
        return "toolseam-temporal"

    @property
    def capabilities(self) -> Collection[Capability]:
        """Every capability toolseam's driver has, ``durable`` on Temporal."""
        missing = lacking()
        return tuple(c for c in CAPABILITIES if c not in missing)

    @property
    def lacking(self) -> Mapping[str, str]:
        """Why a capability is missing here."""
        return lacking()

    @property
    def backends(self) -> Sequence[str]:
        """Asyncio only: Temporal runs workflows and activities on asyncio."""
        return ("asyncio",)

    def versions(self) -> Mapping[str, str]:
        """Toolseam, anyio and temporalio."""
        names = ["toolseam", "anyio"]
        if importlib.util.find_spec("temporalio") is not None:
            names.append("temporalio")
        return {name: importlib.metadata.version(name) for name in names}

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        """Run the scenario on a fresh registry; a durable one as a Temporal workflow."""
        from ._toolseam import registry_for, run_on

        registry = registry_for(scenario)
        if scenario.durable is None:
            return await run_on(registry, scenario)
        return await _run_durable(registry, scenario)


async def _run_durable(registry: Any, scenario: Scenario) -> Sequence[Outcome]:
    from temporalio import activity
    from temporalio.client import Client
    from temporalio.exceptions import ApplicationError

    from toolseam import AbortController, ToolCall
    from toolseam.durable.temporal import TemporalTools, recorded_outcomes

    from ._temporal import CRASH, CallRow, Live, OutcomeRow, missing, row, run_workflow
    from ._toolseam import outcome_of, prepare

    prepare(registry, scenario)  # progress and elicitation do not cross into activities
    tools = TemporalTools(
        registry,
        heartbeat_interval=HEARTBEAT_INTERVAL,
        heartbeat_timeout=timedelta(seconds=2),
        grace=timedelta(milliseconds=500),
    )
    ids = [call.call_id for call in scenario.calls]
    crash = scenario.durable is not None and scenario.durable.then == "recover"
    last = ids[-1] if ids else None
    (inner,) = tools.activities

    @activity.defn(name=ACTIVITY)
    async def call(request: dict[str, Any]) -> Any:
        result = await inner(request)
        if (
            crash
            and request.get("record") is None
            and request.get("call_id") == last
            and activity.info().attempt == 1
        ):
            # The worker "dies" after the body ran, before its outcome is recorded.
            raise ApplicationError(CRASH)
        return result

    async def code(calls: list[CallRow], max_parallel: int) -> list[OutcomeRow]:
        outcomes = await tools.run_tool_calls(
            [ToolCall(*c) for c in calls],
            signal=AbortController().signal,  # the turn's own: never aborted here
            max_parallel=max_parallel,
        )
        return [row(outcome_of(o.call.call_id, o.result)) for o in outcomes]

    async def journal(client: Client, workflow_id: str) -> Sequence[Outcome]:
        recorded = await recorded_outcomes(client, workflow_id)
        return missing([outcome_of(o.call.call_id, o.result) for o in recorded], ids)

    try:
        return await run_workflow(scenario, Live(code, journal, [call]))
    finally:
        tools.close()
