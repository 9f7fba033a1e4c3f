"""Another registry runs the suite on its own types, as docs/conformance.md says (§9).

``stubs/example_registry`` is minireg, a registry that is not toolseam: its own names, its
own views, its own ``mypy.ini`` naming those views for the plugin. The walk-through in
docs/conformance.md runs the matrix on it; this module runs the very command lines the
document shows and requires a clean verdict, and shows that the registry's own plugin
configuration is what makes mypy see ``del`` of its views.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import conformance as suite
import pytest

DOC = suite.ROOT / "docs" / "conformance.md"


def _documented_commands() -> list[list[str]]:
    text = DOC.read_text("utf8")
    commands = re.findall(r"^[ \t]*python typetests/conformance\.py (.+)$", text, re.M)
    return [shlex.split(line) for line in commands if "stubs/example_registry" in line]


def test_the_walk_through_shows_a_command_for_the_example_registry() -> None:
    """The document and this test talk about the same command."""
    assert _documented_commands()


@pytest.mark.parametrize("argv", _documented_commands(), ids=shlex.join)
def test_documented_command_passes_on_the_example_registry(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every case behaves as the contract requires on minireg, messages included."""
    monkeypatch.chdir(suite.ROOT)
    status = suite.main(argv)
    out, err = capsys.readouterr()
    assert status == 0, err
    rows = [line for line in out.splitlines() if line.startswith("|")]
    assert rows
    assert not [row for row in rows if "❌" in row]


def test_the_registry_config_is_what_lets_the_plugin_see_its_views(tmp_path: Path) -> None:
    """Without minireg's ``[toolseam.mypy_plugin] views``, mypy misses ``del`` on its views."""
    deletes = [c for c in suite.load_cases() if c.clause.startswith("§3 `del`") and c.is_negative()]
    assert deletes
    empty = tmp_path / "mypy.ini"
    empty.write_text("[mypy]\n")
    blind = suite.run_checker(
        suite.REFERENCE, deletes, suite.EXAMPLE_TARGET, tmp_path / "w", mypy_config=empty
    )
    assert not any(o.passes for o in blind.outcomes.values())
    seeing = suite.run_checker(suite.REFERENCE, deletes, suite.EXAMPLE_TARGET, tmp_path / "s")
    assert all(o.passes for o in seeing.outcomes.values())


def test_messages_are_read_back_in_the_suite_names() -> None:
    """The registry's `Call` is the cases' `ToolExecution`; a quoted literal stays as is."""
    renames = suite.target_renames(suite.EXAMPLE_TARGET)
    assert renames["Call"] == "ToolExecution"
    rename = suite.message_renamer(renames)
    assert (
        rename('Property "signal" defined in "Call" is read-only; Literal[\'ABORTED\']')
        == 'Property "signal" defined in "ToolExecution" is read-only; Literal[\'ABORTED\']'
    )
