"""Clauses about durable execution: calls as steps of a workflow of a durable engine (§7).

A driver with capability ``durable`` runs a scenario's calls as one workflow (`Durable`):
the kit's stop is then the engine's cancellation of that workflow, issued through its
database as from another process, and the outcomes it reports after a cancel are those
the journal holds. The clauses check what contract §7's durable execution promises: a
cancel tells the bodies in flight and waits for them, the journal then holds exactly one
outcome per call, a replay returns the recorded outcomes without running a body, and
recovery after a crash never runs a body that is not idempotent a second time. A workflow's
own deadline is a stop too: told and awaited like a cancel, and told apart from one.

A crash is simulated in the driver's process: the workflow completes, then is recovered
from the journal its worker would have left had it died while the last call's body ran
(that call's outcome lost, everything recorded before it kept). The journal is the only
thing recovery reads, so it cannot tell this from a SIGKILL between the body's side effect
and the commit of its outcome; a real SIGKILL would put the scripted bodies in another
process, out of the probe's sight (toolseam's own tests kill a worker for real:
tests/test_durable_processes.py).
"""

from __future__ import annotations

from typing import Final

from .._driver import Durable, Outcome, Scenario
from .._kit import Kit, Running
from .._scripts import done
from ._base import clause, describe, expect_awaited, expect_quiet, expect_status

_SECTION = "§7, durable execution"
WORKFLOW_DEADLINE: Final = 2.0
"""The workflow timeout of ``durable.timeout``, in seconds from the workflow's start: long
enough for its first call's body to be running when it passes, even on a loaded machine."""


def _effects(kit: Kit, key: str) -> list[str]:
    return kit.probe.body(key).effects


async def _cancel_while_held(kit: Kit, running: Running, key: str) -> None:
    """Wait until the body of ``key`` runs, then cancel the workflow (the scenario's stop)."""
    await running.until("entered", key)
    await kit.let_run()
    running.abort()


def _expect_told_and_awaited(kit: Kit, running: Running, key: str, stop: str) -> None:
    """The body of ``key`` heard of ``stop`` through its signal, and the run waited for it."""
    told = kit.probe.body(key).told
    kit.check(told is not None, f"the body was never told that {stop}")
    kit.check(told == "signal", f"the body was torn down by {told} instead of being told")
    expect_awaited(
        kit, running, key, "the workflow's execution ended while the body was still running"
    )
    expect_quiet(kit, running)


def _expect_recorded(kit: Kit, *outcomes: Outcome) -> None:
    """The journal holds an outcome for each of ``outcomes``' calls."""
    for outcome in outcomes:
        if outcome.status == "none":
            kit.fail(
                f"the journal holds no outcome for {outcome.call_id} ({outcome.detail}): a "
                "recovery would run it as if it had never started"
            )


@clause(
    "durable.told-on-cancel",
    "Cancelling the workflow through the engine tells the body in flight through its signal "
    "and waits for it",
    section=_SECTION,
    requires=["durable"],
)
async def _told(kit: Kit) -> str:
    tools = [kit.tool("t", "hold")]
    scenario = Scenario(tools=tools, calls=[kit.call("t", "c1")], batch=True, durable=Durable())
    running = kit.start(scenario)
    await _cancel_while_held(kit, running, "c1")
    await running.until("told", "c1")
    await running.held("c1", "cleanup")
    await running.finish()
    _expect_told_and_awaited(kit, running, "c1", "its workflow was cancelled")
    return "told through its signal, awaited"


@clause(
    "durable.one-outcome-after-cancel",
    "After a cancel the journal holds exactly one outcome per call of the batch: ABORTED for "
    "the one that ran, ABORTED_BEFORE_DISPATCH for the one never dispatched",
    section=_SECTION,
    requires=["durable"],
)
async def _one_outcome(kit: Kit) -> str:
    tools = [kit.tool("hold", "hold"), kit.tool("ok", "ok")]
    calls = [kit.call("hold", "c1"), kit.call("ok", "c2")]
    running = kit.start(Scenario(tools=tools, calls=calls, batch=True, durable=Durable()))
    await _cancel_while_held(kit, running, "c1")
    await running.finish()
    kit.check(running.raised is None, f"the run raised {running.raised!r}")
    kit.check(
        not kit.probe.body("c2").entered, "c2, after the cancelled call, ran after the cancel"
    )
    ran, never = running.outcome("c1"), running.outcome("c2")
    _expect_recorded(kit, ran, never)
    expect_status(kit, ran, "aborted")
    expect_status(kit, never, "aborted_before_dispatch")
    return f"c1 {describe(ran)}; c2 {describe(never)}"


@clause(
    "durable.timeout",
    "A workflow's deadline tells the body in flight through its signal and waits for it; the "
    "journal holds a timeout for that call, not an abort, and ABORTED_BEFORE_DISPATCH for the "
    "one never dispatched",
    section=_SECTION,
    requires=["durable"],
)
async def _timeout(kit: Kit) -> str:
    tools = [kit.tool("hold", "hold"), kit.tool("ok", "ok")]
    calls = [kit.call("hold", "c1"), kit.call("ok", "c2")]
    durable = Durable(timeout=WORKFLOW_DEADLINE)
    running = kit.start(Scenario(tools=tools, calls=calls, batch=True, durable=durable))
    await running.until("told", "c1")
    await running.held("c1", "cleanup")
    await running.finish()
    _expect_told_and_awaited(kit, running, "c1", "its workflow's deadline passed")
    kit.check(running.raised is None, f"the run raised {running.raised!r}")
    kit.check(not kit.probe.body("c2").entered, "c2, after the timed-out call, ran after it")
    ran, never = running.outcome("c1"), running.outcome("c2")
    _expect_recorded(kit, ran, never)
    expect_status(kit, ran, "timeout")
    expect_status(kit, never, "aborted_before_dispatch")
    return f"told through its signal, awaited; c1 {describe(ran)}; c2 {describe(never)}"


@clause(
    "durable.replay",
    "Replaying a workflow returns each call's recorded outcome without running its body again",
    section=_SECTION,
    requires=["durable"],
)
async def _replay(kit: Kit) -> str:
    tools = [kit.tool("ok", "ok"), kit.tool("bad", "fail")]
    calls = [kit.call("ok", "c1"), kit.call("bad", "c2")]
    running = await kit.run(
        Scenario(tools=tools, calls=calls, batch=True, durable=Durable(then="replay"))
    )
    good, bad = running.outcome("c1"), running.outcome("c2")
    expect_status(kit, good, "ok")
    kit.check(good.value == done("c1"), f"c1's replayed value is {good.value!r}")
    expect_status(kit, bad, "error")
    for key in ("c1", "c2"):
        runs = _effects(kit, key).count("work")
        kit.check(runs == 1, f"the body of {key} ran {runs} times: the replay ran it again")
    return f"c1 a success, c2 {describe(bad)}, each body run once"


@clause(
    "durable.no-blind-rerun",
    "After a crash, a call that is not idempotent and has no recorded outcome ends with an "
    "unknown outcome and never runs its body again",
    section=_SECTION,
    requires=["durable"],
)
async def _no_blind_rerun(kit: Kit) -> str:
    tools = [kit.tool("send", "ok")]
    running = await kit.run(
        Scenario(
            tools=tools,
            calls=[kit.call("send", "c1")],
            batch=True,
            durable=Durable(then="recover"),
        )
    )
    runs = _effects(kit, "c1").count("work")
    kit.check(runs <= 1, f"the body ran {runs} times: recovery ran its side effect again")
    outcome = running.outcome("c1")
    expect_status(kit, outcome, "unknown")
    return f"{describe(outcome)}; the body ran once"


@clause(
    "durable.idempotent-reruns",
    "After a crash, an idempotent call with no recorded outcome runs again and ends with its "
    "own result",
    section=_SECTION,
    requires=["durable"],
)
async def _idempotent(kit: Kit) -> str:
    tools = [kit.tool("read", "ok", idempotent=True)]
    running = await kit.run(
        Scenario(
            tools=tools,
            calls=[kit.call("read", "c1")],
            batch=True,
            durable=Durable(then="recover"),
        )
    )
    outcome = running.outcome("c1")
    expect_status(kit, outcome, "ok")
    kit.check(outcome.value == done("c1"), f"c1's value is {outcome.value!r}")
    runs = _effects(kit, "c1").count("work")
    kit.check(runs == 2, f"the body ran {runs} times; once before the crash, once after, wanted")
    return "ran again on recovery, a success"
