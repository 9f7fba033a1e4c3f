"""Clauses about the stages around a body: approval, wrappers, nested calls (§5, §7)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

from .._driver import Call, Listen, Scenario
from .._kit import Kit
from .._scripts import done, scripted, wrapper
from ._base import clause, describe, expect_awaited, expect_quiet, expect_status

Answer = Literal["approve", "reject", "cancel"]


def _approver(kit: Kit, answer: Answer | None) -> Callable[[Call, Listen], Awaitable[Answer]]:
    """An approver that holds each request at a gate, then answers.

    With ``answer=None`` it answers ``"cancel"`` when its request was told to stop and
    ``"reject"`` otherwise, as a service waiting for a human should.
    """

    async def approve(call: Call, listen: Listen) -> Answer:
        key = f"{call.call_id}@approval"
        async with scripted(kit.probe, key, "approval", listen):
            await kit.probe.gate(key, "approval")
        if answer is not None:
            return answer
        return "cancel" if listen.is_told() else "reject"

    return approve


# -- approval --------------------------------------------------------------------------


@clause(
    "approval.rejected",
    "A rejected approval is a denial: one failure, and no body runs",
    section="§5.4",
    requires=["approval"],
)
async def _rejected(kit: Kit) -> str:
    kit.probe.open("c1@approval:approval")
    scenario = Scenario(
        tools=[kit.tool("t", "ok")], calls=[kit.call("t", "c1")], approval=_approver(kit, "reject")
    )
    running = await kit.run(scenario)
    outcome = running.outcome("c1")
    kit.check(not kit.probe.body("c1").entered, "the body ran although approval was rejected")
    expect_status(kit, outcome, "error")
    return f"a denial: {outcome.detail}"


@clause(
    "abort.during-approval",
    "An abort while approval is pending is awaited, then ends ABORTED_BEFORE_DISPATCH",
    section="§5.4",
    requires=["approval"],
)
async def _during_approval(kit: Kit) -> str:
    scenario = Scenario(
        tools=[kit.tool("t", "ok")], calls=[kit.call("t", "c1")], approval=_approver(kit, "approve")
    )
    running = kit.start(scenario)
    await kit.wait(
        lambda: running.done or kit.probe.body("c1@approval").at_gate == "approval",
        "the approval to be asked",
    )
    running.abort()
    await running.held("c1@approval", "approval")
    await running.finish()
    expect_awaited(
        kit, running, "c1@approval", "the call returned while its approval was still pending"
    )
    kit.check(not kit.probe.body("c1").entered, "the body ran although the call was aborted")
    expect_status(kit, running.outcome("c1"), "aborted_before_dispatch")
    return "awaited; ABORTED_BEFORE_DISPATCH"


@clause(
    "approval.cancelled-vs-rejected",
    "A cancelled approval of an aborted call ends ABORTED_BEFORE_DISPATCH, told apart from "
    "a rejection",
    section="§5.4",
    requires=["approval"],
)
async def _cancelled_vs_rejected(kit: Kit) -> str:
    kit.probe.open("rejected@approval:approval")
    rejected = await kit.run(
        Scenario(
            tools=[kit.tool("t", "ok")],
            calls=[kit.call("t", "rejected")],
            approval=_approver(kit, None),
        )
    )
    running = kit.start(
        Scenario(
            tools=[kit.tool("t", "ok")],
            calls=[kit.call("t", "cancelled")],
            approval=_approver(kit, None),
        )
    )
    await kit.wait(
        lambda: running.done or kit.probe.body("cancelled@approval").at_gate == "approval",
        "the approval to be asked",
    )
    running.abort()
    running.open("cancelled@approval", "approval")
    await running.finish()
    no, cancelled = rejected.outcome("rejected"), running.outcome("cancelled")
    if no.status == cancelled.status:
        kit.fail(
            "a cancelled approval looks like a rejection: "
            f"rejected gives {describe(no)}, cancelled gives {describe(cancelled)}"
        )
    expect_status(kit, no, "error")
    expect_status(kit, cancelled, "aborted_before_dispatch")
    return "a denial vs ABORTED_BEFORE_DISPATCH"


# -- around-dispatch -------------------------------------------------------------------


@clause(
    "abort.before-delegating",
    "An abort while a wrapper holds the call before delegating ends ABORTED_BEFORE_DISPATCH",
    section="§5, classification",
    requires=["around_dispatch"],
)
async def _before_delegating(kit: Kit) -> str:
    probe = kit.probe
    scenario = Scenario(
        tools=[kit.tool("t", "ok")], calls=[kit.call("t", "c1")], around=wrapper(probe, "before")
    )
    running = kit.start(scenario)
    await kit.wait(
        lambda: running.done or probe.body("c1@wrapper").at_gate == "before",
        "the wrapper to hold the call",
    )
    running.abort()
    await running.held("c1@wrapper", "before")
    await running.finish()
    expect_awaited(
        kit, running, "c1@wrapper", "the call returned while its wrapper was still holding it"
    )
    kit.check(not probe.body("c1").entered, "the body ran although the call was aborted first")
    expect_status(kit, running.outcome("c1"), "aborted_before_dispatch")
    return "ABORTED_BEFORE_DISPATCH, no body"


@clause(
    "abort.after-body-in-wrapper",
    "An abort after the body returned, while a wrapper still holds the call, ends ABORTED",
    section="§5, classification",
    requires=["around_dispatch"],
)
async def _after_body(kit: Kit) -> str:
    probe = kit.probe
    tools, calls = [kit.tool("t", "ok")], [kit.call("t", "c1")]
    scenario = Scenario(tools=tools, calls=calls, around=wrapper(probe, "after"))
    running = kit.start(scenario)
    await kit.wait(
        lambda: running.done or probe.body("c1@wrapper").at_gate == "after",
        "the wrapper to hold the call",
    )
    running.abort()
    running.open("c1@wrapper", "after")
    await running.finish()
    kit.check(probe.body("c1").finished, "the body did not run")
    expect_status(kit, running.outcome("c1"), "aborted")
    return "ABORTED"


# -- nested calls ----------------------------------------------------------------------


@clause(
    "nested.result",
    "A nested call made from a body returns its own result to that body",
    section="§7, nested dispatch",
    requires=["nested"],
)
async def _nested_result(kit: Kit) -> str:
    tools = [kit.tool("outer", "nest_ok"), kit.tool("ok", "ok")]
    running = await kit.run(Scenario(tools=tools, calls=[kit.call("outer", "c1")]))
    outcome = running.outcome("c1")
    expect_status(kit, outcome, "ok")
    wanted = f"{done('c1')}|ok:{done('c1/child')}"
    kit.check(outcome.value == wanted, f"the value is {outcome.value!r}, expected {wanted!r}")
    return "the child's value reached the parent"


@clause(
    "nested.parent-signal",
    "Aborting the outer call reaches a nested body through the parent's signal; both end "
    "ABORTED, both finished",
    section="§7, nested dispatch",
    requires=["nested"],
)
async def _nested_signal(kit: Kit) -> str:
    tools = [kit.tool("outer", "nest_hold"), kit.tool("hold", "hold")]
    running = kit.start(Scenario(tools=tools, calls=[kit.call("outer", "c1")]))
    await running.until("entered", "c1/child")
    running.abort()
    child = await running.until("told", "c1/child")
    running.open("c1/child", "cleanup")
    await running.finish()
    kit.check(child.told is not None, "the nested body was never told of the abort")
    kit.check(child.told == "signal", f"the nested body was torn down by {child.told}")
    effects = kit.probe.body("c1").effects
    kit.check(
        "child:aborted" in effects, f"the nested call did not end ABORTED for its parent: {effects}"
    )
    expect_quiet(kit, running)
    expect_status(kit, running.outcome("c1"), "aborted")
    return "told; both ABORTED"
