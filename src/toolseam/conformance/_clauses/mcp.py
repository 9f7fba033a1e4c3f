"""Clauses about an MCP server over the wire: a client's cancel or disconnect mid-call.

The official MCP conformance suite marks a server's cancellation requirements unobservable:
from the wire it cannot see whether a cancelled tool body stops. The kit can, because its
bodies report to the probe. A driver with capability ``mcp`` serves the scripted tools from
an MCP server and makes the call with the MCP SDK's client over a transport
(`Scenario.mcp`; the built-in drivers: streamable HTTP on loopback, or stdio where the
server cannot be served over HTTP); the kit's stop is the client's cancel or its
disconnect. "The server considers the call done" is the moment its handling of
``tools/call`` ended (over a stream transport, after a disconnect: its run), which the
driver reports through `Scenario.handled`: the kit takes the probe's next number there, and
the body must have finished before it. A cancelled request is never answered, so nothing
else on the wire marks it.
"""

from __future__ import annotations

from .._driver import McpStop, Scenario
from .._kit import WATCHDOG, Kit
from .._probe import BodyRecord
from ._base import clause, describe

_SECTION = "§5, quiescence (MCP)"


class _Witness:
    """The kit's witness of the server's end of the call (`Scenario.handled`)."""

    def __init__(self, kit: Kit) -> None:
        self._kit = kit
        self.at: int | None = None
        self.records: dict[str, BodyRecord] = {}

    def __call__(self) -> None:
        if self.at is None:
            self.at, self.records = self._kit.probe.stamp()


async def _stopped(kit: Kit, how: McpStop) -> _Witness:
    """Call a ``hold`` tool over the wire, stop it as ``how`` says once it runs, finish."""
    witness = _Witness(kit)
    scenario = Scenario(
        tools=[kit.tool("hold", "hold")], calls=[kit.call("hold", "c1")], mcp=how, handled=witness
    )
    running = kit.start(scenario)
    await running.until("entered", "c1")
    await kit.let_run()
    running.abort()
    await running.until("told", "c1")
    await running.held("c1", "cleanup")
    await running.finish()
    kit.check(running.raised is None, f"the driver raised {running.raised!r}")
    return witness


def _told(kit: Kit, witness: _Witness, what: str, done: str) -> str:
    """The body was told of ``what`` by the time the server considered the call done."""
    kit.check(witness.at is not None, f"the server never reported that {done}")
    record = witness.records.get("c1")
    told = None if record is None else record.told
    kit.check(
        told is not None,
        f"the body had not been told of the client's {what} when {done} "
        f"(later: {kit.probe.body('c1').told or 'never'})",
    )
    kit.check(
        told == "signal", f"the body was torn down by {told} at the client's {what}, not told"
    )
    return "told through its signal"


def _awaited(kit: Kit, witness: _Witness, done: str) -> str:
    finished_at = kit.probe.body("c1").finished_at
    kit.check(witness.at is not None, f"the server never reported that {done}")
    if finished_at is None or witness.at is None or finished_at > witness.at:
        kit.fail(
            f"{done} at step {witness.at} while the body was still running "
            f"(it finished at step {finished_at})"
        )
    return f"the body finished (step {finished_at}) before {done} (step {witness.at})"


@clause(
    "mcp.cancel-told",
    "A client's cancel over the MCP wire reaches the running body through its signal, not "
    "by tearing it down",
    section=_SECTION,
    requires=["mcp"],
)
async def _cancel_told(kit: Kit) -> str:
    witness = await _stopped(kit, "cancel")
    return _told(kit, witness, "cancel", "the server's handling of tools/call ended")


@clause(
    "mcp.cancel-awaited",
    "The server ends its handling of a cancelled call only once the body has finished, "
    "cleanup included",
    section=_SECTION,
    requires=["mcp"],
)
async def _cancel_awaited(kit: Kit) -> str:
    witness = await _stopped(kit, "cancel")
    return _awaited(kit, witness, "the server's handling of tools/call ended")


@clause(
    "mcp.disconnect-told",
    "A client that disconnects mid-call gets the running body told through its signal",
    section=_SECTION,
    requires=["mcp"],
)
async def _disconnect_told(kit: Kit) -> str:
    witness = await _stopped(kit, "disconnect")
    return _told(kit, witness, "disconnect", "the server was done with the call")


@clause(
    "mcp.disconnect-awaited",
    "After a client disconnects mid-call, the server is done with the call only once the body "
    "has finished, cleanup included",
    section=_SECTION,
    requires=["mcp"],
)
async def _disconnect_awaited(kit: Kit) -> str:
    witness = await _stopped(kit, "disconnect")
    return _awaited(kit, witness, "the server was done with the call")


@clause(
    "mcp.no-retry-aborts",
    "On 2026-07-28, a body suspended at its question whose retry never comes is aborted "
    "through its signal and finishes, while the client still holds its connection",
    section=_SECTION,
    requires=["mcp", "mcp_input_required"],
)
async def _no_retry(kit: Kit) -> str:
    witness = _Witness(kit)
    scenario = Scenario(
        tools=[kit.tool("ask", "elicit")],
        calls=[kit.call("ask", "c1")],
        mcp="no-retry",
        handled=witness,
    )
    running = kit.start(scenario)
    await running.until("entered", "c1")
    ended = await kit.wait_at_most(lambda: kit.probe.body("c1").finished)
    told = kit.probe.signal_aborted("c1")
    torn = kit.probe.body("c1").torn_down
    effects = list(kit.probe.body("c1").effects)
    running.abort()  # the client disconnects
    await running.finish()
    kit.check(running.raised is None, f"the driver raised {running.raised!r}")
    kit.check(
        ended,
        f"the body still waited at its question {WATCHDOG:g}s after the server answered "
        "input required, and no retry came: nothing aborted it",
    )
    kit.check(not torn, "the body was torn down by task cancellation at its question, not told")
    kit.check(
        told is True,
        "the body ended at its question without being told through its signal "
        f"(its effects: {effects or 'none'}): something other than an abort ended it; the "
        f"client got {' '.join(describe(o) for o in running.outcomes or ()) or 'nothing'}",
    )
    kit.check(not any(e.startswith("answer:") for e in effects), f"the body went on: {effects}")
    return "told through its signal at the input deadline, finished before the disconnect"
