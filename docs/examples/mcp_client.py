"""Use an MCP server's tools as toolseam tools, and stop one mid-flight.

Run it: ``python docs/examples/mcp_client.py``. It starts ``mcp_server.py`` (next to this
file) as a subprocess, registers the server's tools in a local registry, and calls them
through ``registry.execute`` like any other tool. Aborting a call's signal cancels its MCP
request (``notifications/cancelled``); the local result is ``ABORTED``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from toolseam import AbortController, ToolExecutionInput, ToolRegistry, ToolResult
from toolseam.mcp import register_mcp_tools

SERVER = StdioServerParameters(
    command=sys.executable, args=[str(Path(__file__).with_name("mcp_server.py"))]
)


def describe(result: ToolResult) -> str:
    if result.is_error is True:
        code = result.error.info.code if result.error.info else "ERROR"
        return f"{code}: {result.error.message}"
    return f"OK {json.dumps(result.value)}"


async def main() -> None:
    registry = ToolRegistry()
    async with stdio_client(SERVER) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await register_mcp_tools(registry, session)
        print("tools:", ", ".join(schema.name for schema in registry.schemas()))

        count = await registry.execute(
            ToolExecutionInput(
                call_id="call_1",
                name="word_count",
                arguments={"text": "to be or not to be"},
                signal=AbortController().signal,
            )
        )
        print("call_1", describe(count))

        # Validation is the server's job: its INVALID_ARGS comes back as a remote error.
        wrong = await registry.execute(
            ToolExecutionInput(
                call_id="call_2",
                name="word_count",
                arguments={"txt": "oops"},
                signal=AbortController().signal,
            )
        )
        print("call_2", describe(wrong))

        stop = AbortController()  # owned by the UI: the stop button calls stop.abort()
        results: list[ToolResult] = []

        async def slow_search() -> None:
            call = ToolExecutionInput(
                call_id="call_3", name="search", arguments={"query": "MCP"}, signal=stop.signal
            )
            results.append(await registry.execute(call))

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_search)
            await anyio.wait_all_tasks_blocked()  # the request is on the wire
            # The abort becomes notifications/cancelled for that request.
            stop.abort("user pressed stop")
        print("call_3", describe(results[0]))


if __name__ == "__main__":
    anyio.run(main)
