"""The kit's instruments for what a body reaches: the process table, skips, the late report.

The clauses themselves run in tests/test_conformance_kit.py (toolseam passes them) and
tests/test_conformance_mutants.py (each fails the defect it is about); this module checks
what those verdicts stand on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from types import MappingProxyType

import pytest

from toolseam.conformance import CAPABILITIES, Capability, Outcome, Scenario, run_clauses
from toolseam.conformance import _processes as processes
from toolseam.conformance._clauses import capabilities as clauses
from toolseam.conformance.drivers._toolseam import ToolseamDriver

# Says it is up (its modules loaded, its argv final), then blocks until its stdin closes.
_SLEEPER = "import sys; print('ready', flush=True); sys.stdin.read()"


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the kit's (its marker in argv), up and blocked reading its stdin.

    The kit reads ``/proc`` only after its processes have reported over loopback; the fixture
    waits for the same evidence (a line on stdout), not for the end of ``Popen``: between the
    two a new process may still be in exec or loading modules, states the kit never judges.
    """
    process = subprocess.Popen(
        [sys.executable, "-c", _SLEEPER, processes._MARKER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stdout.readline() == b"ready\n"
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.close()
    process.stdout.close()


@pytest.mark.skipif(processes.supported() is not None, reason="needs Linux /proc")
def test_a_running_process_is_running_and_a_killed_one_is_not(
    sleeper: subprocess.Popen[bytes],
) -> None:
    # Running (R, S, or D on a busy disk); never one of the states the kit counts as ended.
    assert processes._state(sleeper.pid) not in processes._ENDED
    os.kill(sleeper.pid, signal.SIGKILL)
    # The moment kill() returns, SIGKILL is pending or the process is already exiting.
    assert processes._state(sleeper.pid) in ("killed", "exited")
    sleeper.wait()
    assert processes._state(sleeper.pid) == "gone"


@pytest.mark.skipif(processes.supported() is not None, reason="needs Linux /proc")
def test_a_process_that_is_not_the_kits_counts_as_gone() -> None:
    # Our own process runs, but has no marker: a reused pid is not the kit's process.
    assert processes._state(os.getpid()) == "gone"


@pytest.mark.skipif(processes.supported() is not None, reason="needs Linux /proc")
def test_a_zombie_has_exited(sleeper: subprocess.Popen[bytes]) -> None:
    assert sleeper.stdin is not None
    sleeper.stdin.close()  # it returns; nobody has reaped it yet
    os.waitid(os.P_PID, sleeper.pid, os.WEXITED | os.WNOWAIT)  # exited, still unreaped
    assert processes._state(sleeper.pid) == "exited"


async def test_the_process_clauses_skip_where_there_is_no_proc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(clauses, "supported", lambda: "no /proc on this platform")
    report = await run_clauses(ToolseamDriver(), only=["process.no-child", "process.host-cancel"])
    assert [(c.status, c.detail) for c in report.clauses] == [
        ("skip", "no /proc on this platform")
    ] * 2


class _WithoutProgress:
    """toolseam's driver, claiming no progress, and saying why."""

    subject = "no progress"
    backends = ("asyncio", "trio")
    capabilities: Collection[Capability] = tuple(
        c for c in CAPABILITIES if c not in ("progress", "mcp", "mcp_input_required")
    )
    lacking: Mapping[Capability, str] = MappingProxyType({"progress": "its tools report nothing"})

    def versions(self) -> dict[str, str]:
        return {}

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        return await ToolseamDriver().run(scenario)


async def test_a_skip_says_why_the_driver_lacks_the_capability() -> None:
    report = await run_clauses(_WithoutProgress(), only=["progress.delivered"])
    (result,) = report.clauses
    assert result.status == "skip"
    assert result.detail == (
        "needs `progress`, which the driver does not offer: its tools report nothing"
    )
