"""A durable-task MCP server process for tests/test_mcp_tasks_durable_processes.py.

``python durable_task_server.py ROLE``, the system database's URL in
``DBOS_SYSTEM_DATABASE_URL``. Serves over streamable HTTP on a free loopback port, with
``tasks`` for every tool and ``durable=DurableTools(...)``; prints ``serving <url>`` once
DBOS is launched (it recovers, at launch, the tasks a killed server left running).

Every body start is appended to the file named by ``DURABLE_RUNS`` (``<tool> <call id>``
a line) and printed as ``started <tool>``; a body told to stop prints ``told <tool>``.
In ROLE ``first`` the idempotent ``read`` waits to be told (the test kills the process
meanwhile); in any other role it returns at once. ``registry`` is also served by
``python -m toolseam.mcp serve PATH:registry --http ... --durable``.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

import anyio
from dbos import DBOS

import dbos_sqlite_compat
from toolseam import ToolRegistry, ToolRunContext, define_tool
from toolseam.durable import DurableTools
from toolseam.mcp import serve_http

dbos_sqlite_compat.install()

ROLE = sys.argv[1]  # "serve" when `python -m toolseam.mcp serve` imports `registry`


def ran(tool: str, exec: ToolRunContext) -> None:
    with open(os.environ["DURABLE_RUNS"], "a", encoding="utf-8") as runs:
        runs.write(f"{tool} {exec.call_id}\n")
    print(f"started {tool}", flush=True)


async def until_told(tool: str, exec: ToolRunContext) -> None:
    await exec.signal.wait()
    print(f"told {tool}", flush=True)
    exec.signal.raise_if_aborted()


@define_tool(name="write", description="Write a record (not idempotent); until told.")
async def write(args: dict[str, Any], exec: ToolRunContext) -> str:
    ran("write", exec)
    await until_told("write", exec)
    return "written"


@define_tool(name="read", description="Read a record.", idempotent=True)
async def read(args: dict[str, Any], exec: ToolRunContext) -> str:
    ran("read", exec)
    if ROLE == "first":
        await until_told("read", exec)
    return "read"


@define_tool(name="hold", description="Hold a lock until told (idempotent).", idempotent=True)
async def hold(args: dict[str, Any], exec: ToolRunContext) -> str:
    ran("hold", exec)
    await until_told("hold", exec)
    return "held"


registry = ToolRegistry()
for tool in (write, read, hold):
    registry.register(tool)


async def main() -> None:
    DBOS(
        config={
            "name": "toolseam_mcp_durable_tasks",
            "system_database_url": os.environ["DBOS_SYSTEM_DATABASE_URL"],
            "log_level": os.environ.get("DBOS_LOG", "CRITICAL"),
            "executor_id": "local",
        }
    )
    durable = DurableTools(registry, poll_interval=0.05)
    async with anyio.create_task_group() as tg:
        url = await tg.start(
            functools.partial(
                serve_http,
                registry,
                port=0,
                tasks={"write": "required", "read": "required", "hold": "required"},
                durable=durable,
            )
        )
        # After the server is made: the tasks DBOS recovers at launch find it.
        DBOS.launch()
        print(f"serving {url}", flush=True)


if __name__ == "__main__":
    anyio.run(main)
