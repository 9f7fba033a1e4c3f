"""Meta-test, clause by clause: every single-break mutant is caught (contract §9).

``stubs/broken_target`` breaks everything at once, so it cannot show that *each* clause is
guarded. Here ``mutants.py`` generates a stub copy of toolseam and one mutant per way to
break a clause (and one per kind of block the mypy plugin's ``del`` walk must visit), runs
them all in one mypy run and one pyright run, and this module asserts, per mutant and
gating checker, that some case of the mutant's own clause fails — or that the mutant
documents why that checker cannot see it, and indeed does not.
"""

from __future__ import annotations

import ast

import conformance as suite
import mutants
import pytest

_ALL = mutants.ALL_MUTANTS

# The batch fixture is one mypy run and one pyright run over a stub copy per mutant (about a
# minute alone); `nox` runs the sessions side by side, so give it room past the default 120 s.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def batch() -> mutants.BatchResult:
    """Every mutant on both gating checkers, computed once."""
    return mutants.run_batch()


def test_the_generated_copy_passes_every_case(batch: mutants.BatchResult) -> None:
    """Control: the unmutated stub copy is the contract, so a caught mutant is the mutant's."""
    assert not batch.control_failures, "\n".join(batch.control_failures)


def test_every_mutant_names_a_clause_of_the_suite() -> None:
    """A mutant of a clause without cases could never be caught."""
    clauses = {case.clause for case in suite.load_cases()}
    assert {m.clause for m in _ALL} <= clauses


def test_every_clause_has_a_mutant() -> None:
    """Per-clause mutation: no clause of the suite is left without a mutant."""
    clauses = {case.clause for case in suite.load_cases()}
    assert clauses <= {m.clause for m in _ALL}


def test_each_mutant_changes_its_module() -> None:
    """A transform that changes nothing would make a mutant that is the control."""
    stubs = mutants.stub_package()
    for mutant in mutants.MUTANTS:
        before = ast.dump(ast.parse(stubs[mutant.module]))
        after = ast.dump(ast.parse(mutant.files(stubs)[mutant.module]))
        assert before != after, mutant.id


@pytest.mark.parametrize("checker", suite.GATING)
@pytest.mark.parametrize("mutant", _ALL, ids=[m.id for m in _ALL])
def test_mutant_is_caught_by_a_case_of_its_clause(
    batch: mutants.BatchResult, mutant: mutants.Mutant | mutants.PluginMutant, checker: str
) -> None:
    """Caught, or documented as invisible to this checker (and then really not caught)."""
    [verdict] = [v for v in batch.verdicts if v.mutant == mutant.id and v.checker == checker]
    if verdict.blind is not None:
        assert not verdict.caught, (
            f"{mutant.id} is documented as invisible to {checker} ({verdict.blind}), but "
            f"these cases catch it: {', '.join(verdict.failing)}; drop the note"
        )
    else:
        assert verdict.caught, (
            f"no case of {mutant.clause!r} fails on {checker} when {mutant.description}"
        )
