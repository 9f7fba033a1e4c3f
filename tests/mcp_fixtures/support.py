"""Helpers for the MCP tests: start the fixture server, read what it recorded."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from .registry import RECORD_ENV

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).resolve().with_name("registry.py")
MODULE_TARGET = "tests.mcp_fixtures.registry:registry"
PATH_TARGET = f"{FIXTURE}:registry"


def server_command(target: str, backend: str) -> list[str]:
    """The argv that serves the fixture registry over stdio on ``backend``."""
    return [sys.executable, "-m", "toolseam.mcp", "serve", target, "--backend", backend]


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
