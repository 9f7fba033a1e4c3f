"""A mypy plugin that reports ``del`` of any attribute of toolseam's execution views.

mypy does not check ``del obj.attr`` at all, not even for a property without a deleter
(python/mypy#12904), so ``del exec.signal`` type-checks on plain mypy although it fails at
runtime and breaks the contract (contract §3: a view's attributes are never deleted). Pyright
reports it. Enable the plugin to close the gap::

    # mypy.ini / setup.cfg            # pyproject.toml
    [mypy]                            [tool.mypy]
    plugins = toolseam.mypy_plugin    plugins = ["toolseam.mypy_plugin"]

The plugin then reports, with the error code ``toolseam-del``::

    error: Cannot delete attribute "signal" of "ToolExecution": toolseam execution views
    never allow deletion  [toolseam-del]

How it works: mypy has no hook for statements, but it type-checks the target of
``del obj.attr`` as an ordinary read of ``obj.attr``, and that read goes through the plugin's
attribute hook. The hook asks for the attributes of the contract's view classes only (by the
fullname of the class that defines the attribute: `CONTRACT_VIEWS` and their subclasses),
and reports the access when the expression is the target of a ``del`` statement of the file
being checked, which the plugin finds by walking that file's syntax tree once.

A registry with its own view classes can have them checked too: list their fullnames in a
``[toolseam.mypy_plugin]`` section of the mypy ini file (``views = mypkg.Exec, mypkg.Ctx``)
or in ``[tool.toolseam.mypy_plugin]`` of pyproject.toml (``views = ["mypkg.Exec"]``).
"""

from __future__ import annotations

import configparser
import tomllib
from collections.abc import Callable, Iterable
from typing import Final, TypeAlias

from mypy.checker import TypeChecker
from mypy.errorcodes import ErrorCode
from mypy.messages import format_type
from mypy.nodes import (
    Block,
    ClassDef,
    Decorator,
    DelStmt,
    Expression,
    ForStmt,
    FuncDef,
    IfStmt,
    ListExpr,
    MatchStmt,
    MemberExpr,
    MypyFile,
    OverloadedFuncDef,
    Statement,
    TryStmt,
    TupleExpr,
    TypeInfo,
    WhileStmt,
    WithStmt,
)
from mypy.options import Options
from mypy.plugin import AttributeContext, Plugin, ReportConfigContext
from mypy.types import Type

__all__ = ["CONTRACT_VIEWS", "TOOLSEAM_DEL", "ToolseamPlugin", "plugin"]

CONTRACT_VIEWS: Final = frozenset(
    {
        "toolseam._views.ToolExecution",
        "toolseam._views.ToolRunContext",
        "toolseam._views.ToolDispatchExecution",
        "toolseam._views.ToolExecutionInput",
        "toolseam._run.CallState",
        "toolseam._run.DispatchView",
    }
)
"""Fullnames of the classes whose attributes (and whose subclasses' attributes) are checked.

mypy knows the classes by the private module that defines them, not by the ``toolseam``
re-export.
"""

TOOLSEAM_DEL: Final = ErrorCode(
    "toolseam-del", "Deleting an attribute of a toolseam execution view", "toolseam"
)
"""The error code of the plugin's report; silence one line with ``# type: ignore[toolseam-del]``."""

_CONFIG_SECTION: Final = "toolseam.mypy_plugin"

# mypy checks one file at a time (deferred nodes of the same file come right after), so a
# small cache of the ``del`` targets per syntax tree walks each file about once.
_CACHE_SIZE: Final = 8

_Position: TypeAlias = tuple[int, int, "int | None", "int | None", str]


def _del_targets(statements: Iterable[Statement]) -> set[_Position]:
    """The positions of the attribute expressions that ``del`` statements delete."""
    found: set[_Position] = set()
    # Only statements can hold a ``del`` (a lambda's body is an expression), so the walk
    # never descends into expressions.
    stack: list[Statement | None] = list(statements)
    while stack:
        node = stack.pop()
        if node is None:
            continue
        if isinstance(node, DelStmt):
            found.update(_position(e) for e in _flatten(node.expr) if isinstance(e, MemberExpr))
        elif isinstance(node, Block):
            stack.extend(node.body)
        elif isinstance(node, FuncDef):
            stack.append(node.body)
        elif isinstance(node, Decorator):
            stack.append(node.func)
        elif isinstance(node, OverloadedFuncDef):
            stack.extend(node.items)
            stack.append(node.impl)
        elif isinstance(node, ClassDef):
            stack.append(node.defs)
        elif isinstance(node, IfStmt):
            stack.extend(node.body)
            stack.append(node.else_body)
        elif isinstance(node, WhileStmt | ForStmt):
            stack.extend((node.body, node.else_body))
        elif isinstance(node, WithStmt):
            stack.append(node.body)
        elif isinstance(node, TryStmt):
            stack.extend((node.body, *node.handlers, node.else_body, node.finally_body))
        elif isinstance(node, MatchStmt):
            stack.extend(node.bodies)
    return found


def _position(expr: MemberExpr) -> _Position:
    # Positions, not node identity: mypy checks a function with a value-restricted TypeVar
    # once per value, on copies of its nodes that keep their positions.
    return (expr.line, expr.column, expr.end_line, expr.end_column, expr.name)


def _flatten(expr: Expression) -> Iterable[Expression]:
    # ``del a.x, (b.y, [c.z])`` deletes every leaf of the (nested) tuple or list.
    if isinstance(expr, TupleExpr | ListExpr):
        for item in expr.items:
            yield from _flatten(item)
    else:
        yield expr


def _configured_views(options: Options) -> frozenset[str]:
    path = options.config_file
    if path is None:
        return frozenset()
    try:
        if path.endswith(".toml"):
            with open(path, "rb") as file:
                data = tomllib.load(file)
            section = data.get("tool", {}).get("toolseam", {}).get("mypy_plugin", {})
            views = section.get("views", [])
            names = [views] if isinstance(views, str) else list(views)
        else:
            parser = configparser.ConfigParser()
            parser.read(path)
            names = parser.get(_CONFIG_SECTION, "views", fallback="").replace(",", " ").split()
    except (OSError, tomllib.TOMLDecodeError, configparser.Error, AttributeError, TypeError):
        # mypy itself reports a config file it cannot read; the plugin keeps its defaults.
        return frozenset()
    return frozenset(str(name).strip() for name in names if str(name).strip())


class ToolseamPlugin(Plugin):
    """Reports ``del`` of an attribute of a toolseam execution view (``toolseam-del``).

    Args:
        options: mypy's options; the views configured in the config file are read here.
    """

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self._views = CONTRACT_VIEWS | _configured_views(options)
        self._is_view: dict[str, bool] = {}
        self._trees: dict[int, tuple[MypyFile, set[_Position]]] = {}

    @property
    def views(self) -> frozenset[str]:
        """The fullnames of the classes checked: `CONTRACT_VIEWS` plus configured ones."""
        return self._views

    def get_attribute_hook(self, fullname: str) -> Callable[[AttributeContext], Type] | None:
        """Return the ``del`` check for attributes defined by a view class or a subclass."""
        owner, _, _attribute = fullname.rpartition(".")
        if self._defines_view(owner):
            return self._check_attribute
        return None

    def report_config_data(self, ctx: ReportConfigContext) -> object:
        """Make a change of the configured views invalidate mypy's cache."""
        return sorted(self._views)

    def _defines_view(self, fullname: str) -> bool:
        known = self._is_view.get(fullname)
        if known is None:
            symbol = self.lookup_fully_qualified(fullname) if fullname else None
            node = None if symbol is None else symbol.node
            known = isinstance(node, TypeInfo) and any(node.has_base(v) for v in self._views)
            self._is_view[fullname] = known
        return known

    def _check_attribute(self, ctx: AttributeContext) -> Type:
        expr = ctx.context
        if isinstance(expr, MemberExpr) and _position(expr) in self._targets_in_file(ctx):
            ctx.api.fail(
                f'Cannot delete attribute "{expr.name}" of '
                f"{format_type(ctx.type, ctx.api.options)}: "
                "toolseam execution views never allow deletion",
                expr,
                code=TOOLSEAM_DEL,
            )
        return ctx.default_attr_type

    def _find_del_targets(self, tree: MypyFile) -> set[_Position]:
        # A seam for typetests/mutants.py, which swaps in walks that forget a kind of block.
        return _del_targets(tree.defs)

    def _targets_in_file(self, ctx: AttributeContext) -> set[_Position]:
        checker = ctx.api
        if not isinstance(checker, TypeChecker):  # pragma: no cover - mypy internals moved
            return set()
        tree = checker.tree
        cached = self._trees.get(id(tree))
        if cached is not None and cached[0] is tree:
            return cached[1]
        targets = self._find_del_targets(tree)
        if len(self._trees) >= _CACHE_SIZE:
            self._trees.pop(next(iter(self._trees)))
        self._trees[id(tree)] = (tree, targets)
        return targets


def plugin(version: str) -> type[Plugin]:
    """The entry point mypy calls (``plugins = toolseam.mypy_plugin``).

    Args:
        version: The running mypy's version; every mypy with attribute hooks is supported.

    Returns:
        `ToolseamPlugin`.
    """
    return ToolseamPlugin
