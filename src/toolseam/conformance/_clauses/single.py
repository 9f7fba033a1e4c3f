"""Clauses about one call: its one result, and an abort at each moment (contract §4, §5)."""

from __future__ import annotations

from .._driver import Scenario
from .._kit import Kit
from .._scripts import done
from ._base import clause, describe, expect_awaited, expect_quiet, expect_status

# -- one result ------------------------------------------------------------------------


@clause(
    "result.success",
    "A successful call returns exactly one success, carrying the body's value",
    section="§5.9",
)
async def _success(kit: Kit) -> str:
    running = await kit.run(Scenario(tools=[kit.tool("t", "ok")], calls=[kit.call("t", "c1")]))
    outcome = running.outcome("c1")
    expect_status(kit, outcome, "ok")
    kit.check(outcome.value == done("c1"), f"the value is {outcome.value!r}, not 'done:c1'")
    published = running.published("c1")
    kit.check(len(published) <= 1, f"the registry announced {len(published)} results for one call")
    return "one success with the body's value"


@clause(
    "result.failure",
    "A body that raises gives exactly one failure result, not an exception",
    section="§4",
)
async def _failure(kit: Kit) -> str:
    running = await kit.run(Scenario(tools=[kit.tool("t", "fail")], calls=[kit.call("t", "c1")]))
    outcome = running.outcome("c1")
    expect_status(kit, outcome, "error")
    return f"one failure: {outcome.detail}"


@clause(
    "result.unknown-tool",
    "A call of an unknown tool gives one failure and runs no body",
    section="§5.6",
)
async def _unknown(kit: Kit) -> str:
    running = await kit.run(
        Scenario(tools=[kit.tool("t", "ok")], calls=[kit.call("no_such_tool", "c1")])
    )
    outcome = running.outcome("c1")
    expect_status(kit, outcome, "error")
    return f"one failure: {outcome.detail}"


@clause(
    "result.one-when-aborted",
    "An aborted call still gives exactly one result",
    section="§5.9",
)
async def _one_when_aborted(kit: Kit) -> str:
    running = kit.start(Scenario(tools=[kit.tool("t", "hold")], calls=[kit.call("t", "c1")]))
    await running.until("entered", "c1")
    running.abort()
    await running.finish()
    outcome = running.outcome("c1")
    kit.check(outcome.status != "none", f"the aborted call gave no result: {outcome.detail}")
    published = running.published("c1")
    kit.check(len(published) <= 1, f"the registry announced {len(published)} results for one call")
    return f"one result: {describe(outcome)}"


# -- ran vs never ran ------------------------------------------------------------------


@clause(
    "abort.pre-aborted",
    "A call whose signal is already aborted ends ABORTED_BEFORE_DISPATCH and runs no body",
    section="§5.3",
)
async def _pre_aborted(kit: Kit) -> str:
    scenario = Scenario(tools=[kit.tool("t", "ok")], calls=[kit.call("t", "c1")])
    scenario.stop._press()
    running = await kit.run(scenario)
    outcome = running.outcome("c1")
    kit.check(not kit.probe.body("c1").entered, "the body ran although the call was pre-aborted")
    expect_status(kit, outcome, "aborted_before_dispatch")
    return "ABORTED_BEFORE_DISPATCH, no body"


@clause(
    "abort.ran",
    "A call aborted while its body runs ends ABORTED",
    section="§5, classification",
)
async def _ran(kit: Kit) -> str:
    running = kit.start(Scenario(tools=[kit.tool("t", "hold")], calls=[kit.call("t", "c1")]))
    await running.until("entered", "c1")
    running.abort()
    await running.finish()
    expect_status(kit, running.outcome("c1"), "aborted")
    return "ABORTED"


@clause(
    "abort.ran-vs-never-ran",
    "'Aborted after the body ran' and 'aborted before it ran' are two different results",
    section="§4",
)
async def _ran_vs_never_ran(kit: Kit) -> str:
    never = Scenario(tools=[kit.tool("t", "ok")], calls=[kit.call("t", "before")])
    never.stop._press()
    first = await kit.run(never)
    ran = kit.start(Scenario(tools=[kit.tool("t", "hold")], calls=[kit.call("t", "during")]))
    await ran.until("entered", "during")
    ran.abort()
    await ran.finish()
    before, during = first.outcome("before"), ran.outcome("during")
    if before.status == during.status or "none" in (before.status, during.status):
        kit.fail(
            "the registry cannot tell a body that never ran from one that did: "
            f"pre-aborted gives {describe(before)}, aborted mid-body gives {describe(during)}"
        )
    expect_status(kit, before, "aborted_before_dispatch")
    expect_status(kit, during, "aborted")
    return "ABORTED_BEFORE_DISPATCH vs ABORTED"


@clause(
    "abort.asks-the-body",
    "An abort reaches the running body through the registry's signal, not by tearing it down",
    section="§5, quiescence",
)
async def _asks(kit: Kit) -> str:
    running = kit.start(Scenario(tools=[kit.tool("t", "hold")], calls=[kit.call("t", "c1")]))
    await running.until("entered", "c1")
    running.abort()
    body = await running.until("told", "c1")
    await running.finish()
    if body.told is None:
        kit.fail("the body was never told of the abort")
    if body.told != "signal":
        kit.fail(f"the body was torn down by {body.told} instead of being asked to stop")
    return "told through its signal"


@clause(
    "abort.quiescent",
    "An aborted call returns only once its body has finished, cleanup included",
    section="§5, quiescence",
)
async def _quiescent(kit: Kit) -> str:
    running = kit.start(Scenario(tools=[kit.tool("t", "hold")], calls=[kit.call("t", "c1")]))
    await running.until("entered", "c1")
    running.abort()
    await running.held("c1", "cleanup")
    await running.finish()
    expect_awaited(kit, running, "c1", "the call returned while its body was still cleaning up")
    expect_quiet(kit, running)
    return "pending until the body finished"


@clause(
    "abort.no-racing",
    "A body that ignores its signal keeps the call pending until the body returns",
    section="§5, quiescence",
)
async def _no_racing(kit: Kit) -> str:
    running = kit.start(Scenario(tools=[kit.tool("t", "ignore")], calls=[kit.call("t", "c1")]))
    await running.until("entered", "c1")
    running.abort()
    body = await running.until("told", "c1")
    if body.told == "task cancellation":
        await running.finish()
        kit.fail("the body was torn down by task cancellation: it could not carry on")
    await running.held("c1", "work")
    await running.finish()
    expect_awaited(
        kit, running, "c1", "the call returned while the body it had told was still working"
    )
    expect_quiet(kit, running)
    return "still pending while the told body worked on"


@clause(
    "abort.replaces-success",
    "A body that succeeds after the abort still ends ABORTED (cancellation replaces success)",
    section="§5, classification",
)
async def _replaces_success(kit: Kit) -> str:
    running = kit.start(Scenario(tools=[kit.tool("t", "ignore")], calls=[kit.call("t", "c1")]))
    await running.until("entered", "c1")
    running.abort()
    await running.until("told", "c1")
    running.open("c1", "work")
    await running.finish()
    expect_status(kit, running.outcome("c1"), "aborted")
    return "ABORTED"


@clause(
    "abort.failure-stays",
    "A body that fails after the abort keeps its failure: cancellation never replaces one",
    section="§5, precedence",
)
async def _failure_stays(kit: Kit) -> str:
    tools = [kit.tool("t", "fail_when_told")]
    running = kit.start(Scenario(tools=tools, calls=[kit.call("t", "c1")]))
    await running.until("entered", "c1")
    running.abort()
    await running.until("told", "c1")
    running.open("c1", "cleanup")
    await running.finish()
    outcome = running.outcome("c1")
    expect_status(kit, outcome, "error")
    return f"the failure stayed: {outcome.detail}"


# -- thread bodies ---------------------------------------------------------------------


@clause(
    "thread.worker",
    "A synchronous body runs on a worker thread and its value is the result",
    section="§5, worker threads",
    requires=["sync_bodies"],
)
async def _thread_worker(kit: Kit) -> str:
    tools = [kit.tool("t", "ok", sync=True)]
    running = await kit.run(Scenario(tools=tools, calls=[kit.call("t", "c1")]))
    outcome = running.outcome("c1")
    expect_status(kit, outcome, "ok")
    kit.check(outcome.value == done("c1"), f"the value is {outcome.value!r}, not 'done:c1'")
    body = kit.probe.body("c1")
    kit.check(not body.on_loop_thread, "the synchronous body ran on the event loop's thread")
    return "ran on a worker thread"


@clause(
    "thread.told",
    "An abort reaches a thread body, which stops: ABORTED",
    section="§5, worker threads",
    requires=["sync_bodies"],
)
async def _thread_told(kit: Kit) -> str:
    tools = [kit.tool("t", "hold", sync=True)]
    running = kit.start(Scenario(tools=tools, calls=[kit.call("t", "c1")]))
    await running.until("entered", "c1")
    running.abort()
    await kit.wait(
        lambda: running.done or kit.probe.body("c1").told is not None,
        "the thread body to hear of the abort",
    )
    # A body polls its signal: once the call returned, read the signal it was given.
    told = kit.probe.body("c1").told or ("signal" if kit.probe.signal_aborted("c1") else None)
    await running.finish()
    kit.check(told == "signal", "the thread body was never told of the abort")
    expect_status(kit, running.outcome("c1"), "aborted")
    return "told; ABORTED"


@clause(
    "thread.awaited",
    "An aborted call with a thread body stays pending until the thread returns",
    section="§5, quiescence",
    requires=["sync_bodies"],
)
async def _thread_awaited(kit: Kit) -> str:
    tools = [kit.tool("t", "hold", sync=True)]
    running = kit.start(Scenario(tools=tools, calls=[kit.call("t", "c1")]))
    await running.until("entered", "c1")
    running.abort()
    await running.held("c1", "cleanup")
    await running.finish()
    expect_awaited(kit, running, "c1", "the call returned while its thread body was still running")
    kit.check(kit.probe.body("c1").told is not None, "the thread body was never told")
    expect_quiet(kit, running)
    return "pending until the thread returned"
