"""The kit's mutants: toolseam's driver with exactly one defect each, and what they break.

`MUTANTS` is the table the mutation test (tests/test_conformance_mutants.py) runs: each
row's driver must fail exactly the clauses listed, on each backend listed, and pass (or
skip) every other clause. A new family of clauses adds a module here with its own
``MUTANTS`` tuple (a defect its clauses must catch, and nothing else may) and one line below.
"""

from __future__ import annotations

from . import capabilities, core, durable, mcp, ptc
from ._base import BOTH, Mutant, ToolseamMutant, race_abort

__all__ = ["BOTH", "MUTANTS", "Mutant", "ToolseamMutant", "race_abort"]

MUTANTS: tuple[Mutant, ...] = (
    *core.MUTANTS,
    *capabilities.MUTANTS,
    *ptc.MUTANTS,
    *durable.MUTANTS,
    *mcp.MUTANTS,
)
"""Every mutant, from every family's module."""
