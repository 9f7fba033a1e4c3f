"""Run the kit's clauses as pytest items in a registry's own test suite (opt-in).

Nothing happens unless the plugin is loaded *and* a driver is named::

    pytest -p toolseam.conformance.pytest_plugin --conformance-driver mypkg.testing:Driver

(or ``conformance_driver = mypkg.testing:Driver`` in the ini file, and ``-p`` in
``addopts``). Then one item per clause is added, ``conformance::<clause id>``: it passes,
fails with the clause's detail, or is skipped for a missing capability.
``--conformance-expect FILE`` (ini ``conformance_expect``) marks the known failures: they
become xfails, and one that passes fails as stale. ``--conformance-backend`` picks the anyio
backend (default: the driver's first). toolseam installs no entry point: having it
installed changes nothing in a test run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import anyio
import pytest

from ._clauses import CLAUSES, Clause
from ._driver import Driver
from ._report import Expectations
from ._runner import ClauseResult, run_clause
from .drivers import load_driver

__all__ = ["ClauseItem", "pytest_addoption", "pytest_collection_modifyitems"]


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's options."""
    group = parser.getgroup("toolseam-conformance", "toolseam behavioural conformance kit")
    group.addoption("--conformance-driver", help="the driver: a built-in name or MODULE:ATTR")
    group.addoption("--conformance-backend", help="the anyio backend (default: driver's first)")
    group.addoption("--conformance-expect", help="the expected-failures file")
    parser.addini("conformance_driver", "the conformance driver (NAME or MODULE:ATTR)")
    parser.addini("conformance_expect", "the conformance expected-failures file")


def _option(config: pytest.Config, name: str) -> str | None:
    value = config.getoption(f"--conformance-{name}")
    if value:
        return str(value)
    ini = config.getini(f"conformance_{name}") if name != "backend" else None
    return str(ini) if ini else None


class ClauseFailure(Exception):
    """A clause failed: its detail is the message."""


class ClauseItem(pytest.Item):
    """One clause run against the configured driver."""

    def __init__(
        self,
        *,
        clause: Clause,
        driver: Driver,
        backend: str,
        expected: str | None,
        **kwargs: object,
    ) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.clause = clause
        self.driver = driver
        self.backend = backend
        self.expected = expected

    def runtest(self) -> None:
        """Run the clause in an event loop of its own."""
        result: ClauseResult = anyio.run(run_clause, self.driver, self.clause, backend=self.backend)
        if result.status == "skip":
            pytest.skip(result.detail)
        if self.expected is not None:
            if result.status == "fail":
                pytest.xfail(f"{self.expected or 'expected failure'}: {result.detail}")
            raise ClauseFailure(
                f"{self.clause.id} is listed as an expected failure but passes: remove it"
            )
        if result.status == "fail":
            raise ClauseFailure(result.detail)

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: object = None
    ) -> str:
        """The clause's detail, without a traceback into the kit."""
        if isinstance(excinfo.value, ClauseFailure):
            return f"{self.clause.id}: {self.clause.title}\n{excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int, str]:
        """Where the item comes from."""
        return "conformance", 0, f"conformance::{self.clause.id}"


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Add one item per clause when a driver is configured."""
    spec = _option(config, "driver")
    if spec is None:
        return
    driver = load_driver(spec)
    backend = _option(config, "backend") or driver.backends[0]
    expect = _option(config, "expect")
    reasons: Mapping[str, str] = Expectations.load(Path(expect)).reasons if expect else {}
    items.extend(
        ClauseItem.from_parent(  # pyright: ignore[reportUnknownMemberType]
            session,
            name=f"conformance::{clause.id}",
            clause=clause,
            driver=driver,
            backend=backend,
            expected=reasons.get(clause.id),
        )
        for clause in CLAUSES
    )
