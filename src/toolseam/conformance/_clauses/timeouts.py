"""Clauses about a tool's own deadline (contract §7, timeout policy)."""

from __future__ import annotations

from typing import Final

from .._driver import Scenario
from .._kit import Kit
from ._base import clause, expect_awaited, expect_quiet, expect_status

_SECTION = "§7, timeout policy"
DEADLINE: Final = 0.05
"""The scripted tools' short deadline, in seconds (it only decides *who* aborted first)."""
_FAR: Final = 60.0  # a deadline no clause reaches


@clause(
    "timeout.result",
    "A tool's own deadline ends the call with a timeout result, told apart from an abort",
    section=_SECTION,
    requires=["timeouts"],
)
async def _result(kit: Kit) -> str:
    tools = [kit.tool("t", "hold", timeout=DEADLINE)]
    running = kit.start(Scenario(tools=tools, calls=[kit.call("t", "c1")]))
    await running.until("told", "c1")
    running.open("c1", "cleanup")
    await running.finish()
    outcome = running.outcome("c1")
    expect_status(kit, outcome, "timeout")
    return f"a timeout: {outcome.detail}"


@clause(
    "timeout.asks",
    "A deadline asks the body through its signal and waits for it, never tears it down",
    section=_SECTION,
    requires=["timeouts"],
)
async def _asks(kit: Kit) -> str:
    tools = [kit.tool("t", "ignore", timeout=DEADLINE)]
    running = kit.start(Scenario(tools=tools, calls=[kit.call("t", "c1")]))
    body = await running.until("told", "c1")
    if body.told is None:
        await running.finish()
        kit.fail("the deadline never reached the body")
    if body.told == "task cancellation":
        await running.finish()
        kit.fail("the deadline tore the body down by task cancellation instead of asking it")
    await running.held("c1", "work")
    await running.finish()
    expect_awaited(
        kit, running, "c1", "the call returned at its deadline while the body was still working"
    )
    expect_quiet(kit, running)
    expect_status(kit, running.outcome("c1"), "timeout")
    return "asked, then waited; a timeout"


@clause(
    "timeout.caller-first",
    "A caller abort that comes before the deadline stays ABORTED, not a timeout",
    section=_SECTION,
    requires=["timeouts"],
)
async def _caller_first(kit: Kit) -> str:
    tools = [kit.tool("t", "hold", timeout=_FAR)]
    running = kit.start(Scenario(tools=tools, calls=[kit.call("t", "c1")]))
    await running.until("entered", "c1")
    running.abort()
    await running.finish()
    expect_status(kit, running.outcome("c1"), "aborted")
    return "ABORTED"
