"""Contract §6: define_tool."""

from __future__ import annotations

import math
import sys
import threading
import typing
from dataclasses import dataclass

import pydantic
import pytest
from typing_extensions import TypedDict

from support import code_of, make_input
from toolseam import (
    INVALID_ARGS,
    INVALID_TOOL_OUTPUT,
    ErrorInfo,
    ToolExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    define_tool,
)
from toolseam._definitions import is_idempotent


class ReadArgs(TypedDict):
    path: str
    limit: int


@dataclass
class DataArgs:
    n: int


class ModelArgs(pydantic.BaseModel):
    query: str
    top_k: int = 3


class Hit(pydantic.BaseModel):
    title: str
    score: float


class TestSchemas:
    @pytest.mark.parametrize(
        ("args_type", "required"),
        [(ReadArgs, ["path", "limit"]), (DataArgs, ["n"]), (ModelArgs, ["query"])],
    )
    def test_parameters_schema_comes_from_the_first_annotation(
        self, args_type: type, required: list[str]
    ) -> None:
        async def body(args: args_type, exec: ToolRunContext) -> str:  # type: ignore[valid-type]
            return ""

        definition = define_tool(name="t", description="d")(body)
        assert definition.parameters["type"] == "object"
        assert definition.parameters["required"] == required

    def test_timeout_is_never_part_of_schemas(self) -> None:
        @define_tool(name="t", description="d", timeout=2.5)
        async def tool(args: ReadArgs, exec: ToolRunContext) -> str:
            return ""

        registry = ToolRegistry()
        registry.register(tool)
        assert tool.timeout == 2.5
        [schema] = registry.schemas()
        assert "timeout" not in str(schema.to_json())


class TestValidation:
    async def test_arguments_are_validated_into_the_annotated_type(self) -> None:
        seen: list[object] = []

        @define_tool(name="search", description="")
        async def search(args: ModelArgs, exec: ToolRunContext) -> list[Hit]:
            seen.append(args)
            return [Hit(title=args.query, score=0.5)]

        registry = ToolRegistry()
        registry.register(search)
        result = await registry.execute(make_input("search", {"query": "q"}))
        assert seen == [ModelArgs(query="q", top_k=3)]
        assert isinstance(result, ToolSuccess)
        assert result.value == [{"title": "q", "score": 0.5}]

    async def test_invalid_arguments_are_invalid_args_with_a_clear_message(self) -> None:
        @define_tool(name="read", description="")
        async def read(args: ReadArgs, exec: ToolRunContext) -> str:
            return ""

        registry = ToolRegistry()
        registry.register(read)
        result = await registry.execute(make_input("read", {"path": "/x"}))
        assert isinstance(result, ToolFailure)
        assert result.error.info == ErrorInfo("ToolArgsError", INVALID_ARGS)
        assert result.error.message == 'invalid arguments for tool "read": limit: Field required'

    async def test_invalid_output_is_invalid_tool_output(self) -> None:
        @define_tool(name="t", description="")
        async def tool(args: ReadArgs, exec: ToolRunContext) -> int:
            return "many"  # type: ignore[return-value]

        registry = ToolRegistry()
        registry.register(tool)
        result = await registry.execute(make_input("t", {"path": "p", "limit": 1}))
        assert isinstance(result, ToolFailure)
        assert result.error.info == ErrorInfo("ToolOutputError", INVALID_TOOL_OUTPUT)
        assert result.error.message.startswith('tool "t" returned invalid output: ')

    async def test_output_must_materialize_as_lossless_json(self) -> None:
        @define_tool(name="t", description="")
        async def tool(args: ReadArgs, exec: ToolRunContext) -> float:
            return math.nan

        @define_tool(name="u", description="")
        async def untyped(args: ReadArgs, exec: ToolRunContext):  # type: ignore[no-untyped-def]
            return {1, 2}

        registry = ToolRegistry()
        registry.register(tool)
        registry.register(untyped)
        for name in ("t", "u"):
            result = await registry.execute(make_input(name, {"path": "p", "limit": 1}))
            assert code_of(result) == INVALID_TOOL_OUTPUT, result


class TestBodies:
    async def test_sync_body_runs_in_a_worker_thread(self) -> None:
        threads: list[int] = []

        @define_tool(name="t", description="")
        def tool(args: ReadArgs, exec: ToolRunContext) -> str:
            threads.append(threading.get_ident())
            return args["path"]

        registry = ToolRegistry()
        registry.register(tool)
        result = await registry.execute(make_input("t", {"path": "p", "limit": 1}))
        assert isinstance(result, ToolSuccess)
        assert result.value == "p"
        assert threads
        assert threads[0] != threading.get_ident()

    async def test_render_and_finalize_content_options(self) -> None:
        def render(args: ReadArgs, value: object) -> list[dict[str, str]]:
            return [{"type": "text", "text": f"{args['path']}: {value}"}]

        def finalize(exec: ToolExecution, result: ToolResult) -> None:
            return None

        @define_tool(name="t", description="", render=render, finalize_content=finalize)
        async def tool(args: ReadArgs, exec: ToolRunContext) -> int:
            return 7

        registry = ToolRegistry()
        registry.register(tool)
        result = await registry.execute(make_input("t", {"path": "p", "limit": 1}))
        assert [dict(b) for b in result.content] == [{"type": "text", "text": "p: 7"}]

    async def test_defer_context_from_the_body_reaches_the_result(self) -> None:
        @define_tool(name="t", description="")
        async def tool(args: ReadArgs, exec: ToolRunContext) -> str:
            exec.defer_context({"read": args["path"]})
            return "ok"

        registry = ToolRegistry()
        registry.register(tool)
        result = await registry.execute(make_input("t", {"path": "p", "limit": 1}))
        assert list(result.additional_contexts) == [{"read": "p"}]

    async def test_non_json_deferred_context_fails_the_call(self) -> None:
        @define_tool(name="t", description="")
        async def tool(args: ReadArgs, exec: ToolRunContext) -> str:
            exec.defer_context({"bad": {1}})  # type: ignore[dict-item]
            return "ok"

        registry = ToolRegistry()
        registry.register(tool)
        result = await registry.execute(make_input("t", {"path": "p", "limit": 1}))
        assert isinstance(result, ToolFailure)
        assert result.error.message.startswith(
            "deferred context must be losslessly JSON-serializable"
        )


class TestSetupErrors:
    @pytest.mark.parametrize("timeout", [0, -1, math.inf, math.nan])
    def test_bad_timeout_is_a_value_error_naming_the_tool(self, timeout: float) -> None:
        with pytest.raises(
            ValueError,
            match=r'^tool "slow": `timeout` must be a positive number of seconds, got ',
        ):
            define_tool(name="slow", description="", timeout=timeout)

    @pytest.mark.parametrize("timeout", ["5", True])
    def test_non_number_timeout_is_a_type_error(self, timeout: object) -> None:
        with pytest.raises(TypeError, match=r'^tool "slow": `timeout` must be a positive number'):
            define_tool(name="slow", description="", timeout=timeout)  # type: ignore[arg-type]

    def test_body_without_exec_parameter_is_rejected(self) -> None:
        async def body(args: ReadArgs) -> str:
            return ""

        with pytest.raises(TypeError, match=r'^tool "t": the body must take two positional'):
            define_tool(name="t", description="")(body)  # type: ignore[call-overload]

    def test_unannotated_arguments_are_rejected(self) -> None:
        async def body(args, exec: ToolRunContext) -> str:  # type: ignore[no-untyped-def]
            return ""

        with pytest.raises(TypeError, match=r'^tool "t": annotate the first parameter `args`'):
            define_tool(name="t", description="")(body)

    def test_typing_typeddict_before_312_names_the_tool_and_the_fix(self) -> None:
        class Old(typing.TypedDict):
            x: int

        async def body(args: Old, exec: ToolRunContext) -> str:
            return ""

        if sys.version_info >= (3, 12):  # pydantic accepts typing.TypedDict from 3.12 on
            assert define_tool(name="t", description="")(body).parameters["required"] == ["x"]
            return
        with pytest.raises(TypeError, match=r'^tool "t": cannot build a schema.*typing_extensions'):
            define_tool(name="t", description="")(body)

    def test_unschematizable_annotation_is_a_type_error_naming_the_tool(self) -> None:
        class Opaque:
            pass

        async def body(args: Opaque, exec: ToolRunContext) -> str:
            return ""

        with pytest.raises(TypeError, match=r'^tool "t": cannot build a schema for the arguments'):
            define_tool(name="t", description="")(body)


class TestIdempotentOption:
    """The ``idempotent`` option: typed, documented, read with a default of ``False``."""

    def test_tools_are_not_idempotent_unless_they_say_so(self) -> None:
        @define_tool(name="send", description="")
        async def send(args: ReadArgs, exec: ToolRunContext) -> str:
            return ""

        @define_tool(name="lookup", description="", idempotent=True)
        def lookup(args: ReadArgs, exec: ToolRunContext) -> str:
            return ""

        assert is_idempotent(send) is False
        assert is_idempotent(lookup) is True
        assert getattr(lookup, "idempotent") is True  # noqa: B009 - not in the protocol

    def test_idempotent_is_never_part_of_schemas(self) -> None:
        @define_tool(name="lookup", description="", idempotent=True)
        async def lookup(args: ReadArgs, exec: ToolRunContext) -> str:
            return ""

        registry = ToolRegistry()
        registry.register(lookup)
        assert "idempotent" not in str(registry.schemas()[0].to_json())

    @pytest.mark.parametrize("value", [1, "yes", None])
    def test_non_bool_idempotent_is_a_type_error_naming_the_tool(self, value: object) -> None:
        with pytest.raises(TypeError, match=r'^tool "send": `idempotent` must be a bool, got '):
            define_tool(name="send", description="", idempotent=value)  # type: ignore[call-overload]

    def test_hand_written_definitions_without_the_attribute_are_not_idempotent(self) -> None:
        class Plain:
            name = "plain"

        class Says:
            name = "says"
            idempotent = True

        class Truthy:
            name = "truthy"
            idempotent = 1

        class Hostile:
            name = "hostile"

            @property
            def idempotent(self) -> bool:
                raise RuntimeError("no")

        assert [is_idempotent(d()) for d in (Plain, Says, Truthy, Hostile)] == [
            False,
            True,
            False,
            False,
        ]


class TaggedArgs(TypedDict):
    tags: typing.Sequence[str]


async def test_sequence_fields_validate_from_frozen_snapshots() -> None:
    """Regression: pydantic rebuilt frozen lists through their private constructor."""

    @define_tool(name="tagged", description="")
    async def tagged(args: TaggedArgs, exec: ToolRunContext) -> int:
        return len(args["tags"])

    registry = ToolRegistry()
    registry.register(tagged)
    result = await registry.execute(make_input("tagged", {"tags": ["a", "b"]}))
    assert isinstance(result, ToolSuccess)
    assert result.value == 2


async def test_sync_body_can_call_back_into_the_event_loop() -> None:
    """Sync bodies run on anyio worker threads, so ``anyio.from_thread`` works in them."""
    import anyio.from_thread

    loop_calls: list[str] = []

    @define_tool(name="callback", description="")
    def callback(args: ReadArgs, exec: ToolRunContext) -> str:
        anyio.from_thread.run_sync(loop_calls.append, args["path"])
        return "ok"

    registry = ToolRegistry()
    registry.register(callback)
    result = await registry.execute(make_input("callback", {"path": "p", "limit": 1}))
    assert isinstance(result, ToolSuccess)
    assert loop_calls == ["p"]
