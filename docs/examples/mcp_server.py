"""Serve a toolseam registry to any MCP client over stdio.

An MCP client starts it as a subprocess: ``python docs/examples/mcp_server.py``, or without
the ``__main__`` block, ``python -m toolseam.mcp serve docs/examples/mcp_server.py:registry``.
A client's cancellation of a call aborts that call's ``exec.signal``; the server answers
only after the body has stopped. Each result is logged on stderr (stdout is the wire).
"""

from __future__ import annotations

import sys

import anyio
from typing_extensions import TypedDict

from toolseam import ToolExecution, ToolRegistry, ToolResult, ToolRunContext, define_tool
from toolseam.mcp import serve_stdio


class SearchArgs(TypedDict):
    query: str


class TextArgs(TypedDict):
    text: str


registry = ToolRegistry()


@define_tool(name="search", description="Search the archive (slow).")
async def search(args: SearchArgs, exec: ToolRunContext) -> list[str]:
    # A slow search that honours its signal: the client's cancellation stops it here.
    await exec.signal.wait()
    exec.signal.raise_if_aborted()
    return []


@define_tool(name="word_count", description="Count the words of a text.")
async def word_count(args: TextArgs, exec: ToolRunContext) -> dict[str, int]:
    return {"words": len(args["text"].split())}


registry.register(search)
registry.register(word_count)


def log_result(exec: ToolExecution, result: ToolResult) -> None:
    code = result.error.info.code if result.is_error is True and result.error.info else "OK"
    print(f"server: request {exec.call_id} {exec.name} -> {code}", file=sys.stderr)


registry.on_result(log_result)


if __name__ == "__main__":
    anyio.run(serve_stdio, registry)
