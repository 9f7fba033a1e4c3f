"""README's Python examples run and print what their comments say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"example{i}" for i in range(len(BLOCKS))])
def test_readme_example_prints_what_it_promises(block: str) -> None:
    promised = [m.strip() for m in re.findall(r"# -> (.*)$", block, re.M)]
    completed = subprocess.run(
        [sys.executable, "-c", block], capture_output=True, text=True, check=False, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == promised


def test_readme_has_the_demo_and_test_commands() -> None:
    assert "python -m toolseam demo" in README
    ci = (Path(__file__).parent.parent / ".ci" / "run").read_text(encoding="utf-8")
    last = [line for line in ci.splitlines() if line.strip() and not line.startswith("#")][-1]
    assert last in README
