"""A minimal agent loop on toolseam, driven by a fake model.

Run it: ``python docs/examples/agent_loop.py``. The fake model asks for three tool calls in
one turn; the user presses stop while they run. The history the loop sends back to the model
still holds exactly one tool result per tool-call id, which is what model providers require.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from typing_extensions import TypedDict

from toolseam import (
    AbortController,
    AbortSignal,
    ToolCall,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)


class SearchArgs(TypedDict):
    query: str


registry = ToolRegistry()


@define_tool(
    name="search",
    description="Search the web.",
    is_concurrency_safe=lambda args: True,  # read-only: may overlap other searches
)
async def search(args: SearchArgs, exec: ToolRunContext) -> str:
    # A slow, cooperative request: it stops as soon as its signal aborts.
    await exec.signal.wait()
    exec.signal.raise_if_aborted()
    return f"results for {args['query']!r}"


@define_tool(name="write_note", description="Write a note to disk.")
def write_note(args: SearchArgs, exec: ToolRunContext) -> str:
    exec.signal.raise_if_aborted()
    return "saved"


registry.register(search)
registry.register(write_note)


class FakeModel:
    """Answers the first turn with tool calls, the second with text."""

    def __init__(self) -> None:
        self.turn = 0

    def respond(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        # A real provider rejects a history whose tool calls lack results.
        asked = {c["id"] for m in history if m["role"] == "assistant" for c in m["tool_calls"]}
        answered = {m["tool_call_id"] for m in history if m["role"] == "tool"}
        assert asked == answered, f"unbalanced history: {asked ^ answered}"
        self.turn += 1
        if self.turn == 1:
            return {
                "role": "assistant",
                "tool_calls": [
                    {"id": "call_a", "name": "search", "arguments": {"query": "anyio"}},
                    {"id": "call_b", "name": "search", "arguments": {"query": "trio"}},
                    {"id": "call_c", "name": "write_note", "arguments": {"query": "summary"}},
                ],
            }
        return {"role": "assistant", "content": "Stopped as you asked.", "tool_calls": []}


async def agent_turn(model: FakeModel, history: list[dict[str, Any]], signal: AbortSignal) -> None:
    message = model.respond(history)
    history.append(message)
    if not message["tool_calls"]:
        return
    calls = [ToolCall(c["id"], c["name"], c["arguments"]) for c in message["tool_calls"]]
    outcomes = await run_tool_calls(registry, calls, signal=signal, max_parallel=4)
    history.extend(  # exactly one tool message per call, in model order
        {
            "role": "tool",
            "tool_call_id": outcome.call.call_id,
            "content": json.dumps(outcome.result.to_json()["content"]),
            "dispatched": outcome.dispatched,
        }
        for outcome in outcomes
    )


async def main() -> None:
    model = FakeModel()
    history: list[dict[str, Any]] = [{"role": "user", "content": "research and take notes"}]
    stop = AbortController()  # owned by the UI: the stop button calls stop.abort()
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent_turn, model, history, stop.signal)
        await anyio.wait_all_tasks_blocked()  # both searches are in flight
        stop.abort("user pressed stop")
    for message in history[2:]:
        [block] = json.loads(message["content"])  # what the model will read
        print(f"{message['tool_call_id']}: dispatched={message['dispatched']} {block['text']}")
    # -> call_a: dispatched=True Error: tool call aborted
    # -> call_b: dispatched=True Error: tool call aborted
    # -> call_c: dispatched=False Error: tool call aborted before dispatch
    # The next request is accepted: every tool call has its result.
    print(model.respond(history)["content"])  # -> Stopped as you asked.


if __name__ == "__main__":
    anyio.run(main)
