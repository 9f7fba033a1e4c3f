"""A registry for tests/test_mcp_stdio.py: an echo, a tool that writes to stdout, and one
that reports the process's threads."""

from __future__ import annotations

import os
import sys
import threading

from typing_extensions import TypedDict

from toolseam import ToolRegistry, ToolRunContext, define_tool


class TextArgs(TypedDict):
    text: str


class NoArgs(TypedDict):
    pass


registry = ToolRegistry()


@define_tool(name="echo", description="Echo the text.")
async def echo(args: TextArgs, exec: ToolRunContext) -> str:
    return args["text"]


@define_tool(name="loud", description="Print to stdout, through Python and to fd 1.")
async def loud(args: NoArgs, exec: ToolRunContext) -> str:
    print("stray print")
    sys.stdout.flush()
    os.write(1, b"stray write\n")
    return "said"


@define_tool(name="threads", description="The names of the process's threads.")
async def threads(args: NoArgs, exec: ToolRunContext) -> list[str]:
    return sorted(thread.name for thread in threading.enumerate())


registry.register(echo)
registry.register(loud)
registry.register(threads)
