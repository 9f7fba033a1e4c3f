"""The scripted bodies that reach beyond their cancellation: progress, elicitation, processes.

Each reports to the probe like every scripted body (`_scripts.scripted` wraps it) and goes
through the `Reach` its driver built: ``progress`` reports three steps, each recorded
(``reported:<n>``), then holds at its ``work`` gate (a thread body returns); ``progress_late``
reports one step and keeps its `Reach` for the kit (`ScriptedTool.kept`); ``elicit`` asks
its caller one question and returns with the answer (``answer:<text>``); ``process`` runs
its tool's program through the registry's helper.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ._body_reach import Reach
from ._driver import Listen
from ._probe import Probe
from ._scripts import Behaviour, done

if TYPE_CHECKING:
    from ._scripts import ScriptedTool

__all__ = ["STEPS", "question", "script", "script_sync"]

STEPS: Final = 3
"""How many progress steps a ``progress`` body reports."""


def question(key: str) -> str:
    """The question an ``elicit`` body asks."""
    return f"May {key} go on?"


def _reach(key: str, reach: Reach | None) -> Reach:
    if reach is None:
        raise TypeError(f"the body of {key} reaches beyond its cancellation: pass it a Reach")
    return reach


async def script(
    tool: ScriptedTool,
    probe: Probe,
    behaviour: Behaviour,
    key: str,
    listen: Listen,
    given: Reach | None,
) -> str:
    """An async body's script (inside `scripted`)."""
    reach = _reach(key, given)
    if behaviour == "progress":
        for step in range(1, STEPS + 1):
            await reach.progress(step, f"step {step}")
            probe.effect(key, f"reported:{step}")
        await probe.gate(key, "work")
        return done(key)
    if behaviour == "progress_late":
        await reach.progress(1, "step 1")
        probe.effect(key, "reported:1")
        tool.kept[key] = reach  # the kit reports through it once the call has settled
        return done(key)
    if behaviour == "elicit":
        answer = await reach.elicit(question(key))
        probe.effect(key, f"answer:{answer}")
        if listen.is_told():
            listen.stop()
        return f"{done(key)}|answer:{answer}"
    if behaviour == "process":
        await reach.run_process(tool.program)
        probe.effect(key, "process ended")
        if listen.is_told():
            listen.stop()
        return done(key)
    raise AssertionError(f"not a reaching behaviour: {behaviour}")


def script_sync(probe: Probe, behaviour: Behaviour, key: str, given: Reach | None) -> str:
    """A thread body's script: only ``progress`` (between `Probe.entered` and `finished`)."""
    reach = _reach(key, given)
    if behaviour != "progress":
        raise TypeError(f"a synchronous body cannot {behaviour}: only progress")
    for step in range(1, STEPS + 1):
        reach.progress_sync(step, f"step {step}")
        probe.effect(key, f"reported:{step}")
    return done(key)
