"""The README's main-job command: ``python -m toolseam demo``."""

from __future__ import annotations

import io
import subprocess
import sys

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
    assert "[ABORT]" in text
    assert "[HOST CANCEL]" in text
    assert "Legend" in text
    assert max(len(line) for line in text.splitlines()) <= 100


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
    assert "demo" in capsys.readouterr().out
