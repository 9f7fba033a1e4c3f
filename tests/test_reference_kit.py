"""The behavioural conformance kit on the reference pipeline (`toolseam-reference`).

It must pass every clause it does not lack a capability for; it lacks exactly ``ptc`` and
``durable``, which are built on `ToolRegistry` only, and ``mcp``/``mcp_input_required``
(the ``mcp.*`` clauses drive a server over the wire: the toolseam-mcp drivers).
"""

from __future__ import annotations

from toolseam.conformance import CLAUSES, clause_ids, run_clauses
from toolseam.conformance.drivers import load_driver


async def test_the_reference_passes_every_clause_it_supports(anyio_backend: str) -> None:
    driver = load_driver("toolseam-reference")
    report = await run_clauses(driver)
    assert [c.id for c in report.clauses] == clause_ids()
    lacking = {
        c.id for c in CLAUSES if {"ptc", "durable", "mcp", "mcp_input_required"} & set(c.requires)
    }
    assert lacking  # the kit has such clauses, and the reference skips exactly those
    assert {c.id: c.status for c in report.clauses if c.id not in lacking} == {
        c.id: "pass" for c in CLAUSES if c.id not in lacking
    }, [(c.id, c.detail) for c in report.clauses if c.status != "pass"]
    assert {c.status for c in report.clauses if c.id in lacking} == {"skip"}
    assert report.subject == "toolseam-reference"
