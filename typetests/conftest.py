"""The static suite's pytest plugin: configures pytest-mypy-plugins and adds pyright items.

pytest-mypy-plugins collects every case of ``test_*.yml`` as an item that runs mypy (with
``toolseam.mypy_plugin``) and asserts the exact ``out:``. For each such item this plugin
adds a twin named ``<case>@pyright``. The first pyright item to run writes every selected
case into its own folder of one temporary project and runs pyright once (``--outputjson``);
each item then asserts that pyright reports errors on exactly the lines where the case
expects mypy errors, or on the lines its ``differences: pyright:`` documents.

Settings of pytest-mypy-plugins:

* ``--mypy-same-process``, always (about three times faster than a mypy process per
  case; mypy then takes ``mypy_path`` from the ini, never from ``MYPYPATH``);
* ``--mypy-ini-file``, unless given (for instance ``typetests/mypy-noplugin.ini``):
  ``typetests/mypy.ini`` merged with the target's own configuration (a ``mypy.ini`` in the
  target folder, or the file ``$TOOLSEAM_CONFORMANCE_MYPY_CONFIG`` names), see
  ``conformance.mypy_config``;
* ``--mypy-testing-base``, unless given: a folder per (ini, target, Python) under the
  system temporary folder, so that switching the target or the plugin never invalidates
  another configuration's mypy cache.

The target is the folder named by ``$TOOLSEAM_CONFORMANCE_TARGET`` (default
``stubs/default_target``); this plugin makes it absolute for mypy's ``mypy_path``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import conformance as suite
import pytest
from pytest_mypy_plugins.collect import YamlTestFile
from pytest_mypy_plugins.item import YamlTestItem

_STATE = pytest.StashKey["_PyrightRun"]()


def pytest_configure(config: pytest.Config) -> None:
    """Resolve the target and set this suite's defaults for pytest-mypy-plugins."""
    target = suite.resolve_target()
    os.environ[suite.TARGET_ENV] = str(target)
    # pytest-mypy-plugins looks mypy up on PATH even in same-process mode: from a venv that
    # is not activated (``.venv/bin/pytest typetests``) that lookup fails, so put this
    # interpreter's scripts folder first.
    scripts = str(Path(sys.executable).parent)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([scripts, os.environ.get("PATH", "")])
    option = config.option
    if not option.mypy_ini_file and not option.mypy_pyproject_toml_file:
        # The suite's settings plus the target's own (its plugin `views`, say).
        own = os.environ.get(suite.MYPY_CONFIG_ENV)
        option.mypy_ini_file = str(suite.mypy_config(target, Path(own) if own else None))
    option.mypy_same_process = True
    if option.mypy_testing_base == tempfile.gettempdir():
        ini = Path(option.mypy_ini_file or option.mypy_pyproject_toml_file).resolve()
        base = suite.cache_root() / f"pytest-{suite.digest(ini, target, sys.version)}"
        base.mkdir(exist_ok=True)
        option.mypy_testing_base = str(base)
    config.stash[_STATE] = _PyrightRun(config, target)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove pyright's temporary project."""
    state = config.stash.get(_STATE, None)
    if state is not None:
        state.cleanup()


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    """Collect a pyright twin right after each mypy item of a yaml file.

    The twins are part of the yaml file's collect report, so pytest counts them when it
    says how many items it collected, and ``-k``/``-m`` select among them like any item.
    """
    report = yield
    if isinstance(collector, YamlTestFile) and report.passed:
        extended: list[pytest.Item | pytest.Collector] = []
        for item in report.result:
            extended.append(item)
            if isinstance(item, YamlTestItem):
                case = suite.Case.from_parts(
                    item.path.name,
                    item.name,
                    item.files[0].content,
                    item.expected_output,
                    item.parsed_test_data,
                )
                extended.append(
                    PyrightItem.from_parent(collector, name=f"{item.name}@pyright", case=case)
                )
        report.result = extended
    return report


class PyrightMismatchError(AssertionError):
    """Pyright did not report errors on exactly the lines the case expects."""


class PyrightItem(pytest.Item):
    """One yaml case checked by pyright (the suite's single pyright run)."""

    def __init__(self, *, case: suite.Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case

    def runtest(self) -> None:
        """Compare pyright's error lines with the case's expected lines."""
        outcome = self.config.stash[_STATE].outcome(self)
        if not outcome.ok:
            raise PyrightMismatchError(outcome.explain())

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str:
        """Show the explanation, not a traceback into this plugin."""
        if isinstance(excinfo.value, PyrightMismatchError | suite.CheckerCrashedError):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """Point at the yaml file."""
        return self.path, None, self.name


class _PyrightRun:
    """Runs pyright once, over every pyright item of the session, on first demand."""

    def __init__(self, config: pytest.Config, target: Path) -> None:
        self._config = config
        self._target = target
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        self._results: dict[str, suite.Outcome] | None = None
        self._error: Exception | None = None

    def outcome(self, item: PyrightItem) -> suite.Outcome:
        if self._error is not None:
            raise self._error
        if self._results is None:
            cases = [i.case for i in item.session.items if isinstance(i, PyrightItem)]
            self._scratch = tempfile.TemporaryDirectory(prefix="toolseam-pyright-")
            try:
                self._results = dict(
                    suite.run_pyright(cases, self._target, Path(self._scratch.name)).outcomes
                )
            except Exception as error:
                self._error = error
                raise
        return self._results[item.case.key]

    def cleanup(self) -> None:
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None
