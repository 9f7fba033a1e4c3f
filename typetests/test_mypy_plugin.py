"""`toolseam.mypy_plugin` on snippets: what it reports, what it leaves alone, its config.

These run mypy in-process (``mypy.api``), so they live with the static suite, whose
environment has mypy; the runtime ``tests`` session does not install it.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import conformance as suite
import pytest
from mypy import api

from toolseam.mypy_plugin import CONTRACT_VIEWS, TOOLSEAM_DEL, ToolseamPlugin, plugin

SNIPPET = """\
from typing import TypeVar

from toolseam import (
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionInput,
    ToolRunContext,
)


class Mine(ToolExecution):
    pass


class Other:
    signal: int = 0


class MyView:
    signal: int = 0


V = TypeVar("V", ToolExecution, ToolDispatchExecution)


async def listener(exec: ToolExecution) -> None:
    del exec.signal
    print(exec.signal.aborted, exec.name)


def views(r: ToolRunContext, d: ToolDispatchExecution, i: ToolExecutionInput) -> None:
    del r.token
    del (d.signal, [i.parent])


def subclass(m: Mine, o: Other, v: MyView) -> None:
    del m.agent
    del o.signal
    del v.signal


def restricted(x: V) -> None:
    del x.call_id


def silenced(x: ToolExecution) -> None:
    del x.arguments  # type: ignore[toolseam-del]
"""

DEL = 'Cannot delete attribute "{attr}" of "{view}": toolseam execution views never allow deletion'
EXPECTED = [
    (27, "signal", "ToolExecution"),
    (32, "token", "ToolRunContext"),
    (33, "signal", "ToolDispatchExecution"),
    (33, "parent", "ToolExecutionInput"),
    (37, "agent", "Mine"),
    (43, "call_id", "ToolExecution"),
    (43, "call_id", "ToolDispatchExecution"),
]
MY_VIEW = (39, "signal", "MyView")


def _errors(tmp_path: Path, config_name: str, config: str) -> list[tuple[int, str]]:
    (tmp_path / "main.py").write_text(SNIPPET)
    (tmp_path / config_name).write_text(textwrap.dedent(config))
    # One cache per configuration, kept between runs: the plugin's views are part of
    # mypy's cache key, so configurations sharing a cache would invalidate each other.
    cache = suite.cache_root() / f"plugin-{suite.digest(config_name, config, sys.version)}"
    stdout, stderr, status = api.run(
        [
            f"--config-file={tmp_path / config_name}",
            f"--cache-dir={cache}",
            "--no-error-summary",
            "--no-pretty",
            "--hide-error-context",
            str(tmp_path / "main.py"),
        ]
    )
    assert status in (0, 1), stdout + stderr
    found: list[tuple[int, str]] = []
    for line in stdout.splitlines():
        match = re.match(r"^.*main\.py:(\d+): error: (.*)$", line)
        assert match, line
        found.append((int(match[1]), match[2]))
    return sorted(found)


def _expected(*entries: tuple[int, str, str]) -> list[tuple[int, str]]:
    return sorted(
        (line, DEL.format(attr=attr, view=view) + "  [toolseam-del]")
        for line, attr, view in entries
    )


def test_plugin_reports_del_of_every_contract_view_attribute(tmp_path: Path) -> None:
    """Views, their subclasses, tuple targets and value-restricted TypeVars are reported."""
    errors = _errors(
        tmp_path,
        "mypy.ini",
        """\
        [mypy]
        strict = True
        plugins = toolseam.mypy_plugin
        """,
    )
    # Not reported: reads, `del` on classes that are no views (whatever the attribute's
    # name), and a line whose ignore names the code (no unused-ignore either).
    assert errors == _expected(*EXPECTED)


def test_mypy_without_the_plugin_reports_no_del(tmp_path: Path) -> None:
    """Plain mypy is silent on every `del` (python/mypy#12904)."""
    # python/mypy#12904: the gap the plugin closes. If this fails, mypy has started to
    # check `del`: drop the documented `mypy` differences of the typetests.
    errors = _errors(
        tmp_path,
        "mypy.ini",
        """\
        [mypy]
        strict = True
        """,
    )
    assert errors == [(47, 'Unused "type: ignore" comment  [unused-ignore]')]


def test_plugin_checks_views_listed_in_the_ini_file(tmp_path: Path) -> None:
    """A `[toolseam.mypy_plugin]` section adds a registry's own views."""
    errors = _errors(
        tmp_path,
        "mypy.ini",
        """\
        [mypy]
        strict = True
        plugins = toolseam.mypy_plugin

        [toolseam.mypy_plugin]
        views = main.MyView, otherpkg.Thing
        """,
    )
    assert errors == _expected(*EXPECTED, MY_VIEW)


def test_plugin_checks_views_listed_in_pyproject(tmp_path: Path) -> None:
    """`[tool.toolseam.mypy_plugin]` in pyproject.toml adds them too."""
    errors = _errors(
        tmp_path,
        "pyproject.toml",
        """\
        [tool.mypy]
        strict = true
        plugins = ["toolseam.mypy_plugin"]

        [tool.toolseam.mypy_plugin]
        views = ["main.MyView"]
        """,
    )
    assert errors == _expected(*EXPECTED, MY_VIEW)


def test_entry_point_returns_the_plugin_class() -> None:
    """`plugins = toolseam.mypy_plugin` finds the entry point and the code."""
    assert plugin("2.4.1") is ToolseamPlugin
    assert TOOLSEAM_DEL.code == "toolseam-del"
    assert "toolseam._views.ToolExecution" in CONTRACT_VIEWS


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("mypy.ini", "[toolseam.mypy_plugin]\nviews = a.B,  c.D\n"),
        ("pyproject.toml", '[tool.toolseam.mypy_plugin]\nviews = ["a.B", "c.D"]\n'),
        ("setup.cfg", "[toolseam.mypy_plugin]\nviews =\n  a.B\n  c.D\n"),
    ],
)
def test_configured_views_are_read_from_each_config_format(
    tmp_path: Path, name: str, text: str
) -> None:
    """ini, setup.cfg and pyproject.toml spell the list their own way."""
    from mypy.options import Options

    (tmp_path / name).write_text(text)
    options = Options()
    options.config_file = str(tmp_path / name)
    assert ToolseamPlugin(options).views == CONTRACT_VIEWS | {"a.B", "c.D"}


def test_unreadable_config_keeps_the_contract_views(tmp_path: Path) -> None:
    """A config mypy cannot parse either leaves the plugin on its defaults."""
    from mypy.options import Options

    (tmp_path / "pyproject.toml").write_text("[tool.toolseam.mypy_plugin\n")
    options = Options()
    options.config_file = str(tmp_path / "pyproject.toml")
    assert ToolseamPlugin(options).views == CONTRACT_VIEWS
