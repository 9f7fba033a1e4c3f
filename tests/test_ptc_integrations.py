"""``run_code`` (toolseam.ptc) exposed through each integration like any other registry tool.

Each test drives the real framework with its own test model: pydantic-ai's `FunctionModel`,
the OpenAI Agents SDK through its `Model` interface answering from a script, and
langchain-core's `GenericFakeChatModel`. The model writes a program that fans out parallel
nested calls; the next model turn (or the tool message) carries the per-call outcome list.

pydantic-ai and the Agents SDK run on asyncio only (see their own test modules), so those two
tests pin ``anyio_backend`` to asyncio; the LangChain test runs on asyncio and trio.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from typing_extensions import TypedDict

from toolseam import AbortController, ToolRegistry, ToolRunContext, define_tool
from toolseam.ptc import PtcTool, ptc_tool

PROGRAM = (
    "import asyncio\n"
    "cities = ['Oslo', 'Lima', 'Pune']\n"
    "temps = await asyncio.gather(*[weather(city=c) for c in cities])\n"
    "dict(zip(cities, temps))"
)
OUTPUT = {"Oslo": 4, "Lima": 4, "Pune": 4}


class City(TypedDict):
    city: str


@asynccontextmanager
async def sandboxed() -> AsyncIterator[tuple[ToolRegistry, list[str]]]:
    """A registry with ``weather`` and a ``run_code`` over it; the cities the bodies saw."""
    registry = ToolRegistry()
    seen: list[str] = []

    @define_tool(name="weather", description="Temperature in a city.", is_concurrency_safe=_yes)
    async def weather(args: City, exec: ToolRunContext) -> int:
        seen.append(args["city"])
        return len(args["city"])

    registry.register(weather)
    run: PtcTool
    async with ptc_tool(registry, tools=["weather"]) as run:
        registry.register(run)
        yield registry, seen


def _yes(_args: object) -> bool:
    return True


def assert_listed(text: str) -> None:
    for index, city in enumerate(["Oslo", "Lima", "Pune"], 1):
        assert f'{index}. weather {{"city": "{city}"}} -> OK' in text


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_pydantic_ai_agent_calls_run_code_and_reads_the_outcome_list() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from toolseam.integrations.pydantic_ai import RegistryToolset

    returned: list[Any] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [
            part
            for message in messages
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        ]
        if not returns:
            assert (
                "async def weather(*, city: str) -> Any:"
                in {tool.name: tool.description for tool in info.function_tools}["run_code"]
            )
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": PROGRAM}, "call_1")])
        returned.append(returns[0].content)
        return ModelResponse(parts=[TextPart("ok")])

    async with sandboxed() as (registry, seen):
        agent = Agent(FunctionModel(respond), toolsets=[RegistryToolset(registry)])
        result = await agent.run("temperatures?")
    assert result.output == "ok"
    (value,) = returned
    assert value["output"] == OUTPUT
    assert [(c["name"], c["arguments"], c["code"]) for c in value["nested_calls"]] == [
        ("weather", {"city": city}, "OK") for city in ["Oslo", "Lima", "Pune"]
    ]
    assert sorted(seen) == ["Lima", "Oslo", "Pune"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_openai_agents_run_calls_run_code_and_reads_the_outcome_list() -> None:
    from agents import Agent, Runner, set_tracing_disabled

    from test_integration_openai_agents import ScriptModel, call, say
    from toolseam.integrations.openai_agents import function_tools

    set_tracing_disabled(True)
    try:
        async with sandboxed() as (registry, seen):
            model = ScriptModel(
                [call("run_code", json.dumps({"code": PROGRAM}), "call_1")], [say("done")]
            )
            agent = Agent(name="assistant", model=model, tools=[*function_tools(registry)])
            result = await Runner.run(agent, "temperatures?")
            await registry.wait_idle()
    finally:
        set_tracing_disabled(False)
    assert result.final_output == "done"
    (sent,) = model.outputs(1)
    assert sent["call_id"] == "call_1"
    assert f"output: {json.dumps(OUTPUT)}" in sent["output"]
    assert_listed(sent["output"])
    assert sorted(seen) == ["Lima", "Oslo", "Pune"]


async def test_langchain_tool_message_carries_the_outcome_list() -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage

    from toolseam.integrations.langchain import run_ai_message_tool_calls

    model = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    "",
                    tool_calls=[{"name": "run_code", "args": {"code": PROGRAM}, "id": "call_1"}],
                )
            ]
        )
    )
    turn = model.invoke([HumanMessage("temperatures?")])
    assert isinstance(turn, AIMessage)
    async with sandboxed() as (registry, seen):
        (reply,) = await run_ai_message_tool_calls(registry, turn, signal=AbortController().signal)
    assert reply.tool_call_id == "call_1"
    assert reply.status == "success"
    assert isinstance(reply.content, str)
    assert_listed(reply.content)
    assert sorted(seen) == ["Lima", "Oslo", "Pune"]
