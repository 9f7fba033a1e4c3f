"""The server the official MCP conformance suite runs against: ``nox -s mcp_conformance``.

The suite (npm ``@modelcontextprotocol/conformance``, its ``server`` scenarios) connects
to a running server over streamable HTTP and calls tools by fixed names, checking what
comes back. This registry has every tool its scenarios call, with the arguments and
results they expect; serve it with::

    python -m toolseam.mcp serve docs/examples/mcp_conformance_server.py:registry --http 8000
    npx @modelcontextprotocol/conformance@0.1.16 server --url http://127.0.0.1:8000/mcp

Run as a program, it calls a few of its tools through an in-process MCP client.

Seven tools need what a toolseam tool cannot yet do while it runs: report progress, log
to the client, ask the user (elicitation) or the client's model (sampling). Until it
can, they do the rest of their work and say so; their scenarios fail.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Final

import anyio
from mcp import types
from mcp.client import Client
from typing_extensions import TypedDict

from toolseam import (
    ContentBlock,
    JsonValue,
    ToolArgsError,
    ToolError,
    ToolExecution,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
)
from toolseam.mcp import create_server

# A 1x1 red PNG and a minimal WAV file, as the suite's own reference server sends.
PNG: Final = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
    "rkJggg=="
)
WAV: Final = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
IMAGE: Final[ContentBlock] = {"type": "image", "data": PNG, "mimeType": "image/png"}


class NoArgs(TypedDict):
    pass


class PromptArgs(TypedDict):
    prompt: str


class MessageArgs(TypedDict):
    message: str


async def pause(exec: ToolRunContext, seconds: float) -> None:
    """Wait a little (the suite wants notifications spread out), stopping on abort."""
    with anyio.move_on_after(seconds):
        await exec.signal.wait()
    exec.signal.raise_if_aborted()


def unavailable(capability: str) -> ToolError:
    return ToolError(
        f"{capability} is not available to toolseam tools yet", code="CAPABILITY_UNAVAILABLE"
    )


@define_tool(name="test_simple_text", description="Tests simple text content response")
async def simple_text(args: NoArgs, exec: ToolRunContext) -> str:
    return "This is a simple text response for testing."


@define_tool(
    name="test_image_content",
    description="Tests image content response",
    render=lambda args, value: [IMAGE],
)
async def image_content(args: NoArgs, exec: ToolRunContext) -> str:
    return "a 1x1 red pixel"


@define_tool(
    name="test_audio_content",
    description="Tests audio content response",
    render=lambda args, value: [{"type": "audio", "data": WAV, "mimeType": "audio/wav"}],
)
async def audio_content(args: NoArgs, exec: ToolRunContext) -> str:
    return "a silent WAV file"


def embedded(args: NoArgs, value: JsonValue) -> Sequence[ContentBlock]:
    resource = {
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content.",
    }
    return [{"type": "resource", "resource": resource}]


@define_tool(
    name="test_embedded_resource",
    description="Tests embedded resource content response",
    render=embedded,
)
async def embedded_resource(args: NoArgs, exec: ToolRunContext) -> str:
    return "an embedded text resource"


def mixed(args: NoArgs, value: JsonValue) -> Sequence[ContentBlock]:
    resource = {
        "uri": "test://mixed-content-resource",
        "mimeType": "application/json",
        "text": json.dumps({"test": "data", "value": 123}),
    }
    text: ContentBlock = {"type": "text", "text": "Multiple content types test:"}
    return [text, IMAGE, {"type": "resource", "resource": resource}]


@define_tool(
    name="test_multiple_content_types",
    description="Tests response with multiple content types (text, image, resource)",
    render=mixed,
)
async def multiple_content_types(args: NoArgs, exec: ToolRunContext) -> str:
    return "text, an image and a resource"


@define_tool(name="test_error_handling", description="Tests error response handling")
async def error_handling(args: NoArgs, exec: ToolRunContext) -> str:
    raise ToolError("This tool intentionally returns an error for testing", code="TEST_ERROR")


@define_tool(
    name="test_tool_with_progress", description="Tests tool that reports progress notifications"
)
async def tool_with_progress(args: NoArgs, exec: ToolRunContext) -> str:
    # Three steps (0, 50 and 100 of 100), which it cannot report yet.
    await pause(exec, 0.05)
    await pause(exec, 0.05)
    return "three steps done, no progress reported"


@define_tool(
    name="test_tool_with_logging",
    description="Tests tool that emits log messages during execution",
)
async def tool_with_logging(args: NoArgs, exec: ToolRunContext) -> str:
    # "Tool execution started", "Tool processing data", "Tool execution completed" at info
    # level, which it cannot send yet.
    await pause(exec, 0.05)
    await pause(exec, 0.05)
    return "Tool with logging executed successfully (no log messages sent)"


@define_tool(
    name="test_sampling",
    description="Tests server-initiated sampling (LLM completion request)",
)
async def sampling(args: PromptArgs, exec: ToolRunContext) -> str:
    # sampling/createMessage: the prompt as one user message, maxTokens 100.
    raise unavailable("sampling")


@define_tool(
    name="test_elicitation",
    description="Tests server-initiated elicitation (user input request)",
)
async def elicitation(args: MessageArgs, exec: ToolRunContext) -> str:
    # elicitation/create with args["message"], asking for a username and an email.
    raise unavailable("elicitation")


@define_tool(
    name="test_elicitation_sep1034_defaults",
    description="Tests elicitation with default values per SEP-1034",
)
async def elicitation_defaults(args: NoArgs, exec: ToolRunContext) -> str:
    # A form whose string, integer, number, enum and boolean fields have defaults.
    raise unavailable("elicitation")


@define_tool(
    name="test_elicitation_sep1330_enums",
    description="Tests elicitation with enum schema improvements per SEP-1330",
)
async def elicitation_enums(args: NoArgs, exec: ToolRunContext) -> str:
    # A form with the five enum shapes: untitled, titled (oneOf), legacy (enumNames),
    # untitled multi-select and titled multi-select (items.anyOf).
    raise unavailable("elicitation")


ADDRESS_SCHEMA: Final[Mapping[str, JsonValue]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


class JsonSchemaTool:
    """A hand-written `ToolDefinition` whose parameters are a JSON Schema 2020-12 document.

    `define_tool` derives a schema from the arguments type; the suite checks that
    ``$schema``, ``$defs`` and ``additionalProperties`` reach ``tools/list`` as written.
    """

    name = "json_schema_2020_12_tool"
    description = "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)"
    parameters = ADDRESS_SCHEMA
    timeout = None

    def parse_arguments(self, arguments: JsonValue, /) -> Mapping[str, JsonValue]:
        if arguments is None:
            return {}
        if not isinstance(arguments, Mapping) or not set(arguments) <= {"name", "address"}:
            raise ToolArgsError(f'invalid arguments for tool "{self.name}": {arguments!r}')
        return arguments

    async def run(self, args: Mapping[str, JsonValue], exec: ToolRunContext, /) -> str:
        return f"JSON Schema 2020-12 tool called with: {json.dumps(args)}"

    def serialize_output(self, output: str, /) -> JsonValue:
        return output

    def render(self, args: Mapping[str, JsonValue], value: JsonValue, /) -> Sequence[ContentBlock]:
        return [{"type": "text", "text": str(value)}]

    def is_concurrency_safe(self, args: Mapping[str, JsonValue], /) -> bool:
        return True

    def finalize_content(
        self, exec: ToolExecution, result: ToolResult, /
    ) -> Sequence[ContentBlock] | None:
        return None


registry = ToolRegistry()
for tool in (
    simple_text,
    image_content,
    audio_content,
    embedded_resource,
    multiple_content_types,
    error_handling,
    tool_with_progress,
    tool_with_logging,
    sampling,
    elicitation,
    elicitation_defaults,
    elicitation_enums,
):
    registry.register(tool)
registry.register(JsonSchemaTool())


def describe(result: types.CallToolResult) -> str:
    kinds = ", ".join(block.type for block in result.content)
    return f"{'error' if result.is_error else 'ok'} [{kinds}]"


async def main() -> None:
    async with Client(create_server(registry)) as client:
        tools = (await client.list_tools()).tools
        print(len(tools), "tools")  # -> 13 tools
        for name in ("test_simple_text", "test_multiple_content_types", "test_error_handling"):
            print(name, describe(await client.call_tool(name, {})))
        # -> test_simple_text ok [text]
        # -> test_multiple_content_types ok [text, image, resource]
        # -> test_error_handling error [text]


if __name__ == "__main__":
    anyio.run(main)
