"""Who may call `serve_http`: the attacker suite (authentication, Origin/Host, limits).

asyncio only where `serve_http` runs (uvicorn is asyncio code); `JwtTokens` on its own
(a JWKS fetched from a URL) is tested on asyncio and trio. Each test serves a
registry in this process on 127.0.0.1 (a free port) with the SDK's bearer middleware, and
attacks it with raw HTTP requests (``httpx2``, the SDK's own HTTP client) or the SDK's
clients of both protocol revisions (2025-11-25 sessions, 2026-07-28 stateless). The JWKS
and its keys are made here; nothing goes to the network. Every refused request is checked
for its status and for the body that must not have run.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import functools
import hashlib
import hmac
import ipaddress
import json
import ssl
import threading
import time
import urllib.parse
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from mcp import ClientSession, MCPError, types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from typing_extensions import TypedDict

from mcp_fixtures.support import GUARD
from toolseam import (
    AbortController,
    Principal,
    ToolExecutionInput,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
)
from toolseam.mcp import (
    ClientCredentials,
    HttpAuth,
    HttpLimits,
    JwtTokens,
    StaticTokens,
    mount_upstreams,
    serve_http,
)
from toolseam.mcp.__main__ import main
from toolseam.mcp._gateway import redact_userinfo

pytestmark = pytest.mark.filterwarnings(
    # The SDK's HTTP client leaves async generators of cancelled streams to the garbage
    # collector (the class of encode/httpx#3686).
    r"ignore:Async generator 'http(core)?x?2\.:ResourceWarning",
)

Era = Literal["2025", "2026"]
ERAS: list[Era] = ["2025", "2026"]
ISSUER = "https://as.example"
AUDIENCE = "https://mcp.example/mcp"
ALICE = "alice-secret-token-0123456789"
BOB = "bob-secret-token-9876543210"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT_2025: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "attacker", "version": "0"},
    },
}
CALL: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "touch", "arguments": {"note": "x"}},
}


@pytest.fixture
def anyio_backend() -> str:
    """asyncio only: uvicorn serves the registry."""
    return "asyncio"


class Keys:
    """A signing key, its JWKS (key id ``k1``), and a stranger's key with the same id."""

    def __init__(self) -> None:
        self.private = ec.generate_private_key(ec.SECP256R1())
        self.stranger = ec.generate_private_key(ec.SECP256R1())
        public = json.loads(ECAlgorithm.to_jwk(self.private.public_key()))
        self.jwks: dict[str, Any] = {"keys": [{**public, "kid": "k1", "alg": "ES256"}]}

    def token(self, *, key: Any = None, **claims: Any) -> str:
        now = int(time.time())
        body = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": "carol",
            "scope": "tools",
            "iat": now,
            "exp": now + 300,
            **claims,
        }
        body = {name: value for name, value in body.items() if value is not None}
        return jwt.encode(body, key or self.private, algorithm="ES256", headers={"kid": "k1"})


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys()


class TouchArgs(TypedDict):
    note: str


class Bodies:
    """A registry whose ``touch`` counts the bodies that ran, and ``hold`` waits."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.seen: list[str | None] = []
        self.callers: list[str | None] = []
        self.held = 0
        self.holding = anyio.Event()
        self.release = anyio.Event()
        self.registry = ToolRegistry()

        @define_tool(name="touch", description="Record that the body ran.")
        async def touch(args: TouchArgs, exec: ToolRunContext) -> str:
            self.ran.append(args["note"])
            access = get_access_token()
            self.seen.append(None if access is None else access.token)
            self.callers.append(None if access is None else access.subject)
            return "touched"

        @define_tool(name="hold", description="Wait until released.")
        async def hold(args: TouchArgs, exec: ToolRunContext) -> str:
            self.held += 1
            self.holding.set()
            await self.release.wait()
            return "held"

        self.registry.register(touch)
        self.registry.register(hold)


@asynccontextmanager
async def serving(registry: ToolRegistry, **settings: Any) -> AsyncGenerator[str]:
    async with anyio.create_task_group() as tg:
        url = await tg.start(
            functools.partial(serve_http, registry, port=0, handle_signals=False, **settings)
        )
        yield url
        tg.cancel_scope.cancel()


def static_auth(**settings: Any) -> HttpAuth:
    digest = hashlib.sha256(BOB.encode()).hexdigest()
    tokens = StaticTokens([(ALICE, "alice", ["tools"]), (f"sha256:{digest}", "bob", ["tools"])])
    return HttpAuth(verifier=tokens, authorization_servers=[ISSUER], **settings)


def jwt_auth(keys: Keys, **settings: Any) -> HttpAuth:
    verifier = JwtTokens(keys.jwks, issuer=ISSUER, audience=AUDIENCE)
    return HttpAuth(
        verifier=verifier, authorization_servers=[ISSUER], resource_url=AUDIENCE, **settings
    )


def era_headers(era: Era, token: str | None = None) -> dict[str, str]:
    headers = dict(HEADERS)
    if era == "2026":
        headers["mcp-protocol-version"] = "2026-07-28"
        headers["mcp-method"] = "tools/call"
        headers["mcp-name"] = "touch"
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return headers


CALL_2026: dict[str, Any] = {
    **CALL,
    "params": {
        **CALL["params"],
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    },
}


def request_for(era: Era) -> dict[str, Any]:
    """The first request of a client: an initialize (2025), a tools/call (2026)."""
    return INIT_2025 if era == "2025" else CALL_2026


@asynccontextmanager
async def http() -> AsyncGenerator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(timeout=GUARD) as client:
        yield client


@asynccontextmanager
async def connect(url: str, era: Era, token: str) -> AsyncGenerator[ClientSession]:
    """An SDK session of the given revision, presenting ``token``."""
    client = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=GUARD)
    async with client:
        transport = streamable_http_client(url, http_client=client)
        if era == "2025":
            async with transport as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                yield session
        else:
            async with Client(transport, cache=None) as sdk_client:
                yield sdk_client.session


def _texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


# -- authentication --------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("kind", ["static", "jwt"])
async def test_a_valid_token_calls_and_the_body_never_sees_it(
    keys: Keys, era: Era, kind: str
) -> None:
    bodies = Bodies()
    auth = static_auth() if kind == "static" else jwt_auth(keys)
    token = ALICE if kind == "static" else keys.token()
    with anyio.fail_after(GUARD):
        async with serving(bodies.registry, auth=auth) as url, connect(url, era, token) as s:
            result = await s.call_tool("touch", {"note": "ok"})
    assert _texts(result) == ["touched"]
    assert bodies.ran == ["ok"]
    assert bodies.seen == ["[redacted]"]  # the principal reaches the body, the token never


def _hs256_confusion(keys: Keys) -> str:
    """A token "signed" with HS256 using the public JWK as the secret (key confusion)."""
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": int(time.time()) + 300}
    signing = f"{_b64({'alg': 'HS256', 'typ': 'JWT', 'kid': 'k1'})}.{_b64(claims)}"
    secret = json.dumps(keys.jwks["keys"][0]).encode()
    mac = hmac.new(secret, signing.encode(), hashlib.sha256).digest()
    return f"{signing}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def _bad_tokens(keys: Keys) -> dict[str, tuple[str | None, str]]:
    """name: (Authorization header value or None, the www-authenticate error)."""
    now = int(time.time())
    none_token = f"{_b64({'alg': 'none', 'typ': 'JWT', 'kid': 'k1'})}."
    none_token += f"{_b64({'iss': ISSUER, 'aud': AUDIENCE, 'sub': 'x', 'exp': now + 300})}."
    return {
        "no token": (None, "invalid_token"),
        "not bearer": (f"Basic {base64.b64encode(b'a:b').decode()}", "invalid_token"),
        "malformed": ("Bearer not.a.jwt", "invalid_token"),
        "expired": (f"Bearer {keys.token(exp=now - 60)}", "invalid_token"),
        "not yet valid": (f"Bearer {keys.token(nbf=now + 600)}", "invalid_token"),
        "no exp": (f"Bearer {keys.token(exp=None)}", "invalid_token"),
        "wrong issuer": (f"Bearer {keys.token(iss='https://evil.example')}", "invalid_token"),
        "wrong audience": (
            f"Bearer {keys.token(aud='https://other.example/mcp')}",
            "invalid_token",
        ),
        "wrong signature": (f"Bearer {keys.token(key=keys.stranger)}", "invalid_token"),
        "alg none": (f"Bearer {none_token}", "invalid_token"),
        "hs256 with the public key": (f"Bearer {_hs256_confusion(keys)}", "invalid_token"),
        "a static token": (f"Bearer {ALICE}", "invalid_token"),
    }


@pytest.mark.parametrize("era", ERAS)
async def test_every_bad_jwt_gets_401_and_no_body_runs(keys: Keys, era: Era) -> None:
    bodies = Bodies()
    with anyio.fail_after(GUARD):
        async with serving(bodies.registry, auth=jwt_auth(keys)) as url, http() as client:
            answers: dict[str, httpx2.Response] = {}
            for name, (header, _) in _bad_tokens(keys).items():
                headers = era_headers(era)
                if header is not None:
                    headers["authorization"] = header
                answers[name] = await client.post(url, json=request_for(era), headers=headers)
            metadata = await client.get(
                url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
            )
    expected_metadata = "https://mcp.example/.well-known/oauth-protected-resource/mcp"
    for name, answer in answers.items():
        assert answer.status_code == 401, name
        challenge = answer.headers["www-authenticate"]
        assert challenge.startswith("Bearer "), name
        assert 'error="invalid_token"' in challenge, name
        assert f'resource_metadata="{expected_metadata}"' in challenge, name
    assert bodies.ran == []
    assert metadata.status_code == 200
    assert metadata.json() == {
        "resource": AUDIENCE,
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
    }


@pytest.mark.parametrize("era", ERAS)
async def test_static_tokens_refuse_strangers_and_the_query_string(era: Era) -> None:
    bodies = Bodies()
    with anyio.fail_after(GUARD):
        async with serving(bodies.registry, auth=static_auth()) as url, http() as client:
            wrong = await client.post(
                url, json=request_for(era), headers=era_headers(era, ALICE + "x")
            )
            hashed = await client.post(
                url,
                json=request_for(era),
                headers=era_headers(era, hashlib.sha256(BOB.encode()).hexdigest()),
            )
            in_query = await client.post(
                f"{url}?access_token={ALICE}", json=request_for(era), headers=era_headers(era)
            )
            bob = await client.post(url, json=request_for(era), headers=era_headers(era, BOB))
    assert [wrong.status_code, hashed.status_code, in_query.status_code] == [401, 401, 401]
    assert bob.status_code == 200  # a token given by its sha256 digest in the file
    assert bodies.ran == ([] if era == "2025" else ["x"])


@pytest.mark.parametrize("era", ERAS)
async def test_a_token_without_the_required_scope_gets_403(keys: Keys, era: Era) -> None:
    bodies = Bodies()
    auth = jwt_auth(keys, required_scopes=["tools:call"])
    with anyio.fail_after(GUARD):
        async with serving(bodies.registry, auth=auth) as url, http() as client:
            answer = await client.post(
                url, json=request_for(era), headers=era_headers(era, keys.token(scope="tools"))
            )
            allowed = await client.post(
                url,
                json=request_for(era),
                headers=era_headers(era, keys.token(scope="tools tools:call")),
            )
    assert answer.status_code == 403
    assert 'error="insufficient_scope"' in answer.headers["www-authenticate"]
    assert allowed.status_code == 200
    assert bodies.ran == ([] if era == "2025" else ["x"])


async def test_a_session_refuses_another_principals_token() -> None:
    bodies = Bodies()
    with anyio.fail_after(GUARD):
        async with serving(bodies.registry, auth=static_auth()) as url, http() as client:
            opened = await client.post(url, json=INIT_2025, headers=era_headers("2025", ALICE))
            session = {"mcp-session-id": opened.headers["mcp-session-id"]}
            stolen = await client.post(
                url, json=CALL, headers={**era_headers("2025", BOB), **session}
            )
    assert opened.status_code == 200
    assert stolen.status_code == 404  # as if the session did not exist
    assert bodies.ran == []


# -- who is calling reaches the pipeline: per-tool scopes (contract §14) ---------------------


class Scoped:
    """A registry with an open ``touch`` and a ``wipe`` that needs the ``admin`` scope."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.principals: list[Principal | None] = []
        self.published: list[tuple[Principal | None, ToolResult]] = []
        self.registry = ToolRegistry()

        @define_tool(name="touch", description="Record the caller.")
        async def touch(args: TouchArgs, exec: ToolRunContext) -> str:
            self.ran.append("touch")
            self.principals.append(exec.principal)
            return "touched"

        @define_tool(name="wipe", description="Wipe everything.", scopes=["admin"])
        async def wipe(args: TouchArgs, exec: ToolRunContext) -> str:
            self.ran.append("wipe")
            return "wiped"

        self.registry.register(touch)
        self.registry.register(wipe)
        self.registry.on_result(
            lambda exec, result: self.published.append((exec.principal, result))
        )


def scoped_auth() -> HttpAuth:
    tokens = StaticTokens([(ALICE, "alice", ["tools"]), (BOB, "bob", ["tools", "admin"])])
    return HttpAuth(verifier=tokens, authorization_servers=[ISSUER])


@pytest.mark.parametrize("era", ERAS)
async def test_tools_list_shows_a_principal_only_what_it_may_call(era: Era) -> None:
    scoped = Scoped()
    with anyio.fail_after(GUARD):
        async with (
            serving(scoped.registry, auth=scoped_auth()) as url,
            connect(url, era, ALICE) as alice,
            connect(url, era, BOB) as bob,
        ):
            seen_by_alice = [tool.name for tool in (await alice.list_tools()).tools]
            seen_by_bob = [tool.name for tool in (await bob.list_tools()).tools]
    assert seen_by_alice == ["touch"]
    assert seen_by_bob == ["touch", "wipe"]
    assert scoped.ran == []


@pytest.mark.parametrize("era", ERAS)
async def test_a_call_without_the_tools_scope_is_denied_and_no_body_runs(era: Era) -> None:
    """The attacker knows the hidden tool's name and calls it anyway."""
    scoped = Scoped()
    with anyio.fail_after(GUARD):
        async with (
            serving(scoped.registry, auth=scoped_auth()) as url,
            connect(url, era, ALICE) as alice,
        ):
            denied = await alice.call_tool("wipe", {"note": "x"})
            allowed = await alice.call_tool("touch", {"note": "x"})
    assert denied.is_error
    assert _texts(denied) == ["Error: tool call denied: the caller lacks the scope admin"]
    assert _texts(allowed) == ["touched"]
    assert scoped.ran == ["touch"]  # never "wipe"
    (who, result), _ = scoped.published
    assert who == Principal("alice", ["tools"])
    assert result.is_error


@pytest.mark.parametrize("era", ERAS)
async def test_a_principal_with_the_scope_calls_the_tool(era: Era) -> None:
    scoped = Scoped()
    with anyio.fail_after(GUARD):
        async with (
            serving(scoped.registry, auth=scoped_auth()) as url,
            connect(url, era, BOB) as bob,
        ):
            result = await bob.call_tool("wipe", {"note": "x"})
    assert _texts(result) == ["wiped"]
    assert scoped.ran == ["wipe"]


@pytest.mark.parametrize("era", ERAS)
async def test_the_body_sees_the_principal_of_the_token_never_the_token(
    keys: Keys, era: Era
) -> None:
    scoped = Scoped()
    token = keys.token(sub="dave", scope="tools admin", tenant="t1")
    with anyio.fail_after(GUARD):
        async with (
            serving(scoped.registry, auth=jwt_auth(keys)) as url,
            connect(url, era, token) as dave,
        ):
            await dave.call_tool("touch", {"note": "x"})
            listed = [tool.name for tool in (await dave.list_tools()).tools]
    [principal] = scoped.principals
    assert principal is not None
    assert principal.name == "dave"
    assert principal.scopes == frozenset({"tools", "admin"})
    assert principal.claims["tenant"] == "t1"
    assert principal.claims["iss"] == ISSUER
    assert token not in repr(dict(principal.claims))
    assert listed == ["touch", "wipe"]


async def test_without_authentication_there_is_no_principal() -> None:
    """Loopback without `HttpAuth`: the caller is trusted as an in-process one."""
    scoped = Scoped()
    with anyio.fail_after(GUARD):
        async with serving(scoped.registry) as url, connect(url, "2025", "ignored") as client:
            await client.call_tool("touch", {"note": "x"})
            listed = [tool.name for tool in (await client.list_tools()).tools]
    assert scoped.principals == [None]
    assert listed == ["touch", "wipe"]


# -- Origin and Host -------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_a_forged_origin_or_host_is_refused(era: Era) -> None:
    bodies = Bodies()
    settings: dict[str, Any] = {
        "auth": static_auth(),
        "allow_origins": ["https://app.example"],
        "allow_hosts": ["mcp.example"],
    }
    with anyio.fail_after(GUARD):
        async with serving(bodies.registry, **settings) as url, http() as client:

            async def post(**extra: str) -> int:
                headers = {**era_headers(era, ALICE), "host": "mcp.example", **extra}
                return (
                    await client.post(
                        url, json=CALL_2026 if era == "2026" else CALL, headers=headers
                    )
                ).status_code

            forged_origin = await post(origin="http://evil.example")
            forged_host = await post(host="evil.example")
            loopback_origin = await post(origin="http://127.0.0.1:1")
            allowed_origin = await post(origin="https://app.example")
            no_origin = await post()
    assert [forged_origin, forged_host] == [403, 421]
    # Past the gate: a 2026 call runs; a 2025 tools/call without a session is refused by
    # the transport (400), which the gate let through. A loopback origin passes because
    # the server listens on loopback.
    passed = 200 if era == "2026" else 400
    assert [loopback_origin, allowed_origin, no_origin] == [passed] * 3
    assert bodies.ran == (["x"] * 3 if era == "2026" else [])


@pytest.mark.parametrize(
    "command",
    [["serve", "mcp_fixtures.registry:registry"], ["gateway", "--upstream", "a=http://x/mcp"]],
)
def test_a_public_bind_without_auth_refuses_to_start(
    capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    status = main([*command, "--http", "0.0.0.0:0"])
    error = capsys.readouterr().err
    assert status == 2
    assert "refusing to serve on 0.0.0.0 without authentication" in error
    for flag in ("--auth-tokens", "--auth-jwks", "--insecure-no-auth"):
        assert flag in error


async def test_serve_http_refuses_a_public_bind_without_auth() -> None:
    with pytest.raises(
        ValueError, match=r"^refusing to serve on 0\.0\.0\.0 without authentication"
    ):
        await serve_http(ToolRegistry(), host="0.0.0.0", port=0)


def test_secrets_never_reach_an_error(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# comment\n{ALICE}\n")
    with pytest.raises(ValueError, match="line 2: expected TOKEN PRINCIPAL") as caught:
        StaticTokens.from_file(tokens)
    assert ALICE not in str(caught.value)
    assert (
        redact_userinfo("cannot reach https://u:pw@host/mcp") == "cannot reach https://***@host/mcp"
    )


# -- limits ----------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_an_oversized_body_gets_413(era: Era) -> None:
    bodies = Bodies()
    limits = HttpLimits(max_body_bytes=1024)
    big = {**CALL, "params": {**CALL_2026["params"], "arguments": {"note": "x" * 4096}}}
    with anyio.fail_after(GUARD):
        async with (
            serving(bodies.registry, auth=static_auth(), limits=limits) as url,
            http() as client,
        ):
            answer = await client.post(url, json=big, headers=era_headers(era, ALICE))
    assert answer.status_code == 413
    assert bodies.ran == []


async def test_a_session_flood_from_one_principal_leaves_room_for_another() -> None:
    bodies = Bodies()
    limits = HttpLimits(max_sessions=4, max_sessions_per_principal=2)
    with anyio.fail_after(GUARD):
        async with (
            serving(bodies.registry, auth=static_auth(), limits=limits) as url,
            http() as client,
        ):
            alice = [
                await client.post(url, json=INIT_2025, headers=era_headers("2025", ALICE))
                for _ in range(3)
            ]
            bob = [
                await client.post(url, json=INIT_2025, headers=era_headers("2025", BOB))
                for _ in range(3)
            ]
    assert [answer.status_code for answer in alice] == [200, 200, 429]
    assert [answer.status_code for answer in bob] == [200, 200, 429]
    assert "too many open sessions for this principal" in alice[2].json()["error"]["message"]


async def test_the_global_session_cap_answers_503() -> None:
    bodies = Bodies()
    limits = HttpLimits(max_sessions=2)
    with anyio.fail_after(GUARD):
        async with serving(bodies.registry, limits=limits) as url, http() as client:
            answers = [
                await client.post(url, json=INIT_2025, headers=era_headers("2025"))
                for _ in range(3)
            ]
    assert [answer.status_code for answer in answers] == [200, 200, 503]


async def test_an_idle_session_is_closed() -> None:
    bodies = Bodies()
    limits = HttpLimits(max_sessions=1, session_idle_timeout=0.2)
    statuses: list[int] = []
    with anyio.fail_after(GUARD):
        async with serving(bodies.registry, limits=limits) as url, http() as client:
            first = await client.post(url, json=INIT_2025, headers=era_headers("2025"))
            # The one session slot is taken until the idle session is closed.
            while not statuses or statuses[-1] != 200:
                answer = await client.post(url, json=INIT_2025, headers=era_headers("2025"))
                statuses.append(answer.status_code)
                await anyio.sleep(0.05)
            stale = await client.post(
                url,
                json={"jsonrpc": "2.0", "id": 9, "method": "ping"},
                headers={**era_headers("2025"), "mcp-session-id": first.headers["mcp-session-id"]},
            )
    assert first.status_code == 200
    assert set(statuses[:-1]) <= {503}
    assert stale.status_code == 404


@pytest.mark.parametrize("era", ERAS)
async def test_a_call_flood_from_one_principal_leaves_another_working(keys: Keys, era: Era) -> None:
    bodies = Bodies()
    limits = HttpLimits(max_calls_per_principal=2)
    alice = keys.token(sub="alice")
    bob = keys.token(sub="bob")
    refused: list[MCPError] = []
    result: types.CallToolResult | None = None
    with anyio.fail_after(GUARD):
        async with (
            serving(bodies.registry, auth=jwt_auth(keys), limits=limits) as url,
            connect(url, era, alice) as flood,
            connect(url, era, bob) as other,
            anyio.create_task_group() as tg,
        ):
            for _ in range(2):
                tg.start_soon(flood.call_tool, "hold", {"note": "h"})
            while bodies.held < 2:
                await bodies.holding.wait()
                bodies.holding = anyio.Event()
            try:
                await flood.call_tool("touch", {"note": "flood"})
            except MCPError as error:
                refused.append(error)
            result = await other.call_tool("touch", {"note": "bob"})
            bodies.release.set()
    assert [error.error.message for error in refused] == [
        "too many calls running for this principal (at most 2)"
    ]
    assert result is not None
    assert _texts(result) == ["touched"]
    assert bodies.ran == ["bob"]
    assert bodies.held == 2


class NameArgs(TypedDict):
    name: str


async def test_a_principal_cannot_take_every_suspended_slot(
    keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2026-07-28: a call suspended at its question counts against its principal's share
    of the server's suspended calls; beyond it, that principal's next question fails
    ``CAPABILITY_UNAVAILABLE`` (its body is told, not parked), and another principal's
    question is still asked."""
    monkeypatch.setattr("toolseam.mcp._rounds.MAX_SUSPENDED_PER_PRINCIPAL", 1)
    registry = ToolRegistry()
    asked: list[str] = []

    @define_tool(name="ask", description="Ask the user something.")
    async def ask(args: NameArgs, exec: ToolRunContext) -> str:
        asked.append(args["name"])
        answer = await exec.elicit("Sure?", {"type": "object", "properties": {}})
        return answer.action

    registry.register(ask)

    async def never(
        context: object, params: types.ElicitRequestParams
    ) -> types.ElicitResult:  # pragma: no cover - the test retries by hand
        raise AssertionError("the test answers the rounds itself")

    @asynccontextmanager
    async def client_of(url: str, token: str) -> AsyncGenerator[Client]:
        http_client = httpx2.AsyncClient(
            headers={"authorization": f"Bearer {token}"}, timeout=GUARD
        )
        async with (
            http_client,
            Client(
                streamable_http_client(url, http_client=http_client),
                cache=None,
                elicitation_callback=never,
            ) as client,
        ):
            yield client

    with anyio.fail_after(GUARD):
        async with (
            serving(registry, auth=jwt_auth(keys)) as url,
            client_of(url, keys.token(sub="alice")) as alice,
            client_of(url, keys.token(sub="bob")) as bob,
        ):
            first = await alice.session.call_tool("ask", {"name": "a1"}, allow_input_required=True)
            second = await alice.session.call_tool("ask", {"name": "a2"}, allow_input_required=True)
            other = await bob.session.call_tool("ask", {"name": "b1"}, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult)
    assert isinstance(other, types.InputRequiredResult)
    assert isinstance(second, types.CallToolResult)
    assert second.is_error
    assert _texts(second) == [
        'Error: tool "ask": elicitation is not available: this MCP server already holds 1 '
        "calls of this principal waiting for their client's answers"
    ]
    assert asked == ["a1", "a2", "b1"]


# -- keys from a URL, TLS, the command line --------------------------------------------------


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_jwks_url_is_fetched_once_and_kept(keys: Keys) -> None:
    fetched: list[str] = []
    document = json.dumps(keys.jwks).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.append(self.path)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
        verifier = JwtTokens(url, issuer=ISSUER, audience=AUDIENCE)
        with anyio.fail_after(GUARD):
            verified: dict[str, AccessToken | None] = {}

            async def verify(subject: str) -> None:
                verified[subject] = await verifier.verify_token(keys.token(sub=subject))

            async with anyio.create_task_group() as tg:  # both wait for the one fetch
                tg.start_soon(verify, "one")
                tg.start_soon(verify, "two")
            first, second = verified["one"], verified["two"]
            again = await verifier.verify_token(keys.token(sub="one", jti="x"))
            forged = await verifier.verify_token(keys.token(key=keys.stranger))
            unknown_kid = jwt.encode(
                {"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": int(time.time()) + 60},
                keys.private,
                algorithm="ES256",
                headers={"kid": "rotated"},
            )
            rotated = await verifier.verify_token(unknown_kid)
    finally:
        server.shutdown()
        server.server_close()
    assert [a.subject if a else None for a in (first, second, again)] == ["one", "two", "one"]
    assert (forged, rotated) == (None, None)
    assert fetched == ["/jwks.json"]  # an unknown key id does not refetch within 5 minutes


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_failed_jwks_fetch_is_tried_again_soon_not_after_the_refresh(
    keys: Keys, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The identity provider is down at the first fetch: the verifier refuses tokens, logs
    # it, and tries again after 1 s, then 2 s (not after the 300 s refresh period).
    answers = [503, 503, 200, 503]
    fetched: list[int] = []
    document = json.dumps(keys.jwks).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status = answers.pop(0)
            fetched.append(status)
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(document if status == 200 else b"{}")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    clock = [1000.0]
    monkeypatch.setattr("toolseam.mcp._auth._monotonic", lambda: clock[0])
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    seen: list[str | None] = []
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
        verifier = JwtTokens(url, issuer=ISSUER, audience=AUDIENCE)
        with anyio.fail_after(GUARD):
            for advance in (0.0, 0.5, 0.6, 1.9, 0.2, 500.0):
                clock[0] += advance
                access = await verifier.verify_token(keys.token(sub="alice"))
                seen.append(access.subject if access else None)
    finally:
        server.shutdown()
        server.server_close()
    # t=0 fails; t=0.5 waits; t=1.1 fails again (next in 2 s); t=3.0 waits; t=3.2 fetches;
    # 500 s later the copy is stale, its refresh fails, and the keys held still verify.
    assert fetched == [503, 503, 200, 503]
    assert seen == [None, None, None, None, "alice", "alice"]
    warnings = [r.getMessage() for r in caplog.records if "JWKS" in r.getMessage()]
    assert warnings == [
        "JwtTokens: fetching the JWKS failed (HTTPError); next try in 1 s",
        "JwtTokens: fetching the JWKS failed (HTTPError); next try in 2 s",
        "JwtTokens: fetching the JWKS failed (HTTPError); next try in 1 s",
    ]
    assert all(url not in w for w in warnings)


def _self_signed(tmp: Path) -> tuple[Path, Path, ssl.SSLContext]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    certfile, keyfile = tmp / "cert.pem", tmp / "key.pem"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.create_default_context(cafile=str(certfile))
    return certfile, keyfile, context


async def test_tls_serves_https(tmp_path: Path) -> None:
    bodies = Bodies()
    certfile, keyfile, context = _self_signed(tmp_path)
    settings: dict[str, Any] = {"auth": static_auth(), "certfile": certfile, "keyfile": keyfile}
    with anyio.fail_after(GUARD):
        async with (
            serving(bodies.registry, **settings) as url,
            httpx2.AsyncClient(verify=context, timeout=GUARD) as client,
        ):
            answer = await client.post(url, json=INIT_2025, headers=era_headers("2025", ALICE))
    assert url.startswith("https://127.0.0.1:")
    assert answer.status_code == 200


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--auth-jwks", "keys.json"], "--auth-jwks and --auth-issuer go together"),
        (["--auth-tokens", "/nonexistent/tokens"], "--auth-tokens: No such file or directory"),
        (["--http", "0.0.0.0:0", "--max-sessions", "0"], "expected a positive integer"),
        (["--certfile", "cert.pem"], "--certfile and --keyfile go together"),
    ],
)
def test_the_command_line_refuses_bad_settings(
    capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) if "--max-sessions" in extra else contextlib.nullcontext():
        status = main(["serve", "mcp_fixtures.registry:registry", "--http", "0", *extra])
        assert status == 2
    assert message in capsys.readouterr().err


# -- the gateway's own credentials upstream --------------------------------------------------


async def test_the_gateway_presents_its_own_credentials_never_the_clients() -> None:
    upstream = Bodies()
    only_alice = HttpAuth(verifier=StaticTokens([(ALICE, "alice", ["tools"])]))
    gateway_auth = HttpAuth(verifier=StaticTokens([(BOB, "bob", ["tools"])]))
    gateway = ToolRegistry()
    clients: list[str | None] = []
    gateway.add_guard(lambda exec: clients.append(exec.principal and exec.principal.name))
    headers = {"up": {"Authorization": f"Bearer {ALICE}"}}
    with anyio.fail_after(GUARD):
        async with (
            serving(upstream.registry, auth=only_alice) as upstream_url,
            mount_upstreams(gateway, {"up": upstream_url}, headers=headers) as mounted,
            serving(gateway, auth=gateway_auth) as gateway_url,
            connect(gateway_url, "2025", BOB) as session,
        ):
            result = await session.call_tool("up_touch", {"note": "via gateway"})
    assert mounted == {"up": ["up_touch", "up_hold"]}
    assert _texts(result) == ["touched"]
    assert upstream.callers == ["alice"]  # the gateway's credential, not its client's
    assert clients == ["bob"]  # the gateway's own stages see who its client is


class AuthorizationServer:
    """An OAuth authorization server on loopback: RFC 8414 metadata and a token endpoint.

    It grants ``client_credentials`` to one client (HTTP Basic), issuing opaque tokens that
    `verifier` then accepts, and records every token request (without its secret).
    """

    CLIENT = "gateway-client"
    SECRET = "gateway-secret-do-not-print-0123"

    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []
        self.issued: dict[str, AccessToken] = {}
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/.well-known/oauth-authorization-server":
                    self._answer(404, {"error": "not_found"})
                    return
                self._answer(
                    200,
                    {
                        "issuer": served.issuer,
                        "authorization_endpoint": f"{served.issuer}/authorize",
                        "token_endpoint": f"{served.issuer}/token",
                        "grant_types_supported": ["client_credentials"],
                        "scopes_supported": ["tools", "admin"],
                        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
                    },
                )

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                basic = base64.b64encode(f"{served.CLIENT}:{served.SECRET}".encode()).decode()
                served.requests.append({k: v for k, v in form.items() if "secret" not in k})
                if self.headers.get("authorization") != f"Basic {basic}":
                    self._answer(401, {"error": "invalid_client"})
                    return
                token = f"issued-{len(served.issued)}"
                served.issued[token] = AccessToken(
                    token=token, client_id=served.CLIENT, scopes=form.get("scope", "").split()
                )
                self._answer(
                    200, {"access_token": token, "token_type": "Bearer", "expires_in": 300}
                )

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"

    async def verify_token(self, token: str) -> AccessToken | None:
        """The upstream's `TokenVerifier`: only tokens this server issued."""
        return self.issued.get(token)

    def __enter__(self) -> AuthorizationServer:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.filterwarnings("error::DeprecationWarning")
async def test_the_gateway_gets_its_upstream_token_by_client_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The SDK's client-credentials provider, against a real token endpoint on loopback."""
    upstream = Scoped()
    gateway = ToolRegistry()
    with AuthorizationServer() as issuer:
        upstream_auth = HttpAuth(verifier=issuer, authorization_servers=[issuer.issuer])
        credentials = ClientCredentials(
            issuer=issuer.issuer,
            client_id=issuer.CLIENT,
            client_secret=issuer.SECRET,
        )
        with anyio.fail_after(GUARD):
            async with (
                serving(upstream.registry, auth=upstream_auth) as upstream_url,
                mount_upstreams(gateway, {"up": upstream_url}, oauth={"up": credentials}) as up,
            ):
                call = ToolExecutionInput(
                    call_id="c1",
                    name="up_wipe",
                    arguments={"note": "x"},
                    signal=AbortController().signal,
                )
                result = await gateway.execute(call)
    assert up == {"up": ["up_touch", "up_wipe"]}  # the token's scopes show it wipe
    assert not result.is_error
    assert upstream.ran == ["wipe"]
    [asked] = issuer.requests  # one token, kept for the connection
    assert asked == {
        "grant_type": "client_credentials",
        "resource": upstream_url,
        "scope": "tools admin",
    }
    assert issuer.SECRET not in repr(credentials)
    assert issuer.SECRET not in caplog.text


async def test_wrong_client_credentials_fail_the_mount_without_showing_the_secret() -> None:
    upstream = Scoped()
    with AuthorizationServer() as issuer:
        upstream_auth = HttpAuth(verifier=issuer, authorization_servers=[issuer.issuer])
        wrong = ClientCredentials(
            issuer=issuer.issuer, client_id=issuer.CLIENT, client_secret="not-the-secret-42"
        )
        with anyio.fail_after(GUARD):
            async with serving(upstream.registry, auth=upstream_auth) as upstream_url:
                with pytest.raises(ConnectionError) as caught:
                    async with mount_upstreams(
                        ToolRegistry(), {"up": upstream_url}, oauth={"up": wrong}
                    ):
                        pass
    assert "not-the-secret-42" not in str(caught.value)
    assert issuer.issued == {}
    assert upstream.ran == []


async def test_client_credentials_are_for_http_upstreams_only() -> None:
    credentials = ClientCredentials(
        issuer="https://as.example", client_id="c", client_secret="s-never-shown"
    )
    with pytest.raises(ValueError, match=r"^OAuth credentials for an unknown or non-HTTP"):
        async with mount_upstreams(
            ToolRegistry(), {"local": "python -m nothing"}, oauth={"local": credentials}
        ):
            pass
    with pytest.raises(ValueError, match=r"^the issuer must be an http\(s\) URL"):
        ClientCredentials(issuer="as.example", client_id="c", client_secret="s")
    assert "s-never-shown" not in repr(credentials)


async def test_an_upstream_refusing_the_gateway_shows_no_secret() -> None:
    upstream = Bodies()
    only_alice = HttpAuth(verifier=StaticTokens([(ALICE, "alice", ["tools"])]))
    with anyio.fail_after(GUARD):
        async with serving(upstream.registry, auth=only_alice) as url:
            with_userinfo = url.replace("http://", "http://gw:hunter2@")
            with pytest.raises(ConnectionError) as caught:
                async with mount_upstreams(
                    ToolRegistry(),
                    {"up": with_userinfo},
                    headers={"up": {"Authorization": f"Bearer {BOB}"}},
                ):
                    pass
    message = str(caught.value)
    assert "hunter2" not in message
    assert BOB not in message
    assert "http://***@127.0.0.1:" in message
    assert upstream.ran == []


def test_the_command_line_reads_upstream_secrets_from_env_or_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TOOLSEAM_TEST_MISSING", raising=False)
    base = ["gateway", "--upstream", "up=http://127.0.0.1:9/mcp"]
    status = main([*base, "--upstream-bearer", "up=env:TOOLSEAM_TEST_MISSING"])
    assert status == 2
    assert "environment variable TOOLSEAM_TEST_MISSING is not set" in capsys.readouterr().err
    status = main([*base, "--upstream-bearer", "other=env:X"])
    assert status == 2
    assert "no --upstream named 'other'" in capsys.readouterr().err
    for malformed in ("up=env:X", "up=client=env:X", "other=https://as.example=c=env:X"):
        status = main([*base, "--upstream-client-credentials", malformed])
        assert status == 2
        assert "expected NAME=ISSUER=CLIENT_ID=SOURCE" in capsys.readouterr().err
    stdio = ["gateway", "--upstream", "up=python -m server"]
    status = main([*stdio, "--upstream-client-credentials", "up=https://as.example=c=env:X"])
    assert status == 2
    assert "an http(s) --upstream" in capsys.readouterr().err
    monkeypatch.setenv("TOOLSEAM_TEST_CLIENT_SECRET", "client-secret-never-shown")
    status = main(
        [
            *base,
            "--upstream-client-credentials",
            "up=http://127.0.0.1:9=gateway=env:TOOLSEAM_TEST_CLIENT_SECRET",
        ]
    )
    assert status == 1  # nothing listens on port 9: the mount fails, plainly
    assert "client-secret-never-shown" not in capsys.readouterr().err
