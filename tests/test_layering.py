"""The core's modules read top-down: no import circle, typing-only imports included.

Regression (issue 25): `_hooks` imported `ToolRegistry` from `_registry`, which imports
`_hooks`. A circle hidden behind ``if TYPE_CHECKING:`` still makes a reader jump back and
forth, so every relative import counts here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import toolseam

CORE = Path(toolseam.__file__).parent


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module is None:
                found.update(alias.name for alias in node.names)
            else:
                found.add(node.module.split(".")[0])
    return found


def _graph() -> dict[str, set[str]]:
    modules = {path.stem: path for path in CORE.glob("_*.py") if path.stem != "__main__"}
    return {name: _imports(path) & modules.keys() for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph``, as the path that closes it, or ``None``."""
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        for imported in sorted(graph[name]):
            if imported in path:
                return [*path[path.index(imported) :], imported]
            if imported not in done:
                found = visit(imported, [*path, imported])
                if found is not None:
                    return found
        done.add(name)
        return None

    for name in sorted(graph):
        found = visit(name, [name])
        if found is not None:
            return found
    return None


def test_the_core_has_no_import_circle() -> None:
    assert _cycle(_graph()) is None


def test_the_check_finds_a_circle() -> None:
    assert _cycle({"_a": {"_b"}, "_b": {"_c"}, "_c": {"_a"}}) == ["_a", "_b", "_c", "_a"]


def test_the_hooks_sit_below_the_registry() -> None:
    graph = _graph()
    assert "_registry" not in graph["_hooks"]
    assert "_hooks" in graph["_registry"]
