"""An MCP server built on the SDK alone: its tool logs and asks its client, with no toolseam tag.

``python foreign.py [TOGETHER] [BACKEND]`` serves it over stdio. Its messages are related to
their request (as the SDK's own servers do), so a client can only tell which call they
belong to from the stream they arrive on, or when one call is in flight.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import ServerMessageMetadata


def foreign_server(together: int = 1) -> Server[Any]:
    """An SDK server whose tool logs and asks, related to its request, with no toolseam tag.

    Each call waits until ``together`` calls have arrived before it logs and asks.
    """
    arrived: list[object] = []
    all_arrived: list[anyio.Event] = []  # made in the event loop, by the first call

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {"who": {"type": "string"}}}
        return types.ListToolsResult(tools=[types.Tool(name="hail", input_schema=schema)])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        who = (params.arguments or {}).get("who", "")
        arrived.append(who)
        if not all_arrived:
            all_arrived.append(anyio.Event())
        if len(arrived) >= together:
            all_arrived[0].set()
        await all_arrived[0].wait()
        log = types.LoggingMessageNotificationParams(level="info", data=f"hailing {who}")
        await ctx.session.send_notification(
            types.LoggingMessageNotification(params=log), related_request_id=ctx.request_id
        )
        form = {"type": "object", "properties": {"name": {"type": "string"}}}
        ask = types.ElicitRequestFormParams(message=f"name for {who}?", requested_schema=form)
        answer = await ctx.session.send_request(
            types.ElicitRequest(params=ask),
            types.ElicitResult,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
        text = f"{answer.action} {answer.content}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server("foreign", on_list_tools=list_tools, on_call_tool=call_tool)


async def main(together: int) -> None:
    server = foreign_server(together)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]), backend=sys.argv[2])
