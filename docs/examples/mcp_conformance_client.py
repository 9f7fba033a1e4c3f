"""The client the official MCP conformance suite launches: ``nox -s mcp_conformance``.

The suite's ``client`` scenarios (npm ``@modelcontextprotocol/conformance``) each start a
mock MCP server, then run this program with the server's URL as its last argument, the
scenario's name in ``MCP_CONFORMANCE_SCENARIO``, the protocol revision to speak in
``MCP_CONFORMANCE_PROTOCOL_VERSION`` and, for some scenarios, the calls to make in
``MCP_CONFORMANCE_CONTEXT``; they check what reaches the mock server. Run one by hand::

    npx @modelcontextprotocol/conformance@0.2.0-alpha.12 client --scenario tools_call \\
        --spec-version 2026-07-28 --command "python docs/examples/mcp_conformance_client.py"

It is toolseam's MCP client at work: the SDK's ``Client`` connects over streamable HTTP
(the initialize handshake up to 2025-11-25; on 2026-07-28, ``server/discover`` and then
stateless requests),
`register_mcp_tools` registers the server's tools in a `ToolRegistry`, and every call goes
through ``registry.execute`` like any other tool's. The server's elicitation requests reach
the call's ``exec.elicit``: the `ToolHost` below answers them with the form's defaults.

The ``auth/*`` scenarios put the mock server behind an OAuth authorization server: the
client gets its token through the SDK's ``OAuthClientProvider`` (an ``httpx2.Auth``) given to
the streamable HTTP transport, which discovers the server's RFC 9728 metadata and the
authorization server's, registers (dynamically, by a client ID metadata document URL, or with
the pre-registered credentials of the scenario's context), runs the authorization code flow
with PKCE and presents the token; ``scripted_authorization`` plays the user's browser. The
tools are then registered and called as in any other scenario: authentication lives in the
transport, below toolseam.

Run without a URL (``python docs/examples/mcp_conformance_client.py``), it starts the
example server next to it (``mcp_conformance_server.py``) over stdio and calls one of its
tools at each revision.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp import StdioServerParameters
from mcp.client import Client, Transport
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import AnyUrl

from toolseam import (
    AbortController,
    AbortSignal,
    ElicitationRequest,
    Elicited,
    JsonValue,
    ToolExecution,
    ToolExecutionInput,
    ToolHost,
    ToolRegistry,
    ToolResult,
)
from toolseam.mcp import McpToolDefinition, SessionCallbacks, register_mcp_tools

# Scenarios whose mock server answers tools/list only: list, call nothing.
LIST_ONLY: Final = frozenset({"json-schema-ref-no-deref", "request-metadata"})
# The arguments a scenario's tools expect when its context names none.
DEFAULT_ARGUMENTS: Final[Mapping[str, JsonValue]] = {"a": 2, "b": 3}


async def answer_with_defaults(
    exec: ToolExecution, request: ElicitationRequest, signal: AbortSignal
) -> Elicited[Any]:
    """A user who accepts every form as the server filled it in (SEP-1034 defaults)."""
    properties = request.requested_schema.get("properties")
    content: dict[str, JsonValue] = {}
    if isinstance(properties, Mapping):
        for name, field in properties.items():
            if isinstance(field, Mapping) and "default" in field:
                content[name] = field["default"]
    return Elicited("accept", content)


HOST: Final = ToolHost(elicit=answer_with_defaults)

# Where the authorization server sends the user back; the scripted browser below reads the
# code off the redirect, so nothing listens there.
REDIRECT_URI: Final = "http://localhost:3000/callback"
# The client ID metadata document (SEP-991) the suite expects a client to name.
CLIENT_METADATA_URL: Final = "https://conformance-test.local/client-metadata.json"
# The MCP transports' own timeouts (httpx2's 5 s default is short for a loaded machine).
HTTP_TIMEOUT: Final = httpx2.Timeout(30.0, read=300.0)


class MemoryTokens:
    """The SDK's ``TokenStorage``, in memory: tokens and the client's registration."""

    def __init__(self, client: OAuthClientInformationFull | None = None) -> None:
        self._tokens: OAuthToken | None = None
        self._client = client

    async def get_tokens(self) -> OAuthToken | None:
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client = client_info


class ScriptedAuthorization:
    """A user's browser that approves at once: it opens the authorization URL, does not
    follow the redirect, and hands the code, state and issuer it carries to the provider."""

    def __init__(self) -> None:
        self._result: AuthorizationCodeResult | None = None

    async def open(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT) as http:
            response = await http.get(authorization_url)
        location = response.headers.get("location")
        if not response.is_redirect or location is None:
            raise RuntimeError(f"the authorization server answered {response.status_code}")
        query = parse_qs(urlsplit(location).query)
        code, state, iss = (query.get(key, [None])[0] for key in ("code", "state", "iss"))
        if code is None:
            raise RuntimeError("the authorization server redirected without a code")
        self._result = AuthorizationCodeResult(code=code, state=state, iss=iss)

    async def callback(self) -> AuthorizationCodeResult:
        result, self._result = self._result, None
        if result is None:
            raise RuntimeError("no authorization response was received")
        return result


def oauth_provider(url: str, context: Mapping[str, Any]) -> OAuthClientProvider:
    """The SDK's authorization-code provider for an ``auth/*`` scenario's server."""
    metadata = OAuthClientMetadata(
        client_name="toolseam-conformance-client",
        redirect_uris=[AnyUrl(REDIRECT_URI)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        application_type="native",
    )
    registered = None
    if "client_id" in context and "client_secret" in context:  # pre-registered (no DCR)
        registered = OAuthClientInformationFull(
            client_id=context["client_id"],
            client_secret=context["client_secret"],
            token_endpoint_auth_method="client_secret_basic",
            redirect_uris=[AnyUrl(REDIRECT_URI)],
            issuer=context.get("issuer"),
        )
    browser = ScriptedAuthorization()
    return OAuthClientProvider(
        server_url=url,
        client_metadata=metadata,
        storage=MemoryTokens(registered),
        redirect_handler=browser.open,
        callback_handler=browser.callback,
        client_metadata_url=CLIENT_METADATA_URL,
    )


async def call(registry: ToolRegistry, name: str, arguments: JsonValue) -> ToolResult:
    """Call one tool through the registry and print its outcome."""
    call_input = ToolExecutionInput(
        call_id=f"call-{name}",
        name=name,
        arguments=arguments,
        signal=AbortController().signal,
        host=HOST,
    )
    result = await registry.execute(call_input)
    outcome = "error" if result.is_error else "ok"
    print(f"{name}: {outcome}", file=sys.stderr)
    return result


def planned_calls(
    scenario: str, registry: ToolRegistry, context: Mapping[str, Any]
) -> list[tuple[str, JsonValue]]:
    """The calls a scenario expects, in order."""
    if scenario in LIST_ONLY:
        return []
    listed = [schema.name for schema in registry.schemas()]
    given: list[dict[str, Any]] | None = context.get("toolCalls")
    if given is not None:
        return [(entry["name"], entry.get("arguments", {})) for entry in given]
    if scenario == "json-schema-2020-12-preservation":
        # Send the focal tool's inputSchema back, as the client received it.
        focal = registry.get("json_schema_2020_12_tool")
        assert isinstance(focal, McpToolDefinition)
        return [("json_schema_echo", {"schema": focal.parameters})]
    if scenario in ("tools_call", "initialize") or scenario.startswith("auth/"):
        return [(name, DEFAULT_ARGUMENTS) for name in listed[:1]]
    return [(name, {}) for name in listed]


async def main(url: str) -> None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "tools_call")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "2025-11-25")
    context: Mapping[str, Any] = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    # Earlier revisions shake hands first (initialize); on 2026-07-28 the client asks the
    # server which revisions it speaks (server/discover) and then sends stateless requests.
    mode = "auto" if version in MODERN_PROTOCOL_VERSIONS else "legacy"
    callbacks = SessionCallbacks()
    registry = ToolRegistry()
    async with AsyncExitStack() as stack:
        server: str | Transport = url
        if scenario.startswith("auth/"):
            # The token is the transport's business: an httpx2.Auth on its HTTP client.
            auth = oauth_provider(url, context)
            http = await stack.enter_async_context(
                httpx2.AsyncClient(auth=auth, timeout=HTTP_TIMEOUT)
            )
            server = streamable_http_client(url, http_client=http)
        client = await stack.enter_async_context(
            Client(server, mode=mode, **callbacks.session_kwargs())
        )
        await register_mcp_tools(registry, client.session, callbacks=callbacks)
        for name, arguments in planned_calls(scenario, registry, context):
            await call(registry, name, arguments)


async def demo() -> None:
    example = Path(__file__).with_name("mcp_conformance_server.py")
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "toolseam.mcp", "serve", f"{example}:registry"]
    )
    for mode in ("legacy", "auto"):  # auto: server/discover picks 2026-07-28
        registry = ToolRegistry()
        async with Client(server, mode=mode) as client:
            await register_mcp_tools(registry, client.session)
            result = await call(registry, "test_simple_text", {})
            if result.is_error is True:
                print(client.session.protocol_version, result.error.message)
            else:
                print(client.session.protocol_version, result.value)
    # -> 2025-11-25 This is a simple text response for testing.
    # -> 2026-07-28 This is a simple text response for testing.


if __name__ == "__main__":
    if len(sys.argv) > 1:
        anyio.run(main, sys.argv[-1])
    else:
        anyio.run(demo)
