"""Clauses about the listeners around a body: pre-execute, post-execute, result observers (§5).

Every stage sees the call's signal and started work is awaited: a scripted listener waits
until it is told of the abort, then cleans up (or works on, ignoring it) at a gate the kit
holds; the call must return only after the listener finished (`Running.awaited`).
"""

from __future__ import annotations

from typing import Literal

from .._driver import Call, Listen, ListenerScript, Outcome, Scenario
from .._kit import Kit, Running
from .._scripts import StageBehaviour, listener
from ._base import clause, describe, expect_awaited, expect_status

Where = Literal["pre", "post"]
_STAGE: dict[Where, str] = {"pre": "pre-execute listener", "post": "post-execute listener"}


def _listener(kit: Kit, where: Where, behaviour: StageBehaviour) -> ListenerScript:
    """A scripted listener of the ``where`` stage, reporting under ``<call id>@<where>``."""

    async def script(call: Call, listen: Listen) -> None:
        await listener(kit.probe, f"{call.call_id}@{where}", _STAGE[where], behaviour, listen)

    return script


async def _abort_in(kit: Kit, where: Where, behaviour: StageBehaviour) -> Running:
    """Start one call whose ``where`` listener behaves so; abort once the listener runs."""
    tools, calls = [kit.tool("t", "ok")], [kit.call("t", "c1")]
    script = _listener(kit, where, behaviour)
    if where == "pre":
        scenario = Scenario(tools=tools, calls=calls, pre_execute=script)
    else:
        scenario = Scenario(tools=tools, calls=calls, post_execute=script)
    running = kit.start(scenario)
    await running.until("entered", f"c1@{where}")
    running.abort()
    return running


async def _told_and_awaited(kit: Kit, where: Where) -> Running:
    """Abort while the listener waits to be told; check it was told, then awaited."""
    key, stage = f"c1@{where}", _STAGE[where]
    running = await _abort_in(kit, where, "hold")
    heard = await running.until("told", key)
    await running.held(key, "cleanup")
    await running.finish()
    if heard.told is None:
        kit.fail(f"the {stage} was never told of the abort")
    if heard.told != "signal":
        kit.fail(f"the {stage} was torn down by {heard.told} instead of being told to stop")
    expect_awaited(kit, running, key, f"the call returned while its {stage} was still pending")
    return running


@clause(
    "listener.pre-abort",
    "An abort while a pre-execute listener is pending is told to it and awaited, then ends "
    "ABORTED_BEFORE_DISPATCH",
    section="§5.4",
    requires=["pre_execute"],
)
async def _pre_abort(kit: Kit) -> str:
    running = await _told_and_awaited(kit, "pre")
    kit.check(not kit.probe.body("c1").entered, "the body ran although the call was aborted")
    expect_status(kit, running.outcome("c1"), "aborted_before_dispatch")
    return "told through its signal, awaited; ABORTED_BEFORE_DISPATCH"


@clause(
    "listener.post-abort",
    "An abort while a post-execute listener is pending is told to it and awaited, then ends "
    "ABORTED: the body ran",
    section="§5, classification",
    requires=["post_execute"],
)
async def _post_abort(kit: Kit) -> str:
    running = await _told_and_awaited(kit, "post")
    kit.check(kit.probe.body("c1").finished, "the body did not run")
    expect_status(kit, running.outcome("c1"), "aborted")
    return "told through its signal, awaited; ABORTED"


@clause(
    "listener.ignored",
    "A pre-execute listener that ignores its signal keeps the call pending until it returns",
    section="§5, quiescence",
    requires=["pre_execute"],
)
async def _ignored(kit: Kit) -> str:
    key, stage = "c1@pre", _STAGE["pre"]
    running = await _abort_in(kit, "pre", "ignore")
    heard = await running.until("told", key)
    if heard.told == "task cancellation":
        await running.finish()
        kit.fail(f"the {stage} was torn down by task cancellation: it could not carry on")
    await running.held(key, "work")
    await running.finish()
    problem = f"the call returned while the {stage} it had told was still working"
    expect_awaited(kit, running, key, problem)
    return "still pending while the told listener worked on"


@clause(
    "observer.one-result",
    "A result observer sees exactly one result per call, even when it raises; the call's "
    "result stands",
    section="§5.9",
    requires=["result_observer"],
)
async def _observer(kit: Kit) -> str:
    seen: list[Outcome] = []

    def observe(outcome: Outcome) -> None:
        seen.append(outcome)
        raise RuntimeError("a scripted observer failure")

    tools, calls = [kit.tool("t", "ok")], [kit.call("t", "c1")]
    running = await kit.run(Scenario(tools=tools, calls=calls, observer=observe))
    outcome = running.outcome("c1")
    mine = [o for o in seen if o.call_id == "c1"]
    kit.check(len(mine) == 1, f"the observer saw {len(mine)} results for one call")
    expect_status(kit, outcome, "ok")
    kit.check(
        mine[0].status == outcome.status,
        f"the observer saw {describe(mine[0])}, the call returned {describe(outcome)}",
    )
    return "one result seen; the raise changed nothing"
