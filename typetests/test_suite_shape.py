"""The suite's own rules: twins per clause, target-only imports, configurations in step."""

from __future__ import annotations

import ast
import configparser
import re
from collections import defaultdict
from pathlib import Path

import conformance as suite


def test_suite_has_at_least_forty_cases() -> None:
    """The issue asks for 40 cases at least."""
    assert len(suite.load_cases()) >= 40


def test_every_clause_has_a_negative_case_and_a_positive_twin() -> None:
    """Contract §9: each clause must fail where it must, and pass where it must."""
    kinds: dict[str, set[bool]] = defaultdict(set)
    for case in suite.load_cases():
        kinds[case.clause].add(case.is_negative())
    lopsided = sorted(clause for clause, seen in kinds.items() if seen != {True, False})
    assert not lopsided


def test_cases_import_the_contract_from_the_target_only() -> None:
    """A case that imports toolseam would ignore the chosen target."""
    direct = re.compile(r"^\s*(from|import)\s+toolseam\b", re.MULTILINE)
    for case in suite.load_cases():
        assert not direct.search(case.main), case.key
        assert "conformance_target" in case.main, case.key


def test_documented_differences_name_lines_of_the_case() -> None:
    """A difference on a line the case does not have is a typo."""
    for case in suite.load_cases():
        length = len(case.main.split("\n"))
        for difference in case.differences.values():
            assert all(1 <= line <= length for line in difference.lines), case.key


def test_mypy_configurations_differ_only_in_the_plugin() -> None:
    """The no-plugin run must measure the plugin, nothing else."""
    with_plugin, without = configparser.ConfigParser(), configparser.ConfigParser()
    with_plugin.read(suite.MYPY_INI)
    without.read(suite.MYPY_NOPLUGIN_INI)
    assert with_plugin.get("mypy", "plugins") == "toolseam.mypy_plugin"
    assert dict(without["mypy"]) == {k: v for k, v in with_plugin["mypy"].items() if k != "plugins"}


def _exported_names(target: Path) -> set[str]:
    tree = ast.parse((target / "conformance_target" / "__init__.pyi").read_text("utf8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            names.update(a.name for a in node.names if a.asname == a.name)
        elif isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {name for name in names if not name.startswith("_")}


def test_broken_target_defines_every_name_of_the_default_target() -> None:
    """An import error would make a case fail for the wrong reason."""
    wanted = _exported_names(suite.DEFAULT_TARGET)
    assert wanted
    assert wanted <= _exported_names(suite.BROKEN_TARGET)


def _listed_names(target: Path) -> set[str]:
    tree = ast.parse((target / "conformance_target" / "__init__.pyi").read_text("utf8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            assert isinstance(node.value, ast.List)
            return {
                e.value
                for e in node.value.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            }
    return set()


def test_example_registry_exports_every_name_of_the_default_target() -> None:
    """The walk-through's target re-exports (through `__all__`) all the suite uses."""
    assert _exported_names(suite.DEFAULT_TARGET) <= _listed_names(suite.EXAMPLE_TARGET)
