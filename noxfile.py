"""Development sessions: ``nox`` runs ``ci``, which runs tests, typetests, lint, docs,
postgres, codemode and the MCP conformance suite side by side; ``-s bench`` is opt-in.

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
from collections.abc import Callable
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
SUPPORTED = ("3.11", "3.12", "3.13")

# uv builds environments an order of magnitude faster than virtualenv; fall back when absent.
nox.options.default_venv_backend = "uv|virtualenv"
# `python -m nox` runs `ci`, which runs CI_SESSIONS side by side (see ci below).
nox.options.sessions = ["ci"]
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


CREWAI_FILES = (
    "src/toolseam/integrations/crewai.py",
    "src/toolseam/conformance/drivers/_crewai.py",
)


@nox.session(python=PYTHONS[0])
def crewai(session: nox.Session) -> None:
    """toolseam.integrations.crewai and the crewai peer driver, in an environment of their own.

    CrewAI pins mcp<2 and pydantic<2.13, while the test group needs mcp>=2; so this session
    checks both modules with both type checkers, runs their tests with ``TOOLSEAM_CREWAI=1``
    (which fails them where CrewAI is missing) and the examples of docs/integrations/crewai.md.
    """
    session.install(".", *_group("crewai"))
    session.run("mypy", "--strict", *CREWAI_FILES)
    session.run("pyright", *CREWAI_FILES)
    # Its public API; the other integrations' frameworks are not installed here (see lint).
    _verifytypes(session, lambda name: name.startswith(CREWAI_MODULE))
    env = {"TOOLSEAM_CREWAI": "1"}
    session.run(
        "pytest", "tests/test_integration_crewai.py", "tests/test_conformance_peers.py",
        *session.posargs, env=env,
    )  # fmt: skip
    pages = {**env, "TOOLSEAM_DOCS_PAGES": "docs/integrations/crewai.md"}
    session.run("pytest", "docs/test_examples.py", "-k", "crewai", env=pages)


@nox.session(python=PYTHONS[0])
def lint(session: nox.Session) -> None:
    """Ruff (lint and format) and both type checkers in strict mode over ``src/``."""
    session.install(".", *_group("lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    # The codemode driver is checked by `nox -s codemode`, where its framework is installed;
    # the CrewAI modules by `nox -s crewai`.
    excluded = [arg for path in (CODEMODE_DRIVER, *CREWAI_FILES) for arg in ("--exclude", path)]
    session.run("mypy", "--strict", "src", *excluded)
    session.run("pyright", "src")  # strict mode and the codemode exclusion: pyproject.toml
    # The public API: every exported symbol fully typed and documented. CrewAI cannot be
    # installed here, so its module's classes have unknown bases: `nox -s crewai` checks them.
    _verifytypes(session, lambda name: not name.startswith(CREWAI_MODULE))


CREWAI_MODULE = "toolseam.integrations.crewai."


def _verifytypes(session: nox.Session, checked: Callable[[str], bool]) -> None:
    """``pyright --verifytypes toolseam``, failing on an error of a symbol ``checked`` names."""
    args = ["pyright", "--verifytypes", "toolseam", "--ignoreexternal", "--outputjson"]
    output = str(session.run(*args, silent=True, success_codes=[0, 1]))
    report, _ = json.JSONDecoder().raw_decode(output[output.index("{") :])
    errors = [
        f"{symbol['name']}: {diagnostic['message']}"
        for symbol in report["typeCompleteness"]["symbols"]
        for diagnostic in symbol["diagnostics"]
        if diagnostic["severity"] == "error" and checked(symbol["name"])
    ] + [d["message"] for d in report["generalDiagnostics"] if d["severity"] == "error"]
    if errors:
        session.error("pyright --verifytypes toolseam:\n" + "\n".join(errors))


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
    # MCP servers over the wire (the mcp.* clauses only): toolseam's and the SDK's MCPServer,
    # before CrewAI's install pins mcp<2.
    ("toolseam-mcp", "asyncio"),
    ("toolseam-mcp", "trio"),
    ("toolseam-mcp-2026", "asyncio"),
    ("toolseam-mcp-2026", "trio"),
    ("mcp-sdk-mcpserver", "asyncio"),
    ("mcp-sdk-mcpserver", "trio"),
    ("mcp-sdk-mcpserver-2026", "asyncio"),
    ("mcp-sdk-mcpserver-2026", "trio"),
    ("pydantic-ai", "asyncio"),
    ("openai-agents", "asyncio"),
    ("autogen", "asyncio"),
    ("langchain", "asyncio"),
    ("dbos-steps", "asyncio"),
    ("google-adk", "asyncio"),
    ("crewai", "asyncio"),
    ("toolseam-temporal", "asyncio"),
    ("temporal-activities", "asyncio"),
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
        if driver == "crewai":  # CrewAI pins mcp<2 and pydantic<2.13 (see crewai)
            session.install(*PYPROJECT["project"]["optional-dependencies"]["crewai"])
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


# The official MCP conformance suite (npm), pinned exactly: its scenarios change between
# pre-releases. Both directions: its server scenarios against docs/examples/
# mcp_conformance_server.py, its client scenarios launching docs/examples/mcp_conformance_client.py.
MCP_CONFORMANCE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"
MCP_CONFORMANCE_NODE = 22  # the suite needs node >= 22
# The protocol revisions run, each at its own wire (the suite's requirement sets).
MCP_CONFORMANCE_REVISIONS = ("2025-11-25", "2026-07-28")
_TOOLS_ONLY = "out of scope: toolseam.mcp serves the tools of a registry, and nothing else"
# The auth extensions' scenarios (unscored, optional: SEP-1730), which `client --requirements`
# runs too. Every scored auth/* scenario passes: the example client's authorization code flow.
_AUTH_EXTENSIONS = {
    "auth/client-credentials-basic": (
        "auth extension (SEP-1046): the example client runs the authorization code flow; "
        "the gateway's ClientCredentials does this grant"
    ),
    "auth/client-credentials-jwt": (
        "auth extension (SEP-1046, private_key_jwt): the example client holds no signing key"
    ),
    "auth/enterprise-managed-authorization": (
        "auth extension (SEP-990, ID-JAG token exchange): not implemented"
    ),
    "auth/dpop": "auth extension (SEP-1932 DPoP): the example client sends no DPoP proofs",
    "auth/dpop-nonce": "auth extension (SEP-1932 DPoP): the example client sends no DPoP proofs",
    "auth/wif-jwt-bearer": (
        "auth extension (SEP-1933, RFC 7523 JWT bearer grant): not implemented"
    ),
}
_OUT_OF_SCOPE_SERVER = {
    "completion-complete": _TOOLS_ONLY,
    **dict.fromkeys(
        (
            "resources-list",
            "resources-read-text",
            "resources-read-binary",
            "resources-templates-read",
            "resources-subscribe",
            "resources-unsubscribe",
            "prompts-list",
            "prompts-get-simple",
            "prompts-get-with-args",
            "prompts-get-embedded-resource",
            "prompts-get-with-image",
        ),
        _TOOLS_ONLY,
    ),
}
# What toolseam does not pass, per revision and direction, and why. A `scenario:check-id`
# entry excuses that one check only (the scenario's other checks stay enforced); `auth/*`
# stands for every auth scenario the run includes. The suite fails the run on any other
# failure, and on a listed entry that passes (drop it from here then).
MCP_CONFORMANCE_EXPECTED_FAILURES: dict[str, dict[str, dict[str, str]]] = {
    "2025-11-25": {
        "server": {
            **_OUT_OF_SCOPE_SERVER,
            # A pending scenario (SEP-1699): the server closes a call's SSE stream mid-call
            # and the client resumes it from an event store; serve_http keeps none.
            "server-sse-polling": "no SSE resumption (no event store)",
        },
        "client": dict(_AUTH_EXTENSIONS),
    },
    "2026-07-28": {
        "server": {
            **{
                name: reason
                for name, reason in _OUT_OF_SCOPE_SERVER.items()
                if name not in ("resources-subscribe", "resources-unsubscribe")
            },
            "sep-2164-resource-not-found": _TOOLS_ONLY,
            # caching: its tools/list checks pass; these ask for lists toolseam has not.
            "caching:sep-2549-prompts-list-caching-hints": _TOOLS_ONLY,
            "caching:sep-2549-resources-list-caching-hints": _TOOLS_ONLY,
            "caching:sep-2549-resources-templates-list-caching-hints": _TOOLS_ONLY,
            # Its input request is a prompts/get, which a tools-only server does not serve.
            "input-required-result-non-tool-request": _TOOLS_ONLY,
        },
        "client": dict(_AUTH_EXTENSIONS),
    },
}


def _requirement_set(suite: Path, revision: str) -> dict[str, list[str]]:
    """A requirement set of the suite: its scored scenarios per leg, and what it leaves unscored.

    Keys ``server`` and ``client`` (scored), ``server-unscored`` and ``client-unscored``.
    Read with a regex: the files are flat YAML lists, and nox has no YAML parser.
    """
    text = (suite / "requirements" / f"{revision}.yaml").read_text()
    found: dict[str, list[str]] = {}
    for leg in ("server", "client"):
        block = re.search(rf"^{leg}:\n((?:  - .*\n)+)", text, re.MULTILINE)
        found[leg] = re.findall(r"^  - (\S+)", block.group(1), re.MULTILINE) if block else []
        found[f"{leg}-unscored"] = re.findall(
            rf"^  - scenario: (\S+)\n    leg: {leg}$", text, re.MULTILINE
        )
    return found


def _baseline(revision: str, scenarios: dict[str, list[str]], path: Path) -> None:
    """Write the suite's expected-failures file for one revision (``auth/*`` expanded)."""
    lines: list[str] = []
    for leg in ("server", "client"):
        lines.append(f"{leg}:")
        run = {*scenarios[leg], *scenarios[f"{leg}-unscored"]}
        for entry, reason in MCP_CONFORMANCE_EXPECTED_FAILURES[revision][leg].items():
            names = (
                sorted(n for n in run if n.startswith("auth/")) if entry == "auth/*" else [entry]
            )
            lines += [f"  - {name}  # {reason}" for name in names]
    path.write_text("\n".join(lines) + "\n")


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
    # The tools served as tasks (the `tasks-*` scenarios): the example's TASKS.
    tasks = [
        "--task=slow_compute",
        "--task=failing_job=required",
        "--task=protocol_error_job",
        "--task=confirm_delete",
        "--task=multi_input",
        "--task=test_tool_with_task=after-input",
    ]
    with log.open("wb") as out:
        server = subprocess.Popen(
            [python, "-m", "toolseam.mcp", "serve", target, "--http", "127.0.0.1:0", *tasks],
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
    """The official MCP conformance suite, both directions, at each protocol revision (npm).

    Installs the suite (and node 22 where the system's node is older) with npm into nox's
    cache dir, once per version (no global install). Serves
    docs/examples/mcp_conformance_server.py over streamable HTTP on a free loopback port
    (one server, both revisions negotiated), and for each revision of
    MCP_CONFORMANCE_REVISIONS runs the suite's requirement set against it (``server
    --requirements REV``), then each scenario the set runs unscored (pending, extension:
    ``tasks-*``) on its own so that it counts; then the same for the client scenarios, which
    launch docs/examples/mcp_conformance_client.py (the unscored ``auth/*`` extensions are
    not run). It fails when a scenario fails that MCP_CONFORMANCE_EXPECTED_FAILURES does not
    list, or when one listed there passes. Skipped, with the reason, when npm is missing.
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
    index = str(suite / "dist" / "index.js")
    python = shutil.which("python", path=session.bin)
    assert python is not None
    client = f"{python} {ROOT / 'docs' / 'examples' / 'mcp_conformance_client.py'}"
    results = tmp / "results"
    shutil.rmtree(results, ignore_errors=True)
    failed: list[str] = []

    def run(what: str, *args: str) -> None:
        # Every run goes on when one fails, so that one session reports all of them.
        session.log(f"{what}: {' '.join(args)}")
        done = subprocess.run([node, index, *args], cwd=ROOT, check=False)
        if done.returncode != 0:
            failed.append(what)

    server, url = _start_conformance_server(session, tmp / "server.log")
    try:
        for revision in MCP_CONFORMANCE_REVISIONS:
            scenarios = _requirement_set(suite, revision)
            baseline = tmp / f"expected-failures-{revision}.yml"
            _baseline(revision, scenarios, baseline)
            common = ["--expected-failures", str(baseline), "--output-dir", str(results / revision)]
            run(f"server {revision}", "server", "--url", url, "--requirements", revision, *common)
            for name in scenarios["server-unscored"]:
                run(
                    f"server {revision} {name}", "server", "--url", url, "--scenario", name,
                    "--spec-version", revision, "--force", *common,
                )  # fmt: skip
            # The client scenarios run side by side, each starting the client: a slow
            # machine needs more than the default 30 s each.
            timeout = ["--timeout", "120000"]
            run(
                f"client {revision}", "client", "--command", client, "--requirements", revision,
                *timeout, *common,
            )  # fmt: skip
            for name in scenarios["client-unscored"]:
                if not name.startswith("auth/"):
                    run(
                        f"client {revision} {name}", "client", "--command", client,
                        "--scenario", name, "--spec-version", revision, "--force",
                        *timeout, *common,
                    )  # fmt: skip
    finally:
        server.send_signal(signal.SIGINT)  # serve_http shuts down cleanly on SIGINT
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        session.log(f"server log: {tmp / 'server.log'}; results: {results}")
    if failed:
        session.error(
            "MCP conformance: unexpected failures, or expected ones that now pass, in: "
            + "; ".join(failed)
        )


# The sessions `python -m nox` runs (through `ci`), longest first: the scheduler starts them in
# this order. postgres and mcp_conformance skip themselves, saying why, where their tools are
# missing (CI installs both, and sets the variables that make a skip a failure).
CI_SESSIONS = [
    *(f"tests-{version}" for version in PYTHONS),
    "mcp_conformance", "docs", "crewai", "typetests", "mcp_typescript", "codemode", "postgres",
    "lint",
]  # fmt: skip


def _ci_jobs(args: list[str]) -> int:
    if "--jobs" in args:
        return max(1, int(args[args.index("--jobs") + 1]))
    return max(1, int(os.environ.get("TOOLSEAM_CI_JOBS", "0")) or (os.cpu_count() or 1))


def _summary_counts(log: str) -> tuple[int, int, int]:
    """passed, failed (errors included) and skipped, from each pytest summary line of a log."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for line in re.findall(r"^=* ?(\d+ \w+.*) in [\d.]+s", log, re.MULTILINE):
        for number, word in re.findall(r"(\d+) (passed|failed|errors?|skipped)", line):
            counts["failed" if word.startswith("error") else word] += int(number)
    return counts["passed"], counts["failed"], counts["skipped"]


@nox.session(python=False)
def ci(session: nox.Session) -> None:
    """Every default session (CI_SESSIONS), as many at once as the machine has cores.

    Each runs as its own ``python -m nox -s NAME`` with its output in a log; a session's log is
    printed whole when it fails and by its last lines when it passes, then one line per
    session and the totals. ``-- --jobs N`` (or ``TOOLSEAM_CI_JOBS``) sets how many run at
    once; ``-- NAME ...`` runs only those. The sessions share nothing but the uv and npm
    caches, and every server a test starts listens on a free loopback port.
    """
    args = list(session.posargs)
    jobs = _ci_jobs(args)
    if "--jobs" in args:
        del args[args.index("--jobs") : args.index("--jobs") + 2]
    unknown = [name for name in args if name not in CI_SESSIONS]
    if unknown:
        session.error(f"not a CI session: {', '.join(unknown)} (they are: {CI_SESSIONS})")
    queue = [name for name in CI_SESSIONS if not args or name in args]
    logs = Path(session.create_tmp()) / "ci-logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    session.log(f"{len(queue)} sessions, {jobs} at a time; logs in {logs}")
    running: dict[str, tuple[subprocess.Popen[bytes], float]] = {}
    ended: list[tuple[str, int, float]] = []
    try:
        while queue or running:
            while queue and len(running) < jobs:
                name = queue.pop(0)
                command = [sys.executable, "-m", "nox", "-s", name]
                with (logs / f"{name}.log").open("wb") as out:
                    process = subprocess.Popen(
                        command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                    )  # fmt: skip
                running[name] = (process, time.monotonic())
                session.log(f"started {name}")
            time.sleep(1)
            for name, (process, started) in list(running.items()):
                if process.poll() is None:
                    continue
                del running[name]
                took = time.monotonic() - started
                ended.append((name, process.returncode, took))
                text = (logs / f"{name}.log").read_text(errors="replace")
                shown = text if process.returncode else "\n".join(text.splitlines()[-25:])
                verdict = "FAILED" if process.returncode else "passed"
                print(
                    f"\n----- {name}: {verdict} in {took / 60:.1f} min -----\n{shown}", flush=True
                )
    finally:
        for process, _ in running.values():
            process.terminate()
    totals = [0, 0, 0]
    for name, code, took in ended:
        counts = _summary_counts((logs / f"{name}.log").read_text(errors="replace"))
        totals = [total + count for total, count in zip(totals, counts, strict=True)]
        outcome = "failed" if code else "ok"
        session.log(f"{name:<18} {outcome:<6} {took / 60:5.1f} min  {counts[0]} passed")
    failed = [name for name, code, _ in ended if code]
    print(f"ci: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped", flush=True)
    if failed:
        session.error(f"failed: {', '.join(failed)}")


# An MCP client nobody here wrote, cancelling calls on toolseam's server (stdio and HTTP).
MCP_TYPESCRIPT_SDK = "@modelcontextprotocol/sdk@1.32.2"


@nox.session(python=PYTHONS[0])
def mcp_typescript(session: nox.Session) -> None:
    """The MCP TypeScript SDK's client against toolseam's server (tests/test_mcp_typescript.py).

    Installs the SDK with npm into nox's cache dir, once per version (no global install),
    and runs the tests with ``TOOLSEAM_MCP_TS_SDK`` pointing at it; node runs the client
    (the SDK needs node >= 18). Without npm or node the session is skipped, saying so,
    unless ``CI`` is true or ``TOOLSEAM_REQUIRE_MCP_TYPESCRIPT=1``: then it fails.
    """
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None or _node_major(node) < 18:
        reason = (
            f"the MCP TypeScript SDK's client ({MCP_TYPESCRIPT_SDK}) needs node >= 18 and npm "
            "on PATH: install Node.js with npm to run it"
        )
        required = os.environ.get("CI", "").lower() in ("1", "true")
        if required or os.environ.get("TOOLSEAM_REQUIRE_MCP_TYPESCRIPT") == "1":
            session.error(reason)
        session.skip(reason)
    assert npm is not None
    session.install(".[mcp]", *_group("test"))
    prefix = Path(session.cache_dir) / "mcp-typescript" / MCP_TYPESCRIPT_SDK.rsplit("@", 1)[1]
    sdk = prefix / "node_modules" / "@modelcontextprotocol" / "sdk"
    if not (sdk / "dist" / "esm" / "client" / "index.js").is_file():
        session.run(
            npm, "install", "--no-save", "--no-audit", "--no-fund", "--loglevel", "error",
            "--prefix", str(prefix), MCP_TYPESCRIPT_SDK, external=True,
        )  # fmt: skip
    session.run(
        "pytest", "tests/test_mcp_typescript.py", *session.posargs,
        env={"TOOLSEAM_MCP_TS_SDK": str(sdk)},
    )  # fmt: skip
