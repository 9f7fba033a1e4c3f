"""Upstream servers for the gateway's revision pairs (tests/test_mcp_gateway_revisions.py).

``python tests/mcp_fixtures/upstreams.py KIND BACKEND`` serves, over stdio on ``BACKEND``:

- ``toolseam-legacy``: the fixture registry (``registry.py``) through toolseam's
  ``create_server``, driven by the SDK's handshake-only loop (``mcp.server.runner.serve_loop``):
  a server that speaks MCP 2025-11-25 only, as servers written before 2026-07-28 do.
- ``sdk``: the SDK's own high-level server (``MCPServer``), as ``run_stdio_async`` serves it:
  both revisions, 2026-07-28 to a client that asks for it.
- ``sdk-legacy``: the same ``MCPServer`` in the SDK's handshake-only loop.

``sdk-http`` serves the ``MCPServer`` over streamable HTTP (asyncio: uvicorn) on a loopback
port it announces on stderr like ``toolseam.mcp`` does (``toolseam.mcp: serving URL``);
``sdk-http-legacy`` the same behind what a 2025-11-25 server answers a request whose
``MCP-Protocol-Version`` header it does not know: ``400 Bad Request``.

The SDK server's tool ``greet`` asks the client for a name through the SDK's own model
(``Resolve(Elicit(...))``): at 2026-07-28 an ``InputRequiredResult`` the client answers and
retries with, at 2025-11-25 an ``elicitation/create`` request during the call; ``where``
asks for the client's roots the same way (``Resolve(ListRoots)``). Its tool
``wait_for_abort`` appends to the record file (``RECORD_ENV``) what
its body saw: ``body-started``, then ``body-cancelled`` when the SDK cancels the handler
(a client's cancellation: ``notifications/cancelled`` or a closed request stream).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp import types
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import Elicit, ListRoots, MCPServer, Resolve
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.mcp_fixtures.registry import RECORD_ENV


def record(**event: object) -> None:
    path = os.environ.get(RECORD_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps(event) + "\n")


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("Who are you?", Name)


def ask_roots() -> ListRoots:
    return ListRoots()


def sdk_server() -> MCPServer:
    server = MCPServer("sdk-upstream", log_level="WARNING")

    @server.tool(name="greet", description="Ask the client for a name, then greet it.")
    def greet(name: Annotated[Name, Resolve(ask_name)]) -> str:
        return f"hello {name.name}"

    @server.tool(name="where", description="Ask the client for its roots, then list them.")
    def where(roots: Annotated[types.ListRootsResult, Resolve(ask_roots)]) -> str:
        return " ".join(f"{root.name}={root.uri}" for root in roots.roots)

    @server.tool(name="wait_for_abort", description="Run until the call is cancelled.")
    async def wait_for_abort(tag: str) -> str:
        record(event="body-started", tag=tag)
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            record(event="body-cancelled", tag=tag)
            raise
        return "never"  # pragma: no cover

    @server.tool(name="echo", description="Echo the text.")
    async def echo(text: str) -> str:
        return text

    return server


async def serve_handshake_only(server: Server[Any]) -> None:
    """Serve ``server`` on stdio in the SDK's handshake-only loop: MCP 2025-11-25 only."""
    async with server.lifespan(server) as state, stdio_server() as (read, write):
        await serve_loop(server, read, write, lifespan_state=state)


def handshake_only(app: Any) -> Any:
    """An ASGI app answering 400 to a request of a 2026 revision, as a 2025-11-25 server does."""

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers", ())) if scope["type"] == "http" else {}
        version = headers.get(b"mcp-protocol-version", b"").decode("latin-1")
        if version not in MODERN_PROTOCOL_VERSIONS:
            await app(scope, receive, send)
            return
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32600, "message": f"Unsupported protocol version: {version}"},
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return guarded


def serve_sdk_http(*, legacy: bool) -> None:
    import uvicorn

    app = sdk_server().streamable_http_app(json_response=False, stateless_http=False)
    if legacy:
        app = handshake_only(app)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, ws="none", log_config=None, access_log=False)
    print(f"toolseam.mcp: serving http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    uvicorn.Server(config).run(sockets=[sock])


def main() -> None:
    kind = sys.argv[1]
    backend = sys.argv[2] if len(sys.argv) > 2 else "asyncio"
    if kind in ("sdk-http", "sdk-http-legacy"):
        serve_sdk_http(legacy=kind == "sdk-http-legacy")
    elif kind == "sdk":
        anyio.run(sdk_server().run_stdio_async, backend=backend)
    elif kind == "sdk-legacy":
        lowlevel = sdk_server()._lowlevel_server  # pyright: ignore[reportPrivateUsage]
        anyio.run(serve_handshake_only, lowlevel, backend=backend)
    elif kind == "toolseam-legacy":
        from tests.mcp_fixtures.registry import registry

        from toolseam.mcp import create_server

        anyio.run(serve_handshake_only, create_server(registry), backend=backend)
    else:
        raise SystemExit(f"unknown kind: {kind}")


if __name__ == "__main__":
    main()
