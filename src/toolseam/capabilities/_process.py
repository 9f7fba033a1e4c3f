"""`run_process`: a subprocess owned by one tool call, stopped through its signal."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from signal import SIGKILL, SIGTERM, Signals
from typing import IO, Any, Final, TypeAlias, final

import anyio
import anyio.abc

from .._errors import ToolError
from .._signals import AbortController, AbortSignal, fuse
from ._abort import finish_on_cancel, run_unless_aborted

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_MAX_OUTPUT",
    "PROCESS_FAILED",
    "ProcessFailedError",
    "ProcessResult",
    "run_process",
]

logger = logging.getLogger("toolseam.capabilities")

StrOrBytesPath: TypeAlias = str | bytes | os.PathLike[str] | os.PathLike[bytes]

PROCESS_FAILED: Final = "PROCESS_FAILED"
"""The code of `ProcessFailedError`: the process exited with a status other than 0."""

DEFAULT_GRACE: Final = 5.0
"""Seconds between SIGTERM and SIGKILL when `run_process` stops a process (trio's figure)."""

DEFAULT_MAX_OUTPUT: Final = 1 << 20
"""Bytes kept of each captured stream by default (1 MiB); the rest is read and dropped."""

# How much of the standard error a `ProcessFailedError` message quotes (its end).
_STDERR_IN_MESSAGE: Final = 2000


@final
@dataclass(frozen=True, kw_only=True, slots=True)
class ProcessResult:
    """How a process `run_process` ran has ended (`subprocess.CompletedProcess`'s fields).

    Captured output is bounded: of each stream, the first ``max_output`` bytes are kept and
    the rest is read (so the process never blocks on a full pipe) and counted.
    """

    args: tuple[StrOrBytesPath, ...]
    """The program and its arguments, as given."""
    returncode: int
    """The exit status; ``-N`` when signal ``N`` ended the process (POSIX convention)."""
    stdout: bytes | None
    """The captured standard output (``stdout=PIPE``), else ``None``."""
    stderr: bytes | None
    """The captured standard error (``stderr=PIPE``), else ``None``."""
    stdout_dropped: int = 0
    """How many bytes of standard output were read past ``max_output`` and dropped."""
    stderr_dropped: int = 0
    """How many bytes of standard error were read past ``max_output`` and dropped."""

    def check_returncode(self) -> None:
        """Raise `ProcessFailedError` if the exit status is not 0 (what ``check=True`` does).

        Raises:
            ProcessFailedError: ``returncode`` is not 0.
        """
        if self.returncode != 0:
            raise ProcessFailedError(self)


class ProcessFailedError(ToolError):
    """A process `run_process` ran exited with a status other than 0 (code `PROCESS_FAILED`).

    A `ToolError`, so a tool body can let it propagate: the call's failure then carries
    ``ErrorInfo("ProcessFailedError", "PROCESS_FAILED")`` and a message for the model that
    names the command, its status and the end of its standard error::

        command `git push origin main` exited with status 128: fatal: ...

    Args:
        result: The process's result, kept as `result`.
    """

    result: ProcessResult
    """The result of the process, with its captured output."""

    def __init__(self, result: ProcessResult) -> None:
        super().__init__(_describe_failure(result), code=PROCESS_FAILED)
        self.result = result


async def run_process(
    argv: Sequence[StrOrBytesPath],
    *,
    signal: AbortSignal,
    grace: float = DEFAULT_GRACE,
    input: bytes | None = None,
    stdout: int | IO[Any] | None = subprocess.PIPE,
    stderr: int | IO[Any] | None = subprocess.PIPE,
    max_output: int = DEFAULT_MAX_OUTPUT,
    check: bool = True,
    cwd: StrOrBytesPath | None = None,
    env: Mapping[str, str] | None = None,
) -> ProcessResult:
    """Run a program in its own process group and return once it, and its group, are gone.

    The process starts a new session (``setsid``), so it leads a process group of its own
    that its children join. Whatever happens, no process of that group is left running
    when this function returns or raises:

    - **Abort.** When ``signal`` aborts, the whole group is asked to stop with SIGTERM; a
      group still there ``grace`` seconds later gets SIGKILL (and a warning is logged on
      the ``toolseam.capabilities`` logger). Once the process has exited this raises the
      signal's abort, as ``signal.raise_if_aborted()`` does — whatever the exit status —
      so a tool body that lets it propagate ends ``ABORTED``.
    - **Exit.** When the process exits by itself, what it left running in its group gets
      SIGKILL at once: the call is over, and so is its work.
    - **Host cancellation** of the awaiting task (or any exception) stops the group the
      same way, shielded, and the cancellation propagates unchanged once it has exited.

    A descendant that starts a session of its own (a daemon) leaves the group, and with it
    this function's reach; if it keeps the output pipes open, only an abort ends the wait
    for them. POSIX only: process groups are what make the stop reach grandchildren.

    The options follow anyio's `run_process` and trio's; the differences serve tools.
    There is no shell: ``argv`` is the program and its arguments. The standard input is
    ``input`` (then closed) or empty (``/dev/null``), never the host's own — under an MCP
    server on stdio that is the protocol stream. Output goes to a pipe and is captured by
    default; ``subprocess.DEVNULL``, a file or a descriptor send it elsewhere, and ``None``
    inherits the host's (which, on an MCP stdio server, corrupts the protocol stream).
    There is no timeout: the call's deadline aborts its signal (contract §7).

    Args:
        argv: The program and its arguments (a sequence, never a string: no shell).
        signal: The call's signal, usually ``exec.signal``: required, there is no default.
        grace: Seconds from SIGTERM to SIGKILL, zero or more.
        input: Bytes written to the standard input, which is then closed.
        stdout: ``subprocess.PIPE`` (capture), ``subprocess.DEVNULL``, a file, a descriptor,
            or ``None`` (inherit).
        stderr: As ``stdout``, or ``subprocess.STDOUT`` to merge it into the standard output.
        max_output: Bytes kept of each captured stream; the rest is read and counted in
            `ProcessResult.stdout_dropped` / `ProcessResult.stderr_dropped`.
        check: Raise `ProcessFailedError` for an exit status other than 0.
        cwd: The working directory of the process.
        env: The whole environment of the process (``None``: the host's).

    Returns:
        The exit status and the captured output.

    Raises:
        Exception: The signal's abort (its reason, or `toolseam.AbortError`), once the
            process group has been stopped.
        ProcessFailedError: ``check`` is true and the exit status is not 0.
        TypeError: ``argv`` is a string or empty; an option has the wrong type.
        ValueError: ``grace`` or ``max_output`` is negative (or not finite).
        NotImplementedError: Not a POSIX system.
        OSError: The program could not be started (``FileNotFoundError``, ...).
    """
    _check_arguments(argv, signal, grace, max_output)
    args = tuple(argv)
    await anyio.lowlevel.checkpoint()
    signal.raise_if_aborted()
    host = AbortController()
    with fuse(signal, host.signal) as stop:
        # Host cancellation stops the group as an abort does, then propagates unchanged.
        result = await finish_on_cancel(
            partial(_run, args, stop.signal, grace, input, stdout, stderr, max_output, cwd, env),
            host.abort,
        )
    if check:
        result.check_returncode()
    return result


async def _run(
    args: tuple[StrOrBytesPath, ...],
    signal: AbortSignal,
    grace: float,
    input: bytes | None,
    stdout: int | IO[Any] | None,
    stderr: int | IO[Any] | None,
    max_output: int,
    cwd: StrOrBytesPath | None,
    env: Mapping[str, str] | None,
) -> ProcessResult:
    outputs = (
        _Capture(max_output) if stdout == subprocess.PIPE else None,
        _Capture(max_output) if stderr == subprocess.PIPE else None,
    )
    process = await _spawn(args, input, stdout, stderr, cwd, env)
    try:
        await _supervise(process, signal, grace, input, outputs)
    finally:
        # contract §5, quiescence: nothing of the group outlives the call, whichever way
        # it ends (an abort has already stopped it; a cancellation or an error has not).
        with anyio.CancelScope(shield=True):
            await _stop(process, grace)
            await process.aclose()
    signal.raise_if_aborted()
    out, err = outputs
    return ProcessResult(
        args=args,
        returncode=_exit_status(process),
        stdout=None if out is None else out.value(),
        stderr=None if err is None else err.value(),
        stdout_dropped=0 if out is None else out.dropped,
        stderr_dropped=0 if err is None else err.dropped,
    )


def _check_arguments(argv: object, signal: object, grace: object, max_output: object) -> None:
    # Checked at run time as well: tools are written without a type checker too.
    if not hasattr(os, "killpg"):
        raise NotImplementedError(
            "run_process needs POSIX process groups to stop a process and its children; "
            f"they do not exist on {os.name}"
        )
    if isinstance(argv, str | bytes) or not isinstance(argv, Sequence):
        raise TypeError(
            "`argv` must be a sequence of the program and its arguments (run_process never "
            f"uses a shell), got {argv!r}"
        )
    if not argv:
        raise TypeError("`argv` must name a program, got an empty sequence")
    if type(signal) is not AbortSignal:
        raise TypeError(f"`signal` must be an AbortSignal, got {type(signal).__name__}")
    if isinstance(grace, bool) or not isinstance(grace, int | float):
        raise TypeError(f"`grace` must be a number of seconds, got {grace!r}")
    if not (math.isfinite(grace) and grace >= 0):
        raise ValueError(f"`grace` must be a finite number of seconds, zero or more, got {grace}")
    if isinstance(max_output, bool) or not isinstance(max_output, int):
        raise TypeError(f"`max_output` must be a number of bytes, got {max_output!r}")
    if max_output < 0:
        raise ValueError(f"`max_output` must be zero or more bytes, got {max_output}")


async def _spawn(
    args: tuple[StrOrBytesPath, ...],
    input: bytes | None,
    stdout: int | IO[Any] | None,
    stderr: int | IO[Any] | None,
    cwd: StrOrBytesPath | None,
    env: Mapping[str, str] | None,
) -> anyio.abc.Process:
    with anyio.CancelScope(shield=True):
        # A spawn cut short by a cancellation would leave a process nobody stops: the
        # group is started whole, and stopped however the call ends.
        return await anyio.open_process(
            args,
            stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    raise AssertionError("unreachable: a shielded scope swallows nothing")


async def _supervise(
    process: anyio.abc.Process,
    signal: AbortSignal,
    grace: float,
    input: bytes | None,
    outputs: tuple[_Capture | None, _Capture | None],
) -> None:
    """Feed and drain the process until it has exited and its pipes are closed.

    Never raises for an abort: the caller reads the signal once this returns.
    """
    pipes_closed = anyio.Event()
    async with anyio.create_task_group() as pipes:
        pipes.start_soon(_pump, process, input, outputs, pipes_closed)
        async with anyio.create_task_group() as life:
            life.start_soon(_stop_on_abort, process, signal, grace)
            await process.wait()
            life.cancel_scope.cancel()
        _signal_group(process, SIGKILL)  # what the process left running in its group
        # The pipes close once every process holding them is gone. One that left the
        # group may hold them on: then only an abort ends the wait.
        await run_unless_aborted(signal, pipes_closed.wait)
        pipes.cancel_scope.cancel()


async def _pump(
    process: anyio.abc.Process,
    input: bytes | None,
    outputs: tuple[_Capture | None, _Capture | None],
    done: anyio.Event,
) -> None:
    async with anyio.create_task_group() as group:
        if input is not None and process.stdin is not None:
            group.start_soon(_feed, process.stdin, input)
        for stream, capture in zip((process.stdout, process.stderr), outputs, strict=True):
            if stream is not None and capture is not None:
                group.start_soon(_drain, stream, capture)
    done.set()


async def _feed(stream: anyio.abc.ByteSendStream, data: bytes) -> None:
    try:
        if data:
            await stream.send(data)
        await stream.aclose()
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, BrokenPipeError):
        pass  # the process closed its standard input (or exited): what it read is its choice


async def _drain(stream: anyio.abc.ByteReceiveStream, capture: _Capture) -> None:
    async for chunk in stream:
        capture.add(chunk)


async def _stop_on_abort(process: anyio.abc.Process, signal: AbortSignal, grace: float) -> None:
    # Runs until the process exits, which cancels it: an exit within the grace period
    # never gets SIGKILL (trio's deliver_cancel, for the whole group).
    await signal.wait()
    _signal_group(process, SIGTERM)
    await anyio.sleep(grace)
    _warn_kill(process, grace)
    _signal_group(process, SIGKILL)


async def _stop(process: anyio.abc.Process, grace: float) -> None:
    """Stop the group (SIGTERM, SIGKILL after ``grace``) and wait until none of it runs.

    The caller shields it. After an exit, only what is left in the group gets SIGKILL.
    """
    if process.returncode is None:
        _signal_group(process, SIGTERM)
        with anyio.move_on_after(grace):
            await process.wait()
        if process.returncode is None:
            _warn_kill(process, grace)
    _signal_group(process, SIGKILL)
    await process.wait()
    # SIGKILL takes effect when each process is next scheduled, not when kill() returns.
    delay = 0.001
    while _group_runs(process.pid):
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.05)


def _group_runs(group: int) -> bool:
    """Whether a process of ``group`` still runs; zombies do not run, and never end here.

    Where no init process reaps orphans (a container's), a killed grandchild stays a zombie
    for good, and ``killpg(group, 0)`` goes on finding it: ``/proc`` tells the two apart.
    """
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # macOS: a group of zombies only
    try:
        entries = os.listdir("/proc")
    except FileNotFoundError:
        return True  # no /proc: the group is gone when killpg() no longer finds it
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                stat = file.read()
        except OSError:
            continue  # it has just ended
        # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
        state, _, pgrp = stat[stat.rindex(b")") + 2 :].split(b" ", 3)[:3]
        if int(pgrp) == group and state not in (b"Z", b"X"):
            return True
    return False


def _signal_group(process: anyio.abc.Process, signum: Signals) -> None:
    # The process leads its group (start_new_session), so the group's id is its pid. That
    # id is not reused while a member of the group lives, even after the leader was reaped.
    with contextlib.suppress(ProcessLookupError):  # no process is left in the group
        os.killpg(process.pid, signum)


def _warn_kill(process: anyio.abc.Process, grace: float) -> None:
    if grace == 0:
        return  # SIGKILL right away is what was asked for
    logger.warning(
        "process %d ignored SIGTERM for %ss; sending SIGKILL to its process group",
        process.pid,
        grace,
    )


def _exit_status(process: anyio.abc.Process) -> int:
    status = process.returncode
    assert status is not None  # _stop has waited for the exit
    return status


@final
class _Capture:
    """One captured stream: the first ``limit`` bytes, and a count of the rest."""

    __slots__ = ("_chunks", "_kept", "_limit", "dropped")

    def __init__(self, limit: int) -> None:
        self._chunks: list[bytes] = []
        self._kept = 0
        self._limit = limit
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self._limit - self._kept
        if room >= len(chunk):
            self._chunks.append(chunk)
            self._kept += len(chunk)
            return
        if room > 0:
            self._chunks.append(chunk[:room])
            self._kept += room
        self.dropped += len(chunk) - max(room, 0)

    def value(self) -> bytes:
        return b"".join(self._chunks)


def _describe_failure(result: ProcessResult) -> str:
    command = shlex.join(os.fsdecode(arg) for arg in result.args)
    status = result.returncode
    if status < 0:
        try:
            ending = f"was killed by {Signals(-status).name}"
        except ValueError:
            ending = f"was killed by signal {-status}"
    else:
        ending = f"exited with status {status}"
    message = f"command `{command}` {ending}"
    stderr = (result.stderr or b"").decode("utf-8", errors="replace").strip()
    if stderr:
        if len(stderr) > _STDERR_IN_MESSAGE:
            stderr = "…" + stderr[-_STDERR_IN_MESSAGE:]
        message += f": {stderr}"
    return message
