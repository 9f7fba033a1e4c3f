"""Helpers for the MCP tests: start the fixture servers, read what they recorded."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from toolseam import ToolRegistry, ToolRunContext, define_tool

from .registry import RECORD_ENV, TextArgs

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).resolve().with_name("registry.py")
MODULE_TARGET = "tests.mcp_fixtures.registry:registry"
PATH_TARGET = f"{FIXTURE}:registry"


GUARD = 15.0  # seconds: a failure guard for every wait below, never a pacing
_ANNOUNCED = re.compile(r"^toolseam\.mcp: serving (\S+)$", re.M)


def server_command(target: str, backend: str) -> list[str]:
    """The argv that serves the fixture registry over stdio on ``backend``."""
    return [sys.executable, "-m", "toolseam.mcp", "serve", target, "--backend", backend]


def http_server_command(target: str = PATH_TARGET, address: str = "127.0.0.1:0") -> list[str]:
    """The argv that serves the fixture registry over streamable HTTP (asyncio only)."""
    return [sys.executable, "-m", "toolseam.mcp", "serve", target, "--http", address]


@dataclass
class Served:
    """A server process that announced its URL (``toolseam.mcp: serving URL``)."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/", 1)[0])


def reap(process: subprocess.Popen[bytes]) -> int:
    """Stop a process if it still runs (SIGTERM, then SIGKILL) and return its exit status."""
    if process.poll() is None:
        process.terminate()
        try:
            return process.wait(timeout=GUARD)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait(timeout=GUARD)


@contextmanager
def serving(
    argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None
) -> Iterator[Served]:
    """Start a server process, wait until it announces its URL, and reap it at the end.

    Its stderr goes to ``log`` (a pipe nobody drains could fill and stall the server).
    """
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            list(argv),
            env={**os.environ, **(env or {})},
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + GUARD
        # Another process writes the log: there is no event to wait on, only its contents.
        while not (found := _ANNOUNCED.search(log.read_text(encoding="utf-8", errors="replace"))):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{argv} did not start:\n{log.read_text(errors='replace')}")
            time.sleep(0.02)
        yield Served(process, found.group(1), log)
    finally:
        reap(process)


async def exited(process: subprocess.Popen[bytes]) -> int:
    """The exit status of a process, once it has exited (callers bound the wait)."""
    while (status := process.poll()) is None:  # noqa: ASYNC110 - another process, no event
        await anyio.sleep(0.01)
    return status


def server_parameters(
    record: Record, backend: str, *, target: str = PATH_TARGET
) -> StdioServerParameters:
    command, *args = server_command(target, backend)
    return StdioServerParameters(
        command=command, args=args, env={RECORD_ENV: str(record.path)}, cwd=ROOT
    )


@asynccontextmanager
async def connect(parameters: StdioServerParameters) -> AsyncGenerator[ClientSession]:
    """A real server process and the SDK's real client, initialized."""
    async with (
        stdio_client(parameters, errlog=sys.stderr) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


class Record:
    """The JSON-lines file the fixture server appends its observations to."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.touch()

    def events(self, **match: object) -> list[dict[str, Any]]:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        events = [json.loads(line) for line in lines if line.endswith("}")]
        return [e for e in events if all(e.get(k) == v for k, v in match.items())]

    async def wait_for(self, **match: object) -> dict[str, Any]:
        """The first event matching ``match``, once the server has written it.

        Polls the file: the server is another process. Callers bound the whole test with
        ``anyio.fail_after``; nothing here decides an ordering.
        """
        # Another process writes the file: there is no event to wait on, only its contents.
        while not (found := self.events(**match)):  # noqa: ASYNC110
            await anyio.sleep(0.01)
        return found[0]


@contextmanager
def first_error() -> Iterator[None]:
    """Re-raise the first leaf of an exception group.

    On CPython 3.11.7, once ``mcp`` (and so ``click``) is imported, pytest can crash with
    ``SystemError: AST constructor recursion depth mismatch`` while rendering a failure
    wrapped in nested exception groups; a bare exception renders fine.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup):
            leaf = cast("BaseExceptionGroup[BaseException]", leaf).exceptions[0]
        raise leaf from None


def echo_registry() -> ToolRegistry:
    """A fresh registry with one tool, ``echo`` (returns its ``text``)."""
    registry = ToolRegistry()

    @define_tool(name="echo", description="Echo the text.")
    async def echo(args: TextArgs, exec: ToolRunContext) -> str:
        return args["text"]

    registry.register(echo)
    return registry
