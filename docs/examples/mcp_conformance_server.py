"""The server the official MCP conformance suite runs against: ``nox -s mcp_conformance``.

The suite (npm ``@modelcontextprotocol/conformance``, its ``server`` scenarios) connects
to a running server over streamable HTTP and calls tools by fixed names, checking what
comes back, at the protocol revision it is told: MCP 2025-11-25 (an ``initialize``
handshake, then a session) or 2026-07-28 (stateless requests); one server speaks both.
This registry has every tool its scenarios call, with the arguments and results they
expect; serve it with::

    python -m toolseam.mcp serve docs/examples/mcp_conformance_server.py:registry --http 8000 \\
        --task slow_compute --task failing_job=required --task protocol_error_job \\
        --task confirm_delete --task multi_input --task test_tool_with_task=after-input
    npx @modelcontextprotocol/conformance@0.2.0-alpha.12 server \\
        --url http://127.0.0.1:8000/mcp --requirements 2026-07-28

Fifteen tools use what a tool body reaches while it runs: ``exec.progress``, ``exec.log``,
``exec.elicit`` (the user), ``exec.sample`` (the client's model) and ``exec.roots``; served
over MCP, they become progress notifications, log messages, and ``elicitation/create``,
``sampling/createMessage`` and ``roots/list`` requests to the client of the call (on
2026-07-28, the questions of an ``InputRequiredResult``: the ``input-required-result-*``
scenarios). On 2026-07-28, a body that asks for a capability the client did not declare
(``test_missing_capability``) makes the call's answer a
``MissingRequiredClientCapabilityError``. ``test_custom_header`` declares an
``x-mcp-header`` argument: a 2026-07-28 client mirrors it into an ``Mcp-Param-Region``
header, which the server checks against the body.

Six tools run as tasks of the MCP tasks extension (the ``--task`` options, `TASKS`; the
``tasks-*`` scenarios): a 2026-07-28 client that declares ``io.modelcontextprotocol/tasks``
gets a task id for their calls and polls ``tasks/get``.

Run as a program, it calls a few of its tools through an MCP client of its own, which
answers the server's questions: ``python docs/examples/mcp_conformance_server.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Final, Literal

import anyio
from mcp import types
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from pydantic import Field
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
    for step in (0, 50, 100):
        exec.progress(step, total=100, message=f"Completed step {step} of 100")
        if step < 100:
            await pause(exec, 0.05)
    return "three steps done"


@define_tool(
    name="test_tool_with_logging",
    description="Tests tool that emits log messages during execution",
)
async def tool_with_logging(args: NoArgs, exec: ToolRunContext) -> str:
    for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        exec.log("info", text)
        await pause(exec, 0.05)
    return "Tool with logging executed successfully"


@define_tool(
    name="test_sampling",
    description="Tests server-initiated sampling (LLM completion request)",
)
async def sampling(args: PromptArgs, exec: ToolRunContext) -> str:
    completion = await exec.sample(args["prompt"], max_tokens=100)
    return f"LLM response: {completion}"


class Contact(TypedDict):
    username: Annotated[str, Field(description="User's response")]
    email: Annotated[str, Field(description="User's email address")]


@define_tool(
    name="test_elicitation",
    description="Tests server-initiated elicitation (user input request)",
)
async def elicitation(args: MessageArgs, exec: ToolRunContext) -> str:
    answer = await exec.elicit(args["message"], Contact)
    if answer.content is None:
        return f"User response: {answer}"  # declined or cancelled
    return f"User response: {answer.content['username']} <{answer.content['email']}>"


# Two forms as JSON Schema dicts: the defaults of SEP-1034 and the enum shapes of SEP-1330.
DEFAULTS_FORM: Final[Mapping[str, JsonValue]] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}
ENUMS_FORM: Final[Mapping[str, JsonValue]] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2"],
            "enumNames": ["Option One", "Option Two"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                ]
            },
        },
    },
    "required": [],
}


@define_tool(
    name="test_elicitation_sep1034_defaults",
    description="Tests elicitation with default values per SEP-1034",
)
async def elicitation_defaults(args: NoArgs, exec: ToolRunContext) -> str:
    return f"User response: {await exec.elicit('Please review your details', DEFAULTS_FORM)}"


@define_tool(
    name="test_elicitation_sep1330_enums",
    description="Tests elicitation with enum schema improvements per SEP-1330",
)
async def elicitation_enums(args: NoArgs, exec: ToolRunContext) -> str:
    return f"User response: {await exec.elicit('Please pick your options', ENUMS_FORM)}"


# The suite's fixture (SEP-1613, SEP-2106): `$schema`, `$defs` with an `$anchor`, a `$ref`,
# composition and conditional keywords; toolseam lists it as declared, dereferencing nothing.
ADDRESS_SCHEMA: Final[Mapping[str, JsonValue]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
ADDRESS_FIELDS: Final = frozenset({"name", "address", "contactMethod", "phone", "email"})


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
        if not isinstance(arguments, Mapping) or not set(arguments) <= ADDRESS_FIELDS:
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


# The input-required-result-* scenarios of MCP 2026-07-28 (SEP-2322). The suite asks for
# these keys; over 2026-07-28 each question becomes an InputRequiredResult, the body waiting
# at it until the client's retry answers (over 2025-11-25, a request during the call).
class UserName(TypedDict):
    name: str


class Confirmation(TypedDict):
    ok: bool


class Color(TypedDict):
    color: str


@define_tool(
    name="test_input_required_result_elicitation",
    description="Asks the user's name (InputRequiredResult with one elicitation)",
)
async def irr_elicitation(args: NoArgs, exec: ToolRunContext) -> str:
    answer = await exec.elicit("What is your name?", UserName, key="user_name")
    return f"Hello, {answer.content['name']}!" if answer.content else f"No name: {answer}"


@define_tool(
    name="test_input_required_result_sampling",
    description="Asks the client's model a question (InputRequiredResult with one sampling)",
)
async def irr_sampling(args: NoArgs, exec: ToolRunContext) -> str:
    completion = await exec.sample(
        "What is the capital of France?", max_tokens=100, key="capital_question"
    )
    return f"The model says: {completion}"


@define_tool(
    name="test_input_required_result_list_roots",
    description="Asks the client's roots (InputRequiredResult with one roots/list)",
)
async def irr_list_roots(args: NoArgs, exec: ToolRunContext) -> str:
    roots = await exec.roots(key="client_roots")
    return "Roots: " + ", ".join(root.uri for root in roots)


@define_tool(
    name="test_input_required_result_request_state",
    description="Asks for a confirmation; the retry's requestState is checked",
)
async def irr_request_state(args: NoArgs, exec: ToolRunContext) -> str:
    answer = await exec.elicit("Please confirm", Confirmation, key="confirm")
    # Reached only through a retry whose signed requestState resumed this very body.
    return f"state-ok: confirmed={answer.content['ok'] if answer.content else None}"


@define_tool(
    name="test_input_required_result_multiple_inputs",
    description="Asks three questions at once: elicitation, sampling and roots",
)
async def irr_multiple_inputs(args: NoArgs, exec: ToolRunContext) -> str:
    answers: dict[str, str] = {}

    async def name() -> None:
        answer = await exec.elicit("What is your name?", UserName, key="user_name")
        answers["name"] = answer.content["name"] if answer.content else "?"

    async def greeting() -> None:
        answers["greeting"] = str(
            await exec.sample("Generate a greeting", max_tokens=50, key="greeting")
        )

    async def roots() -> None:
        answers["roots"] = ", ".join(root.uri for root in await exec.roots(key="client_roots"))

    async with anyio.create_task_group() as questions:  # asked together: one round
        questions.start_soon(name)
        questions.start_soon(greeting)
        questions.start_soon(roots)
    return f"{answers['greeting']} {answers['name']} ({answers['roots']})"


@define_tool(
    name="test_input_required_result_multi_round",
    description="Asks two questions, one after the other (two rounds)",
)
async def irr_multi_round(args: NoArgs, exec: ToolRunContext) -> str:
    name = await exec.elicit("Step 1: What is your name?", UserName, key="step1")
    color = await exec.elicit("Step 2: What is your favorite color?", Color, key="step2")
    who = name.content["name"] if name.content else "?"
    return f"{who} likes {color.content['color'] if color.content else '?'}"


@define_tool(
    name="test_input_required_result_tampered_state",
    description="Asks for a confirmation; a tampered requestState is refused",
)
async def irr_tampered_state(args: NoArgs, exec: ToolRunContext) -> str:
    answer = await exec.elicit("Please confirm", Confirmation, key="confirm")
    return f"confirmed={answer.content['ok'] if answer.content else None}"


@define_tool(
    name="test_input_required_result_capabilities",
    description="Asks only what the client declared it can answer",
)
async def irr_capabilities(args: NoArgs, exec: ToolRunContext) -> str:
    said: list[str] = []
    try:
        said.append(str(await exec.elicit("What is your name?", UserName, key="user_name")))
    except ToolError as error:  # CAPABILITY_UNAVAILABLE: the client declared no elicitation
        said.append(error.message)
    try:
        said.append(str(await exec.sample("Say hello", max_tokens=20, key="hello")))
    except ToolError as error:
        said.append(error.message)
    return "; ".join(said)


class RegionArgs(TypedDict):
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]
    query: str


@define_tool(
    name="test_custom_header",
    description="Tests an argument mirrored into an Mcp-Param header (SEP-2243)",
)
async def custom_header(args: RegionArgs, exec: ToolRunContext) -> str:
    return f"{args['query']} in {args['region']}"


@define_tool(
    name="test_missing_capability",
    description="Needs the client's sampling capability (MissingRequiredClientCapabilityError)",
)
async def missing_capability(args: NoArgs, exec: ToolRunContext) -> str:
    return f"LLM response: {await exec.sample('Say hello', max_tokens=10)}"


# The tasks extension (SEP-2663, the `tasks-*` scenarios): served with
# `--task slow_compute --task failing_job=required ...` (TASKS below), each call of these
# tools runs in the background and the client polls `tasks/get`.
class GreetArgs(TypedDict):
    name: str


@define_tool(name="greet", description="Says hello (an ordinary call, never a task)")
async def greet(args: GreetArgs, exec: ToolRunContext) -> str:
    return f"Hello, {args['name']}!"


class ComputeArgs(TypedDict, total=False):
    seconds: float
    label: str


@define_tool(name="slow_compute", description="Works for `seconds`, then answers (a task)")
async def slow_compute(args: ComputeArgs, exec: ToolRunContext) -> str:
    seconds = args.get("seconds", 1.0)
    await pause(exec, seconds)  # a cancel of the task aborts the signal: ABORTED
    return f"{args.get('label', 'computed')}: done after {seconds:g} s"


@define_tool(name="failing_job", description="Fails as a tool does (a task, required)")
async def failing_job(args: NoArgs, exec: ToolRunContext) -> str:
    await pause(exec, 0.5)
    raise ToolError("the job failed", code="JOB_FAILED")


@define_tool(name="protocol_error_job", description="Crashes (a task that ends failed)")
async def protocol_error_job(args: NoArgs, exec: ToolRunContext) -> str:
    raise RuntimeError("the job crashed")


class DeleteArgs(TypedDict):
    filename: str


class Confirm(TypedDict):
    confirm: bool


@define_tool(name="confirm_delete", description="Asks before it deletes (a task's question)")
async def confirm_delete(args: DeleteArgs, exec: ToolRunContext) -> str:
    answer = await exec.elicit(f"Delete {args['filename']}?", Confirm)
    confirmed = answer.content is not None and answer.content["confirm"]
    return f"{'deleted' if confirmed else 'kept'} {args['filename']}"


@define_tool(name="multi_input", description="Asks two questions at once (a task's questions)")
async def multi_input(args: NoArgs, exec: ToolRunContext) -> str:
    said: list[str] = []

    async def name() -> None:
        answer = await exec.elicit("What is your name?", UserName)
        said.append(answer.content["name"] if answer.content else "?")

    async def confirm() -> None:
        answer = await exec.elicit("Confirm?", Confirm)
        said.append(str(answer.content["confirm"]) if answer.content else "?")

    async with anyio.create_task_group() as questions:
        questions.start_soon(name)
        questions.start_soon(confirm)
    return ", ".join(said)


@define_tool(
    name="test_tool_with_task",
    description="Asks the user's name, then goes on as a task (after-input)",
)
async def tool_with_task(args: NoArgs, exec: ToolRunContext) -> str:
    answer = await exec.elicit("What is your name?", UserName, key="user_name")
    who = answer.content["name"] if answer.content else "nobody"
    await pause(exec, 0.2)  # the rest of the work, as a task
    return f"Hello, {who}, from a task!"


TASKS: Final[Mapping[str, Literal["optional", "required", "after-input"]]] = {
    "slow_compute": "optional",
    "failing_job": "required",
    "protocol_error_job": "optional",
    "confirm_delete": "optional",
    "multi_input": "optional",
    "test_tool_with_task": "after-input",
}


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
    irr_elicitation,
    irr_sampling,
    irr_list_roots,
    irr_request_state,
    irr_multiple_inputs,
    irr_multi_round,
    irr_tampered_state,
    irr_capabilities,
    custom_header,
    missing_capability,
    greet,
    slow_compute,
    failing_job,
    protocol_error_job,
    confirm_delete,
    multi_input,
    tool_with_task,
):
    registry.register(tool)
registry.register(JsonSchemaTool())


def describe(result: types.CallToolResult) -> str:
    kinds = ", ".join(block.type for block in result.content)
    return f"{'error' if result.is_error else 'ok'} [{kinds}]"


def text(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


# The client's side: a person who fills in the form, a model that answers, a log display.
async def fill_in_form(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@home"})


async def complete(
    context: ClientRequestContext, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    reply = types.TextContent(type="text", text="Paris")
    return types.CreateMessageResult(role="assistant", content=reply, model="stub-model")


async def show_log(params: types.LoggingMessageNotificationParams) -> None:
    print(f"log {params.level}: {params.data}")


async def main() -> None:
    # mode="legacy": the initialize handshake (MCP 2025-11-25), the revision in which a
    # server may ask its client for input during a call.
    client = Client(
        create_server(registry, tasks=TASKS),
        mode="legacy",
        elicitation_callback=fill_in_form,
        sampling_callback=complete,
        logging_callback=show_log,
    )
    async with client:
        tools = (await client.list_tools()).tools
        print(len(tools), "tools")  # -> 30 tools
        for name in ("test_simple_text", "test_multiple_content_types", "test_error_handling"):
            print(name, describe(await client.call_tool(name, {})))
        # -> test_simple_text ok [text]
        # -> test_multiple_content_types ok [text, image, resource]
        # -> test_error_handling error [text]
        steps: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            steps.append(progress)

        await client.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
        print("progress:", steps)  # -> progress: [0.0, 50.0, 100.0]
        await client.call_tool("test_tool_with_logging", {})
        # -> log info: Tool execution started
        # -> log info: Tool processing data
        # -> log info: Tool execution completed
        asked = await client.call_tool("test_elicitation", {"message": "Who are you?"})
        print(text(asked))  # -> User response: ada <ada@home>
        sampled = await client.call_tool("test_sampling", {"prompt": "Capital of France?"})
        print(text(sampled))  # -> LLM response: Paris


if __name__ == "__main__":
    anyio.run(main)
