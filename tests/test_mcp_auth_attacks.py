"""Attacks on `serve_http`'s authentication and limits found by an adversarial pass.

Each test is one way through that once worked. The tests that serve over HTTP run on
asyncio only (``serve_http`` is served by uvicorn, which is asyncio code); the verifiers
and the command line on their own need no event loop, or run on both backends.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import anyio
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from mcp import ClientSession, MCPError, types
from mcp.client import Client
from mcp.client.extension import ClientExtension
from mcp.client.streamable_http import streamable_http_client
from pydantic import TypeAdapter
from typing_extensions import TypedDict

from mcp_fixtures.support import first_error
from test_mcp_auth import (
    ALICE,
    AUDIENCE,
    BOB,
    GUARD,
    INIT_2025,
    ISSUER,
    Bodies,
    era_headers,
    http,
    serving,
    static_auth,
)
from toolseam import (
    AbortController,
    ToolExecutionInput,
    ToolRegistry,
    ToolRunContext,
    define_tool,
)
from toolseam.mcp import (
    ClientCredentials,
    HttpLimits,
    JwtTokens,
    StaticTokens,
    mount_upstreams,
)
from toolseam.mcp.__main__ import main
from toolseam.mcp._gateway import redact_userinfo

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


# -- JWT: what the verifier itself refuses, whatever PyJWT version is installed ------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _claims() -> dict[str, Any]:
    now = int(time.time())
    return {"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory", "scope": "admin", "exp": now + 300}


async def test_a_symmetric_key_in_the_jwks_never_verifies_a_token() -> None:
    """A JWKS that also holds an ``oct`` key (its secret then as public as the JWKS): a
    token whose header says ``ES256`` but that is HMAC-signed with that key. PyJWT 2.10
    (the oldest toolseam and the MCP SDK accept) verifies with the key's own algorithm,
    whatever the header says; toolseam takes only asymmetric keys, and only for the
    algorithm the header names."""
    secret = b"published-with-the-jwks-0123456789"
    jwks = {"keys": [{"kty": "oct", "k": _b64(secret), "kid": "h"}]}
    verifier = JwtTokens(jwks, issuer=ISSUER, audience=AUDIENCE)
    signing = f"{_b64(json.dumps({'alg': 'ES256', 'kid': 'h'}).encode())}."
    signing += _b64(json.dumps(_claims()).encode())
    mac = hmac.new(secret, signing.encode(), hashlib.sha256).digest()
    assert await verifier.verify_token(f"{signing}.{_b64(mac)}") is None


async def test_a_token_with_a_critical_extension_is_refused() -> None:
    """RFC 7515: a ``crit`` extension the verifier does not understand refuses the token
    (PyJWT 2.10 ignores ``crit``); toolseam understands none."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = json.loads(ECAlgorithm.to_jwk(key.public_key()))
    verifier = JwtTokens({"keys": [{**public, "kid": "k1"}]}, issuer=ISSUER, audience=AUDIENCE)
    headers = {"kid": "k1", "crit": ["exp-only-if-online"], "exp-only-if-online": True}
    token = jwt.encode(_claims(), key, algorithm="ES256", headers=headers)
    assert await verifier.verify_token(token) is None
    plain = jwt.encode(_claims(), key, algorithm="ES256", headers={"kid": "k1"})
    assert await verifier.verify_token(plain) is not None


@pytest.mark.parametrize(
    "url", ["http://as.example/jwks.json", "http://10.0.0.5:8080/jwks", "HTTP://as.example/jwks"]
)
def test_a_jwks_url_over_plain_http_off_loopback_is_refused(url: str) -> None:
    """The JWKS decides who gets in: fetched over plain HTTP from another machine, anyone
    on the path could hand the server their own key and then sign any token."""
    with pytest.raises(ValueError, match=r"^a JWKS URL must be https"):
        JwtTokens(url, issuer=ISSUER, audience=AUDIENCE)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/jwks.json",
        "http://localhost:9/jwks.json",
        "http://[::1]:9/jwks.json",
        "https://as.example/jwks.json",
    ],
)
def test_a_jwks_url_over_https_or_on_loopback_is_taken(url: str) -> None:
    JwtTokens(url, issuer=ISSUER, audience=AUDIENCE)  # fetched on first use


async def test_a_jwks_redirect_is_held_to_the_same_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """A JWKS URL that redirects: the target must be fit to fetch keys from as well (urllib
    follows any redirect, https to plain http included). Here "loopback" is narrowed to
    ``localhost`` so that a second server on 127.0.0.1 stands for another machine."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = json.loads(ECAlgorithm.to_jwk(key.public_key()))
    document = json.dumps({"keys": [{**public, "kid": "k1"}]}).encode()

    class Keys(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, format: str, *args: object) -> None:
            pass

    elsewhere = ThreadingHTTPServer(("127.0.0.1", 0), Keys)
    target = f"http://127.0.0.1:{elsewhere.server_port}/jwks.json"

    class Redirect(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("location", target)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    here = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    for server in (elsewhere, here):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr("toolseam.mcp._auth._loopback", lambda host: host == "localhost")
    try:
        url = f"http://localhost:{here.server_port}/jwks.json"
        verifier = JwtTokens(url, issuer=ISSUER, audience=AUDIENCE)
        token = jwt.encode(_claims(), key, algorithm="ES256", headers={"kid": "k1"})
        with anyio.fail_after(GUARD):
            verified = await verifier.verify_token(token)
    finally:
        for server in (elsewhere, here):
            server.shutdown()
            server.server_close()
    assert verified is None


def test_the_command_line_refuses_a_plain_http_jwks_url(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        [
            *("serve", "mcp_fixtures.registry:registry", "--http", "0"),
            *("--auth-jwks", "http://as.example/jwks.json", "--auth-issuer", ISSUER),
        ]
    )
    assert status == 2
    assert "a JWKS URL must be https" in capsys.readouterr().err


# -- the command line never echoes a secret given where a reference was expected -----------

SECRET = "sk-live-do-not-print-0123456789"


@pytest.mark.parametrize(
    "extra",
    [
        ["--upstream-bearer", f"up={SECRET}"],
        ["--upstream-bearer", f"up=Bearer:{SECRET}"],
        ["--upstream-bearer", SECRET],
        ["--upstream-header", f"up=X-Api-Key={SECRET}"],
        ["--upstream-client-credentials", f"up=https://as.example=client={SECRET}"],
    ],
)
def test_a_secret_passed_instead_of_its_source_is_not_printed(
    capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    """``--upstream-bearer up=TOKEN`` (the token itself, not ``env:VAR``) was refused
    with the token in the message, on the terminal and in whatever keeps its output."""
    try:
        status = main(["gateway", "--upstream", "up=http://127.0.0.1:1/mcp", *extra])
    except SystemExit as exit:
        status = exit.code
    assert status == 2
    printed = capsys.readouterr()
    assert "expected" in printed.err
    assert SECRET not in printed.err + printed.out


def test_an_upstream_url_without_a_name_is_not_printed_with_its_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["gateway", "--upstream", f"https://user:{SECRET}@mcp.example/mcp"])
    error = capsys.readouterr().err
    assert "expected NAME=URL_OR_COMMAND, got 'https://***@mcp.example/mcp'" in error
    assert SECRET not in error


# -- an upstream URL's password: sent, never logged or shown -------------------------------


def test_a_password_with_an_at_sign_is_redacted_whole() -> None:
    """URL parsers split userinfo at the *last* ``@`` before the host; the redaction cut
    at the first and printed the rest of the password."""
    shown = redact_userinfo("cannot reach http://gw:p@ss-hunter2@127.0.0.1:9/mcp, giving up")
    assert shown == "cannot reach http://***@127.0.0.1:9/mcp, giving up"
    assert redact_userinfo("https://host/path?who=a@b") == "https://host/path?who=a@b"


async def test_an_upstream_urls_password_reaches_no_log_and_still_authenticates(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With the password in the URL, the HTTP client logged every request's URL, password
    and all, at INFO. The gateway sends it as HTTP Basic with a URL that has none."""
    seen: list[str | None] = []

    class Refusing(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(self.headers.get("authorization"))
            self.send_response(401)
            self.send_header("content-length", "0")
            self.end_headers()

        do_GET = do_POST

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://gw:p%40ss-hunter2@127.0.0.1:{server.server_port}/mcp"
    try:
        with (
            caplog.at_level(logging.DEBUG),
            anyio.fail_after(GUARD),
            pytest.raises(ConnectionError) as caught,
        ):
            async with mount_upstreams(ToolRegistry(), {"up": url}):
                pass
    finally:
        server.shutdown()
        server.server_close()
    assert seen
    assert seen[0] == f"Basic {base64.b64encode(b'gw:p@ss-hunter2').decode()}"
    assert "hunter2" not in caplog.text
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize("issuer", ["http://as.example", "HTTP://10.0.0.5:8080"])
def test_client_credentials_are_never_sent_over_plain_http_off_loopback(issuer: str) -> None:
    """The secret goes to the issuer's token endpoint, found in metadata fetched from the
    issuer: over plain HTTP anyone on the path reads it, or names their own endpoint.
    OAuth 2.1 requires TLS but on loopback."""
    with pytest.raises(ValueError, match=r"^the issuer must be https") as caught:
        ClientCredentials(issuer=issuer, client_id="c", client_secret=SECRET)
    assert SECRET not in str(caught.value)
    for fine in ("https://as.example", "http://127.0.0.1:9", "http://localhost:9"):
        ClientCredentials(issuer=fine, client_id="c", client_secret=SECRET)


# -- tasks: one principal cannot take every task slot --------------------------------------


class TasksExtension(ClientExtension):
    identifier = "io.modelcontextprotocol/tasks"


async def _create_task(url: str, token: str) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {token}"}
    with first_error():
        return await _send_task_call(url, headers)


async def _send_task_call(url: str, headers: dict[str, str]) -> dict[str, Any]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=GUARD) as http_client,
        Client(
            streamable_http_client(url, http_client=http_client),
            cache=None,
            extensions=[TasksExtension()],
        ) as client,
    ):
        answer: dict[str, Any] = await client.session.send_request(
            types.Request[Any, Any](
                method="tools/call", params={"name": "hold", "arguments": {"note": "t"}}
            ),
            cast("Any", TypeAdapter(dict[str, Any])),
        )
        return answer


@asyncio_only
async def test_one_principal_cannot_take_every_task_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """A task runs on after its ``tools/call`` answered, so the per-principal call cap
    never counts it: one principal could start tasks until the server's ``max_tasks`` was
    reached, and every other principal's task was refused. Each principal gets at most
    ``MAX_TASKS_PER_PRINCIPAL`` unfinished tasks."""
    monkeypatch.setattr("toolseam.mcp._tasks.MAX_TASKS_PER_PRINCIPAL", 2)
    bodies = Bodies()
    refused: list[MCPError] = []
    with anyio.fail_after(GUARD):
        async with serving(
            bodies.registry, auth=static_auth(), tasks={"hold": "optional"}, max_tasks=8
        ) as url:
            try:
                alice = [await _create_task(url, ALICE) for _ in range(2)]
                try:
                    await _create_task(url, ALICE)
                except MCPError as error:
                    refused.append(error)
                bob = await _create_task(url, BOB)
            finally:
                bodies.release.set()  # the tasks' bodies end, so the server can stop
    assert [task["resultType"] for task in [*alice, bob]] == ["task"] * 3
    assert [error.error.message for error in refused] == [
        "this MCP server already runs 2 tasks of this principal, its share; the call was not "
        "run: retry once one has finished"
    ]
    assert bodies.held == 3


# -- MCP 2026-07-28: a requestState is its caller's, for its call only ----------------------


@asyncio_only
async def test_a_request_state_serves_only_its_principal_and_its_call() -> None:
    """Held already (the state binds a keyed digest of the principal, the tool and the
    arguments); kept here over real HTTP: another principal's retry with a state, or the
    same principal's for another tool or other arguments, is refused and does not use the
    state up; the owner's retry then resumes the one body, and a replay is refused."""
    registry = ToolRegistry()
    effects: list[str] = []

    class Who(TypedDict):
        name: str

    @define_tool(name="order", description="Charges, asks whose name, ships.")
    async def order(args: dict[str, Any], exec: ToolRunContext) -> str:
        effects.append("charged")
        await exec.elicit("Whose name?", Who, key="who")
        effects.append("shipped")
        return "ordered"

    @define_tool(name="other", description="Another tool.")
    async def other(args: dict[str, Any], exec: ToolRunContext) -> str:
        effects.append("other")
        return "other"

    registry.register(order)
    registry.register(other)
    answers = {"who": types.ElicitResult(action="accept", content={"name": "Ada"})}
    refusals: list[str] = []

    async def retry(session: ClientSession, state: str, name: str, **arguments: Any) -> Any:
        return await session.call_tool(
            name,
            arguments,
            input_responses=answers,
            request_state=state,
            allow_input_required=True,
        )

    with first_error(), anyio.fail_after(GUARD):
        async with (
            serving(registry, auth=static_auth()) as url,
            _asking(url, ALICE) as alice,
            _asking(url, BOB) as bob,
        ):
            first = await alice.call_tool("order", {}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            state = first.request_state
            assert state is not None
            for session, name, arguments in [
                (bob, "order", {}),
                (alice, "other", {}),
                (alice, "order", {"extra": 1}),
            ]:
                try:
                    await retry(session, state, name, **arguments)
                except MCPError as error:
                    refusals.append(error.error.message)
            final = await retry(alice, state, "order")
            try:
                await retry(alice, state, "order")
            except MCPError as error:
                refusals.append(error.error.message)
    assert isinstance(final, types.CallToolResult)
    assert not final.is_error
    assert effects == ["charged", "shipped"]
    another_call = (
        "requestState refused: it was issued for another tool call (the tool, its arguments "
        "or the caller differ)"
    )
    assert refusals[:3] == [another_call] * 3
    assert refusals[3].startswith("requestState refused: it was already answered")


@asynccontextmanager
async def _asking(url: str, token: str) -> AsyncGenerator[ClientSession]:
    """A 2026-07-28 SDK client presenting ``token`` that can be asked (elicitation)."""

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    headers = {"authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=GUARD) as http_client,
        Client(
            streamable_http_client(url, http_client=http_client),
            cache=None,
            elicitation_callback=elicit,
        ) as client,
    ):
        yield client.session


@asyncio_only
async def test_an_upstream_urls_password_reaches_no_log_on_its_calls(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The same over a connection that works: the calls through the gateway (at
    2026-07-28 over HTTP, its lean path) log no URL with the password in it."""
    bodies = Bodies()
    gateway = ToolRegistry()
    with caplog.at_level(logging.DEBUG), anyio.fail_after(GUARD):
        async with serving(bodies.registry) as url:
            with_password = url.replace("http://", "http://gw:p%40ss-hunter2@")
            async with mount_upstreams(gateway, {"up": with_password}):
                result = await gateway.execute(
                    ToolExecutionInput(
                        call_id="c1",
                        name="up_touch",
                        arguments={"note": "x"},
                        signal=AbortController().signal,
                    )
                )
    assert not result.is_error
    assert bodies.ran == ["x"]
    assert "127.0.0.1" in caplog.text  # the requests were logged, without the password
    assert "hunter2" not in caplog.text
