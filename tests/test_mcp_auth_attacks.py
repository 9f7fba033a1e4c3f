"""Attacks on `serve_http`'s authentication and limits found by an adversarial pass.

Each test is one way through that once worked. The tests that serve over HTTP run on
asyncio only (``serve_http`` is served by uvicorn, which is asyncio code); the verifiers
and the command line on their own need no event loop, or run on both backends.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

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
from toolseam.mcp import HttpLimits, StaticTokens

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


# -- the static token file ------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["literal", "digest"])
def test_one_token_for_two_principals_is_refused(tmp_path: Path, spelling: str) -> None:
    """A token listed twice (or once as itself and once as its digest) named whichever
    principal came last; the file is refused instead, by line, never showing the token."""
    again = (
        ALICE if spelling == "literal" else f"sha256:{hashlib.sha256(ALICE.encode()).hexdigest()}"
    )
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{ALICE} alice read\n\n{again} mallory admin\n")
    with pytest.raises(ValueError, match=r"line 3: the same token as line 1$") as caught:
        StaticTokens.from_file(tokens)
    assert ALICE not in str(caught.value)
    with pytest.raises(ValueError, match=r"^entries 1 and 2 have the same token$"):
        StaticTokens([(ALICE, "alice", ["read"]), (again, "mallory", ["admin"])])


async def test_a_digest_prefix_in_capitals_is_still_a_digest(tmp_path: Path) -> None:
    """``SHA256:HEX`` was taken as a literal token: the published digest itself let
    anyone in, and the token it is the digest of did not."""
    digest = hashlib.sha256(ALICE.encode()).hexdigest()
    tokens = tmp_path / "tokens"
    tokens.write_text(f"SHA256:{digest.upper()} alice read\n")
    verifier = StaticTokens.from_file(tokens)
    assert await verifier.verify_token(f"SHA256:{digest.upper()}") is None
    found = await verifier.verify_token(ALICE)
    assert found is not None
    assert found.subject == "alice"


async def test_a_comment_after_the_scopes_grants_none_of_its_words(tmp_path: Path) -> None:
    """``TOKEN alice read # admin revoked`` granted the scopes ``#``, ``admin`` and
    ``revoked``: a ``#`` starts a comment anywhere on the line."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{ALICE} alice read # admin revoked\n")
    found = await StaticTokens.from_file(tokens).verify_token(ALICE)
    assert found is not None
    assert found.scopes == ["read"]
