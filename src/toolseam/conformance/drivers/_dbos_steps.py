"""The driver of bare DBOS steps: plain functions as DBOS steps, as a user without toolseam.

Every scenario — durable or not — runs the way a DBOS user writes it: one workflow whose
code makes one DBOS step per call (``@DBOS.step``, wrapping the tool's plain async function),
one after another, or gathered at once when every tool of the batch may run concurrently
(``max_parallel`` of them at a time). The workflow's code turns what each step returned or
raised into the call's outcome. DBOS offers one way to stop work, the workflow's cancel
(``DBOS.cancel_workflow``, through the system database), so that is what the kit's stop
does. The steps are ``preemptible``, DBOS's own answer to a cancel arriving mid-step (it
polls for it once a second and cancels the step's task); without it the body runs on
untold. A cancelled workflow returns nothing, so its outcomes are what its journal holds:
each recorded step's output or error, by step id (the i-th call is step i).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final, final

from dbos import DBOS

from .._driver import Capability, Outcome, Scenario
from ._common import TaskListen, versions
from ._dbos import CallRow, Live, OutcomeRow, missing, row, run_workflow, step

__all__ = ["DBOSStepsDriver", "StepError"]

_LACKING: Final[Mapping[str, str]] = {
    "host_cancel": (
        "a DBOS workflow runs in a task of DBOS's own: cancelling the task that awaits its "
        "handle does not reach it (the handle shields the workflow's task)"
    ),
    "sync_bodies": "not driven: the kit's bodies run as async DBOS steps",
    "timeouts": (
        "not driven: a DBOS step's timeout (`timeout_seconds`) cancels the step's task like a "
        "preemption; this driver does not give the kit's per-tool deadlines to it"
    ),
    "nested": "a DBOS step cannot start another step (DBOS runs it as a plain call)",
    "approval": "DBOS has no approval stage",
    "around_dispatch": "DBOS has no around-dispatch stage",
    "pre_execute": "DBOS has no pre-execute stage",
    "post_execute": "DBOS has no post-execute stage",
    "result_observer": "DBOS has no result observer",
    "progress": "DBOS has no progress reporting from a step",
    "elicitation": "DBOS has no elicitation",
    "process": "DBOS has no process helper",
    "ptc": "DBOS has no code-running tool",
}


class StepError(Exception):
    """What a scripted body raises to fail (a plain exception, recorded by DBOS)."""


@final
class DBOSStepsDriver:
    """Drives bare DBOS (``dbos``): each call one ``@DBOS.step`` of a workflow."""

    @property
    def subject(self) -> str:
        """``"dbos-steps"``."""
        return "dbos-steps"

    @property
    def capabilities(self) -> Collection[Capability]:
        """Batches (several steps in one workflow) and durable workflows."""
        return ("batch", "durable")

    @property
    def lacking(self) -> Mapping[str, str]:
        """Why the other capabilities are missing."""
        return _LACKING

    @property
    def backends(self) -> Sequence[str]:
        """Asyncio only: DBOS runs workflows and steps as asyncio tasks."""
        return ("asyncio",)

    def versions(self) -> Mapping[str, str]:
        """DBOS."""
        return versions("dbos")

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        """Run the scenario's calls as one workflow of bare DBOS steps."""
        tools = {tool.name: tool for tool in scenario.tools}
        parallel = all(tool.parallel for tool in scenario.tools)
        ids = [call.call_id for call in scenario.calls]

        async def body(name: str, arguments: dict[str, str]) -> Any:
            tool = tools.get(name)
            if tool is None:
                raise LookupError(f"unknown tool {name!r}")
            return await tool.run(arguments, TaskListen(StepError))

        async def one(key: str, call: CallRow) -> OutcomeRow:
            call_id, name, arguments = call
            try:
                value = await step(key, name, arguments)
            except Exception as error:
                return row(Outcome(call_id, "error", f"{type(error).__name__}: {error}"))
            return row(Outcome(call_id, "ok", value=value))

        async def code(key: str, calls: list[CallRow], max_parallel: int) -> list[OutcomeRow]:
            if not parallel:
                return [await one(key, call) for call in calls]
            turns = asyncio.Semaphore(max_parallel)

            async def limited(call: CallRow) -> OutcomeRow:
                async with turns:
                    return await one(key, call)

            return list(await asyncio.gather(*(limited(call) for call in calls)))

        async def journal(workflow_id: str) -> Sequence[Outcome]:
            recorded: list[Outcome] = []
            for info in await DBOS.list_workflow_steps_async(workflow_id):
                index = info["function_id"] - 1
                if not 0 <= index < len(ids):
                    continue
                error = info["error"]
                if error is not None:
                    detail = f"{type(error).__name__}: {error}"
                    recorded.append(Outcome(ids[index], "error", detail))
                else:
                    recorded.append(Outcome(ids[index], "ok", value=info["output"]))
            return missing(recorded, ids)

        live = Live(code, journal, body)
        return await run_workflow(scenario, live)
