"""Meta-test: the suite catches a broken contract (contract §9).

``stubs/broken_target`` breaks every rule the suite checks (optional and deletable
signal, mutable views, a signal with ``abort``, public constructors, untyped codes, a
``define_tool`` that loses inference, stages that take any callable). Every negative case
must stop reporting its expected error there; a case that still reports it could not tell
a broken contract from a sound one, and is printed as a survivor.
"""

from __future__ import annotations

from pathlib import Path

import conformance as suite
import pytest


@pytest.fixture(scope="module")
def cases() -> list[suite.Case]:
    """Every case of the suite, loaded once."""
    return suite.load_cases()


def _missing_names(report: suite.Report) -> list[str]:
    # An import error would silence a case for the wrong reason.
    return [
        f"{outcome.case.key}: {diagnostic.message}"
        for outcome in report.outcomes.values()
        for diagnostic in outcome.diagnostics
        if 'Module "conformance_target" has no attribute' in diagnostic.message
        or "unknown import symbol" in diagnostic.message
    ]


@pytest.mark.parametrize("checker", suite.GATING)
def test_every_negative_case_fails_on_the_broken_target(
    checker: str, cases: list[suite.Case], tmp_path: Path
) -> None:
    """A negative case that still reports its errors on the broken target is a survivor."""
    negatives = [case for case in cases if case.is_negative(checker)]
    assert negatives

    # Control: on the sound contract the same run sees every expected error, so a
    # silent case below is the broken target's doing, not the runner's.
    control = suite.run_checker(checker, negatives, suite.DEFAULT_TARGET, tmp_path / "default")
    blind = [
        o.explain() for o in control.outcomes.values() if not o.still_reports_expected_errors()
    ]
    assert not blind, "\n".join(blind)

    broken = suite.run_checker(checker, negatives, suite.BROKEN_TARGET, tmp_path / "broken")
    assert not _missing_names(broken), "\n".join(_missing_names(broken))
    survivors = [o for o in broken.outcomes.values() if o.still_reports_expected_errors()]
    for outcome in survivors:
        print(outcome.explain())
    assert not survivors, (
        f"{len(survivors)} of {len(negatives)} negative cases still report their expected "
        f"errors on the broken target ({checker}): " + ", ".join(o.case.key for o in survivors)
    )
