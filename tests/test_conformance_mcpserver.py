"""The SDK's own ``MCPServer``, measured by the kit's ``mcp.*`` clauses over the wire.

Apart from tests/test_conformance_peers.py, which the ``codemode`` and ``crewai`` sessions
run in environments without (or with an older) ``mcp``: this module runs in the default
test sessions, on asyncio and trio.
"""

from __future__ import annotations

import anyio
import pytest

from toolseam.conformance import CAPABILITIES, clause_ids, load_driver, run_clauses

_MCPSERVER_VERDICTS = {
    # It awaits the handler it cancels, but its tools have no signal: torn down, not told.
    "mcp.cancel-told": "fail",
    "mcp.cancel-awaited": "pass",
    "mcp.disconnect-told": "fail",
    "mcp.disconnect-awaited": "pass",
}


@pytest.mark.parametrize("name", ["mcp-sdk-mcpserver", "mcp-sdk-mcpserver-2026"])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_sdks_mcpserver_is_measured_over_the_wire(name: str, backend: str) -> None:
    """The SDK's ``MCPServer`` on both revisions and both backends (the scoreboard's columns).

    On asyncio over streamable HTTP, on trio over stdio (a socket pair). Its verdicts are the
    measurement the docs state: a change of the SDK that changes them shows here, and the
    docs (behaviour-kit.md, conformance.md) must say the new ones.
    """
    driver = load_driver(name)
    assert set(driver.capabilities) <= set(CAPABILITIES)
    report = anyio.run(run_clauses, driver, backend=backend)
    assert [c.id for c in report.clauses] == clause_ids()
    assert report.versions["mcp"]
    verdicts = {c.id: c.status for c in report.clauses if c.id.startswith("mcp.")}
    expected = dict(_MCPSERVER_VERDICTS)
    # 2026-07-28: ctx.elicit raises NoBackChannelError, nothing suspends or aborts the body.
    expected["mcp.no-retry-aborts"] = "fail" if name.endswith("2026") else "skip"
    # At 2025-11-25 over HTTP, the SDK's session keeps a call running when its client's
    # stream drops (a client may resume it): the body is never told, nor cancelled, until
    # the session ends; the clauses give up at the kit's watchdog.
    kept = backend == "asyncio" and not name.endswith("2026")
    if kept:
        expected["mcp.disconnect-awaited"] = "fail"
    assert verdicts == expected, [(c.id, c.detail) for c in report.clauses if c.id in verdicts]
    for clause in report.clauses:
        assert clause.detail, clause.id
        if clause.id.startswith("mcp.disconnect-") and kept:
            assert "waiting for the body of 'c1' to be told" in clause.detail, clause
            continue
        if clause.id in ("mcp.cancel-told", "mcp.disconnect-told"):
            assert "torn down by task cancellation" in clause.detail
        if not clause.id.startswith("mcp."):
            assert clause.status == "skip"
            assert clause.detail == "the driver measures only mcp.*"
