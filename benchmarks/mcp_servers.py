"""The servers bench_mcp.py measures: one no-op ``echo`` tool each.

- ``registry``: toolseam's (``python -m toolseam.mcp serve benchmarks/mcp_servers.py:registry``,
  and the gateway's upstream).
- ``python benchmarks/mcp_servers.py sdk-stdio`` / ``sdk-http``: the SDK's own high-level
  server (``mcp.server.mcpserver.MCPServer``), over stdio, or over streamable HTTP in the
  mode ``serve_http`` uses (stateful, SSE responses) on the same uvicorn, on a loopback port
  it picks and announces on stderr like ``toolseam.mcp`` does.
"""

from __future__ import annotations

import socket
import sys

from typing_extensions import TypedDict

from toolseam import ToolRegistry, ToolRunContext, define_tool


class EchoArgs(TypedDict):
    text: str


registry = ToolRegistry()


@define_tool(name="echo", description="Echo the text.")
async def echo(args: EchoArgs, exec: ToolRunContext) -> str:
    return args["text"]


registry.register(echo)


def _sdk_server() -> object:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("sdk", log_level="WARNING")

    @server.tool(name="echo", description="Echo the text.")
    async def sdk_echo(text: str) -> str:
        return text

    return server


def main() -> None:
    import anyio

    mode = sys.argv[1]
    server = _sdk_server()
    if mode == "sdk-stdio":
        anyio.run(server.run_stdio_async)  # type: ignore[attr-defined]
        return
    import uvicorn

    app = server.streamable_http_app(json_response=False, stateless_http=False)  # type: ignore[attr-defined]
    # A TCP listener (proto IPPROTO_TCP), as serve_http makes: asyncio sets TCP_NODELAY.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, ws="none", log_config=None, access_log=False)
    print(f"toolseam.mcp: serving http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
