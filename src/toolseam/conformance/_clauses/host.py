"""Clauses about host cancellation of the task awaiting a call (contract §5)."""

from __future__ import annotations

from .._driver import Scenario
from .._kit import Kit, Running
from .._scripts import wrapper
from ._base import clause, describe, expect_awaited, expect_quiet, expect_status

_SECTION = "§5, host cancellation"


async def _host_cancelled(kit: Kit, *, sync: bool = False) -> Running:
    tools = [kit.tool("t", "hold", sync=sync)]
    running = kit.start(Scenario(tools=tools, calls=[kit.call("t", "c1")]))
    await running.until("entered", "c1")
    running.host_cancel()
    return running


def _expect_propagated(kit: Kit, running: Running) -> None:
    if running.swallowed:
        kit.fail("the host's cancellation was swallowed: the call returned normally")
    if running.raised is not None:
        kit.fail(f"the call raised {type(running.raised).__name__} instead of the cancellation")


@clause(
    "host.propagates",
    "Host cancellation of the awaiting task propagates out of the call, never swallowed",
    section=_SECTION,
    requires=["host_cancel"],
)
async def _propagates(kit: Kit) -> str:
    running = await _host_cancelled(kit)
    await running.finish()
    _expect_propagated(kit, running)
    kit.check(running.cancelled, "the host's cancellation did not propagate")
    return "propagated"


@clause(
    "host.body-told",
    "Host cancellation also aborts the body's own signal, so work handed that signal hears of it",
    section=_SECTION,
    requires=["host_cancel"],
)
async def _body_told(kit: Kit) -> str:
    running = await _host_cancelled(kit)
    body = await running.until("told", "c1")
    await running.finish()
    if body.told is None:
        kit.fail("the body never heard of the host's cancellation")
    aborted = kit.probe.signal_aborted("c1")
    kit.check(
        aborted is True,
        f"the body heard of it by {body.told}, but the cancellation it was given (its signal, "
        "token) never fired: work it handed that to goes on",
    )
    return f"heard of it by {body.told}; its signal aborted"


@clause(
    "host.awaited",
    "Host cancellation lets the cancellation go on only once the body has finished",
    section=_SECTION,
    requires=["host_cancel"],
)
async def _awaited(kit: Kit) -> str:
    running = await _host_cancelled(kit)
    await running.held("c1", "cleanup")
    await running.finish()
    expect_awaited(
        kit, running, "c1", "the cancellation went on while the body was still cleaning up"
    )
    expect_quiet(kit, running)
    return "the body finished first"


@clause(
    "host.one-result",
    "A host-cancelled call still announces exactly one result: ABORTED",
    section=_SECTION,
    requires=["host_cancel"],
)
async def _one_result(kit: Kit) -> str:
    return await _one_aborted_result(kit, sync=False)


async def _one_aborted_result(kit: Kit, *, sync: bool) -> str:
    running = await _host_cancelled(kit, sync=sync)
    running.open("c1", "cleanup")
    await running.finish()
    published = running.published("c1")
    call = "thread call" if sync else "call"
    if not published:
        kit.fail(f"the registry gave no result for the host-cancelled {call}")
    kit.check(len(published) == 1, f"the registry announced {len(published)} results")
    expect_status(kit, published[0], "aborted")
    return "one ABORTED result"


@clause(
    "host.never-ran",
    "A call host-cancelled before its body starts announces ABORTED_BEFORE_DISPATCH",
    section=_SECTION,
    requires=["host_cancel", "around_dispatch"],
)
async def _never_ran(kit: Kit) -> str:
    probe = kit.probe
    tools, calls = [kit.tool("t", "ok")], [kit.call("t", "c1")]
    running = kit.start(Scenario(tools=tools, calls=calls, around=wrapper(probe, "before")))
    await kit.wait(
        lambda: running.done or probe.body("c1@wrapper").at_gate == "before",
        "the wrapper to hold the call",
    )
    running.host_cancel()
    await running.finish()
    _expect_propagated(kit, running)
    kit.check(not probe.body("c1").entered, "the body ran although the host cancelled first")
    published = running.published("c1")
    if not published:
        kit.fail("the registry gave no result for the host-cancelled call")
    kit.check(len(published) == 1, f"the registry announced {len(published)} results")
    expect_status(kit, published[0], "aborted_before_dispatch")
    return f"one result: {describe(published[0])}"


@clause(
    "host.thread-awaited",
    "Host cancellation waits for a started thread body before it goes on",
    section="§5, worker threads",
    requires=["host_cancel", "sync_bodies"],
)
async def _thread_awaited(kit: Kit) -> str:
    running = await _host_cancelled(kit, sync=True)
    await running.held("c1", "cleanup")
    await running.finish()
    expect_awaited(
        kit, running, "c1", "the cancellation went on while the thread body was still running"
    )
    told = kit.probe.body("c1").told is not None
    kit.check(told, "the thread body was never told of the host's cancellation")
    expect_quiet(kit, running)
    return "the thread returned first"


@clause(
    "host.thread-one-result",
    "A host-cancelled thread body that stops as told announces exactly one result: ABORTED",
    section="§5, worker threads",
    requires=["host_cancel", "sync_bodies"],
)
async def _thread_one_result(kit: Kit) -> str:
    return await _one_aborted_result(kit, sync=True)
