"""An SDK client process that calls ``wait_for_abort`` over HTTP and waits to be killed.

``python http_client.py URL ERA TAG BACKEND``: ERA ``2025`` is a ``ClientSession`` with the
``initialize`` handshake, ``2026`` the SDK's ``Client`` (``server/discover``).
"""

from __future__ import annotations

import sys

import anyio
from mcp import ClientSession
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, era: str, tag: str) -> None:
    arguments = {"tag": tag}
    if era == "2025":
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            await s.call_tool("wait_for_abort", arguments)
    else:
        async with Client(url, cache=None) as client:
            await client.call_tool("wait_for_abort", arguments)


if __name__ == "__main__":
    url, era, tag, backend = sys.argv[1:]
    anyio.run(main, url, era, tag, backend=backend)
