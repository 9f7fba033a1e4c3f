"""Tools that use what a body reaches while it runs: progress, logs, elicitation, sampling.

`make_registry` builds a fresh registry of them (the in-process tests add their own
tools to it); `registry` is one, for ``python -m toolseam.mcp serve PATH:registry`` (the
gateway tests' upstream). Served that way, every published result is appended to the file
named by ``TOOLSEAM_MCP_RECORD``, one JSON object per line. Self-contained: it is imported
by path in a server process.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from typing_extensions import TypedDict

from toolseam import (
    JsonValue,
    LogLevel,
    ToolExecution,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
    nested_input,
)
from toolseam.policies import timeout_policy

RECORD_ENV = "TOOLSEAM_MCP_RECORD"
LEVELS: tuple[LogLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
FORM: Mapping[str, JsonValue] = {
    "type": "object",
    "properties": {"colour": {"type": "string", "enum": ["red", "blue"]}, "n": {"type": "integer"}},
    "required": ["colour"],
}


class NoArgs(TypedDict):
    pass


class CountArgs(TypedDict):
    n: int


class MessageArgs(TypedDict):
    message: str


class Person(TypedDict):
    name: str


@define_tool(name="steps", description="Report n steps of progress, logging each.")
async def steps(args: CountArgs, exec: ToolRunContext) -> str:
    for step in range(1, args["n"] + 1):
        exec.progress(step, total=args["n"], message=f"step {step}")
        exec.log("info", f"step {step}")
    return "done"


@define_tool(name="sync_steps", description="Report n steps of progress from a thread.")
def sync_steps(args: CountArgs, exec: ToolRunContext) -> str:
    for step in range(1, args["n"] + 1):
        exec.progress(step, total=args["n"])
        exec.log("info", f"thread step {step}")
    return "done"


@define_tool(name="backwards", description="Report progress that goes back twice.")
async def backwards(args: NoArgs, exec: ToolRunContext) -> str:
    for value in (1, 3, 2, 3, 4):
        exec.progress(value)
        exec.log("debug", value)  # so that no two progress events queue back to back
    return "done"


@define_tool(name="burst", description="Report n steps of progress without yielding.")
async def burst(args: CountArgs, exec: ToolRunContext) -> str:
    for step in range(1, args["n"] + 1):
        exec.progress(step, total=args["n"])
    return "done"


@define_tool(name="levels", description="Log one message at every level.")
async def levels(args: NoArgs, exec: ToolRunContext) -> str:
    for level in LEVELS:
        exec.log(level, {"level": level}, logger="levels")
    return "done"


@define_tool(name="flood", description="Log n messages without ever yielding.")
async def flood(args: CountArgs, exec: ToolRunContext) -> str:
    for index in range(args["n"]):
        exec.log("info", index)
    return "done"


@define_tool(name="ask", description="Ask the user for a name.")
async def ask(args: MessageArgs, exec: ToolRunContext) -> str:
    return str(await exec.elicit(args["message"], Person))


@define_tool(name="ask_form", description="Ask the user to fill in a JSON Schema form.")
async def ask_form(args: MessageArgs, exec: ToolRunContext) -> str:
    return str(await exec.elicit(args["message"], FORM))


@define_tool(name="log_then_ask", description="Log, then ask the user.")
async def log_then_ask(args: MessageArgs, exec: ToolRunContext) -> str:
    exec.log("info", "about to ask")
    return str(await exec.elicit(args["message"], Person))


@define_tool(name="ask_model", description="Ask the client's model.")
async def ask_model(args: MessageArgs, exec: ToolRunContext) -> str:
    sampled = await exec.sample(args["message"], max_tokens=20, system_prompt="be brief")
    return f"{sampled.model}: {sampled}"


@define_tool(
    name="ask_then_time_out", description="Ask the user; its deadline withdraws it.", timeout=0.2
)
async def ask_then_time_out(args: MessageArgs, exec: ToolRunContext) -> str:
    return str(await exec.elicit(args["message"], Person))


def make_registry() -> ToolRegistry:
    """A fresh registry of every tool above, and ``outer`` (which calls ``steps``)."""
    registry = ToolRegistry()

    @define_tool(name="outer", description="Call steps as a nested call.")
    async def outer(args: CountArgs, exec: ToolRunContext) -> str:
        nested = nested_input(exec, call_id="inner", name="steps", arguments=args)
        result = await registry.execute(nested)
        return f"inner: {result.value if result.is_error is False else 'failed'}"

    for tool in (
        steps,
        sync_steps,
        backwards,
        burst,
        levels,
        flood,
        ask,
        ask_form,
        log_then_ask,
        ask_model,
        ask_then_time_out,
        outer,
    ):
        registry.register(tool)
    registry.on_execute(timeout_policy(registry))
    return registry


def _published(exec: ToolExecution, result: ToolResult) -> None:
    path = os.environ.get(RECORD_ENV)
    if path:
        code = result.error.info.code if result.is_error is True and result.error.info else None
        with open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps({"event": "result", "name": exec.name, "code": code}) + "\n")


registry = make_registry()
registry.on_result(_published)
