"""Run the yaml type tests through any type checker, one process per checker for all cases.

pytest-mypy-plugins runs each case through mypy and asserts its exact ``out:``. This module
is the rest of the static suite: it loads the same cases the same way, writes each one into
its own directory of a temporary project, runs a checker once over all of them, and says
per case whether the checker reported errors on exactly the lines the case expects. The
pyright items of ``pytest typetests`` (``conftest.py``), the broken-target meta-test
(``test_broken_target.py``) and the conformance matrix (``nox -s conformance``, the
``main`` below) are built on it.

A case's expected lines are the ``error`` lines of its ``out:`` (what mypy with
``toolseam.mypy_plugin`` reports). Where a checker legitimately differs, the case says so
in a ``differences:`` key, which pytest-mypy-plugins ignores::

    differences:
      pyright:
        lines: [7]             # the lines this checker reports errors on instead
        reason: microsoft/pyright#6113, no narrowing on the truthiness of `is_error`

Checker names: ``mypy`` (without the plugin), ``pyright``, ``basedpyright``, ``pyrefly``,
``ty``. The
reference, ``mypy+plugin``, never has differences: its truth is ``out:``.
"""

from __future__ import annotations

import argparse
import ast
import configparser
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml
from pytest_mypy_plugins import utils as pmp_utils
from pytest_mypy_plugins.collect import SafeLineLoader, parse_parametrized

ROOT: Final = Path(__file__).resolve().parent.parent
TYPETESTS: Final = ROOT / "typetests"
STUBS: Final = ROOT / "stubs"
DEFAULT_TARGET: Final = STUBS / "default_target"
BROKEN_TARGET: Final = STUBS / "broken_target"
TARGET_ENV: Final = "TOOLSEAM_CONFORMANCE_TARGET"
MYPY_CONFIG_ENV: Final = "TOOLSEAM_CONFORMANCE_MYPY_CONFIG"
EXAMPLE_TARGET: Final = STUBS / "example_registry"
MYPY_INI: Final = TYPETESTS / "mypy.ini"
MYPY_NOPLUGIN_INI: Final = TYPETESTS / "mypy-noplugin.ini"

REFERENCE: Final = "mypy+plugin"
CHECKERS: Final = ("mypy+plugin", "pyright", "mypy", "basedpyright", "pyrefly", "ty")
"""Every checker of the matrix, in column order."""
GATING: Final = ("mypy+plugin", "pyright")
"""The checkers whose disagreement with a case fails CI."""

BEGIN_MARK: Final = "<!-- BEGIN GENERATED: nox -s conformance -->"
END_MARK: Final = "<!-- END GENERATED -->"


@dataclass(frozen=True)
class Difference:
    """Where one checker legitimately reports errors on other lines than the reference."""

    lines: frozenset[int]
    """The lines this checker reports errors on."""
    reason: str
    """Why, with the upstream issue where there is one."""


@dataclass(frozen=True)
class ExpectedError:
    """One expected mypy error of ``out:`` (a regular expression in a ``regex: true`` case)."""

    line: int
    message: str
    regex: bool

    def matches(self, line: int, message: str) -> bool:
        """Whether mypy's ``message`` on ``line`` is this error (as pytest-mypy-plugins matches)."""
        if line != self.line:
            return False
        return bool(re.match(self.message, message)) if self.regex else message == self.message


@dataclass(frozen=True)
class Case:
    """One yaml case (one parametrization of it), as pytest-mypy-plugins collects it."""

    file: str
    """The yaml file name."""
    name: str
    """The pytest-mypy-plugins item name (``case`` plus the parameters)."""
    clause: str
    """The contract clause the case checks: one row of the matrix."""
    main: str
    """The rendered source."""
    error_lines: frozenset[int]
    """Lines of ``main`` with an expected error (``out:`` and ``# E:`` comments)."""
    expected_errors: tuple[ExpectedError, ...] = ()
    """The expected mypy errors themselves, message and all."""
    differences: Mapping[str, Difference] = field(default_factory=dict)
    """Per-checker exceptions to ``error_lines``."""

    @property
    def key(self) -> str:
        """``file::name``, unique in the suite."""
        return f"{self.file}::{self.name}"

    def expected_lines(self, checker: str) -> frozenset[int]:
        """The lines ``checker`` must report errors on (and no other line)."""
        difference = self.differences.get(checker)
        return self.error_lines if difference is None else difference.lines

    def is_negative(self, checker: str = REFERENCE) -> bool:
        """Whether the case must fail to type-check on ``checker``."""
        return bool(self.expected_lines(checker))

    @classmethod
    def from_parts(
        cls, file: str, name: str, main: str, expected: Iterable[Any], raw: Mapping[str, Any]
    ) -> Case:
        """Build a case from what pytest-mypy-plugins parsed.

        Args:
            file: The yaml file name.
            name: The item name.
            main: The rendered source of ``main``.
            expected: pytest-mypy-plugins' ``OutputMatcher`` objects for the case.
            raw: The case's yaml mapping (for ``clause`` and ``differences``).

        Raises:
            ValueError: The case has ``files:``, no ``clause:``, or a malformed
                ``differences:``.
        """
        where = f"{file}::{name}"
        if raw.get("files"):
            raise ValueError(f"{where}: cases must be self-contained (no `files:`)")
        clause = raw.get("clause")
        if not isinstance(clause, str) or not clause:
            raise ValueError(f"{where}: every case names its contract `clause:`")
        errors = tuple(
            ExpectedError(matcher.lnum, matcher.message, matcher.regex)
            for matcher in expected
            if matcher.severity == "error" and matcher.fname == "main"
        )
        return cls(
            file=file,
            name=name,
            clause=clause,
            main=main,
            error_lines=frozenset(error.line for error in errors),
            expected_errors=errors,
            differences=_parse_differences(where, raw.get("differences")),
        )


def _parse_differences(where: str, raw: object) -> dict[str, Difference]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: `differences:` maps checker names to lines and a reason")
    parsed: dict[str, Difference] = {}
    for checker, entry in raw.items():
        if checker not in CHECKERS or checker == REFERENCE:
            raise ValueError(f"{where}: unknown checker {checker!r} in `differences:`")
        lines = entry.get("lines") if isinstance(entry, dict) else None
        reason = entry.get("reason") if isinstance(entry, dict) else None
        if not isinstance(lines, list) or not all(isinstance(n, int) for n in lines):
            raise ValueError(f"{where}: `differences.{checker}.lines` must be a list of lines")
        if not isinstance(reason, str) or not reason:
            raise ValueError(f"{where}: `differences.{checker}.reason` must say why")
        parsed[checker] = Difference(frozenset(lines), reason)
    return parsed


def load_cases(paths: Iterable[Path] | None = None) -> list[Case]:
    """Load every case of the given yaml files (default: all of ``typetests/``).

    Names and rendering follow pytest-mypy-plugins exactly (its own helpers do the work),
    so ``Case.key`` matches the pytest item of the same case.
    """
    files = sorted(TYPETESTS.glob("test_*.yml")) if paths is None else list(paths)
    cases: list[Case] = []
    for path in files:
        raw_cases = yaml.load(path.read_text("utf8"), Loader=SafeLineLoader) or []
        for raw in raw_cases:
            for params in parse_parametrized(raw.get("parametrized", [])):
                suffix = ",".join(f"{k}={v}" for k, v in params.items())
                name = f"{raw['case']}[{suffix}]" if params else raw["case"]
                main = pmp_utils.render_template(template=raw["main"], data=params)
                regex = raw.get("regex", False)
                expected = [
                    *pmp_utils.extract_output_matchers_from_comments(
                        "main", main.split("\n"), regex=regex
                    ),
                    *pmp_utils.extract_output_matchers_from_out(
                        raw.get("out", ""), params, regex=regex
                    ),
                ]
                cases.append(Case.from_parts(path.name, name, main, expected, raw))
    return cases


def resolve_target(value: str | os.PathLike[str] | None = None) -> Path:
    """The target folder: ``value``, else ``$TOOLSEAM_CONFORMANCE_TARGET``, else the default.

    A relative path is taken from the current directory.

    Raises:
        FileNotFoundError: The folder holds no ``conformance_target`` module.
    """
    chosen = value if value is not None else os.environ.get(TARGET_ENV) or DEFAULT_TARGET
    target = Path(chosen).resolve()
    if not any(
        (target / candidate).exists()
        for candidate in (
            "conformance_target.py",
            "conformance_target.pyi",
            "conformance_target/__init__.py",
            "conformance_target/__init__.pyi",
        )
    ):
        raise FileNotFoundError(f"{target} holds no `conformance_target` module")
    return target


@dataclass(frozen=True)
class Diagnostic:
    """One error a checker reported in a case."""

    line: int
    message: str


@dataclass(frozen=True)
class Outcome:
    """What one checker reported on one case, against what the case expects."""

    case: Case
    checker: str
    diagnostics: tuple[Diagnostic, ...]

    @property
    def actual_lines(self) -> frozenset[int]:
        """Lines with at least one error."""
        return frozenset(d.line for d in self.diagnostics)

    @property
    def expected_lines(self) -> frozenset[int]:
        """Lines the case expects errors on, for this checker."""
        return self.case.expected_lines(self.checker)

    @property
    def ok(self) -> bool:
        """Errors on exactly the expected lines."""
        return self.actual_lines == self.expected_lines

    @property
    def judged_by_message(self) -> bool:
        """Whether the case pins this checker's messages (mypy's, without a difference)."""
        return self.checker in (REFERENCE, "mypy") and self.checker not in self.case.differences

    @property
    def passes(self) -> bool:
        """Errors on exactly the expected lines and, where the case pins them, messages."""
        return self.ok and (not self.judged_by_message or self.still_reports_expected_errors())

    def still_reports_expected_errors(self) -> bool:
        """Whether every expected error is still reported (so the case cannot tell).

        For mypy, the very message of ``out:`` (another error on the same line, such as an
        untyped decorator of a broken target, is not the expected one); for the others,
        which have no expected messages, an error on each expected line.
        """
        if self.judged_by_message:
            return all(
                any(expected.matches(d.line, d.message) for d in self.diagnostics)
                for expected in self.case.expected_errors
            )
        return self.expected_lines <= self.actual_lines

    @property
    def documented(self) -> bool:
        """The case documents a difference for this checker (and it held, when ``ok``)."""
        return self.checker in self.case.differences

    def explain(self) -> str:
        """Say what differs, line by line."""
        missing = sorted(self.expected_lines - self.actual_lines)
        extra = sorted(self.actual_lines - self.expected_lines)
        parts = [f"{self.checker} on {self.case.key}:"]
        if missing:
            parts.append(f"  expected an error on line(s) {missing}, got none")
        if extra:
            parts.append(f"  unexpected error(s) on line(s) {extra}")
        source = self.case.main.split("\n")
        for diagnostic in sorted(self.diagnostics, key=lambda d: d.line):
            code = source[diagnostic.line - 1].strip() if diagnostic.line <= len(source) else ""
            parts.append(f"  main:{diagnostic.line}: {diagnostic.message}    # {code}")
        return "\n".join(parts)


class CheckerUnavailableError(RuntimeError):
    """The checker is not installed in this environment."""


class CheckerCrashedError(RuntimeError):
    """The checker exited without a usable report."""


def cache_root() -> Path:
    """Where the suite keeps mypy caches between runs (the system temporary folder)."""
    root = Path(tempfile.gettempdir()) / "toolseam-typetests"
    root.mkdir(parents=True, exist_ok=True)
    return root


def digest(*parts: object) -> str:
    """A short, stable name for a configuration (one mypy cache per configuration)."""
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:12]


def _write_project(
    cases: Sequence[Case], workdir: Path, names: Sequence[str] | None = None
) -> dict[str, Case]:
    """Write each case to ``<workdir>/cNNN/main.py``; map each folder name to its case."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    folders: dict[str, Case] = {}
    for index, case in enumerate(cases):
        folder = f"c{index:03d}" if names is None else names[index]
        (workdir / folder).mkdir()
        (workdir / folder / "main.py").write_text(case.main, "utf8")
        folders[folder] = case
    return folders


@dataclass(frozen=True)
class Report:
    """One checker's run over a set of cases."""

    checker: str
    outcomes: Mapping[str, Outcome]
    """The outcome per ``Case.key`` (per folder, for a batch of renamed copies)."""
    elsewhere: tuple[str, ...] = ()
    """Errors reported outside the cases (in the target, say), as ``path:line: message``."""


def _report(
    checker: str,
    workdir: Path,
    folders: Mapping[str, Case],
    found: Iterable[tuple[str, Diagnostic]],
    *,
    by_folder: bool = False,
) -> Report:
    per_folder: dict[str, list[Diagnostic]] = {folder: [] for folder in folders}
    elsewhere: list[str] = []
    root = workdir.resolve()
    for path, diagnostic in found:
        resolved = (workdir / path).resolve()
        folder = resolved.relative_to(root).parts[0] if resolved.is_relative_to(root) else None
        if folder in per_folder:
            per_folder[folder].append(diagnostic)
        else:
            elsewhere.append(f"{path}:{diagnostic.line}: {diagnostic.message}")
    outcomes = {
        folder if by_folder else case.key: Outcome(case, checker, tuple(per_folder[folder]))
        for folder, case in folders.items()
    }
    return Report(checker, outcomes, tuple(elsewhere))


def _run(command: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None) -> str:
    try:
        completed = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, check=False
        )
    except FileNotFoundError as error:
        raise CheckerUnavailableError(str(error)) from None
    return completed.stdout + ("\n" + completed.stderr if completed.returncode > 1 else "")


_MYPY_LINE = re.compile(r"^(?P<path>[^:\s]+\.pyi?):(?P<line>\d+): (?P<severity>\w+): (?P<msg>.*)$")


def target_renames(target: Path) -> dict[str, str]:
    """The target's renaming re-exports, ``{its name: the suite's name}``.

    A registry maps its own types onto the suite's names (``from minireg import Call as
    ToolExecution``); mypy's messages then name its types, and the suite reads them back
    in the suite's names before comparing them with the messages a case pins.
    """
    for candidate in (
        "conformance_target/__init__.pyi",
        "conformance_target/__init__.py",
        "conformance_target.pyi",
        "conformance_target.py",
    ):
        path = target / candidate
        if path.exists():
            tree = ast.parse(path.read_text("utf8"))
            return {
                alias.name: alias.asname
                for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom)
                for alias in node.names
                if alias.asname is not None and alias.asname != alias.name
            }
    return {}


def message_renamer(renames: Mapping[str, str]) -> Callable[[str], str]:
    """A function that reads a message of mypy's back in the suite's names."""
    if not renames:
        return lambda message: message
    # One pass over every name at once (a target may swap two names), leaving the
    # single-quoted literals of a message alone (``Literal['ABORTED']`` is a value).
    names = "|".join(map(re.escape, sorted(renames, key=len, reverse=True)))
    pattern = re.compile(rf"'[^']*'|\b({names})\b")
    return lambda message: pattern.sub(
        lambda match: renames[match[1]] if match[1] else match[0], message
    )


def mypy_config(target: Path, config: Path | None = None, *, plugin: bool = True) -> Path:
    """The mypy configuration file for ``target``: the suite's, plus the registry's own.

    The suite's settings (``typetests/mypy.ini``: strict, ``warn_unreachable``, the target on
    ``mypy_path``, ``toolseam.mypy_plugin``) always hold. The registry's configuration —
    ``config``, else a ``mypy.ini`` in the target folder, if any — adds to them: its other
    ``[mypy]`` settings, its ``mypy_path`` entries and plugins, and its other sections,
    ``[toolseam.mypy_plugin]`` (the plugin's ``views``) in particular. A pyproject.toml
    (``[tool.mypy]``, ``[tool.toolseam.mypy_plugin]``) works too.

    Returns:
        A generated ini file (under `cache_root`) with absolute paths.
    """
    chosen = config if config is not None else target / "mypy.ini"
    ours = configparser.ConfigParser()
    ours.read(MYPY_INI if plugin else MYPY_NOPLUGIN_INI)
    theirs = _read_config(chosen) if chosen.exists() else {}
    merged: dict[str, dict[str, str]] = {name: dict(ours[name]) for name in ours.sections()}
    base = merged["mypy"]
    paths = [str(target)]
    plugins = [p.strip() for p in base.get("plugins", "").split(",") if p.strip()]
    for section, values in theirs.items():
        if section != "mypy":
            merged[section] = dict(values)
            continue
        for key, value in values.items():
            if key == "mypy_path":
                paths += [
                    str((chosen.parent / p.strip()).resolve())
                    for p in re.split(r"[,:]", value)
                    if p.strip()
                ]
            elif key == "plugins":
                plugins += [
                    p.strip() for p in value.split(",") if p.strip() and p.strip() not in plugins
                ]
            else:
                base[key] = value
    base["mypy_path"] = ", ".join(paths)
    if plugins and plugin:
        base["plugins"] = ", ".join(plugins)
    elif not plugin:
        base.pop("plugins", None)
    text = "".join(
        f"[{section}]\n" + "".join(f"{key} = {value}\n" for key, value in values.items()) + "\n"
        for section, values in merged.items()
    )
    path = cache_root() / f"mypy-{digest(text)}.ini"
    if not path.exists():
        # Named by its content, written atomically: concurrent runs agree on it.
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(text, "utf8")
        partial.replace(path)
    return path


def _read_config(path: Path) -> dict[str, dict[str, str]]:
    if path.suffix == ".toml":
        with path.open("rb") as file:
            tool = tomllib.load(file).get("tool", {})
        sections: dict[str, dict[str, str]] = {}
        for key, value in tool.get("mypy", {}).items():
            if isinstance(value, dict):
                continue  # per-module overrides: not needed by the suite
            shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
            sections.setdefault("mypy", {})[key] = (
                shown.lower() if isinstance(value, bool) else shown
            )
        views = tool.get("toolseam", {}).get("mypy_plugin", {}).get("views")
        if views:
            sections["toolseam.mypy_plugin"] = {
                "views": ", ".join(views) if isinstance(views, list) else str(views)
            }
        return sections
    parser = configparser.ConfigParser()
    parser.read(path)
    return {name: dict(parser[name]) for name in parser.sections()}


def run_mypy(
    cases: Sequence[Case],
    target: Path,
    workdir: Path,
    *,
    plugin: bool = True,
    config: Path | None = None,
) -> Report:
    """Type-check every case in one mypy process.

    Args:
        cases: The cases.
        target: The folder that holds ``conformance_target``.
        workdir: A scratch folder (replaced).
        plugin: Whether ``toolseam.mypy_plugin`` is enabled.
        config: The registry's own mypy configuration (see `mypy_config`).

    Returns:
        The report: the outcome per case, and errors reported elsewhere. Messages are
        read back in the suite's names (`target_renames`).
    """
    folders = _write_project(cases, workdir)
    ini = mypy_config(target, config, plugin=plugin)
    cache = cache_root() / f"matrix-mypy-{digest(ini, target, sys.version)}"
    command = [
        sys.executable,
        "-m",
        "mypy",
        f"--config-file={ini}",
        f"--cache-dir={cache}",
        "--explicit-package-bases",
        "--no-error-summary",
        "--no-pretty",
        "--hide-error-context",
        "--show-error-codes",
        *(f"{folder}/main.py" for folder in folders),
    ]
    output = _run(command, cwd=workdir)
    rename = message_renamer(target_renames(target))
    found = [(path, Diagnostic(d.line, rename(d.message))) for path, d in _mypy_errors(output)]
    return _report(REFERENCE if plugin else "mypy", workdir, folders, found)


def _mypy_errors(output: str) -> list[tuple[str, Diagnostic]]:
    found: list[tuple[str, Diagnostic]] = []
    for line in output.splitlines():
        match = _MYPY_LINE.match(line)
        if match is None:
            if line.strip() and not line.startswith(" "):
                raise CheckerCrashedError(f"mypy: unexpected output: {line}\n{output}")
            continue
        if match["severity"] == "error":
            found.append((match["path"], Diagnostic(int(match["line"]), match["msg"])))
    return found


def run_mypy_in_process(
    cases: Sequence[Case], names: Sequence[str], workdir: Path, ini: Path, cache_key: object
) -> Report:
    """Type-check ``cases`` with mypy in this process (``mypy.api``), folders ``names``.

    The outcomes are keyed by folder. ``ini`` is the whole configuration (its
    ``mypy_path`` must be absolute); ``cache_key`` names the mypy cache to reuse.
    """
    from mypy import api

    folders = _write_project(cases, workdir, names)
    cache = cache_root() / f"inproc-mypy-{digest(ini.read_text('utf8'), cache_key, sys.version)}"
    previous = Path.cwd()
    os.chdir(workdir)
    try:
        stdout, stderr, status = api.run(
            [
                f"--config-file={ini}",
                f"--cache-dir={cache}",
                "--explicit-package-bases",
                "--no-error-summary",
                "--no-pretty",
                "--hide-error-context",
                "--show-error-codes",
                *(f"{folder}/main.py" for folder in folders),
            ]
        )
    finally:
        os.chdir(previous)
    if status > 1:
        raise CheckerCrashedError(f"mypy exited {status}:\n{stdout}\n{stderr}")
    return _report(REFERENCE, workdir, folders, _mypy_errors(stdout), by_folder=True)


def pyright_config(target: Path) -> dict[str, object]:
    """The pyright configuration of the suite: strict, like the mypy ini."""
    return {
        "include": ["."],
        "extraPaths": [str(target)],
        "pythonVersion": f"{sys.version_info.major}.{sys.version_info.minor}",
        "typeCheckingMode": "strict",
        # The default target is a stub re-exporting toolseam; a stub without a source is
        # what a target is, not a problem.
        "reportMissingModuleSource": False,
        # A naming-style rule (an uppercase name is a constant), not a typing one: it would
        # flag rebinding a code even where the code is not `Final`.
        "reportConstantRedefinition": False,
    }


def run_pyright(
    cases: Sequence[Case], target: Path, workdir: Path, *, folders: Sequence[str] | None = None
) -> Report:
    """Type-check every case in one pyright process (``--outputjson``, strict mode).

    With ``folders``, each case is written to the folder of that name and the outcomes are
    keyed by folder (a batch that checks one case against several targets).
    """
    return _run_pyright_like("pyright", cases, target, workdir, folders)


def run_basedpyright(cases: Sequence[Case], target: Path, workdir: Path) -> Report:
    """Type-check every case in one basedpyright process (information only).

    The same configuration as pyright's (strict mode; basedpyright's own extra rules of
    its ``all`` mode stay off), so the column shows where the fork's verdicts differ.
    """
    return _run_pyright_like("basedpyright", cases, target, workdir, None)


def _run_pyright_like(
    checker: str,
    cases: Sequence[Case],
    target: Path,
    workdir: Path,
    folders: Sequence[str] | None,
) -> Report:
    names = folders
    folders_map = _write_project(cases, workdir, names)
    (workdir / "pyrightconfig.json").write_text(json.dumps(pyright_config(target), indent=2))
    command = [
        sys.executable,
        "-m",
        checker,
        "--outputjson",
        "--pythonpath",
        sys.executable,
        "--project",
        str(workdir),
    ]
    output = _run(command, cwd=workdir)
    try:
        report = json.loads(output)
    except json.JSONDecodeError:
        raise CheckerCrashedError(f"{checker}: no JSON report:\n{output}") from None
    found = [
        (
            item["file"],
            Diagnostic(
                item["range"]["start"]["line"] + 1,
                f"{item['message']} ({item.get('rule', 'error')})".replace("\n", " "),
            ),
        )
        for item in report.get("generalDiagnostics", [])
        if item.get("severity") == "error"
    ]
    return _report(checker, workdir, folders_map, found, by_folder=names is not None)


def run_pyrefly(cases: Sequence[Case], target: Path, workdir: Path) -> Report:
    """Type-check every case in one pyrefly process (information only)."""
    folders = _write_project(cases, workdir)
    (workdir / "pyrefly.toml").write_text(
        'project-includes = ["c*/main.py"]\n'
        f"search-path = [{json.dumps(str(target))}]\n"
        f"python-interpreter-path = {json.dumps(sys.executable)}\n"
        f'python-version = "{sys.version_info.major}.{sys.version_info.minor}"\n'
    )
    command = ["pyrefly", "check", "--output-format", "json", "--config", "pyrefly.toml"]
    output = _run(command, cwd=workdir)
    try:
        report = json.loads(output[output.index("{") :])
    except ValueError:
        raise CheckerCrashedError(f"pyrefly: no JSON report:\n{output}") from None
    found = [
        (
            item["path"],
            Diagnostic(item["line"], f"{item['description']} [{item['name']}]"),
        )
        for item in report.get("errors", [])
        if item.get("severity", "error") == "error"
    ]
    return _report("pyrefly", workdir, folders, found)


_TY_LINE = re.compile(r"^(?P<path>[^:\s]+\.pyi?):(?P<line>\d+):\d+: (?P<severity>\w+)(?P<msg>.*)$")


def run_ty(cases: Sequence[Case], target: Path, workdir: Path) -> Report:
    """Type-check every case in one ty process (information only)."""
    folders = _write_project(cases, workdir)
    command = [
        "ty",
        "check",
        "--output-format",
        "concise",
        "--python",
        sys.executable,
        "--python-version",
        f"{sys.version_info.major}.{sys.version_info.minor}",
        "--extra-search-path",
        str(target),
        *(f"{folder}/main.py" for folder in folders),
    ]
    output = _run(command, cwd=workdir)
    found = [
        (match["path"], Diagnostic(int(match["line"]), match["msg"]))
        for match in map(_TY_LINE.match, output.splitlines())
        if match is not None and match["severity"] == "error"
    ]
    return _report("ty", workdir, folders, found)


def run_checker(
    checker: str,
    cases: Sequence[Case],
    target: Path,
    workdir: Path,
    *,
    mypy_config: Path | None = None,
) -> Report:
    """Run one checker of `CHECKERS` over ``cases`` (``mypy_config``: see `mypy_config`).

    Raises:
        CheckerUnavailableError: The checker is not installed.
        CheckerCrashedError: It produced no usable report.
    """
    if checker == REFERENCE:
        return run_mypy(cases, target, workdir, plugin=True, config=mypy_config)
    if checker == "mypy":
        return run_mypy(cases, target, workdir, plugin=False, config=mypy_config)
    if checker == "pyright":
        return run_pyright(cases, target, workdir)
    if checker == "basedpyright":
        if importlib.util.find_spec("basedpyright") is None:
            raise CheckerUnavailableError("basedpyright is not installed")
        return run_basedpyright(cases, target, workdir)
    if checker in ("pyrefly", "ty"):
        if shutil.which(checker) is None:
            raise CheckerUnavailableError(f"{checker} is not installed")
        return (
            run_pyrefly(cases, target, workdir)
            if checker == "pyrefly"
            else run_ty(cases, target, workdir)
        )
    raise ValueError(f"unknown checker {checker!r}")


def checker_version(checker: str) -> str:
    """The checker's version as it reports it (``unavailable`` if it is not installed)."""
    commands = {
        REFERENCE: [sys.executable, "-m", "mypy", "--version"],
        "mypy": [sys.executable, "-m", "mypy", "--version"],
        "pyright": [sys.executable, "-m", "pyright", "--version"],
        "basedpyright": [sys.executable, "-m", "basedpyright", "--version"],
        "pyrefly": ["pyrefly", "--version"],
        "ty": ["ty", "--version"],
    }
    try:
        done = subprocess.run(commands[checker], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        return "unavailable"
    words = done.stdout.split()
    return words[1] if len(words) > 1 and done.returncode == 0 else "unavailable"


# -- the matrix ---------------------------------------------------------------------------


def _kind(outcome: Outcome) -> str:
    """How a documented difference departs from the contract: misses or adds errors."""
    expected, documented = outcome.case.error_lines, outcome.expected_lines
    if documented < expected:
        return "missed"
    if documented > expected:
        return "extra"
    return "moved"


def _cell(outcomes: Sequence[Outcome]) -> str:
    total = len(outcomes)
    required = sum(o.actual_lines == o.case.error_lines for o in outcomes)
    failing = [o for o in outcomes if not o.passes]
    if failing:
        return f"❌ {required}/{total}"
    if required == total:
        return f"✅ {total}/{total}"
    kinds: dict[str, int] = {}
    for outcome in outcomes:
        if outcome.actual_lines != outcome.case.error_lines:
            kinds[_kind(outcome)] = kinds.get(_kind(outcome), 0) + 1
    notes = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
    return f"⚠️ {required}/{total} ({notes}, as documented)"


def _case_cell(outcome: Outcome | None) -> str:
    if outcome is None:
        return "n/a"
    if not outcome.passes:
        expected, actual = sorted(outcome.expected_lines), sorted(outcome.actual_lines)
        if expected == actual:
            return "❌ other messages than the case pins"
        return f"❌ expected {expected or 'none'}, got {actual or 'none'}"
    if outcome.documented:
        return f"⚠️ {_kind(outcome)}, as documented"
    return "✅"


def _section(clause: str) -> tuple[int, ...]:
    # "§3 ..." sorts by its section number; a clause without one goes last.
    match = re.match(r"§(\d+)", clause)
    return (int(match[1]),) if match else (1_000,)


def render_matrix(
    cases: Sequence[Case],
    results: Mapping[str, Mapping[str, Outcome] | str],
    versions: Mapping[str, str],
    target: Path,
) -> str:
    """The generated section of ``docs/conformance.md``.

    Args:
        cases: Every case, in suite order.
        results: Per checker, the outcomes by case key, or why it did not run.
        versions: Per checker, its version.
        target: The target the matrix was made on.
    """
    checkers = list(results)
    try:
        shown_target = target.relative_to(ROOT)
    except ValueError:
        shown_target = target
    lines = [
        BEGIN_MARK,
        "",
        f"Target `{shown_target}`; Python {sys.version_info.major}.{sys.version_info.minor}; "
        + "; ".join(f"{c} {versions.get(c, '?')}" for c in checkers)
        + ". Gating: "
        + ", ".join(GATING)
        + "; the other columns are for information.",
        "",
        "A cell counts the cases that behave as the contract requires (errors on exactly "
        "the expected lines and, on mypy, with the messages the case pins). ✅ all of them "
        "· ⚠️ the others behave as their documented "
        "difference says (*missed*: the checker does not report a violation; *extra*: it "
        "reports an error on sound code) · ❌ a case behaves neither way.",
        "",
        "### By clause",
        "",
        "| clause | cases | " + " | ".join(checkers) + " |",
        "|---|---|" + "---|" * len(checkers),
    ]
    clauses: dict[str, list[Case]] = {}
    for case in cases:
        clauses.setdefault(case.clause, []).append(case)
    for clause, members in sorted(clauses.items(), key=lambda item: _section(item[0])):
        negatives = sum(case.is_negative() for case in members)
        row = [clause, f"{negatives} neg / {len(members) - negatives} pos"]
        for checker in checkers:
            result = results[checker]
            if isinstance(result, str):
                row.append(result)
            else:
                row.append(_cell([result[case.key] for case in members]))
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "### Documented differences",
        "",
        "| case | checker | errors on lines | reason |",
        "|---|---|---|---|",
    ]
    for case in cases:
        for checker, difference in case.differences.items():
            shown = sorted(difference.lines) or "none"
            lines.append(
                f"| `{case.key}` | {checker} | {shown} (reference: "
                f"{sorted(case.error_lines) or 'none'}) | {difference.reason} |"
            )
    lines += [
        "",
        "### By case",
        "",
        "<details><summary>Every case on every checker</summary>",
        "",
        "| case | kind | " + " | ".join(checkers) + " |",
        "|---|---|" + "---|" * len(checkers),
    ]
    for case in cases:
        row = [f"`{case.key}`", "negative" if case.is_negative() else "positive"]
        for checker in checkers:
            result = results[checker]
            row.append(result if isinstance(result, str) else _case_cell(result.get(case.key)))
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "</details>", "", END_MARK]
    return "\n".join(lines)


def render_mutation(result: Any, mutants: Sequence[Any]) -> str:
    """The mutation score of the generated section (``mutants.run_batch``'s result)."""
    verdicts = {(v.mutant, v.checker): v for v in result.verdicts}
    lines = ["### Mutation score", ""]
    for checker in GATING:
        mine = [verdicts[(m.id, checker)] for m in mutants]
        blind = [v for v in mine if v.blind is not None]
        caught = sum(v.caught for v in mine)
        lines.append(
            f"- **{checker}**: {caught} of {len(mine) - len(blind)} mutants it can see "
            f"caught ({len(blind)} documented as invisible to it, below)."
        )
    lines += [
        "",
        "| clause | mutant | the break | " + " | ".join(GATING) + " |",
        "|---|---|---|" + "---|" * len(GATING),
    ]
    for mutant in sorted(mutants, key=lambda m: _section(m.clause)):
        cells = []
        for checker in GATING:
            verdict = verdicts[(mutant.id, checker)]
            if verdict.blind is not None:
                cells.append(
                    "⚪ cannot see it" if not verdict.caught else "❌ caught, but documented blind"
                )
            elif verdict.caught:
                cells.append(f"✅ {len(verdict.failing)} case(s)")
            else:
                cells.append("❌ survives")
        # A `|` in a table cell, even inside code, must be escaped.
        what = mutant.description.replace("|", "\\|")
        lines.append(f"| {mutant.clause} | `{mutant.id}` | {what} | " + " | ".join(cells) + " |")
    lines += ["", "Why a checker cannot see a mutant:", ""]
    reasons: dict[tuple[str, str], list[str]] = {}
    for mutant in mutants:
        for checker, reason in mutant.blind.items():
            reasons.setdefault((checker, reason), []).append(f"`{mutant.id}`")
    for (checker, reason), ids in reasons.items():
        lines.append(f"- {checker}, {', '.join(ids)}: {reason}.")
    return "\n".join(lines)


def write_section(doc: Path, section: str) -> None:
    """Replace the generated section of ``doc`` (between the markers) with ``section``.

    Raises:
        ValueError: The document lacks the markers.
    """
    text = doc.read_text("utf8")
    start, end = text.find(BEGIN_MARK), text.find(END_MARK)
    if start < 0 or end < start:
        raise ValueError(f"{doc} has no generated section ({BEGIN_MARK} ... {END_MARK})")
    doc.write_text(text[:start] + section + text[end + len(END_MARK) :], "utf8")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the matrix; write it into the docs; fail when a gating checker disagrees."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--target", help=f"target folder (default: ${TARGET_ENV} or default)")
    parser.add_argument(
        "--mypy-config",
        type=Path,
        help="the registry's own mypy configuration (default: mypy.ini in the target folder)",
    )
    parser.add_argument("--checkers", nargs="+", default=list(CHECKERS), choices=CHECKERS)
    parser.add_argument("--write-docs", type=Path, help="document whose section to rewrite")
    parser.add_argument(
        "--no-mutants",
        dest="mutants",
        action="store_false",
        help="leave out the mutation score (computed on the default target only)",
    )
    options = parser.parse_args(argv)

    target = resolve_target(options.target)
    cases = load_cases()
    results: dict[str, Mapping[str, Outcome] | str] = {}
    versions: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="toolseam-conformance-") as scratch:
        for checker in options.checkers:
            versions[checker] = checker_version(checker)
            workdir = Path(scratch) / checker.replace("+", "-")
            try:
                report = run_checker(
                    checker, cases, target, workdir, mypy_config=options.mypy_config
                )
            except CheckerUnavailableError:
                if checker in GATING:
                    raise
                results[checker] = "not installed"
                continue
            results[checker] = report.outcomes
            for error in report.elsewhere:
                print(f"{checker}: outside the cases: {error}", file=sys.stderr)

    failures = [
        outcome
        for checker in GATING
        if not isinstance(result := results.get(checker, "skipped"), str)
        for outcome in result.values()
        if not outcome.passes
    ]
    section = render_matrix(cases, results, versions, target)
    mutation_failed = False
    if target == DEFAULT_TARGET.resolve() and options.mutants:
        # The mutants are toolseam's own: scored on the default target only.
        import mutants

        batch = mutants.run_batch(cases)
        failures_text = list(batch.control_failures)
        mutation = render_mutation(batch, mutants.ALL_MUTANTS)
        section = section.replace(
            "\n\n### Documented differences", "\n\n" + mutation + "\n\n### Documented differences"
        )
        stale = [v for v in batch.verdicts if (v.blind is None) != v.caught]
        for verdict in stale:
            print(
                f"mutant {verdict.mutant} on {verdict.checker}: not as documented", file=sys.stderr
            )
        for text in failures_text:
            print(f"control: {text}", file=sys.stderr)
        mutation_failed = bool(stale or failures_text)
    if options.write_docs is not None:
        write_section(options.write_docs, section)
        print(f"wrote the matrix of {len(cases)} cases into {options.write_docs}")
    else:
        print(section)
    for outcome in failures:
        print(outcome.explain(), file=sys.stderr)
    return 1 if failures or mutation_failed else 0


if __name__ == "__main__":
    sys.exit(main())
