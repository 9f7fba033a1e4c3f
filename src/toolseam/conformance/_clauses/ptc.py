"""Clauses about programmatic tool calling: a code call whose program calls the tools (§7).

A registry with a code-running tool (capability ``ptc``: toolseam's ``run_code``,
pydantic-ai-harness's ``CodeMode``) runs a `Program` that calls the scenario's scripted tools;
each such nested call is a body the probe sees like any other. The clauses check the stop's
order: every nested call in flight is told through its signal and awaited, the model is told
which nested calls ran and which never did, no nested call starts after the stop, and the
sandbox process has exited when the code call returns — a program that never ends by
itself included.

"Awaited" and "exited" are read at the code call's return, which the driver reports
(`Scenario.code_returned`): the kit takes the probe's next number and reads the process
table there. `Driver.run` may return later — a driver closing its sandbox pool waits for
whatever a code call left behind — and that must not hide a code call that returned first.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence

from .._driver import Call, Outcome, Program, Scenario
from .._kit import Kit, Running
from .._probe import BodyRecord
from .._scripts import ScriptedTool, done
from ._base import clause, describe, expect_status
from .host import _expect_propagated

_SECTION = "§7, nested dispatch"
_CODE = "p"  # the code call's id


def _tools(kit: Kit) -> list[ScriptedTool]:
    # Both may overlap others: a runtime runs several of the program's calls at once.
    return [kit.tool("hold", "hold", parallel=True), kit.tool("ok", "ok", parallel=True)]


class _CodeReturn:
    """The kit's witness of the code call's return (`Scenario.code_returned`)."""

    def __init__(self, kit: Kit) -> None:
        self._kit = kit
        self.at: int | None = None
        """The probe's number when the code call returned (``None``: never reported)."""
        self.records: dict[str, BodyRecord] = {}
        self.running: dict[int, bool] = {}
        """The sandbox's processes then, and whether each still ran."""

    def __call__(self, pids: Collection[int]) -> None:
        if self.at is None:  # the first report counts
            self.at, self.records = self._kit.probe.stamp()
            self.running = {pid: _running(pid) for pid in pids}

    def expect_reported(self) -> int:
        """The probe's number at the return; fails the clause if the driver never said."""
        if self.at is None:
            self._kit.fail("the driver never reported the code call's return")
        return self.at

    def expect_awaited(self, key: str) -> None:
        """Fail unless nested call ``key`` had finished when the code call returned."""
        at = self.expect_reported()
        finished_at = self._kit.probe.body(key).finished_at
        if finished_at is None or finished_at > at:
            when = "had not finished by then" if finished_at is None else f"at step {finished_at}"
            self._kit.fail(
                f"the code call returned while nested call {key} was still running (it returned "
                f"at step {at}; {key} finished {when})"
            )


def _program_scenario(kit: Kit, program: Program, returned: _CodeReturn) -> Scenario:
    return Scenario(
        tools=_tools(kit),
        calls=[kit.call("run_code", _CODE)],
        program=program,
        code_returned=returned,
    )


def _calls(tool: str, *keys: str) -> tuple[Call, ...]:
    return tuple(Kit.call(tool, key) for key in keys)


def _listed(kit: Kit, running: Running, key: str) -> Outcome | None:
    """The one outcome the runtime reported to the model for nested call ``key``, if any."""
    if running.raised is not None:
        return None
    found = [o for o in running.outcomes or () if o.call_id == key]
    if len(found) > 1:
        kit.fail(f"nested call {key} is reported {len(found)} times, expected once")
    return found[0] if found else None


async def _abort_while_held(kit: Kit, running: Running, keys: Sequence[str]) -> None:
    """Wait until every body of ``keys`` runs, then abort the code call."""
    for key in keys:
        await running.until("entered", key)
    running.abort()


def _expect_told_by_signal(kit: Kit, keys: Sequence[str]) -> None:
    for key in keys:
        told = kit.probe.body(key).told
        kit.check(told is not None, f"nested call {key} was never told of the stop")
        kit.check(
            told == "signal", f"nested call {key} was torn down by {told} instead of being told"
        )


@clause(
    "ptc.nested-results",
    "A program's nested calls run through the registry and their values reach the program",
    section=_SECTION,
    requires=["ptc"],
)
async def _results(kit: Kit) -> str:
    program = Program(_calls("ok", "n1", "n2"), then=_calls("ok", "n3"))
    running = await kit.run(_program_scenario(kit, program, _CodeReturn(kit)))
    outcome = running.outcome(_CODE)
    expect_status(kit, outcome, "ok")
    wanted = [done("n1"), done("n2"), done("n3")]
    kit.check(outcome.value == wanted, f"the program's value is {outcome.value!r}, not {wanted!r}")
    return "three nested calls, their values in the program's"


@clause(
    "ptc.nested-told-and-awaited",
    "An abort of the code call tells every nested call in flight through its signal and awaits it",
    section=_SECTION,
    requires=["ptc"],
)
async def _told_and_awaited(kit: Kit) -> str:
    keys = ("n1", "n2", "n3")
    returned = _CodeReturn(kit)
    running = kit.start(_program_scenario(kit, Program(_calls("hold", *keys)), returned))
    await _abort_while_held(kit, running, keys)
    for key in keys:
        await running.until("told", key)
    for key in keys:
        await running.held(key, "cleanup")
    await running.finish()
    _expect_told_by_signal(kit, keys)
    for key in keys:
        returned.expect_awaited(key)
    return "three nested calls told through their signal and awaited"


@clause(
    "ptc.never-ran-labelled",
    "After a stop the model is told each nested call's outcome: ABORTED if it ran, "
    "ABORTED_BEFORE_DISPATCH if it never did",
    section=_SECTION,
    requires=["ptc"],
)
async def _labelled(kit: Kit) -> str:
    program = Program(_calls("hold", "n1"), then=_calls("ok", "n2"))
    running = kit.start(_program_scenario(kit, program, _CodeReturn(kit)))
    await _abort_while_held(kit, running, ("n1",))
    await running.finish()
    ran = _listed(kit, running, "n1")
    if ran is None:
        kit.fail(
            "the runtime told nothing about nested call n1, which ran: the model cannot know "
            "its side effects may have happened"
        )
    expect_status(kit, ran, "aborted")
    words = [f"n1 {describe(ran)}"]
    if not kit.probe.body("n2").entered:  # a call made after the stop (see no-call-after-stop)
        never = _listed(kit, running, "n2")
        if never is None:
            kit.fail("the runtime told nothing about nested call n2, made after the stop")
        expect_status(kit, never, "aborted_before_dispatch")
        words.append(f"n2 {describe(never)}")
    return "; ".join(words)


@clause(
    "ptc.no-call-after-stop",
    "A nested call the program makes after the stop never runs",
    section=_SECTION,
    requires=["ptc"],
)
async def _no_call_after_stop(kit: Kit) -> str:
    program = Program(_calls("hold", "n1"), then=_calls("ok", "n2", "n3"))
    running = kit.start(_program_scenario(kit, program, _CodeReturn(kit)))
    await _abort_while_held(kit, running, ("n1",))
    await running.finish()
    for key in ("n2", "n3"):
        kit.check(
            not kit.probe.body(key).entered,
            f"nested call {key}, made after the stop, ran: {kit.probe.body(key).effects}",
        )
    return "no body started after the stop"


@clause(
    "ptc.sandbox-gone",
    "When a stopped code call returns, its sandbox process has exited, even if the program "
    "would never end by itself",
    section=_SECTION,
    requires=["ptc"],
)
async def _sandbox_gone(kit: Kit) -> str:
    returned = _CodeReturn(kit)
    program = Program(_calls("hold", "n1"), await_calls=False, spin=True)
    running = kit.start(_program_scenario(kit, program, returned))
    await _abort_while_held(kit, running, ("n1",))
    await running.finish()
    returned.expect_reported()
    pids = sorted(returned.running)
    kit.check(bool(pids), "the driver reported no sandbox process when the code call returned")
    still = [pid for pid in pids if returned.running[pid]]
    kit.check(not still, f"sandbox process {still} was still running when the code call returned")
    return f"process {', '.join(map(str, pids))} gone when the call returned"


@clause(
    "ptc.host-cancel",
    "Host cancellation of a code call tells and awaits its nested calls, then propagates",
    section=_SECTION,
    requires=["ptc", "host_cancel"],
)
async def _host_cancel(kit: Kit) -> str:
    keys = ("n1", "n2")
    returned = _CodeReturn(kit)
    running = kit.start(_program_scenario(kit, Program(_calls("hold", *keys)), returned))
    for key in keys:
        await running.until("entered", key)
    running.host_cancel()
    for key in keys:
        await running.until("told", key)
    for key in keys:
        await running.held(key, "cleanup")
    await running.finish()
    _expect_propagated(kit, running)
    kit.check(running.cancelled, "the host's cancellation did not propagate")
    _expect_told_by_signal(kit, keys)
    for key in keys:
        returned.expect_awaited(key)
    return "told, awaited, propagated"


def _running(pid: int) -> bool:
    """Whether process ``pid`` is still running: not gone, not a zombie (Linux ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # pragma: no cover - no /proc: ask the kernel whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
