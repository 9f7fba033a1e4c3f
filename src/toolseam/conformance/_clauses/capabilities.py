"""Clauses about what a body reaches beyond its signal: progress, elicitation, processes (§5).

The kit plays the caller: its progress sink records every event it receives under
``<call id>@progress`` (so the snapshot taken when the call returns says what had arrived
by then), and its scripted elicitation reports under ``<call id>@elicit`` like every stage,
answering at once or holding until its request is withdrawn. A ``process`` body runs the
kit's program (`_processes`), whose children ignore SIGTERM; the process table is read the
moment the call returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from .._body_reach import ElicitationScript, ProgressSink
from .._driver import Call, Listen, Scenario
from .._kit import Kit, Running
from .._processes import CHILDREN, processes, supported
from .._reaching_bodies import STEPS, question
from .._scripts import scripted, wait_told
from ._base import clause, describe, expect_awaited, expect_quiet, expect_status

_SECTION = "§5, capabilities"
_STEPS = [f"{step}|step {step}" for step in range(1, STEPS + 1)]


def _sink(kit: Kit) -> ProgressSink:
    """The caller's progress sink: each event becomes an effect of ``<call id>@progress``."""

    def receive(call_id: str, progress: float, message: str | None) -> None:
        kit.probe.effect(f"{call_id}@progress", f"{progress:g}|{message}")

    return receive


def _received(kit: Kit, call_id: str) -> list[str]:
    return kit.probe.body(f"{call_id}@progress").effects


def _in_order(what: Sequence[str]) -> str:
    return ", ".join(what) if what else "nothing"


# -- progress ----------------------------------------------------------------------------


@clause(
    "progress.delivered",
    "Progress a body reports reaches the caller while the body runs: every event once, in order",
    section=_SECTION,
    requires=["progress"],
)
async def _delivered(kit: Kit) -> str:
    scenario = Scenario(
        tools=[kit.tool("t", "progress")], calls=[kit.call("t", "c1")], progress=_sink(kit)
    )
    running = kit.start(scenario)
    await kit.wait(
        lambda: running.done or kit.probe.body("c1").at_gate == "work",
        "the body to report its progress",
    )
    await kit.let_run()  # every chance to deliver what was reported
    live = list(_received(kit, "c1"))
    await running.finish()
    outcome = running.outcome("c1")
    expect_status(kit, outcome, "ok")
    kit.check(
        live == _STEPS,
        f"while the body was still running the caller had received {_in_order(live)}; it "
        f"reported {_in_order(_STEPS)}",
    )
    final = _received(kit, "c1")
    kit.check(final == _STEPS, f"by the end the caller had received {_in_order(final)}")
    return f"{STEPS} events, in order, while the body ran"


@clause(
    "progress.thread",
    "Progress a synchronous body reports from its worker thread reaches the caller, in order, "
    "before the call returns",
    section=_SECTION,
    requires=["progress", "sync_bodies"],
)
async def _thread(kit: Kit) -> str:
    tools = [kit.tool("t", "progress", sync=True)]
    running = await kit.run(Scenario(tools=tools, calls=[kit.call("t", "c1")], progress=_sink(kit)))
    body = kit.probe.body("c1")
    outcome = running.outcome("c1")
    record = running.at_return.get("c1@progress")
    by_return = record.effects if record is not None else []
    if by_return != _STEPS:
        ended = describe(outcome) if outcome.status != "ok" else "a success"
        kit.fail(
            f"when the call returned ({ended}), the caller had received {_in_order(by_return)}; "
            f"the thread body reported {_in_order(body.effects)}"
        )
    expect_status(kit, outcome, "ok")
    kit.check(not body.on_loop_thread, "the synchronous body ran on the event loop's thread")
    return f"{STEPS} events from the worker thread, in order, before the call returned"


@clause(
    "progress.after-settle",
    "Progress reported after the call settled is dropped, never delivered to the caller",
    section=_SECTION,
    requires=["progress"],
)
async def _after_settle(kit: Kit) -> str:
    tool = kit.tool("t", "progress_late")
    running = await kit.run(
        Scenario(tools=[tool], calls=[kit.call("t", "c1")], progress=_sink(kit))
    )
    expect_status(kit, running.outcome("c1"), "ok")
    kit.check(
        _received(kit, "c1") == ["1|step 1"],
        f"the progress the body reported while it ran did not reach the caller: "
        f"{_in_order(_received(kit, 'c1'))}",
    )
    kept = tool.kept.get("c1")
    if kept is None:
        kit.fail("the body did not keep its way to report progress")
    raised = ""
    try:
        await kept.progress(2, "after the call settled")
    except Exception as error:  # refusing it is dropping it too
        raised = f" (reporting raised {type(error).__name__})"
    await kit.let_run()  # every chance to deliver it
    late = _received(kit, "c1")[1:]
    kit.check(not late, f"the caller received progress reported after the call settled: {late}")
    return f"dropped{raised}"


@clause(
    "progress.after-settle-batch",
    "Progress a call reports after it settled, while the rest of its batch still runs, is dropped",
    section=_SECTION,
    requires=["progress", "batch"],
)
async def _after_settle_batch(kit: Kit) -> str:
    late, held = (
        kit.tool("late", "progress_late", parallel=True),
        kit.tool("held", "slow", parallel=True),
    )
    calls = [kit.call("late", "c1"), kit.call("held", "c2")]
    scenario = Scenario(tools=[late, held], calls=calls, batch=True, progress=_sink(kit))
    running = kit.start(scenario)
    await kit.wait(
        lambda: (
            running.done
            or (kit.probe.body("c1").finished and kit.probe.body("c2").at_gate == "work")
        ),
        "c1 to return while c2 runs",
    )
    if running.done:
        await running.finish()
        kit.fail("the batch ended before c1 had returned while c2 ran: the calls did not overlap")
    await kit.let_run()  # c1 settles while c2 holds the batch open
    kept = late.kept.get("c1")
    if kept is None:
        await running.finish()
        kit.fail("the body did not keep its way to report progress")
    raised = ""
    try:
        await kept.progress(2, "after the call settled")
    except Exception as error:  # refusing it is dropping it too
        raised = f" (reporting raised {type(error).__name__})"
    await kit.let_run()  # every chance to deliver it while the batch still runs
    delivered = list(_received(kit, "c1"))
    await running.finish()
    for call_id in ("c1", "c2"):
        expect_status(kit, running.outcome(call_id), "ok")
    kit.check(
        delivered[:1] == ["1|step 1"],
        f"the progress c1 reported while it ran did not reach the caller: {_in_order(delivered)}",
    )
    kit.check(
        not delivered[1:],
        "while the batch still ran, the caller received progress c1 reported after it "
        f"settled: {delivered[1:]}",
    )
    return f"dropped{raised}"


# -- elicitation --------------------------------------------------------------------------

Asking = Literal["answer", "hold"]


def _asker(kit: Kit, asking: Asking) -> ElicitationScript:
    """The caller's scripted elicitation, reporting under ``<call id>@elicit``.

    ``answer`` says ``"yes"`` at once; ``hold`` waits until its request is withdrawn (told
    through the `Listen` the driver gave it), cleans up at its ``cleanup`` gate and answers
    nothing.
    """

    async def ask(call: Call, text: str, listen: Listen) -> str | None:
        key = f"{call.call_id}@elicit"
        async with scripted(kit.probe, key, "elicitation", listen):
            kit.probe.effect(key, f"asked:{text}")
            if asking == "answer":
                return "yes"
            await wait_told(kit.probe, key, listen)
            await kit.probe.gate(key, "cleanup")
            kit.probe.effect(key, "cleanup")
            return None

    return ask


@clause(
    "elicit.answered",
    "An elicitation the caller answers returns that answer to the body",
    section=_SECTION,
    requires=["elicitation"],
)
async def _answered(kit: Kit) -> str:
    tools, calls = [kit.tool("t", "elicit")], [kit.call("t", "c1")]
    running = await kit.run(Scenario(tools=tools, calls=calls, elicit=_asker(kit, "answer")))
    asked = kit.probe.body("c1@elicit").effects
    kit.check(
        f"asked:{question('c1')}" in asked,
        f"the caller was not asked the body's question: {_in_order(asked)}",
    )
    expect_status(kit, running.outcome("c1"), "ok")
    effects = kit.probe.body("c1").effects
    kit.check("answer:yes" in effects, f"the body did not get the answer: {_in_order(effects)}")
    return "the body got the caller's answer"


@clause(
    "elicit.withdrawn",
    "An abort while an elicitation is pending withdraws it through its signal and awaits it; "
    "the call ends ABORTED",
    section=_SECTION,
    requires=["elicitation"],
)
async def _withdrawn(kit: Kit) -> str:
    key = "c1@elicit"
    tools, calls = [kit.tool("t", "elicit")], [kit.call("t", "c1")]
    running = kit.start(Scenario(tools=tools, calls=calls, elicit=_asker(kit, "hold")))
    await running.until("entered", key)
    running.abort()
    heard = await running.until("told", key)
    await running.held(key, "cleanup")
    await running.finish()
    if heard.told is None:
        kit.fail(
            "the pending elicitation was never withdrawn: its request never heard of the abort"
        )
    if heard.told != "signal":
        kit.fail(
            f"the pending elicitation was torn down by {heard.told} instead of being withdrawn "
            "through its signal"
        )
    expect_awaited(kit, running, key, "the call returned while its elicitation was still pending")
    expect_quiet(kit, running)
    expect_status(kit, running.outcome("c1"), "aborted")
    return "withdrawn through its signal, awaited; ABORTED"


@clause(
    "elicit.unavailable",
    "A body asking for an elicitation its caller does not offer gets one failure at once, "
    "never a hang",
    section=_SECTION,
    requires=["elicitation"],
)
async def _unavailable(kit: Kit) -> str:
    tools, calls = [kit.tool("t", "elicit")], [kit.call("t", "c1")]
    running = await kit.run(Scenario(tools=tools, calls=calls))
    outcome = running.outcome("c1")
    expect_status(kit, outcome, "error")
    kit.check(kit.probe.body("c1").finished, "the body did not run")
    return f"one failure: {outcome.detail}"


# -- processes ----------------------------------------------------------------------------


async def _process_stopped(kit: Kit, stop: Callable[[Running], object], how: str) -> str:
    """Run the kit's program through the registry's helper; stop the call once it runs."""
    why = supported()
    if why is not None:
        kit.skip(why)
    async with processes(kit, "c1@process") as watched:
        tool = kit.tool("t", "process", program=watched.argv)
        running = kit.start(Scenario(tools=[tool], calls=[kit.call("t", "c1")]))
        running.on_return(watched.record)
        await kit.wait(
            lambda: running.done or watched.started,
            f"the program and its {CHILDREN} children to start",
        )
        if not watched.started:
            await running.finish()
            ended = describe(running.outcome("c1")) if running.outcomes else "no result"
            kit.fail(f"the call ended before its process had started: {ended}")
        stop(running)
        await running.finish()
        kit.check(watched.recorded, "the kit did not see the call return")
        left = watched.left
        if left:
            kit.fail(f"when the {how} call returned, {left} still ran")
    ended = watched.ended
    return f"none of the leader and its {CHILDREN} children ran when the call returned ({ended})"


@clause(
    "process.no-child",
    "An aborted call whose body runs a process through the registry's helper returns only "
    "once no process of its group runs",
    section="§5, quiescence",
    requires=["process"],
)
async def _no_child(kit: Kit) -> str:
    return await _process_stopped(kit, Running.abort, "aborted")


@clause(
    "process.host-cancel",
    "Host cancellation of a call whose body runs a process through the registry's helper "
    "goes on only once no process of its group runs",
    section="§5, host cancellation",
    requires=["process", "host_cancel"],
)
async def _host_cancel(kit: Kit) -> str:
    return await _process_stopped(kit, Running.host_cancel, "host-cancelled")
