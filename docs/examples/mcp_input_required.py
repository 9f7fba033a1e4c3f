"""A tool that asks its user a question over MCP 2026-07-28, its side effect counted once.

The SDK's own ``Client`` negotiates 2026-07-28, in which a server asks by answering the call
with an ``InputRequiredResult``; the client answers through its elicitation callback and
retries the call. toolseam's server keeps the body suspended at its question and resumes
that very body with the answer: the charge before the question happens once per call.

Run it: ``python docs/examples/mcp_input_required.py``.
"""

from __future__ import annotations

import anyio
from mcp import types
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from typing_extensions import TypedDict

from toolseam import ToolRegistry, ToolRunContext, define_tool
from toolseam.mcp import create_server


class Order(TypedDict):
    item: str


class Address(TypedDict):
    city: str


charges: list[str] = []


@define_tool(name="order", description="Charge for an item, then ask where to ship it.")
async def order(args: Order, exec: ToolRunContext) -> str:
    charges.append(args["item"])  # the side effect before the question
    answer = await exec.elicit(f"Where should the {args['item']} go?", Address, key="address")
    if answer.content is None:
        return f"{args['item']}: charged, not shipped ({answer})"
    return f"{args['item']}: charged once, shipped to {answer.content['city']}"


registry = ToolRegistry()
registry.register(order)


async def ask_user(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    print("asked:", params.message)
    return types.ElicitResult(action="accept", content={"city": "Lyon"})


def text(result: types.CallToolResult | types.InputRequiredResult) -> str:
    if isinstance(result, types.InputRequiredResult):
        return f"{result.result_type} {sorted(result.input_requests or {})}"
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def main() -> None:
    async with Client(create_server(registry), elicitation_callback=ask_user) as client:
        print("revision:", client.session.protocol_version)
        # The SDK's client runs the rounds itself: the call, the question, the retry.
        print(text(await client.call_tool("order", {"item": "book"})))
        # The same rounds by hand: the first answer is the question, the retry resumes.
        first = await client.session.call_tool("order", {"item": "lamp"}, allow_input_required=True)
        print("round 1:", text(first))
        assert isinstance(first, types.InputRequiredResult)
        city = types.ElicitResult(action="accept", content={"city": "Oslo"})
        final = await client.session.call_tool(
            "order",
            {"item": "lamp"},
            input_responses={"address": city},
            request_state=first.request_state,
            allow_input_required=True,
        )
        print("round 2:", text(final))
    print("charges:", charges)


# -> revision: 2026-07-28
# -> asked: Where should the book go?
# -> book: charged once, shipped to Lyon
# -> round 1: input_required ['address']
# -> round 2: lamp: charged once, shipped to Oslo
# -> charges: ['book', 'lamp']

if __name__ == "__main__":
    anyio.run(main)
