"""The runnable examples in docs/ stay true (both backends)."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).parent.parent / "docs" / "examples"


def _main(name: str) -> Any:
    return runpy.run_path(str(EXAMPLES / name), run_name="example")["main"]


async def test_agent_loop_keeps_the_history_balanced_after_stop(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await _main("agent_loop.py")()
    assert capsys.readouterr().out.splitlines() == [
        'call_a: dispatched=True [{"type": "text", "text": "Error: tool call aborted"}]',
        'call_b: dispatched=True [{"type": "text", "text": "Error: tool call aborted"}]',
        'call_c: dispatched=False [{"type": "text", "text": '
        '"Error: tool call aborted before dispatch"}]',
        "Stopped as you asked.",
    ]


async def test_composite_tool_stops_every_nested_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await _main("composite_tool.py")()
    lines = capsys.readouterr().out.splitlines()
    assert sorted(lines[:3]) == [f"crawl-1/{i}  parent=yes ABORTED" for i in range(3)]
    assert lines[3] == "crawl-1    parent=no  ABORTED"
