"""The kit's process program, and what the process table says about it (Linux ``/proc``).

A ``process`` body runs the kit's program (`Processes.argv`) through its registry's process
helper: a Python leader that starts `CHILDREN` children in its process group. Every one of
them ignores SIGTERM, as a server or a build a tool starts may: only a helper that stops the
whole group, and goes on to SIGKILL when asking is not enough, leaves nothing running. Each
process, once its signal handling is set, connects to the kit over loopback and reports its
pid; the kit stops the call only once every pid has arrived, and reads ``/proc`` the moment
the call returns (`Running.on_return`).

A process counts as still running unless it is gone, a zombie, or doomed: SIGKILL is
pending for it (``ShdPnd``/``SigPnd`` in ``/proc/<pid>/status``) or it is already exiting
(``PF_EXITING``). A process killed with SIGKILL executes no instruction of its own after the
``kill`` call returns, but when its zombie appears depends on the scheduler: "doomed" makes
the verdict on a registry that kills the group and then waits only for its leader the same
whatever the machine's load, and a registry that leaves one child of the group running fails
every time.
"""

from __future__ import annotations

import os
import signal
import sys
from collections import Counter
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Final, final

import anyio
import anyio.abc

from ._kit import Kit
from ._probe import Probe

__all__ = ["CHILDREN", "Processes", "processes", "supported"]

CHILDREN: Final = 2
"""How many children the leader starts (each ignores SIGTERM)."""

_MARKER: Final = "toolseam-conformance-process"  # in every argv: the kit kills only its own
_SIGKILL_BIT: Final = 1 << (signal.SIGKILL - 1)
_PF_EXITING: Final = 0x4  # include/linux/sched.h
_REAP_PATIENCE: Final = 2.0

_CHILD = """
import os, signal, socket, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with socket.create_connection((sys.argv[1], int(sys.argv[2]))) as report:
    report.sendall(b"child %d" % os.getpid())
while True:
    time.sleep(3600)
"""

_LEADER = f"""
import os, signal, socket, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
for _ in range({CHILDREN}):
    subprocess.Popen([sys.executable, "-c", {_CHILD!r}, *sys.argv[1:]], stdin=subprocess.DEVNULL)
with socket.create_connection((sys.argv[1], int(sys.argv[2]))) as report:
    report.sendall(b"leader %d" % os.getpid())
while True:
    time.sleep(3600)
"""


def supported() -> str | None:
    """Why the kit cannot watch processes here, or ``None`` when it can (Linux ``/proc``)."""
    if not sys.platform.startswith("linux") or not Path("/proc/self/status").exists():
        return f"the kit reads the process table from Linux /proc, which {sys.platform} lacks"
    return None


def _state(pid: int) -> str:
    """What ``/proc`` says of one of the kit's processes.

    ``"gone"``, ``"exited"`` (a zombie, or exiting), ``"killed"`` (SIGKILL pending) or, for
    a process that can still run, its state letter.
    """
    # Read in the order a dying process loses them: its argv goes with its memory (after
    # PF_EXITING is set), a pending SIGKILL is dequeued just before. A process that is
    # killed while we read then shows up as exiting in the last read, ``stat``, instead of
    # as a process with an empty argv (which would read as a reused pid) or none pending.
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        status = Path(f"/proc/{pid}/status").read_text("utf8")
        stat = Path(f"/proc/{pid}/stat").read_text("utf8")
    except OSError:
        return "gone"
    fields = stat.rsplit(")", 1)[1].split()
    state, flags = fields[0], int(fields[6])
    if state in ("Z", "X", "x") or flags & _PF_EXITING:
        return "exited"
    if _MARKER.encode() not in cmdline:
        return "gone"  # the pid was reused: the kit's process is gone
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name in ("SigPnd", "ShdPnd") and int(value.strip(), 16) & _SIGKILL_BIT:
            return "killed"
    return state


_ENDED: Final = frozenset({"gone", "exited", "killed"})


@final
class Processes:
    """The pids the kit's program reported, and the process table's verdict on them."""

    def __init__(self, probe: Probe, key: str, port: int) -> None:
        self._probe = probe
        self._key = key
        self.argv: tuple[str, ...] = (
            sys.executable,
            "-c",
            _LEADER,
            "127.0.0.1",
            str(port),
            _MARKER,
        )
        """The program a ``process`` body runs."""
        self.pids: list[int] = []
        """Every pid reported so far: the leader's and its children's, in arrival order."""
        self.leader: int | None = None
        self.recorded = False
        """Whether `record` has run (the call has returned)."""
        self.states: dict[int, str] = {}
        """Each pid's state when the call returned (`record`)."""

    @property
    def started(self) -> bool:
        """Whether the leader and all its children have reported."""
        return len(self.pids) == CHILDREN + 1

    async def _receive(self, stream: anyio.abc.SocketStream) -> None:
        data = b""
        async with stream:
            with suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                while True:
                    data += await stream.receive()
        role, _, number = data.decode("ascii", "replace").partition(" ")
        pid = int(number)
        self.pids.append(pid)
        if role == "leader":
            self.leader = pid
        self._probe.effect(self._key, f"{role}:{pid}")  # wakes the kit

    def record(self) -> None:
        """Read the process table now (the moment the call returns)."""
        self.states = {pid: _state(pid) for pid in self.pids}
        self.recorded = True

    @property
    def left(self) -> str:
        """What still ran when the call returned, in words (``""``: nothing)."""
        running = [pid for pid, state in self.states.items() if state not in _ENDED]
        children = sum(pid != self.leader for pid in running)
        # No pids or states: the words go into reports, which should read the same each run.
        parts = ["the leader"] if self.leader in running else []
        if children:
            parts.append(f"{children} of its {CHILDREN} children")
        return " and ".join(parts)

    @property
    def ended(self) -> str:
        """How the processes had ended when the call returned, in words."""
        counts = Counter(self.states.values())
        return ", ".join(f"{counts[state]} {state}" for state in sorted(_ENDED) if counts[state])

    async def kill_leftovers(self) -> None:
        """SIGKILL every process of the kit's still running (the clause is over).

        Then waits a little (at most `_REAP_PATIENCE`) for the leader, the registry's child,
        to be reaped, and lets the event loop run, so that whatever process object the
        registry left behind sees the exit while its event loop is still there.
        """
        killed = [pid for pid in self.pids if _state(pid) not in _ENDED]
        for pid in killed:
            with suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if self.leader not in killed:
            return
        with anyio.move_on_after(_REAP_PATIENCE):  # cleanup, not a measurement
            # /proc has no events to wait on: look again until the leader is reaped.
            while _state(self.leader) != "gone":  # noqa: ASYNC110
                await anyio.sleep(0.01)
        await Kit.let_run()


@asynccontextmanager
async def processes(kit: Kit, key: str) -> AsyncGenerator[Processes]:
    """Listen for the program's reports while the block runs; kill what it left, after."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port: int = listener.extra(anyio.abc.SocketAttribute.local_port)
    watched = Processes(kit.probe, key, port)
    serving = anyio.CancelScope()

    async def serve() -> None:
        async with listener:  # closed here, once serving has stopped accepting
            with serving:
                await listener.serve(watched._receive)

    kit.start_soon(serve)
    try:
        yield watched
    finally:
        serving.cancel()
        with anyio.CancelScope(shield=True):
            await watched.kill_leftovers()
