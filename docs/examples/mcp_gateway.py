"""A gateway in front of two MCP servers, and a stop that crosses both hops.

Run it: ``python docs/examples/mcp_gateway.py``. It starts two upstream servers and a
gateway in front of them, then talks to the gateway only:

- upstream ``web``: the registry below, served over streamable HTTP in this process
  (`serve_http` on a free port);
- upstream ``local``: ``mcp_server.py`` (next to this file) over stdio, a process the
  gateway starts;
- the gateway: ``python -m toolseam.mcp gateway`` as a subprocess over stdio, with
  `policy` (below) applied to every upstream's calls in one place.

The client watches a running ``web_search``: the body's ``exec.progress`` crosses both
hops back to it (the gateway relays it). Then the client stops the call: its cancellation
reaches the gateway (hop 1), whose remote tool cancels its own request to ``web`` (hop 2),
where the body sees its signal abort and the result is ``ABORTED``.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from typing_extensions import TypedDict

from toolseam import ToolExecution, ToolRegistry, ToolResult, ToolRunContext, define_tool
from toolseam.mcp import serve_http

HERE = Path(__file__).resolve()


class SearchArgs(TypedDict):
    query: str


class TextArgs(TypedDict):
    text: str


web = ToolRegistry()  # the "web" upstream's own registry
web_published = anyio.Event()


@define_tool(name="search", description="Search the web (slow).")
async def search(args: SearchArgs, exec: ToolRunContext) -> list[str]:
    print("web: search started")
    exec.progress(1, total=3, message=f"searching the web for {args['query']}")
    await exec.signal.wait()  # a slow search that honours its signal
    print(f"web: search saw the stop ({exec.signal.reason})")
    exec.signal.raise_if_aborted()
    return []


@define_tool(name="word_count", description="Count the words of a text.")
async def word_count(args: TextArgs, exec: ToolRunContext) -> dict[str, int]:
    return {"words": len(args["text"].split())}


def log_web_result(exec: ToolExecution, result: ToolResult) -> None:
    code = result.error.info.code if result.is_error is True and result.error.info else "OK"
    print(f"web: {exec.name} -> {code}")
    web_published.set()


web.register(search)
web.register(word_count)
web.on_result(log_web_result)


def policy(registry: ToolRegistry) -> None:
    """The gateway's policy (``--policy``): one guard for every upstream's tools."""
    registry.add_guard(
        lambda exec: "search the web upstream instead" if exec.name == "local_search" else None
    )


def describe(result: types.CallToolResult) -> str:
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    return " ".join(texts)


async def main() -> None:
    async with anyio.create_task_group() as servers:
        serve = functools.partial(serve_http, web, port=0, handle_signals=False)
        url = await servers.start(serve)
        gateway = StdioServerParameters(
            command=sys.executable,
            args=[
                *("-m", "toolseam.mcp", "gateway"),
                *("--upstream", f"web={url}"),
                *("--upstream", f"local={sys.executable} {HERE.with_name('mcp_server.py')}"),
                *("--policy", f"{HERE}:policy"),
            ],
        )
        async with stdio_client(gateway) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            print("tools:", ", ".join(tool.name for tool in listed.tools))

            counted = await session.call_tool("local_word_count", {"text": "to be or not to be"})
            print("local_word_count ->", describe(counted))
            denied = await session.call_tool("local_search", {"query": "MCP"})
            print("local_search ->", describe(denied))

            progressed = anyio.Event()

            async def show(progress: float, total: float | None, message: str | None) -> None:
                print(f"client: {message} ({progress:.0f}/{total or 0:.0f})")
                progressed.set()

            search = functools.partial(session.call_tool, progress_callback=show)
            async with anyio.create_task_group() as calls:
                calls.start_soon(search, "web_search", {"query": "MCP"})
                await progressed.wait()  # the search's progress crossed both hops
                calls.cancel_scope.cancel()  # the user pressed stop: hop 1
            await web_published.wait()  # hop 2 reached the body, which has stopped
        servers.cancel_scope.cancel()  # serve_http shuts down cleanly


# -> tools: web_search, web_word_count, local_search, local_word_count
# -> local_word_count -> {"words": 6}
# -> local_search -> Error: tool call denied: search the web upstream instead
# -> web: search started
# -> client: searching the web for MCP (1/3)
# -> web: search saw the stop (operation aborted: the MCP client closed the request's stream)
# -> web: search -> ABORTED

if __name__ == "__main__":
    # asyncio: serve_http runs on uvicorn, which is asyncio only.
    anyio.run(main, backend="asyncio")
