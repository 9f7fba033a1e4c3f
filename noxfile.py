"""Development sessions: ``nox`` runs tests, typetests, lint, docs, postgres, codemode and
the MCP conformance suite; ``-s bench`` is opt-in.

``postgres`` and ``mcp_conformance`` skip themselves, saying why, where Postgres's binaries
or npm are not installed (CI installs both).
"""

from __future__ import annotations

import glob
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
SUPPORTED = ("3.11", "3.12", "3.13")

# uv builds environments an order of magnitude faster than virtualenv; fall back when absent.
nox.options.default_venv_backend = "uv|virtualenv"
# postgres and mcp_conformance skip themselves (saying why) where their tools are missing.
nox.options.sessions = [
    "tests", "typetests", "lint", "docs", "postgres", "codemode", "mcp_conformance"
]  # fmt: skip
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


CODEMODE_DRIVER = "src/toolseam/conformance/drivers/_codemode.py"


@nox.session(python=PYTHONS[0])
def codemode(session: nox.Session) -> None:
    """The kit's driver of pydantic-ai-harness's CodeMode, in an environment of its own.

    The harness pins pydantic-ai-slim==2.62.0, older than the pydantic-ai extra's floor that
    every other session installs; so this session checks the driver with both type checkers
    and runs its test (tests/test_conformance_peers.py with ``TOOLSEAM_CODEMODE=1``).
    """
    session.install(".", *_group("codemode"))
    session.run("mypy", "--strict", CODEMODE_DRIVER)
    session.run("pyright", CODEMODE_DRIVER)
    session.run(
        "pytest", "tests/test_conformance_peers.py", *session.posargs,
        env={"TOOLSEAM_CODEMODE": "1"},
    )  # fmt: skip


@nox.session(python=PYTHONS[0])
def lint(session: nox.Session) -> None:
    """Ruff (lint and format) and both type checkers in strict mode over ``src/``."""
    session.install(".", *_group("lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    # The codemode driver is checked by `nox -s codemode`, where its framework is installed.
    session.run("mypy", "--strict", "src", "--exclude", CODEMODE_DRIVER)
    session.run("pyright", "src")  # strict mode and the codemode exclusion: pyproject.toml
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
    ("toolseam-reference", "asyncio"),
    ("toolseam-reference", "trio"),
    ("pydantic-ai", "asyncio"),
    ("openai-agents", "asyncio"),
    ("autogen", "asyncio"),
    ("langchain", "asyncio"),
    ("dbos-steps", "asyncio"),
    ("codemode", "asyncio"),
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
        if driver == "codemode":  # last: the harness brings its own pydantic-ai (see codemode)
            session.install("pydantic-ai-harness>=0.62")
        path = Path(session.create_tmp()) / f"behaviour-{driver}-{backend}.json"
        session.run(
            "python", "-m", "toolseam.conformance", "--driver", driver, "--backend", backend,
            "--json", str(path), success_codes=[0] if driver.startswith("toolseam") else [0, 1],
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


# The official MCP conformance suite (npm), run against docs/examples/mcp_conformance_server.py.
MCP_CONFORMANCE = "@modelcontextprotocol/conformance@0.1.16"
MCP_CONFORMANCE_NODE = 22  # the suite needs node >= 22
# Every server scenario of the suite that toolseam does not pass, and why. The suite fails the
# run on any other failing scenario, and on a listed one that passes (drop it from here then).
MCP_CONFORMANCE_EXPECTED_FAILURES = {
    # Out of scope: toolseam.mcp serves the tools of a registry, and nothing else.
    "completion-complete": "no completion/complete: toolseam serves tools only",
    "resources-list": "no resources: toolseam serves tools only",
    "resources-read-text": "no resources: toolseam serves tools only",
    "resources-read-binary": "no resources: toolseam serves tools only",
    "resources-templates-read": "no resources: toolseam serves tools only",
    "resources-subscribe": "no resources: toolseam serves tools only",
    "resources-unsubscribe": "no resources: toolseam serves tools only",
    "prompts-list": "no prompts: toolseam serves tools only",
    "prompts-get-simple": "no prompts: toolseam serves tools only",
    "prompts-get-with-args": "no prompts: toolseam serves tools only",
    "prompts-get-embedded-resource": "no prompts: toolseam serves tools only",
    "prompts-get-with-image": "no prompts: toolseam serves tools only",
    # A pending scenario (SEP-1699): the server closes a call's SSE stream mid-call and the
    # client resumes it from an event store; serve_http keeps no event store (docs/mcp.md).
    "server-sse-polling": "no SSE resumption (no event store)",
}


def _node_major(node: str) -> int:
    found = subprocess.run([node, "--version"], capture_output=True, text=True, check=False)
    match = re.match(r"v(\d+)\.", found.stdout)
    return int(match.group(1)) if match else 0


def _node_package() -> str:
    """The npm package that ships node for this machine (the `node` package's binaries)."""
    system = {"linux": "linux", "darwin": "darwin", "win32": "win"}.get(sys.platform, sys.platform)
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64"}.get(machine, machine)
    return f"node-{system}-{arch}@{MCP_CONFORMANCE_NODE}"


def _node_binaries(prefix: Path) -> list[Path]:
    """The node binaries an npm `node-<platform>-<arch>` package installed under ``prefix``."""
    return [
        *prefix.glob("node_modules/node-*/bin/node"),
        *prefix.glob("node_modules/node-*/node.exe"),
    ]


def _start_conformance_server(
    session: nox.Session, log: Path
) -> tuple[subprocess.Popen[bytes], str]:
    """Serve the example registry on a free loopback port; return the process and its URL."""
    python = shutil.which("python", path=session.bin)
    assert python is not None
    target = "docs/examples/mcp_conformance_server.py:registry"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [python, "-m", "toolseam.mcp", "serve", target, "--http", "127.0.0.1:0"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = None
    deadline = time.monotonic() + 60
    while url is None and time.monotonic() < deadline and server.poll() is None:
        time.sleep(0.1)
        # serve_http announces the URL once it accepts connections.
        found = re.search(r"serving (http://\S+)", log.read_text(errors="replace"))
        url = found.group(1) if found else None
    if url is None:
        server.kill()
        server.wait()
        session.error(f"the example server did not start:\n{log.read_text(errors='replace')}")
    return server, url


@nox.session(python=PYTHONS[0])
def mcp_conformance(session: nox.Session) -> None:
    """The official MCP conformance suite's server scenarios (npm).

    Installs the suite (and node 22 where the system's node is older) with npm into nox's
    cache dir, once per version (no global install), serves
    docs/examples/mcp_conformance_server.py over streamable HTTP on a free loopback port,
    and runs every server scenario against it. It fails when a scenario fails that is not in
    MCP_CONFORMANCE_EXPECTED_FAILURES, or when one listed there passes. Skipped, with the
    reason, when npm is not installed.
    """
    npm = shutil.which("npm")
    if npm is None:
        session.skip(
            "npm is not on PATH: the MCP conformance suite is the npm package "
            f"{MCP_CONFORMANCE} (it also brings node {MCP_CONFORMANCE_NODE}); install "
            "Node.js with npm to run it"
        )
    session.install(".[mcp]")
    tmp = Path(session.create_tmp())
    # In nox's cache dir, which outlives the session's venv: npm runs once per version.
    # Two prefixes: an `npm install --no-save` removes what an earlier one put in its prefix.
    cache = Path(session.cache_dir) / "mcp-conformance"
    prefix = cache / MCP_CONFORMANCE.rsplit("@", 1)[1]
    install = [npm, "install", "--no-save", "--no-audit", "--no-fund", "--loglevel", "error"]
    suite = prefix / "node_modules" / "@modelcontextprotocol" / "conformance"
    if not (suite / "dist" / "index.js").is_file():
        session.run(*install, "--prefix", str(prefix), MCP_CONFORMANCE, external=True)
    node = shutil.which("node")
    if node is None or _node_major(node) < MCP_CONFORMANCE_NODE:
        # npm's `node-<platform>-<arch>` packages ship node itself (not every platform has 22).
        package = _node_package()
        node_prefix = cache / package
        found = _node_binaries(node_prefix)
        if not found:
            session.run(
                *install, "--prefix", str(node_prefix), package, external=True,
                success_codes=[0, 1],
            )  # fmt: skip
            found = _node_binaries(node_prefix)
        if not found:
            session.error(
                f"the MCP conformance suite needs node >= {MCP_CONFORMANCE_NODE}, and npm has no "
                f"{package} for this machine: install node {MCP_CONFORMANCE_NODE} or newer"
            )
        node = str(found[0])
    assert node is not None
    version = json.loads((suite / "package.json").read_text())["version"]
    session.log(f"conformance {version} on node {_node_major(node)}")
    baseline = tmp / "expected-failures.yml"
    baseline.write_text(
        "server:\n" + "".join(f"  - {name}\n" for name in MCP_CONFORMANCE_EXPECTED_FAILURES)
    )
    results = tmp / "results"
    shutil.rmtree(results, ignore_errors=True)
    server, url = _start_conformance_server(session, tmp / "server.log")
    try:
        session.run(
            node, str(suite / "dist" / "index.js"), "server", "--url", url, "--suite", "all",
            "--expected-failures", str(baseline), "--output-dir", str(results), external=True,
        )  # fmt: skip
    finally:
        server.send_signal(signal.SIGINT)  # serve_http shuts down cleanly on SIGINT
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        session.log(f"server log: {tmp / 'server.log'}; results: {results}")
