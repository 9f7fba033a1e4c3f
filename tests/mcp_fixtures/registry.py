"""The registry the MCP tests serve from a subprocess.

Everything observable on the server side is appended, one JSON object per line, to the file
named by ``TOOLSEAM_MCP_RECORD``: the process starting (with its pid), the bodies of
``wait_for_abort`` and ``step`` starting and seeing their signal abort (or being torn down
instead), every published result with its code, and the process exiting normally.
"""

from __future__ import annotations

import atexit
import json
import os
from collections.abc import Mapping

import anyio
from typing_extensions import TypedDict

from toolseam import (
    ToolExecution,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
)
from toolseam.policies import timeout_policy

RECORD_ENV = "TOOLSEAM_MCP_RECORD"


def record(**event: object) -> None:
    path = os.environ.get(RECORD_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps(event) + "\n")


class TextArgs(TypedDict):
    text: str


class PointArgs(TypedDict):
    x: int
    y: int


class TagArgs(TypedDict):
    tag: str


class StepArgs(TypedDict):
    tag: str
    hold: bool


class CountArgs(TypedDict):
    n: int


class Name(TypedDict):
    name: str


registry = ToolRegistry()


@define_tool(name="echo", description="Echo the text.")
async def echo(args: TextArgs, exec: ToolRunContext) -> str:
    return args["text"]


@define_tool(name="point", description="Return a point as a JSON object.")
async def point(args: PointArgs, exec: ToolRunContext) -> dict[str, int]:
    exec.defer_context({"note": "points are integers"})
    return {"x": args["x"], "y": args["y"]}


@define_tool(name="wait_for_abort", description="Run until the call is aborted.")
async def wait_for_abort(args: TagArgs, exec: ToolRunContext) -> str:
    record(event="body-started", tag=args["tag"], call_id=exec.call_id)
    try:
        await exec.signal.wait()
    except anyio.get_cancelled_exc_class():
        record(event="body-torn-down", tag=args["tag"])
        raise
    record(event="body-saw-abort", tag=args["tag"], reason=str(exec.signal.reason))
    exec.signal.raise_if_aborted()
    return "never"


@define_tool(name="step", description="Return the tag at once, or hold until aborted.")
async def step(args: StepArgs, exec: ToolRunContext) -> str:
    record(event="body-started", tag=args["tag"], call_id=exec.call_id)
    if args["hold"]:
        try:
            await exec.signal.wait()
        except anyio.get_cancelled_exc_class():
            record(event="body-torn-down", tag=args["tag"])
            raise
        record(event="body-saw-abort", tag=args["tag"], reason=str(exec.signal.reason))
        exec.signal.raise_if_aborted()
    return args["tag"]


@define_tool(name="count", description="Return the numbers 0 .. n-1 (a JSON array).")
async def count(args: CountArgs, exec: ToolRunContext) -> list[int]:
    return list(range(args["n"]))


@define_tool(name="deadline", description="Run past its own 10 ms deadline.", timeout=0.01)
async def deadline(args: TagArgs, exec: ToolRunContext) -> str:
    await exec.signal.wait()
    exec.signal.raise_if_aborted()
    return "never"


@define_tool(name="crash", description="Kill the server process mid-call.")
async def crash(args: TagArgs, exec: ToolRunContext) -> str:
    record(event="crashing", tag=args["tag"])
    os._exit(3)


@define_tool(name="ask_once", description="Record a side effect, then ask a name.")
async def ask_once(args: TagArgs, exec: ToolRunContext) -> str:
    record(event="side_effect", tag=args["tag"])
    answer = await exec.elicit("Whose name?", Name, key="who")
    return f"for {answer.content['name'] if answer.content else 'nobody'}"


@define_tool(name="lookup_once", description="Idempotent: ask a name.", idempotent=True)
async def lookup_once(args: TagArgs, exec: ToolRunContext) -> str:
    record(event="side_effect", tag=args["tag"])
    answer = await exec.elicit("Whose name?", Name, key="who")
    return f"found {answer.content['name'] if answer.content else 'nobody'}"


registry.register(echo)
registry.register(ask_once)
registry.register(lookup_once)
registry.register(point)
registry.register(wait_for_abort)
registry.register(step)
registry.register(count)
registry.register(deadline)
registry.register(crash)
registry.on_execute(timeout_policy(registry))


def _published(exec: ToolExecution, result: ToolResult) -> None:
    arguments = exec.arguments
    tag = arguments.get("tag") if isinstance(arguments, Mapping) else None
    code = None
    if result.is_error is True and result.error.info is not None:
        code = result.error.info.code
    record(event="result", name=exec.name, tag=tag, call_id=exec.call_id, code=code)


registry.on_result(_published)
record(event="started", pid=os.getpid())
atexit.register(lambda: record(event="exit"))
