"""Clauses about one model turn's batch of calls (contract §7, batch executor)."""

from __future__ import annotations

from .._driver import Scenario
from .._kit import Kit, Running
from .._scripts import done
from ._base import clause, describe, expect_awaited, expect_quiet, expect_status

_SECTION = "§7, batch executor"
_KEYS = ("c1", "c2", "c3")


def _at_work(kit: Kit, keys: tuple[str, ...]) -> list[str]:
    return [k for k in keys if kit.probe.body(k).at_gate == "work"]


async def _open_last_first(kit: Kit, running: Running, keys: tuple[str, ...]) -> None:
    """Let the held bodies finish, the last in model order first, until the batch ends."""
    while not running.done:
        await kit.wait(lambda: running.done or bool(_at_work(kit, keys)), "a body to hold")
        await kit.let_run()
        waiting = _at_work(kit, keys)
        if waiting:
            await running.held(waiting[-1], "work")
            await running.until("finished", waiting[-1])


@clause(
    "batch.model-order",
    "A batch gives one outcome per call, in model order, whatever order the bodies end in",
    section=_SECTION,
    requires=["batch"],
)
async def _model_order(kit: Kit) -> str:
    tools = [kit.tool("t", "slow", parallel=True)]
    running = kit.start(Scenario(tools=tools, calls=[kit.call("t", k) for k in _KEYS], batch=True))
    await _open_last_first(kit, running, _KEYS)
    outcomes = await running.finish()
    kit.check(running.raised is None, f"the batch raised {running.raised!r}")
    ids = [o.call_id for o in outcomes]
    kit.check(ids == list(_KEYS), f"outcomes for {ids}, expected exactly {list(_KEYS)}")
    for outcome in outcomes:
        expect_status(kit, outcome, "ok")
        kit.check(outcome.value == done(outcome.call_id), f"{outcome.call_id}: {outcome.value!r}")
    order = ", ".join(kit.probe.finish_order)
    return f"model order; bodies finished {order}"


@clause(
    "batch.parallel",
    "Calls marked safe to run concurrently overlap",
    section=_SECTION,
    requires=["batch"],
)
async def _parallel(kit: Kit) -> str:
    tools = [kit.tool("t", "slow", parallel=True)]
    running = kit.start(Scenario(tools=tools, calls=[kit.call("t", k) for k in _KEYS], batch=True))
    await kit.wait(lambda: running.done or bool(_at_work(kit, _KEYS)), "a body to start")
    await kit.let_run()
    # A registry may do work in threads before each body starts (a durable engine reads and
    # writes its journal), which letting the tasks run does not wait for: give every body
    # until the watchdog to be at work. A registry that runs them one at a time never gets
    # there, and is judged on what overlapped by then.
    await kit.wait_at_most(lambda: running.done or len(_at_work(kit, _KEYS)) == len(_KEYS))
    overlapping = _at_work(kit, _KEYS)
    await _open_last_first(kit, running, _KEYS)
    await running.finish()
    kit.check(len(overlapping) > 1, f"only {overlapping} ran at once: the calls did not overlap")
    return f"{len(overlapping)} bodies at once"


@clause(
    "batch.balanced-after-stop",
    "After a stop, every call has one result: ABORTED if its body ran, else "
    "ABORTED_BEFORE_DISPATCH",
    section=_SECTION,
    requires=["batch"],
)
async def _balanced(kit: Kit) -> str:
    tools = [kit.tool("t", "hold", parallel=True)]
    calls = [kit.call("t", k) for k in _KEYS]
    running = kit.start(Scenario(tools=tools, calls=calls, batch=True, max_parallel=1))
    await running.until("entered", "c1")
    await kit.let_run()
    running.abort()
    outcomes = await running.finish()
    kit.check(running.raised is None, f"the batch raised {running.raised!r}: no results at all")
    ids = [o.call_id for o in outcomes]
    kit.check(ids == list(_KEYS), f"outcomes for {ids}, expected exactly {list(_KEYS)}")
    ran: list[str] = []
    for outcome in outcomes:
        if kit.probe.body(outcome.call_id).entered:
            ran.append(outcome.call_id)
            expect_status(kit, outcome, "aborted")
        else:
            expect_status(kit, outcome, "aborted_before_dispatch")
    return f"balanced; bodies ran for {ran}"


@clause(
    "batch.drained",
    "A stopped batch returns only once every started body has finished",
    section=_SECTION,
    requires=["batch"],
)
async def _drained(kit: Kit) -> str:
    tools = [kit.tool("t", "hold", parallel=True)]
    running = kit.start(
        Scenario(tools=tools, calls=[kit.call("t", k) for k in _KEYS[:2]], batch=True)
    )
    await running.until("entered", "c1")
    await kit.let_run()
    running.abort()
    await running.held("c1", "cleanup")
    await running.held("c2", "cleanup")
    await running.finish()
    for key in _KEYS[:2]:
        if kit.probe.body(key).entered:
            expect_awaited(
                kit, running, key, "the batch returned while a body was still cleaning up"
            )
    expect_quiet(kit, running)
    return "drained"


@clause(
    "batch.failure-isolated",
    "One failing call does not cost the other calls of the batch their results",
    section=_SECTION,
    requires=["batch"],
)
async def _isolated(kit: Kit) -> str:
    tools = [kit.tool("bad", "fail", parallel=True), kit.tool("good", "ok", parallel=True)]
    calls = [kit.call("bad", "c1"), kit.call("good", "c2")]
    running = await kit.run(Scenario(tools=tools, calls=calls, batch=True))
    kit.check(running.raised is None, f"the batch raised {running.raised!r}: no results at all")
    bad, good = running.outcome("c1"), running.outcome("c2")
    expect_status(kit, bad, "error")
    expect_status(kit, good, "ok")
    return f"{describe(bad)}; the other succeeded"
