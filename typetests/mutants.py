"""Single-break mutants of the contract, generated from toolseam itself (contract §9).

`stub_package` turns the installed ``toolseam`` package into a stub-only copy (every
function body ``...``, only what type checkers read): a *generated* target, faithful by
construction. Each `Mutant` is one syntax-tree transform of that copy that breaks exactly
one clause of the contract; each `PluginMutant` is one transform of the ``del`` walk of
``toolseam.mypy_plugin``. `run_batch` checks every mutant in one mypy run (in this
process) and one pyright run: each mutant's package is renamed (``toolseam_<id>``, its
target ``conformance_target_<id>``) so that all of them live side by side, and the plugin
mutants are dispatched per case folder by one generated plugin.

A mutant is *caught* by a checker when at least one case of its own clause stops passing
(errors on other lines, or — on mypy — other messages than the case pins). The unmutated
copy (`CONTROL`) runs in the same batch and must pass every case it is given, so that a
caught mutant is the mutation's doing, not the copy's.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import inspect
import re
import shutil
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import conformance as suite

PACKAGE: Final = "toolseam"
CONTROL: Final = "control"

# Modules the contract's re-exports reach; the others (CLI, demo, MCP, the plugin) never
# reach a type checker through `conformance_target`.
_SKIPPED: Final = frozenset({"__main__", "_demo", "mypy_plugin", "policies"})


# -- the generated stub copy -----------------------------------------------------------


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_overload_implementation(node: ast.stmt, previous: ast.stmt) -> bool:
    return (
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and isinstance(previous, ast.FunctionDef | ast.AsyncFunctionDef)
        and previous.name == node.name
        and any("overload" in ast.unparse(d) for d in previous.decorator_list)
        and not any("overload" in ast.unparse(d) for d in node.decorator_list)
    )


def _strip(body: list[ast.stmt]) -> list[ast.stmt]:
    kept: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.Expr):
            continue  # docstrings and module-level calls
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            kept.extend(_strip(node.body))  # what checkers see
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if kept and _is_overload_implementation(node, kept[-1]):
                continue  # a stub declares the overloads only
            node.body = [ast.Expr(ast.Constant(...))]
        elif isinstance(node, ast.ClassDef):
            node.body = _strip(node.body) or [ast.Expr(ast.Constant(...))]
        elif isinstance(node, ast.If | ast.Try | ast.For | ast.While | ast.With):
            continue  # runtime-only set-up
        kept.append(node)
    return kept


def stub_package() -> dict[str, str]:
    """The installed toolseam package as stubs: ``{"_views.pyi": text, ...}``."""
    spec = importlib.util.find_spec(PACKAGE)
    assert spec is not None
    assert spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    files: dict[str, str] = {}
    for path in sorted(root.glob("*.py")):
        if path.stem in _SKIPPED:
            continue
        tree = ast.parse(path.read_text("utf8"))
        tree.body = _strip(tree.body)
        files[f"{path.stem}.pyi"] = ast.unparse(tree) + "\n"
    return files


def _renamed(text: str, package: str) -> str:
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and (node.module == PACKAGE or node.module.startswith(PACKAGE + "."))
        ):
            node.module = package + node.module[len(PACKAGE) :]
    return ast.unparse(tree) + "\n"


# -- transforms -------------------------------------------------------------------------


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise LookupError(f"no class {name}")


def _defs(body: Iterable[ast.stmt], name: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [
        node
        for node in body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
    ]


def _parse_stmts(source: str) -> list[ast.stmt]:
    return ast.parse(textwrap.dedent(source)).body


def add_members(cls: str, source: str) -> Callable[[ast.Module], None]:
    """Add members (a setter, a deleter, a method) to class ``cls``."""

    def transform(tree: ast.Module) -> None:
        node = _class(tree, cls)
        for statement in _parse_stmts(source):
            # A property's setter or deleter must follow the definitions of the property.
            prop = next(
                (
                    d.value.id
                    for d in getattr(statement, "decorator_list", ())
                    if isinstance(d, ast.Attribute) and isinstance(d.value, ast.Name)
                ),
                None,
            )
            defined = _defs(node.body, prop) if prop else []
            if defined:
                node.body.insert(node.body.index(defined[-1]) + 1, statement)
            else:
                node.body.append(statement)

    return transform


def add_setter(cls: str, prop: str) -> Callable[[ast.Module], None]:
    """Give the property ``prop`` of ``cls`` a setter of the getter's type."""

    def transform(tree: ast.Module) -> None:
        [getter, *_] = _defs(_class(tree, cls).body, prop)
        assert getter.returns is not None
        kind = ast.unparse(getter.returns)
        add_members(cls, f"@{prop}.setter\ndef {prop}(self, value: {kind}) -> None: ...")(tree)

    return transform


def remove_member(cls: str, name: str) -> Callable[[ast.Module], None]:
    """Remove every definition of ``name`` from class ``cls``."""

    def transform(tree: ast.Module) -> None:
        node = _class(tree, cls)
        doomed = _defs(node.body, name)
        assert doomed, f"{cls}.{name} not found"
        node.body = [m for m in node.body if m not in doomed] or [ast.Expr(ast.Constant(...))]

    return transform


def annotate(
    function: str, annotation: str, *, param: str | None = None, cls: str | None = None
) -> Callable[[ast.Module], None]:
    """Re-annotate a parameter (or, without ``param``, the return) of every overload."""

    def transform(tree: ast.Module) -> None:
        body = _class(tree, cls).body if cls else tree.body
        functions = _defs(body, function)
        assert functions, f"no function {function}"
        for node in functions:
            new = ast.parse(annotation, mode="eval").body
            if param is None:
                node.returns = new
                continue
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            matching = [a for a in args if a.arg == param]
            if matching:  # the implementation may spell its parameters otherwise
                matching[0].annotation = new

    return transform


def make_async(cls: str, function: str) -> Callable[[ast.Module], None]:
    """Turn ``def f(...) -> Awaitable[R]`` of class ``cls`` into ``async def f(...) -> R``."""

    def transform(tree: ast.Module) -> None:
        node = _class(tree, cls)
        for index, member in enumerate(node.body):
            if isinstance(member, ast.FunctionDef) and member.name == function:
                assert isinstance(member.returns, ast.Subscript)
                fields = {**vars(member), "returns": member.returns.slice}
                node.body[index] = ast.AsyncFunctionDef(**fields)
                return
        raise LookupError(f"no {cls}.{function}")

    return transform


def retype_field(cls: str, field: str, source: str) -> Callable[[ast.Module], None]:
    """Replace the annotated field ``field`` of ``cls`` with the statement ``source``.

    A dataclass that writes its own ``__init__`` (``ToolExecutionInput``) takes the field as
    a keyword-only parameter: that parameter gets the new annotation and default too.
    """

    def transform(tree: ast.Module) -> None:
        node = _class(tree, cls)
        for index, member in enumerate(node.body):
            if (
                isinstance(member, ast.AnnAssign)
                and isinstance(member.target, ast.Name)
                and member.target.id == field
            ):
                node.body[index : index + 1] = replacement = _parse_stmts(source)
                _retype_init_parameter(node, field, replacement[0])
                return
        raise LookupError(f"no field {cls}.{field}")

    return transform


def _retype_init_parameter(node: ast.ClassDef, field: str, new: ast.stmt) -> None:
    assert isinstance(new, ast.AnnAssign)
    for init in _defs(node.body, "__init__"):
        for index, parameter in enumerate(init.args.kwonlyargs):
            if parameter.arg == field:
                parameter.annotation = new.annotation
                init.args.kw_defaults[index] = new.value


def replace_statement(pattern: str, source: str) -> Callable[[ast.Module], None]:
    """Replace the module-level statement whose source matches ``pattern``."""

    def transform(tree: ast.Module) -> None:
        for index, node in enumerate(tree.body):
            if re.fullmatch(pattern, ast.unparse(node)):
                tree.body[index : index + 1] = _parse_stmts(source)
                return
        raise LookupError(f"no statement matches {pattern!r}")

    return transform


def redecorate(cls: str, decorator: str) -> Callable[[ast.Module], None]:
    """Replace the decorators of class ``cls`` with ``decorator``."""

    def transform(tree: ast.Module) -> None:
        _class(tree, cls).decorator_list = [ast.parse(decorator, mode="eval").body]

    return transform


def chain(*transforms: Callable[[ast.Module], None]) -> Callable[[ast.Module], None]:
    """Apply several transforms of one module (one break spelled in several places)."""

    def transform(tree: ast.Module) -> None:
        for each in transforms:
            each(tree)

    return transform


@dataclass(frozen=True)
class Mutant:
    """One clause broken in one module of the generated copy."""

    id: str
    clause: str
    """The clause whose cases must catch it (a ``clause:`` of the yaml cases)."""
    description: str
    module: str
    """The stub file the transform applies to, e.g. ``_views.pyi``."""
    transform: Callable[[ast.Module], None]
    blind: Mapping[str, str] = field(default_factory=dict)
    """Per checker, why it cannot see this mutant (documented, never silently skipped)."""

    def files(self, stubs: Mapping[str, str]) -> dict[str, str]:
        """The generated copy with this mutant's break in it."""
        tree = ast.parse(stubs[self.module])
        self.transform(tree)
        return {**stubs, self.module: ast.unparse(tree) + "\n"}


_DEL_BLIND: Final = {
    "mypy+plugin": "mypy's verdict on `del` is the plugin's, which rejects deleting any view "
    "attribute whatever the view declares: no target can loosen it. The plugin mutants "
    "cover mypy's side of the clause"
}

_CODES: Final = {
    "TOOL_ABORTED": "ABORTED",
    "TOOL_ABORTED_BEFORE_DISPATCH": "ABORTED_BEFORE_DISPATCH",
    "TOOL_TIMEOUT": "TOOL_TIMEOUT",
    "UNKNOWN_TOOL": "UNKNOWN_TOOL",
    "INVALID_ARGS": "INVALID_ARGS",
    "INVALID_TOOL_OUTPUT": "INVALID_TOOL_OUTPUT",
}
_FIELDS: Final = ("token", "call_id", "root_call_id", "name", "arguments", "agent", "parent")
_STAGES: Final = {
    "on_pre_execute": (
        "listener",
        "Callable[[ToolDispatchExecution, Next[PreDecision]], Awaitable[PreDecision]]",
    ),
    "on_post_execute": (
        "listener",
        "Callable[[ToolDispatchExecution, ToolResult, Next[PostDecision]], "
        "Awaitable[PostDecision]]",
    ),
    "on_result": ("observer", "Callable[[ToolDispatchExecution, ToolResult], None]"),
    "add_guard": ("guard", "Callable[[ToolDispatchExecution], str | None]"),
}
_SHAPE: Final = "§5 each stage takes only its own shape"
_OPTIONS: Final = "§6 the options are typed against the body's arguments"
_HAND: Final = "§6 hand-written `ToolDefinition`s"
_REGISTRY_IMPORTS: Final = (
    "from typing import Any\nfrom ._views import ToolDispatchExecution, ToolExecution\n"
    "from ._stages import Next\nfrom ._decisions import PreDecision, PostDecision\n"
    "from ._results import ToolResult\nfrom collections.abc import Awaitable, Callable\n"
)


def _prepend_imports(transform: Callable[[ast.Module], None]) -> Callable[[ast.Module], None]:
    def with_imports(tree: ast.Module) -> None:
        tree.body[0:0] = _parse_stmts(_REGISTRY_IMPORTS)
        transform(tree)

    return with_imports


MUTANTS: Final[tuple[Mutant, ...]] = (
    # contract §2
    Mutant(
        "signal-abort",
        "§2 a borrowed signal cannot abort",
        "`AbortSignal` gains `abort()`",
        "_signals.pyi",
        add_members("AbortSignal", "def abort(self, reason: object = None) -> None: ..."),
    ),
    Mutant(
        "aborted-settable",
        "§2 `aborted` and `reason` are read-only",
        "`AbortSignal.aborted` gets a setter",
        "_signals.pyi",
        add_members("AbortSignal", "@aborted.setter\ndef aborted(self, value: bool) -> None: ..."),
    ),
    Mutant(
        "reason-settable",
        "§2 `aborted` and `reason` are read-only",
        "`AbortSignal.reason` gets a setter",
        "_signals.pyi",
        add_members("AbortSignal", "@reason.setter\ndef reason(self, value: object) -> None: ..."),
    ),
    # contract §3
    Mutant(
        "input-signal-default",
        "§3 `signal` is required at `ToolExecutionInput`",
        "`ToolExecutionInput.signal` has a default",
        "_views.pyi",
        retype_field("ToolExecutionInput", "signal", "signal: AbortSignal = ..."),
    ),
    Mutant(
        "input-signal-optional",
        "§3 `signal` is never `None`",
        "`ToolExecutionInput.signal` is `AbortSignal | None`",
        "_views.pyi",
        retype_field("ToolExecutionInput", "signal", "signal: AbortSignal | None"),
    ),
    Mutant(
        "dispatch-signal-none",
        "§3 `signal` is never `None`",
        "the dispatch view's setter takes `AbortSignal | None`",
        "_views.pyi",
        annotate("signal", "AbortSignal | None", param="value", cls="ToolDispatchExecution"),
    ),
    Mutant(
        "input-mutable",
        "§3 `ToolExecutionInput` is immutable",
        "`ToolExecutionInput` is not frozen",
        "_views.pyi",
        redecorate("ToolExecutionInput", "dataclass(kw_only=True, slots=True)"),
    ),
    Mutant(
        "token-constructible",
        "§3 `ExecutionToken` and `AbortSignal` have no public constructor",
        "`ExecutionToken()` constructible",
        "_views.pyi",
        chain(
            remove_member("ExecutionToken", "__init__"),
            add_members("ExecutionToken", "def __init__(self) -> None: ..."),
        ),
    ),
    Mutant(
        "signal-constructible",
        "§3 `ExecutionToken` and `AbortSignal` have no public constructor",
        "`AbortSignal()` constructible",
        "_signals.pyi",
        chain(
            remove_member("AbortSignal", "__init__"),
            add_members("AbortSignal", "def __init__(self) -> None: ..."),
        ),
    ),
    Mutant(
        "view-signal-settable",
        "§3 a borrowed `signal` cannot be assigned, in any stage",
        "`ToolExecution.signal` gets a setter",
        "_views.pyi",
        add_members(
            "ToolExecution", "@signal.setter\ndef signal(self, value: AbortSignal) -> None: ..."
        ),
    ),
    Mutant(
        "view-signal-deletable",
        "§3 `del` of a view attribute is rejected",
        "every view property gets a deleter",
        "_views.pyi",
        chain(
            *(
                add_members("ToolExecution", f"@{name}.deleter\ndef {name}(self) -> None: ...")
                for name in (*_FIELDS, "signal")
            ),
            add_members("ToolDispatchExecution", "@signal.deleter\ndef signal(self) -> None: ..."),
            redecorate("ToolExecutionInput", "dataclass(kw_only=True, slots=True)"),
        ),
        blind=_DEL_BLIND,
    ),
    Mutant(
        "dispatch-signal-any",
        "§3 the dispatch view's `signal` is replaceable by an `AbortSignal`",
        "the dispatch view's setter takes `object`",
        "_views.pyi",
        annotate("signal", "object", param="value", cls="ToolDispatchExecution"),
    ),
    Mutant(
        "dispatch-signal-read-only",
        "§3 the dispatch view's `signal` is replaceable by an `AbortSignal`",
        "the dispatch view's `signal` has no setter",
        "_views.pyi",
        remove_member("ToolDispatchExecution", "signal"),
    ),
    *(
        Mutant(
            f"{name.replace('_', '-')}-settable",
            "§3 every other field is read-only in every view",
            f"`ToolExecution.{name}` gets a setter",
            "_views.pyi",
            add_setter("ToolExecution", name),
        )
        for name in _FIELDS
    ),
    Mutant(
        "defer-context-object",
        "§3 the body view adds `defer_context(JsonValue)`",
        "`defer_context` takes `object`",
        "_views.pyi",
        annotate("defer_context", "object", param="context", cls="ToolRunContext"),
    ),
    Mutant(
        "defer-context-removed",
        "§3 the body view adds `defer_context(JsonValue)`",
        "`ToolRunContext` has no `defer_context`",
        "_views.pyi",
        remove_member("ToolRunContext", "defer_context"),
    ),
    # contract §4
    Mutant(
        "success-is-error-bool",
        "§4 results narrow on `is_error`",
        "`ToolSuccess.is_error` is `bool`",
        "_results.pyi",
        retype_field(
            "ToolSuccess", "is_error", "is_error: bool = field(default=False, init=False)"
        ),
    ),
    *(
        Mutant(
            f"literal-{code.lower().replace('_', '-')}",
            "§4 codes are `Final` literals",
            f"`{code}` declared `Literal[...]`, not `Final`",
            "_errors.pyi",
            replace_statement(
                rf"{code}: Final = '{value}'",
                f"from typing import Literal\n{code}: Literal['{value}'] = '{value}'",
            ),
        )
        for code, value in _CODES.items()
    ),
    Mutant(
        "code-not-literal",
        "§4 an exhaustive `match` over the codes",
        "`TOOL_ABORTED` is `Final[str]`",
        "_errors.pyi",
        replace_statement(
            r"TOOL_ABORTED: Final = 'ABORTED'", "TOOL_ABORTED: Final[str] = 'ABORTED'"
        ),
    ),
    Mutant(
        "results-mutable",
        "§4 results are frozen",
        "`ToolSuccess` and `ToolFailure` are not frozen",
        "_results.pyi",
        chain(
            redecorate("ToolSuccess", "dataclass(slots=True, kw_only=True)"),
            redecorate("ToolFailure", "dataclass(slots=True, kw_only=True)"),
        ),
    ),
    # contract §5
    *(
        Mutant(
            f"{method.replace('_', '-')}-dispatch-view",
            "§5 a stage cannot demand the dispatch view",
            f"`{method}` takes stages that demand the dispatch view",
            "_registry.pyi",
            _prepend_imports(annotate(method, annotation, param=param, cls="ToolRegistry")),
        )
        for method, (param, annotation) in _STAGES.items()
    ),
    Mutant(
        "guard-returns-object",
        _SHAPE,
        "`add_guard` takes a guard returning `object`",
        "_registry.pyi",
        _prepend_imports(
            annotate(
                "add_guard", "Callable[[ToolExecution], object]", param="guard", cls="ToolRegistry"
            )
        ),
    ),
    Mutant(
        "on-execute-any",
        _SHAPE,
        "`on_execute` takes any callable",
        "_registry.pyi",
        _prepend_imports(
            annotate("on_execute", "Callable[..., Any]", param="wrapper", cls="ToolRegistry")
        ),
    ),
    Mutant(
        "approval-answer-str",
        _SHAPE,
        "`ApprovalAnswer` is `str`",
        "_approval.pyi",
        replace_statement(r"ApprovalAnswer: TypeAlias = .*", "ApprovalAnswer: TypeAlias = str"),
    ),
    Mutant(
        "deny-reason-optional",
        "§5 decision shapes",
        "`Deny.reason` has a default",
        "_decisions.pyi",
        retype_field("Deny", "reason", "reason: str = ''"),
    ),
    # contract §6
    Mutant(
        "define-tool-loses-types",
        "§6 `define_tool` infers args, result and `exec.signal`",
        "`ToolDecorator.__call__` returns `ToolDefinition[Any, Any]`",
        "_define.pyi",
        annotate("__call__", "ToolDefinition[Any, Any]", cls="ToolDecorator"),
    ),
    Mutant(
        "define-tool-any-body",
        "§6 `define_tool` rejects a body without `exec` or with wrong types",
        "`ToolDecorator.__call__` takes any callable",
        "_define.pyi",
        annotate("__call__", "Callable[..., Any]", param="body", cls="ToolDecorator"),
    ),
    Mutant(
        "register-any",
        "§6 `register` takes a `ToolDefinition`",
        "`register` takes any object",
        "_registry.pyi",
        annotate("register", "object", param="definition", cls="ToolRegistry"),
    ),
    Mutant(
        "is-concurrency-safe-option-any",
        _OPTIONS,
        "the `is_concurrency_safe` option is `Callable[[Any], object]`",
        "_define.pyi",
        annotate("define_tool", "Callable[[Any], object] | None", param="is_concurrency_safe"),
    ),
    Mutant(
        "render-option-any",
        _OPTIONS,
        "the `render` option takes any callable",
        "_define.pyi",
        annotate("define_tool", "Callable[..., Any] | None", param="render"),
    ),
    Mutant(
        "finalize-option-any",
        _OPTIONS,
        "the `finalize_content` option takes any callable",
        "_define.pyi",
        annotate("define_tool", "Callable[..., Any] | None", param="finalize_content"),
    ),
    Mutant(
        "coroutine-bodies-only",
        "§6 every body that type-checks also defines",
        "async bodies must be coroutine functions (a `def` returning an awaitable is a sync body)",
        "_define.pyi",
        lambda tree: _retype_async_overloads(tree),
    ),
    Mutant(
        "run-coroutine-only",
        _HAND,
        "`ToolDefinition.run` is an `async def`",
        "_definitions.pyi",
        make_async("ToolDefinition", "run"),
    ),
    Mutant(
        "is-concurrency-safe-object",
        _HAND,
        "`ToolDefinition.is_concurrency_safe` returns `object`",
        "_definitions.pyi",
        annotate("is_concurrency_safe", "object", cls="ToolDefinition"),
    ),
)
"""One mutant per clause at least; a clause with several ways to break has several."""


def _retype_async_overloads(tree: ast.Module) -> None:
    node = _class(tree, "ToolDecorator")
    changed = 0
    for member in _defs(node.body, "__call__"):
        body = [*member.args.posonlyargs, *member.args.args][1]
        if body.annotation is not None and "Awaitable[R]" in ast.unparse(body.annotation):
            text = ast.unparse(body.annotation).replace("Awaitable[R]", "Coroutine[Any, Any, R]")
            body.annotation = ast.parse(text, mode="eval").body
            changed += 1
    assert changed


# -- plugin mutants ---------------------------------------------------------------------


@dataclass(frozen=True)
class PluginMutant:
    """One kind of block (or target) the plugin's ``del`` walk forgets."""

    id: str
    description: str
    transform: Callable[[ast.FunctionDef], None]
    function: str = "_del_targets"

    clause: str = "§3 `del` of a view attribute is rejected"
    blind: Mapping[str, str] = field(
        default_factory=lambda: {"pyright": "pyright does not run the mypy plugin"}
    )


def _drop_branch(kind: str) -> Callable[[ast.FunctionDef], None]:
    """Remove the ``elif isinstance(node, <kind>)`` branch of the walk."""

    def transform(walk: ast.FunctionDef) -> None:
        for node in ast.walk(walk):
            if isinstance(node, ast.If) and node.orelse and isinstance(node.orelse[0], ast.If):
                nested = node.orelse[0]
                if ast.unparse(nested.test) == f"isinstance(node, {kind})":
                    node.orelse = nested.orelse
                    return
        raise LookupError(f"no branch for {kind}")

    return transform


def _drop_field(kind: str, attribute: str) -> Callable[[ast.FunctionDef], None]:
    """In the branch for ``kind``, stop visiting ``node.<attribute>``."""

    def visits(expr: ast.expr) -> bool:
        inner = expr.value if isinstance(expr, ast.Starred) else expr
        return ast.unparse(inner) == f"node.{attribute}"

    def transform(walk: ast.FunctionDef) -> None:
        for node in ast.walk(walk):
            if isinstance(node, ast.If) and ast.unparse(node.test) == f"isinstance(node, {kind})":
                kept: list[ast.stmt] = []
                changed = False
                for statement in node.body:
                    call = statement.value if isinstance(statement, ast.Expr) else None
                    assert isinstance(call, ast.Call)
                    [argument] = call.args
                    if isinstance(argument, ast.Tuple):
                        remaining = [e for e in argument.elts if not visits(e)]
                        changed |= len(remaining) < len(argument.elts)
                        argument.elts = remaining
                        kept.append(statement)
                    elif visits(argument):
                        changed = True
                    else:
                        kept.append(statement)
                assert changed, f"the {kind} branch never visits node.{attribute}"
                node.body = kept or [ast.Pass()]
                return
        raise LookupError(f"no branch for {kind}")

    return transform


def _flatten_shallow(function: ast.FunctionDef) -> None:
    """``_flatten`` yields the items of a tuple target without descending into them."""
    for node in ast.walk(function):
        if isinstance(node, ast.For):
            node.body = _parse_stmts("yield item")
            return
    raise LookupError("no loop in _flatten")


PLUGIN_MUTANTS: Final[tuple[PluginMutant, ...]] = (
    *(
        PluginMutant(f"plugin-no-{label}", f"the walk skips {what}", _drop_branch(kind))
        for label, kind, what in (
            ("functions", "FuncDef", "function bodies"),
            ("decorated", "Decorator", "decorated functions"),
            ("overloads", "OverloadedFuncDef", "overloaded functions"),
            ("classes", "ClassDef", "class bodies"),
            ("if", "IfStmt", "`if` statements"),
            ("loops", "WhileStmt | ForStmt", "`for`/`while` loops"),
            ("with", "WithStmt", "`with` blocks"),
            ("try", "TryStmt", "`try` statements"),
            ("match", "MatchStmt", "`match` statements"),
        )
    ),
    PluginMutant(
        "plugin-no-else",
        "the walk skips `else`/`elif` branches",
        _drop_field("IfStmt", "else_body"),
    ),
    PluginMutant(
        "plugin-no-loop-else",
        "the walk skips the `else` of loops",
        _drop_field("WhileStmt | ForStmt", "else_body"),
    ),
    PluginMutant(
        "plugin-no-except", "the walk skips `except` handlers", _drop_field("TryStmt", "handlers")
    ),
    PluginMutant(
        "plugin-no-try-else",
        "the walk skips the `else` of `try`",
        _drop_field("TryStmt", "else_body"),
    ),
    PluginMutant(
        "plugin-no-finally", "the walk skips `finally`", _drop_field("TryStmt", "finally_body")
    ),
    PluginMutant(
        "plugin-shallow-targets",
        "nested tuple targets of `del` are not descended into",
        _flatten_shallow,
        function="_flatten",
    ),
)


def _python_name(mutant_id: str) -> str:
    return "m_" + re.sub(r"\W", "_", mutant_id)


def plugin_module(mutants: Sequence[PluginMutant]) -> str:
    """One mypy plugin that walks each case folder ``<mutant>__cNNN`` with that mutant."""
    from toolseam import mypy_plugin

    source = inspect.getsource(mypy_plugin)
    module = ast.parse(source)
    imports = [n for n in module.body if isinstance(n, ast.Import | ast.ImportFrom)]
    originals = {
        n.name: n for n in module.body if isinstance(n, ast.FunctionDef) and n.name.startswith("_")
    }
    parts = [ast.unparse(node) for node in imports]
    parts.append(
        "from toolseam.mypy_plugin import ToolseamPlugin, _Position, _del_targets, _flatten, "
        "_position"
    )
    table: list[str] = []
    for mutant in mutants:
        name = _python_name(mutant.id)
        function = ast.parse(ast.unparse(originals[mutant.function])).body[0]
        assert isinstance(function, ast.FunctionDef)
        mutant.transform(function)
        if mutant.function == "_flatten":
            function.name = f"_flatten_{name}"
            walk = ast.parse(ast.unparse(originals["_del_targets"])).body[0]
            assert isinstance(walk, ast.FunctionDef)
            walk.name = f"_walk_{name}"
            parts += [
                ast.unparse(function),
                ast.unparse(walk).replace("_flatten(", f"_flatten_{name}("),
            ]
        else:
            function.name = f"_walk_{name}"
            parts.append(ast.unparse(function))
        table.append(f"    {name!r}: _walk_{name},")
    parts.append("_WALKS = {\n" + "\n".join(table) + "\n}")
    parts.append(
        textwrap.dedent(
            """\
            class MutantsPlugin(ToolseamPlugin):
                def _find_del_targets(self, tree: MypyFile) -> set[_Position]:
                    folder = tree.path.replace("\\\\", "/").split("/")[-2]
                    walk = _WALKS.get(folder.split("__")[0], _del_targets)
                    return walk(tree.defs)


            def plugin(version: str) -> type[Plugin]:
                return MutantsPlugin
            """
        )
    )
    return "\n\n".join(parts) + "\n"


# -- the batch --------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What one checker made of one mutant."""

    mutant: str
    checker: str
    failing: tuple[str, ...]
    """The keys of the mutant's own clause's cases that stopped passing."""
    blind: str | None = None
    """Why this checker cannot see the mutant, when it is documented as blind."""

    @property
    def caught(self) -> bool:
        """Some case of the clause fails on this checker."""
        return bool(self.failing)


@dataclass(frozen=True)
class BatchResult:
    """Every mutant on every gating checker, and the control run."""

    verdicts: tuple[Verdict, ...]
    control_failures: tuple[str, ...]
    """Explanations of the cases that fail on the unmutated copy (must be none)."""
    elsewhere: Mapping[str, tuple[str, ...]]


def _project(
    cases: Sequence[suite.Case],
    mutants: Sequence[Mutant],
    plugin_mutants: Sequence[PluginMutant],
    root: Path,
) -> tuple[list[tuple[str, str, suite.Case]], Path]:
    """Write the packages, targets and cases of the batch under ``root``."""
    stubs = stub_package()
    default = (suite.DEFAULT_TARGET / "conformance_target" / "__init__.pyi").read_text("utf8")
    lib = root / "lib"
    jobs: list[tuple[str, str, suite.Case]] = []  # (folder, mutant id, case)
    variants: list[tuple[str, dict[str, str]]] = [(CONTROL, stubs)]
    variants += [(m.id, m.files(stubs)) for m in mutants]
    by_clause: dict[str, list[suite.Case]] = {}
    for case in cases:
        by_clause.setdefault(case.clause, []).append(case)
    for mutant_id, files in variants:
        name = _python_name(mutant_id)
        package = lib / f"toolseam_{name}"
        package.mkdir(parents=True)
        for filename, text in files.items():
            (package / filename).write_text(_renamed(text, f"toolseam_{name}"), "utf8")
        (package / "py.typed").write_text("")
        target = lib / f"conformance_target_{name}"
        target.mkdir()
        (target / "__init__.pyi").write_text(_renamed(default, f"toolseam_{name}"), "utf8")
    wanted: list[tuple[str, Sequence[suite.Case]]] = [(CONTROL, cases)]
    wanted += [(m.id, by_clause.get(m.clause, [])) for m in mutants]
    jobs += [
        (mutant_id, _python_name(mutant_id), case)
        for mutant_id, members in wanted
        for case in members
    ]
    jobs += [
        (mutant.id, _python_name(CONTROL), case)
        for mutant in plugin_mutants
        for case in by_clause.get(mutant.clause, [])
    ]
    return jobs, lib


def _rewrite(case: suite.Case, target_suffix: str) -> suite.Case:
    main = re.sub(r"\bconformance_target\b", f"conformance_target_{target_suffix}", case.main)
    return suite.Case(
        file=case.file,
        name=case.name,
        clause=case.clause,
        main=main,
        error_lines=case.error_lines,
        expected_errors=case.expected_errors,
        differences=case.differences,
    )


def run_batch(
    cases: Sequence[suite.Case] | None = None,
    mutants: Sequence[Mutant] = MUTANTS,
    plugin_mutants: Sequence[PluginMutant] = PLUGIN_MUTANTS,
    workdir: Path | None = None,
) -> BatchResult:
    """Check every mutant: one mypy run (in this process) and one pyright run."""
    cases = suite.load_cases() if cases is None else cases
    # A stable folder (per Python), so that mypy's cache of the batch stays warm between
    # runs: mypy revalidates the rewritten files by their content.
    root = workdir or suite.cache_root() / f"mutants-{suite.digest(sys.version)}"
    with _exclusive(root.with_suffix(".lock")):
        return _run_batch(cases, mutants, plugin_mutants, root)


@contextlib.contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """Hold ``lock`` while the batch rewrites its (shared, stable) folder."""
    with lock.open("a") as file:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: runs are not concurrent there
            yield
            return
        fcntl.flock(file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(file, fcntl.LOCK_UN)


def _run_batch(
    cases: Sequence[suite.Case],
    mutants: Sequence[Mutant],
    plugin_mutants: Sequence[PluginMutant],
    root: Path,
) -> BatchResult:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    jobs, lib = _project(cases, mutants, plugin_mutants, root)
    names = [
        f"{_python_name(mutant_id)}__c{index:03d}" for index, (mutant_id, _, _) in enumerate(jobs)
    ]
    rewritten = [_rewrite(case, suffix) for _, suffix, case in jobs]
    plugin_source = plugin_module(plugin_mutants)
    # mypy imports a plugin file by its name, once per process: the name is its digest.
    plugin_path = root / f"toolseam_mutants_plugin_{suite.digest(plugin_source)}.py"
    plugin_path.write_text(plugin_source, "utf8")
    views = sorted(
        view.replace(f"{PACKAGE}.", f"toolseam_{_python_name(m)}.", 1)
        for m in [CONTROL, *(m.id for m in mutants)]
        for view in _contract_views()
    )
    ini = root / "mypy.ini"
    ini.write_text(
        suite.MYPY_INI.read_text("utf8")
        .replace("$TOOLSEAM_CONFORMANCE_TARGET", str(lib))
        .replace("plugins = toolseam.mypy_plugin", f"plugins = {plugin_path}")
        + f"\n[toolseam.mypy_plugin]\nviews = {', '.join(views)}\n"
    )
    mypy = suite.run_mypy_in_process(rewritten, names, root / "mypy", ini, lib)
    # The plugin mutants change nothing pyright reads: only the target mutants run there.
    plugin_ids = {m.id for m in plugin_mutants}
    on_pyright = [i for i, (mutant_id, _, _) in enumerate(jobs) if mutant_id not in plugin_ids]
    pyright = suite.run_pyright(
        [rewritten[i] for i in on_pyright],
        lib,
        root / "pyright",
        folders=[names[i] for i in on_pyright],
    )
    reports = {suite.REFERENCE: mypy, "pyright": pyright}
    control_failures: list[str] = []
    failing: dict[tuple[str, str], list[str]] = {}
    for (mutant_id, _, case), folder in zip(jobs, names, strict=True):
        for checker, report in reports.items():
            outcome = report.outcomes.get(folder)
            if outcome is None:
                continue
            if mutant_id == CONTROL:
                if not outcome.passes:
                    control_failures.append(outcome.explain())
            elif not outcome.passes:
                failing.setdefault((mutant_id, checker), []).append(case.key)
    verdicts = [
        Verdict(
            m.id,
            checker,
            tuple(failing.get((m.id, checker), ())),
            m.blind.get(checker),
        )
        for m in _both(mutants, plugin_mutants)
        for checker in suite.GATING
    ]
    return BatchResult(
        tuple(verdicts),
        tuple(control_failures),
        {checker: report.elsewhere for checker, report in reports.items()},
    )


def _both(
    mutants: Sequence[Mutant], plugin_mutants: Sequence[PluginMutant]
) -> list[Mutant | PluginMutant]:
    return [*mutants, *plugin_mutants]


ALL_MUTANTS: Final = _both(MUTANTS, PLUGIN_MUTANTS)
"""Every mutant of the contract and of the plugin, in report order."""


def _contract_views() -> frozenset[str]:
    from toolseam.mypy_plugin import CONTRACT_VIEWS

    return CONTRACT_VIEWS
