"""The behavioural conformance kit on toolseam, and the kit's own documents.

toolseam must pass every clause, on asyncio and trio. That the clauses can fail — each
exactly for the rule it checks — is tests/test_conformance_mutants.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from toolseam.conformance import CLAUSES, clause_ids, run_clauses
from toolseam.conformance.drivers._mcp import ToolseamMcpDriver, ToolseamMcpDriver2026
from toolseam.conformance.drivers._toolseam import ToolseamDriver

ROOT = Path(__file__).parent.parent


async def test_toolseam_passes_every_clause(anyio_backend: str) -> None:
    report = await run_clauses(ToolseamDriver())
    assert [c.id for c in report.clauses] == clause_ids()
    # DBOS runs on asyncio only: on trio the durable clauses report the capability missing.
    durable = {c.id for c in CLAUSES if "durable" in c.requires}
    # Its MCP server is measured over the wire by the toolseam-mcp drivers (below).
    wire = {c.id for c in CLAUSES if "mcp" in c.requires}
    assert {c.status for c in report.clauses if c.id not in durable | wire} == {"pass"}, [
        (c.id, c.detail) for c in report.clauses if c.status != "pass"
    ]
    assert all(
        c.status == "skip" and "toolseam-mcp drivers" in c.detail
        for c in report.clauses
        if c.id in wire
    )
    verdicts = {c.status for c in report.clauses if c.id in durable}
    assert verdicts == ({"pass"} if anyio_backend == "asyncio" else {"skip"}), [
        (c.id, c.detail) for c in report.clauses if c.id in durable
    ]
    if anyio_backend == "trio":
        assert all("cannot host trio" in c.detail for c in report.clauses if c.id in durable)
    assert report.subject == "toolseam"
    assert set(report.versions) >= {"toolseam", "anyio", "python"}


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_toolseams_mcp_server_passes_every_mcp_clause(
    anyio_backend: str, revision: str
) -> None:
    """Over the wire, with the MCP SDK's client: a cancel and a disconnect are told and
    awaited; on 2026-07-28 a retry that never comes aborts the suspended body."""
    driver = ToolseamMcpDriver() if revision == "2025-11-25" else ToolseamMcpDriver2026()
    report = await run_clauses(driver)
    wire = {c.id for c in CLAUSES if c.id.startswith("mcp.")}
    verdicts = {c.id: c.status for c in report.clauses if c.id in wire}
    assert {s for i, s in verdicts.items() if i != "mcp.no-retry-aborts"} == {"pass"}
    assert verdicts.get("mcp.no-retry-aborts") == ("pass" if revision == "2026-07-28" else "skip")
    assert all(c.status == "skip" for c in report.clauses if c.id not in wire)
    assert report.subject == f"toolseam-mcp@{revision}"


def test_clauses_have_stable_unique_ids_traced_to_the_contract() -> None:
    ids = clause_ids()
    assert len(ids) >= 25
    assert len(set(ids)) == len(ids)
    contract = (ROOT / "docs" / "contract.md").read_text("utf8")
    sections = set(re.findall(r"^## (§\d+)", contract, re.M))
    for clause in CLAUSES:
        assert re.fullmatch(r"[a-z]+\.[a-z-]+", clause.id), clause.id
        assert clause.section.split(".")[0].split(",")[0] in sections, clause.id
        assert clause.title[0].isupper() or clause.title[0] == "'", clause.id


def test_the_guide_lists_every_clause_as_the_code_has_it() -> None:
    guide = (ROOT / "docs" / "behaviour-kit.md").read_text("utf8").split("## The clauses")[1]
    rows = re.findall(r"^\| `([a-z.-]+)` \| (.+?) \| (.+?) \| (.+?) \|$", guide, re.M)
    expected = [
        (c.id, c.title, c.section, ", ".join(f"`{r}`" for r in c.requires) or "—") for c in CLAUSES
    ]
    assert rows == expected


def test_the_scoreboard_has_every_clause() -> None:
    page = (ROOT / "docs" / "conformance.md").read_text("utf8")
    from toolseam.conformance.scoreboard import BEGIN_MARK, END_MARK

    section = page[page.index(BEGIN_MARK) : page.index(END_MARK)]
    assert re.findall(r"^\| `([a-z.-]+)` ", section, re.M) == clause_ids()


def test_the_example_driver_is_a_third_party_driver_under_100_lines() -> None:
    import runpy

    path = ROOT / "docs" / "examples" / "conformance_driver.py"
    source = path.read_text("utf8")
    assert len(source.splitlines()) < 100
    assert "toolseam.conformance.drivers" not in source  # public names only
    namespace = runpy.run_path(str(path), run_name="example")  # runs it, on asyncio
    for backend in ("asyncio", "trio"):
        report = anyio.run(run_clauses, namespace["MyDriver"](), backend=backend)
        counts = {s: sum(c.status == s for c in report.clauses) for s in ("pass", "fail", "skip")}
        # The count the example states in its comment is the one it gets.
        assert f"# -> {counts}" in source, counts
