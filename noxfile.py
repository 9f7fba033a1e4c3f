"""Development sessions: ``nox`` runs tests, typetests, lint, docs, postgres; ``bench`` opt-in."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
SUPPORTED = ("3.11", "3.12", "3.13")

# uv builds environments an order of magnitude faster than virtualenv; fall back when absent.
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["tests", "typetests", "lint", "docs", "postgres"]
# uv must never try to download an interpreter: this project tests the ones on the machine.
os.environ.setdefault("UV_PYTHON_DOWNLOADS", "never")


def _expose_pyenv_interpreters() -> None:
    """Put every pyenv-installed CPython 3.11-3.13 on PATH.

    pyenv's shims only run the *selected* version, so ``python3.12`` is a shim that fails
    unless 3.12 is selected; its real binaries live under ``$PYENV_ROOT/versions``.
    """
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    dirs = [
        bindir
        for version in SUPPORTED
        for bindir in sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin")))
        if os.path.exists(os.path.join(bindir, f"python{version}"))
    ]
    if dirs:
        os.environ["PATH"] = os.pathsep.join([*dirs, os.environ.get("PATH", "")])


def _available_pythons() -> list[str]:
    found = []
    for version in SUPPORTED:
        exe = shutil.which(f"python{version}")
        if exe is None:
            continue
        probe = subprocess.run([exe, "-c", "pass"], capture_output=True, check=False)
        if probe.returncode == 0:
            found.append(version)
    return found or [SUPPORTED[0]]


_expose_pyenv_interpreters()
PYTHONS = _available_pythons()


def _group(name: str) -> list[str]:
    return nox.project.dependency_groups(PYPROJECT, name)


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """Runtime tests, every async test on asyncio and trio."""
    session.install(".", *_group("test"))
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHONS[0])
def postgres(session: nox.Session) -> None:
    """toolseam.durable on a real Postgres: DBOS queue workers in two processes, a third cancels.

    tests/test_durable_postgres.py starts its own server on loopback (``initdb`` in a
    temporary folder, ``pg_ctl start``; as root, as an unprivileged user) from the Postgres
    binaries found on PATH, in ``$TOOLSEAM_PG_BIN`` or in ``/usr/lib/postgresql/*/bin``.
    Without them the session is skipped, saying so, unless ``TOOLSEAM_REQUIRE_POSTGRES=1``
    (set by .ci/run, which installs Debian's ``postgresql`` first): then it fails.
    """
    sys.path.insert(0, str(ROOT / "tests"))
    from local_postgres import find_binaries, missing_reason

    binaries = find_binaries()
    if binaries is None:
        if os.environ.get("TOOLSEAM_REQUIRE_POSTGRES") == "1":
            session.error(missing_reason())
        session.skip(missing_reason())
    session.install(".", *_group("test"))
    session.run(
        "pytest", "tests/test_durable_postgres.py", *session.posargs,
        env={"TOOLSEAM_POSTGRES": "1", "TOOLSEAM_PG_BIN": str(binaries)},
    )  # fmt: skip


@nox.session(python=PYTHONS[0])
def lint(session: nox.Session) -> None:
    """Ruff (lint and format) and both type checkers in strict mode over ``src/``."""
    session.install(".", *_group("lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy", "--strict", "src")
    session.run("pyright", "src")  # strict mode is set in pyproject.toml
    # The public API: every exported symbol fully typed and documented.
    session.run("pyright", "--verifytypes", "toolseam", "--ignoreexternal")


@nox.session(python=PYTHONS[0])
def typetests(session: nox.Session) -> None:
    """The static conformance suite: each yaml case on mypy (with the plugin) and pyright.

    Also the meta-tests (every negative case fails on ``stubs/broken_target``; every
    single-break mutant is caught by a case of its clause), the third-party walk-through
    and the plugin's own tests. ``TOOLSEAM_CONFORMANCE_TARGET=path`` runs the suite on a
    target (``TOOLSEAM_CONFORMANCE_MYPY_CONFIG=file``: its own mypy configuration).
    """
    session.install(".", *_group("typetest"))
    session.run("pytest", "typetests", *session.posargs)


@nox.session(python=PYTHONS[0])
def docs(session: nox.Session) -> None:
    """Every Python example of README.md and docs/ runs and type-checks (docs/test_examples.py).

    Each complete program runs on asyncio and trio and prints what its ``# ->`` comments
    promise; all of them pass ``mypy --strict`` with ``toolseam.mypy_plugin`` and pyright in
    strict mode (one process each); every ``<!-- fragment -->`` parses.
    """
    session.install(".", *_group("docs"))
    session.run("pytest", "docs/test_examples.py", *session.posargs)


BEHAVIOURAL_SUBJECTS = [
    ("toolseam", "asyncio"),
    ("toolseam", "trio"),
    ("pydantic-ai", "asyncio"),
    ("openai-agents", "asyncio"),
    ("autogen", "asyncio"),
    ("langchain", "asyncio"),
]


@nox.session(python=PYTHONS[0])
def conformance(session: nox.Session) -> None:
    """The conformance matrix, written into docs/conformance.md (not a default session).

    Every case on mypy+plugin and pyright (these fail the session) and, for information,
    on plain mypy, basedpyright, pyrefly and ty; then the mutation score. ``nox -s
    conformance -- --target path [--mypy-config file]`` prints the matrix of another
    target instead. Without arguments it also writes the behavioural scoreboard
    (``toolseam.conformance``: toolseam and the peers, clause by clause) into the same page.
    """
    session.install(".", *_group("conformance"))
    # With arguments (``-- --target path``) the matrix is printed, and the docs left alone.
    args = session.posargs or ["--write-docs", "docs/conformance.md"]
    session.run("python", "typetests/conformance.py", *args)
    if session.posargs:
        return
    # The behavioural scoreboard (toolseam.conformance): toolseam on both backends, then the
    # peers, each through its own tool seam. toolseam must pass every clause; the peers'
    # failures are the measurement.
    reports = []
    for driver, backend in BEHAVIOURAL_SUBJECTS:
        path = Path(session.create_tmp()) / f"behaviour-{driver}-{backend}.json"
        session.run(
            "python", "-m", "toolseam.conformance", "--driver", driver, "--backend", backend,
            "--json", str(path), success_codes=[0] if driver == "toolseam" else [0, 1],
        )  # fmt: skip
        reports.append(str(path))
    session.run(
        "python", "-m", "toolseam.conformance.scoreboard", "--write-docs", "docs/conformance.md",
        *reports,
    )  # fmt: skip


@nox.session(python=PYTHONS[0])
def bench(session: nox.Session) -> None:
    """Performance benchmarks (not a default session): figures, ratios, PASS/MISS.

    ``nox -s bench -- --quick`` for a smoke run, ``-- --skip-static`` to leave out the
    static suite's wall time; see ``docs/performance.md``.
    """
    session.install(".", *_group("bench"))
    session.run("python", "benchmarks/run_all.py", *session.posargs)
