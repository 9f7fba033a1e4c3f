"""The README's main-job command: ``python -m toolseam demo``."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from toolseam.__main__ import main
from toolseam._demo import run_demo

EXPECTED_CODES = [
    "OK",
    "ABORTED_BEFORE_DISPATCH",
    "ABORTED_BEFORE_DISPATCH",
    "ABORTED",
    "ABORTED_BEFORE_DISPATCH",
    "ABORTED",
    "ABORTED",
    "INVALID_ARGS",
    "ABORTED",
]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_demo_prints_each_call_with_its_code_and_a_legend(backend: str) -> None:
    out = io.StringIO()
    assert run_demo(backend=backend, out=out) == 0  # type: ignore[arg-type]
    text = out.getvalue()
    codes = [
        line.split("=> ", 1)[1].split(":", 1)[0]
        for line in text.splitlines()
        if line.lstrip().startswith("=> ")
    ]
    assert codes == EXPECTED_CODES
    # Each abort with its reason, the host cancellation, and the validation step.
    assert "[ABORT 'turn already over']" in text
    assert "approval > [ABORT 'user said no more'] > post" in text
    assert "pre > wrap > body > [HOST CANCEL] > result" in text
    assert "pre > wrap > body: args rejected > post > result" in text
    assert "Why post runs where it runs" in text
    # The long call's progress reached the caller's host, which stopped it at 3 of 10.
    assert "   progress 1/10 2/10 3/10\n   => ABORTED: tool call aborted" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_demo_output_is_the_same_on_both_backends() -> None:
    outputs = []
    for backend in ("asyncio", "trio"):
        out = io.StringIO()
        run_demo(backend=backend, out=out)  # type: ignore[arg-type]
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1]


def test_module_entry_point_runs_the_demo() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "toolseam", "demo"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    assert "ABORTED_BEFORE_DISPATCH" in completed.stdout


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "demo" in out
    assert "python -m toolseam.mcp" in out
    assert "python -m toolseam.conformance" in out


@pytest.mark.parametrize("command", [["toolseam"], [sys.executable, "-m", "toolseam"]])
def test_version(command: list[str]) -> None:
    import shutil

    import toolseam

    if command == ["toolseam"]:
        # The console script sits beside the interpreter of this environment.
        script = shutil.which("toolseam", path=str(Path(sys.executable).parent))
        assert script is not None
        command = [script]
    completed = subprocess.run(
        [*command, "--version"], capture_output=True, text=True, check=False, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == f"toolseam {toolseam.__version__}\n"


_WITHOUT = """
import importlib.util, runpy, sys
real = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name == {missing!r} else real(name, *a)
sys.argv = {argv!r}
{run}
"""


def _run_without(missing: str, argv: list[str], run: str) -> subprocess.CompletedProcess[str]:
    source = _WITHOUT.format(missing=missing, argv=argv, run=run)
    return subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, check=False, timeout=60
    )


def test_demo_on_trio_without_trio_says_how_to_install_it() -> None:
    completed = _run_without(
        "trio",
        ["toolseam", "demo", "--backend", "trio"],
        "from toolseam.__main__ import main; sys.exit(main(sys.argv[1:]))",
    )
    assert completed.returncode == 2
    assert completed.stderr == 'the trio backend needs trio: pip install "toolseam[trio]"\n'


def test_mcp_command_without_mcp_says_how_to_install_it() -> None:
    # What `python -m toolseam.mcp` looks like while it imports its package.
    completed = _run_without(
        "mcp",
        ["-m", "serve"],
        "sys.orig_argv = [sys.executable, '-m', 'toolseam.mcp', 'serve']\n"
        "runpy.run_module('toolseam.mcp', run_name='__main__')",
    )
    assert completed.returncode == 1
    assert completed.stderr == 'toolseam.mcp needs the MCP SDK: pip install "toolseam[mcp]"\n'
    imported = _run_without("mcp", ["x"], "import toolseam.mcp")
    assert "ImportError: toolseam.mcp needs the MCP SDK" in imported.stderr
