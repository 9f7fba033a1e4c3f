"""Every Python example in the documentation runs, prints what it promises, and type-checks.

Run by ``nox -s docs`` (a default session): ``pytest docs/test_examples.py``.

The examples are every fenced ```` ```python ```` block of README.md and docs/**/*.md, and every
docs/examples/*.py. A block is a complete program unless the line directly above its opening
fence is ``<!-- fragment -->``. For each complete program:

* it runs in a subprocess from the repository root, once on asyncio and, when it starts an
  event loop with ``anyio.run``, once more on trio (``anyio.run`` is given
  ``backend="trio"``); it must exit with status 0, and where it states its output in
  ``# -> ...`` comments, its standard output must be exactly those lines, in order;
* all complete programs are type-checked together, in one ``mypy --strict`` process with
  ``plugins = toolseam.mypy_plugin`` and one pyright process in strict mode; each program's
  test fails on a diagnostic of its own lines.

A fragment must still parse (top-level ``await`` allowed).

The subprocesses and both checkers start together, on a small pool, the first time a test
needs one of them; each test then waits for its own job. mypy's cache lives under the system
temporary folder, so a second run is warm.
"""

from __future__ import annotations

import ast
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FRAGMENT = "<!-- fragment -->"
PROMISE = re.compile(r"#\s*->\s?(.*?)\s*$", re.M)
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})(?P<info>[^`]*)$")
RUN_TIMEOUT = 120.0
CHECK_TIMEOUT = 900.0

# Runs a program as ``python path`` would, with anyio's default backend switched to trio
# when asked: an example is written once and runs on both backends.
RUNNER = """\
import functools, os, runpy, sys
path, backend = sys.argv[1], sys.argv[2]
if backend != "asyncio":
    import anyio
    anyio.run = functools.partial(anyio.run, backend=backend)
sys.argv = [path]
sys.path[0] = os.path.dirname(os.path.abspath(path))  # as `python path` does
runpy.run_path(path, run_name="__main__")
"""


@dataclass(frozen=True)
class Example:
    """One example: a fenced block of a Markdown file, or a file of docs/examples."""

    source: Path  # the file it comes from
    line: int  # 1-based line of its first code line in ``source``
    code: str
    fragment: bool

    @property
    def id(self) -> str:
        relative = self.source.relative_to(ROOT).as_posix()
        return relative if self.source.suffix == ".py" else f"{relative}:{self.line}"

    @property
    def slug(self) -> str:
        """A module name for the checkers, unique per example."""
        stem = re.sub(r"\W", "_", self.source.relative_to(ROOT).with_suffix("").as_posix())
        return f"ex_{stem}_{self.line}".lower()

    @property
    def promised(self) -> list[str]:
        return PROMISE.findall(self.code)

    @property
    def backends(self) -> tuple[str, ...]:
        # A program on anyio runs on both backends, unless it pins one itself (an example
        # of an asyncio-only framework).
        portable = "anyio.run(" in self.code and 'backend="asyncio"' not in self.code
        return ("asyncio", "trio") if portable else ("asyncio",)


# Pages whose framework cannot share this session's environment: their own nox session
# checks them, naming them in TOOLSEAM_DOCS_PAGES (comma-separated), which selects only them.
OWN_SESSION = {"docs/integrations/crewai.md": "nox -s crewai"}
SELECTED = [page for page in os.environ.get("TOOLSEAM_DOCS_PAGES", "").split(",") if page]


def markdown_files() -> list[Path]:
    if SELECTED:
        return [ROOT / page for page in SELECTED]
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [page for page in pages if page.relative_to(ROOT).as_posix() not in OWN_SESSION]


def blocks_of(path: Path) -> Iterator[Example]:
    """The ```python blocks of one Markdown file (fences may be indented, as in lists)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, ticks = opening["indent"], opening["ticks"]
        language = opening["info"].strip().split(" ")[0]
        end = index + 1
        while end < len(lines) and lines[end].strip() != ticks:
            end += 1
        if language in {"py", "python3", "pycon", "pyi"}:
            raise AssertionError(
                f"{path.relative_to(ROOT)}:{index + 1}: write ```python (the docs test checks "
                f"only those), not ```{language}"
            )
        if language == "python":
            body = [line.removeprefix(indent) for line in lines[index + 1 : end]]
            above = lines[index - 1].strip() if index > 0 else ""
            yield Example(path, index + 2, "\n".join(body) + "\n", fragment=above == FRAGMENT)
        index = end + 1


def collect() -> list[Example]:
    blocks = [block for path in markdown_files() for block in blocks_of(path)]
    files = [
        Example(path, 1, path.read_text(encoding="utf-8"), fragment=False)
        for path in sorted((ROOT / "docs" / "examples").glob("*.py"))
        if not SELECTED
    ]
    return blocks + files


EXAMPLES = collect()
PROGRAMS = [example for example in EXAMPLES if not example.fragment]
FRAGMENTS = [example for example in EXAMPLES if example.fragment]


@dataclass
class Diagnostic:
    example: Example | None
    line: int  # in the example's source file
    text: str

    def __str__(self) -> str:
        where = self.example.id.split(":")[0] if self.example else "?"
        return f"{where}:{self.line}: {self.text}"


@dataclass
class Jobs:
    """Every subprocess of the module, started together on a small pool."""

    workdir: Path
    pool: concurrent.futures.ThreadPoolExecutor
    files: dict[Path, Example] = field(default_factory=dict)  # checked file -> example
    runs: dict[tuple[str, str], concurrent.futures.Future[subprocess.CompletedProcess[str]]] = (
        field(default_factory=dict)
    )
    mypy: concurrent.futures.Future[list[Diagnostic]] | None = None
    pyright: concurrent.futures.Future[list[Diagnostic]] | None = None

    def start(self) -> None:
        for example in PROGRAMS:
            path = self.workdir / "examples" / f"{example.slug}.py"
            path.write_text(example.code, encoding="utf-8")
            self.files[path] = example
        # The checkers first: they take longest.
        self.mypy = self.pool.submit(self._mypy)
        self.pyright = self.pool.submit(self._pyright)
        for path, example in self.files.items():
            # docs/examples files run in place (they may find their neighbours by __file__).
            program = example.source if example.source.suffix == ".py" else path
            for backend in example.backends:
                self.runs[example.id, backend] = self.pool.submit(self._run, program, backend)

    @staticmethod
    def _run(program: Path, backend: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", RUNNER, str(program), backend],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )

    def _locate(self, file: str, line: int) -> tuple[Example | None, int]:
        example = self.files.get(Path(file).resolve())
        if example is None:
            return None, line
        if example.source.suffix == ".py":
            return example, line
        return example, example.line + line - 1

    def _mypy(self) -> list[Diagnostic]:
        cache = self.workdir / "mypy_cache"
        config = self.workdir / "mypy.ini"
        config.write_text(
            "[mypy]\nstrict = True\nplugins = toolseam.mypy_plugin\n"
            f"python_version = {sys.version_info.major}.{sys.version_info.minor}\n"
            f"cache_dir = {cache}\n",
            encoding="utf-8",
        )
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy",
                "--config-file",
                str(config),
                "--show-absolute-path",
                "--no-error-summary",
                "--no-pretty",
                *map(str, self.files),
            ],
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT,
            check=False,
        )
        if completed.returncode not in (0, 1):
            raise RuntimeError(f"mypy crashed:\n{completed.stdout}\n{completed.stderr}")
        found: list[Diagnostic] = []
        for row in completed.stdout.splitlines():
            match = re.match(r"^(.+?\.py):(\d+): (error|note): (.*)$", row)
            if match is None:
                continue
            example, line = self._locate(match[1], int(match[2]))
            if match[3] == "error":
                found.append(Diagnostic(example, line, f"mypy: {match[4]}"))
            elif found and found[-1].example is example:
                found[-1].text += f"\n    {match[4]}"
        return found

    def _pyright(self) -> list[Diagnostic]:
        config = self.workdir / "pyrightconfig.json"
        config.write_text(
            json.dumps(
                {
                    "include": [f"examples/{path.name}" for path in self.files],
                    "typeCheckingMode": "strict",
                    "pythonVersion": f"{sys.version_info.major}.{sys.version_info.minor}",
                }
            ),
            encoding="utf-8",
        )
        pyright = shutil.which("pyright", path=str(Path(sys.executable).parent)) or "pyright"
        completed = subprocess.run(
            [pyright, "--outputjson", "--pythonpath", sys.executable, "-p", str(config)],
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT,
            check=False,
        )
        try:
            report = json.loads(completed.stdout)
        except json.JSONDecodeError:
            raise RuntimeError(
                f"pyright gave no report:\n{completed.stdout}\n{completed.stderr}"
            ) from None
        found: list[Diagnostic] = []
        for item in report["generalDiagnostics"]:
            if item["severity"] not in ("error", "warning"):
                continue
            example, line = self._locate(item["file"], item["range"]["start"]["line"] + 1)
            rule = f" ({item['rule']})" if "rule" in item else ""
            found.append(Diagnostic(example, line, f"pyright: {item['message']}{rule}"))
        return found


@pytest.fixture(scope="module")
def jobs() -> Iterator[Jobs]:
    # One folder per environment and checkout, kept between runs: mypy's cache (beside it)
    # stays valid only while the checked files keep their paths.
    key = hashlib.sha256(f"{sys.prefix}\0{ROOT}".encode()).hexdigest()[:12]
    workdir = Path(tempfile.gettempdir()).resolve() / f"toolseam-docs-{key}"
    shutil.rmtree(workdir / "examples", ignore_errors=True)
    (workdir / "examples").mkdir(parents=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        started = Jobs(workdir, pool)
        started.start()
        try:
            yield started
        finally:
            for future in started.runs.values():
                future.cancel()


def _ids(examples: list[Example]) -> list[str]:
    return [example.id for example in examples]


def test_every_example_is_found() -> None:
    """The collection itself: README's first example is a program, and ids are unique."""
    assert PROGRAMS[0].source == ROOT / "README.md"
    assert len({example.id for example in EXAMPLES}) == len(EXAMPLES)
    assert {e.source.name for e in PROGRAMS if e.source.suffix == ".py"} == {
        p.name for p in (ROOT / "docs" / "examples").glob("*.py")
    }


def test_every_fragment_parses() -> None:
    """Fragments are not run or type-checked, but they must be Python."""
    broken = []
    for example in FRAGMENTS:
        try:
            compile(
                example.code,
                example.id,
                "exec",
                flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
                dont_inherit=True,
            )
        except SyntaxError as error:
            broken.append(f"{example.id}: {error}")
    assert broken == []


RUN_CASES = [
    pytest.param(example, backend, id=f"{example.id}@{backend}")
    for example in PROGRAMS
    for backend in example.backends
]


@pytest.mark.timeout(CHECK_TIMEOUT + RUN_TIMEOUT)
@pytest.mark.parametrize(("example", "backend"), RUN_CASES)
def test_program_runs_and_prints_what_it_promises(
    jobs: Jobs, example: Example, backend: str
) -> None:
    completed = jobs.runs[example.id, backend].result()
    assert completed.returncode == 0, f"{example.id} failed on {backend}:\n{completed.stderr}"
    if example.promised:
        assert completed.stdout.splitlines() == example.promised, completed.stderr


def _report(diagnostics: list[Diagnostic], example: Example | None) -> list[str]:
    return [str(d) for d in diagnostics if d.example is example]


@pytest.mark.timeout(CHECK_TIMEOUT)
@pytest.mark.parametrize("example", PROGRAMS, ids=_ids(PROGRAMS))
def test_program_type_checks_on_mypy_strict_with_the_plugin(jobs: Jobs, example: Example) -> None:
    assert jobs.mypy is not None
    assert _report(jobs.mypy.result(), example) == []


@pytest.mark.timeout(CHECK_TIMEOUT)
@pytest.mark.parametrize("example", PROGRAMS, ids=_ids(PROGRAMS))
def test_program_type_checks_on_pyright_strict(jobs: Jobs, example: Example) -> None:
    assert jobs.pyright is not None
    assert _report(jobs.pyright.result(), example) == []


@pytest.mark.timeout(CHECK_TIMEOUT)
def test_checkers_report_nothing_outside_the_examples(jobs: Jobs) -> None:
    """A diagnostic in an imported module (toolseam itself, say) is reported here."""
    assert jobs.mypy is not None
    assert jobs.pyright is not None
    assert _report(jobs.mypy.result(), None) == []
    assert _report(jobs.pyright.result(), None) == []


def test_readme_has_the_demo_and_test_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python -m toolseam demo" in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    last = [line for line in ci.splitlines() if line.strip() and not line.startswith("#")][-1]
    assert last in readme


CONTRACT = ROOT / "docs" / "contract.md"
# Where the repository's own words may live; the contract is cited from all of them.
OWN_FILES = ("README.md", "CHANGELOG.md", "noxfile.py", "pyproject.toml")
OWN_DIRS = ("src", "tests", "typetests", "stubs", "docs", "benchmarks")


def _own_text_files() -> Iterator[Path]:
    for name in OWN_FILES:
        yield ROOT / name
    for directory in OWN_DIRS:
        for path in sorted((ROOT / directory).rglob("*")):
            if path.is_file() and path.suffix in {".py", ".pyi", ".md", ".yml", ".ini", ".toml"}:
                yield path


def test_contract_names_every_public_name() -> None:
    import toolseam
    import toolseam.mypy_plugin
    import toolseam.policies

    text = CONTRACT.read_text(encoding="utf-8")
    names = [
        *toolseam.__all__,
        *toolseam.policies.__all__,
        *toolseam.mypy_plugin.__all__,
        "toolseam.mypy_plugin",
        "__version__",
    ]
    missing = [
        name for name in names if not re.search(rf"`[^`\n]*\b{re.escape(name)}\b[^`\n]*`", text)
    ]
    assert missing == []


def test_contract_sections_are_numbered_as_cited() -> None:
    text = CONTRACT.read_text(encoding="utf-8")
    assert re.findall(r"^## §(\d+) ", text, re.M) == [str(n) for n in range(1, 15)]
    assert re.findall(r"^\*\*5\.(\d+) ", text, re.M) == [str(n) for n in range(1, 10)]
    for subsection in (
        "Order of one call",
        "Cancellation classification and precedence",
        "Quiescence",
        "Host cancellation",
        "Worker threads",
    ):
        assert f"\n### {subsection}\n" in text


def test_every_citation_of_the_contract_names_a_section() -> None:
    wrong = []
    for path in _own_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in re.finditer(r"contract §(\d+)(?:\.(\d+))?", text, re.IGNORECASE):
            section, step = int(match[1]), match[2]
            if not 1 <= section <= 14 or (step is not None and (section, int(step)) > (5, 9)):
                wrong.append(f"{path.relative_to(ROOT)}: {match[0]}")
            elif step is not None and section != 5:
                wrong.append(f"{path.relative_to(ROOT)}: {match[0]} (only §5 has numbered steps)")
    assert wrong == []


def test_nothing_refers_to_a_specification_outside_the_repository() -> None:
    """The contract the repository cites is docs/contract.md; no other document is implied."""
    word = re.compile(r"\b" + "SP" + r"EC\b")  # spelt apart so this file does not match itself
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _own_text_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if word.search(line)
    ]
    assert found == []


def test_console_transcripts_of_the_examples_match_what_they_promise() -> None:
    """A ```console block that runs a docs/examples program shows exactly its promised output."""
    programs = {
        e.source.relative_to(ROOT).as_posix(): e for e in PROGRAMS if e.source.suffix == ".py"
    }
    checked = 0
    for path in markdown_files():
        text = path.read_text(encoding="utf-8")
        for block in re.findall(r"^```console\n(.*?)^```", text, re.M | re.S):
            command, *output = block.splitlines()
            match = re.fullmatch(r"\$ python (docs/examples/\w+\.py)", command)
            if match is None or match[1] not in programs:
                continue
            assert output == programs[match[1]].promised, f"{path.name}: {command}"
            checked += 1
    assert checked >= 1
