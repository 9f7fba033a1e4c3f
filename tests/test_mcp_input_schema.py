"""A 2026-07-28 call over streamable HTTP does not list every tool first.

The SDK's modern HTTP transport checks a ``tools/call``'s ``Mcp-Param-*`` headers against
the called tool's input schema; a server that does not hand it the schema by name
(``get_tool_input_schema``) gets its whole ``tools/list`` run for every call. toolseam's
server hands it over. Asyncio only: uvicorn serves in this process.
"""

from __future__ import annotations

import functools

import anyio
import pytest
from mcp.client import Client

from mcp_fixtures.support import GUARD, first_error
from toolseam import Principal, ToolRegistry, ToolRunContext, ToolSchema, define_tool
from toolseam.mcp import create_server, serve_http

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(core)?x?2\.:ResourceWarning",
)


class CountingRegistry(ToolRegistry):  # type: ignore[misc]  # final: a test subclass counts calls
    """Counts how often the server lists the tools."""

    listed = 0

    def schemas(self, *, principal: Principal | None = None) -> list[ToolSchema]:
        CountingRegistry.listed += 1
        return super().schemas(principal=principal)


@define_tool(name="echo", description="Echo the text.")
async def echo(args: dict[str, str], exec: ToolRunContext) -> str:
    return args["text"]


def test_the_server_hands_the_sdk_each_tools_schema_by_name() -> None:
    registry = ToolRegistry()
    registry.register(echo)
    server = create_server(registry)
    assert server.get_tool_input_schema is not None
    assert server.get_tool_input_schema("echo") == registry.get("echo").parameters  # type: ignore[union-attr]
    assert server.get_tool_input_schema("missing") is None


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_2026_http_call_does_not_list_the_tools(anyio_backend: str) -> None:
    registry = CountingRegistry()
    registry.register(echo)
    serve = functools.partial(serve_http, port=0, handle_signals=False)
    with first_error(), anyio.fail_after(GUARD):
        async with anyio.create_task_group() as servers:
            url = await servers.start(serve, registry)
            async with Client(url, cache=None) as client:
                assert client.protocol_version == "2026-07-28"
                await client.list_tools()
                listed = CountingRegistry.listed
                for _ in range(3):
                    result = await client.call_tool("echo", {"text": "hi"})
                    assert not result.is_error
            servers.cancel_scope.cancel()
    assert CountingRegistry.listed == listed
