"""One toolseam server, both MCP revisions: 2025-11-25 (handshake) and 2026-07-28 (stateless).

What 2026-07-28 adds on the server side, and that the older revision is left as it was:
caching hints on ``tools/list``, input schemas listed exactly as declared (JSON Schema
2020-12, nothing dereferenced), ``MissingRequiredClientCapabilityError`` (-32021) for a
body that asks a client for a capability it did not declare, ``Mcp-Param-*`` headers
checked against the body, the server's identity, and cancellation (stdio: the
notification; streamable HTTP: closing the request's stream, in ``test_mcp_http.py``).

In process (``create_server``, the SDK's in-memory transport for each revision) on asyncio
and trio; over stdio a real server process (both backends); over streamable HTTP a real
server process (uvicorn, asyncio) and raw requests from a client on both backends.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import pytest
from mcp import MCPError, types
from mcp.client import Client
from mcp_types import HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY

import toolseam
from mcp_fixtures.support import (
    GUARD,
    ROOT,
    Record,
    Served,
    first_error,
    http_server_command,
    server_parameters,
    serving,
)
from toolseam.mcp import create_server

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(core)?x?2\.:ResourceWarning",
)

Mode = Literal["legacy", "2026-07-28"]
MODES: list[Mode] = ["legacy", "2026-07-28"]
EXAMPLE = ROOT / "docs" / "examples" / "mcp_conformance_server.py"
TARGET = f"{EXAMPLE}:registry"


def _example_registry() -> toolseam.ToolRegistry:

    spec = importlib.util.spec_from_file_location("mcp_conformance_server", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the module's annotations through it
    spec.loader.exec_module(module)
    registry: toolseam.ToolRegistry = module.registry
    return registry


@pytest.fixture(scope="module")
def registry() -> toolseam.ToolRegistry:
    return _example_registry()


def _text(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


# -- in process, both revisions -------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_input_schemas_are_listed_exactly_as_declared(
    registry: toolseam.ToolRegistry, mode: Mode
) -> None:
    with first_error(), anyio.fail_after(GUARD):
        async with Client(create_server(registry), mode=mode, cache=None) as client:
            listed = {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}
    declared = registry.get("json_schema_2020_12_tool")
    assert declared is not None
    # $schema, $defs (with its $anchor), the $ref, allOf/if/then/else: as declared, the
    # $ref not replaced by what it points at.
    assert listed["json_schema_2020_12_tool"] == json.loads(json.dumps(declared.parameters))
    assert listed["json_schema_2020_12_tool"]["properties"]["address"] == {
        "$ref": "#/$defs/address"
    }


async def test_tools_list_carries_caching_hints_on_2026_only(
    registry: toolseam.ToolRegistry,
) -> None:
    with first_error(), anyio.fail_after(GUARD):
        async with Client(create_server(registry), mode="2026-07-28", cache=None) as client:
            modern = await client.list_tools()
        async with Client(create_server(registry), mode="legacy", cache=None) as client:
            legacy = await client.list_tools()
    # Stale at once (a tool registered later is listed at the next request), and private.
    assert (modern.ttl_ms, modern.cache_scope) == (0, "private")
    assert {"ttl_ms", "cache_scope"} <= modern.model_fields_set  # on the wire, not defaults
    assert not {"ttl_ms", "cache_scope"} & legacy.model_fields_set  # 2025-11-25 has none


async def test_an_undeclared_capability_is_error_minus_32021_on_2026(
    registry: toolseam.ToolRegistry,
) -> None:
    with first_error(), anyio.fail_after(GUARD):
        async with Client(create_server(registry), mode="2026-07-28", cache=None) as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool("test_missing_capability", {})
    assert raised.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert raised.value.error.message == (
        'tool "test_missing_capability": sampling is not available: '
        "the MCP client did not declare the sampling capability"
    )
    assert raised.value.error.data == {"requiredCapabilities": {"sampling": {}}}


async def test_an_undeclared_capability_is_a_failed_call_on_2025(
    registry: toolseam.ToolRegistry,
) -> None:
    with first_error(), anyio.fail_after(GUARD):
        async with Client(create_server(registry), mode="legacy", cache=None) as client:
            result = await client.call_tool("test_missing_capability", {})
    assert result.is_error is True
    assert result.meta is not None
    assert result.meta["toolseam/code"] == "CAPABILITY_UNAVAILABLE"


async def test_a_body_that_handles_the_missing_capability_still_answers_on_2026() -> None:
    registry = toolseam.ToolRegistry()

    @toolseam.define_tool(name="ask_or_guess", description="Samples if it can.")
    async def ask_or_guess(args: dict[str, Any], exec: toolseam.ToolRunContext) -> str:
        try:
            return str(await exec.sample("hello?", max_tokens=5))
        except toolseam.ToolError:
            return "guessed"

    registry.register(ask_or_guess)
    with first_error(), anyio.fail_after(GUARD):
        async with Client(create_server(registry), mode="2026-07-28", cache=None) as client:
            result = await client.call_tool("ask_or_guess", {})
    assert (result.is_error, _text(result)) == (False, ["guessed"])


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # auto: server/discover, 2026-07-28
async def test_the_server_names_itself_with_toolseams_version(
    registry: toolseam.ToolRegistry, mode: str
) -> None:
    with first_error(), anyio.fail_after(GUARD):
        async with Client(create_server(registry), mode=mode, cache=None) as client:
            info = client.session.server_info
            own = create_server(registry, version="1.2.3")
    assert info is not None
    assert (info.name, info.version) == ("toolseam", toolseam.__version__)
    assert own.version == "1.2.3"


# -- over stdio: cancellation on both revisions -----------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # auto: server/discover, 2026-07-28
async def test_a_cancel_over_stdio_reaches_and_awaits_the_body(
    anyio_backend: str, mode: str, tmp_path: Path
) -> None:
    record = Record(tmp_path / "record.jsonl")
    tag = f"stdio-{mode}"
    with first_error(), anyio.fail_after(GUARD):
        async with Client(
            server_parameters(record, anyio_backend), mode=mode, cache=None
        ) as client:
            assert client.session.protocol_version == (
                "2026-07-28" if mode == "auto" else "2025-11-25"
            )
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "wait_for_abort", {"tag": tag})
                await record.wait_for(event="body-started", tag=tag)
                tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled
            published = await record.wait_for(event="result", tag=tag)
            after = await client.call_tool("echo", {"text": "still here"})
    assert published["code"] == "ABORTED"
    # On both revisions, stdio cancels with notifications/cancelled.
    [saw] = record.events(event="body-saw-abort", tag=tag)
    assert saw["reason"] == "operation aborted: the MCP request was cancelled"
    # The body saw the abort, wound down, and only then was the result published.
    assert [e["event"] for e in record.events(tag=tag)] == [
        "body-started",
        "body-saw-abort",
        "result",
    ]
    assert _text(after) == ["still here"]


# -- over streamable HTTP: the 2026-07-28 wire ------------------------------------------------


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Module-scoped, so the HTTP server process serves both backends' tests."""
    return str(request.param)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    log = tmp_path_factory.mktemp("mcp-revisions") / "server.log"
    with serving(http_server_command(TARGET), log) as served:
        yield served


@pytest.fixture
async def http() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient() as client:
        yield client


def _meta(capabilities: dict[str, Any]) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }


async def _call_2026(
    http: httpx2.AsyncClient,
    url: str,
    name: str,
    arguments: dict[str, Any],
    headers: dict[str, str] | None = None,
    capabilities: dict[str, Any] | None = None,
) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": _meta(capabilities or {})},
    }
    sent = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": name,
        **(headers or {}),
    }
    return await http.post(url, json=body, headers=sent)


async def test_http_2026_checks_mcp_param_headers_against_the_body(
    served: Served, http: httpx2.AsyncClient
) -> None:
    arguments = {"region": "us-west1", "query": "rain"}
    with anyio.fail_after(GUARD):
        agreed = await _call_2026(
            http, served.url, "test_custom_header", arguments, {"mcp-param-region": "us-west1"}
        )
        differs = await _call_2026(
            http, served.url, "test_custom_header", arguments, {"mcp-param-region": "eu-west1"}
        )
        missing = await _call_2026(http, served.url, "test_custom_header", arguments)
    assert agreed.status_code == 200
    result = agreed.json()["result"]
    assert result["content"] == [{"type": "text", "text": "rain in us-west1"}]
    # 2026-07-28 results say they are final, and who answered.
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == {
        "name": "toolseam",
        "version": toolseam.__version__,
    }
    for refused in (differs, missing):
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == HEADER_MISMATCH


async def test_http_2026_answers_an_undeclared_capability_with_400(
    served: Served, http: httpx2.AsyncClient
) -> None:
    with anyio.fail_after(GUARD):
        answer = await _call_2026(http, served.url, "test_missing_capability", {})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["code"], error["data"]) == (
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        {"requiredCapabilities": {"sampling": {}}},
    )


async def test_http_2026_mcp_method_header_must_match_the_body(
    served: Served, http: httpx2.AsyncClient
) -> None:
    with anyio.fail_after(GUARD):
        answer = await _call_2026(
            http, served.url, "test_simple_text", {}, {"mcp-method": "tools/list"}
        )
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == HEADER_MISMATCH
