"""The kit is mutation-tested: each single-defect driver fails exactly the clauses it breaks.

The table is `kit_mutants.MUTANTS` (one row per defect: the driver, the clause ids it must
fail, the backends it can be expressed on). A clause that misses a defect, or fails a
registry for a rule it does not break, makes a row fail here. The unmodified toolseam driver
passes everything (tests/test_conformance_kit.py).
"""

from __future__ import annotations

import pytest

from kit_mutants import MUTANTS, Mutant
from toolseam.conformance import CLAUSES, Report, clause_ids, run_clauses


def _failing(report: Report) -> set[str]:
    return {c.id for c in report.clauses if c.status == "fail"}


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
async def test_a_mutant_fails_exactly_the_clauses_it_breaks(
    mutant: Mutant, anyio_backend: str
) -> None:
    if anyio_backend not in mutant.backends:
        pytest.skip(f"{mutant.name} cannot be expressed on {anyio_backend}")
    driver = mutant.driver()
    report = await run_clauses(driver)
    assert [c.id for c in report.clauses] == clause_ids()
    assert _failing(report) - mutant.sometimes == mutant.breaks, [
        (c.id, c.detail) for c in report.clauses if c.status == "fail"
    ]
    # A skip only where the mutant lacks a capability (``durable``: on trio, or in the
    # families that measure the in-process registry), or outside the clause families it
    # measures (the MCP drivers: ``mcp.*`` only).
    offered = set(driver.capabilities)
    families = getattr(driver, "families", None)
    needs = {c.id: set(c.requires) for c in CLAUSES}
    for clause in report.clauses:
        outside = families is not None and clause.id.split(".")[0] not in families
        assert clause.status in ("pass", "fail") or outside or not needs[clause.id] <= offered, (
            clause
        )


def test_every_mutant_breaks_a_known_clause_and_names_are_unique() -> None:
    known = set(clause_ids())
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)
    for mutant in MUTANTS:
        assert mutant.breaks, f"{mutant.name} breaks nothing: it is not a mutant"
        assert mutant.breaks <= known, mutant.breaks - known
        assert mutant.sometimes <= known, mutant.sometimes - known
        assert not mutant.breaks & mutant.sometimes, mutant.name
