"""Attacks on `serve_http`'s authentication and limits found by an adversarial pass.

Each test is one way through that once worked. The tests that serve over HTTP run on
asyncio only (``serve_http`` is served by uvicorn, which is asyncio code); the verifiers
and the command line on their own need no event loop, or run on both backends.
"""

from __future__ import annotations

import pytest

from test_mcp_auth import (
    ALICE,
    INIT_2025,
    Bodies,
    era_headers,
    http,
    serving,
    static_auth,
)
from toolseam.mcp import HttpLimits

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(core)?x?2\.:ResourceWarning",
)

asyncio_only = pytest.mark.parametrize("anyio_backend", ["asyncio"])


@asyncio_only
async def test_a_second_protocol_version_header_does_not_dodge_the_session_cap() -> None:
    """The SDK routes a request by its *first* ``MCP-Protocol-Version`` header; the
    per-principal session cap must read the same one, or a later 2026 value hides an
    ``initialize`` that still opens a 2025 session."""
    bodies = Bodies()
    limits = HttpLimits(max_sessions=10, max_sessions_per_principal=2)
    smuggled = [
        *era_headers("2025", ALICE).items(),
        ("mcp-protocol-version", "2025-11-25"),
        ("mcp-protocol-version", "2026-07-28"),
    ]
    async with (
        serving(bodies.registry, auth=static_auth(), limits=limits) as url,
        http() as client,
    ):
        answers = [await client.post(url, json=INIT_2025, headers=smuggled) for _ in range(3)]
    assert [answer.status_code for answer in answers] == [200, 200, 429]
    assert "mcp-session-id" not in answers[2].headers
