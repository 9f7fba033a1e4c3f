"""What a tool body reaches beyond its signal: progress, logs, elicitation, sampling.

Contract §5, "Capabilities": the caller offers them per call (`ToolHost`); the events reach
the host and the registry's event listeners in the event loop's thread; the requests carry
the call's signal, are withdrawn on abort and awaited, never raced.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.from_thread
import pydantic
import pytest
from typing_extensions import TypedDict

from support import Published, TextArgs, make_input
from toolseam import (
    CAPABILITY_FAILED,
    CAPABILITY_UNAVAILABLE,
    TOOL_ABORTED,
    AbortController,
    AbortError,
    AbortSignal,
    ElicitationRequest,
    Elicited,
    JsonValue,
    LogEvent,
    ProgressEvent,
    Sampled,
    SamplingRequest,
    ToolCall,
    ToolError,
    ToolEvent,
    ToolExecution,
    ToolExecutionInput,
    ToolFailure,
    ToolHost,
    ToolRegistry,
    ToolRunContext,
    ToolSuccess,
    define_tool,
    nested_input,
    run_tool_calls,
)


class Person(TypedDict):
    name: str
    age: int


class PersonModel(pydantic.BaseModel):
    name: str


@dataclasses.dataclass
class Sink:
    """A host's progress and log consumers that record what they saw, and where."""

    events: list[tuple[str, ToolEvent]] = dataclasses.field(
        default_factory=list[tuple[str, ToolEvent]]
    )
    threads: set[int] = dataclasses.field(default_factory=set[int])

    def __call__(self, exec: ToolExecution, event: Any) -> None:
        self.events.append((exec.call_id, event))
        self.threads.add(threading.get_ident())

    def host(self, **members: Any) -> ToolHost:
        return ToolHost(on_progress=self, on_log=self, **members)


def registry_with(*tools: Any) -> tuple[ToolRegistry, Published]:
    registry = ToolRegistry()
    for tool in tools:
        registry.register(tool)
    published = Published()
    registry.on_result(published)
    return registry, published


@define_tool(name="report", description="Reports progress and logs.")
async def report(args: TextArgs, exec: ToolRunContext) -> str:
    exec.progress(1, 3, "one")
    exec.log("info", {"step": 1}, logger="report")
    exec.progress(2.5, 3)
    exec.progress(3)
    return args["text"]


class TestProgressAndLogs:
    async def test_reach_the_host_in_order(self) -> None:
        sink = Sink()
        registry, _ = registry_with(report)
        result = await registry.execute(make_input("report", host=sink.host()))
        assert isinstance(result, ToolSuccess)
        assert sink.events == [
            ("call_1", ProgressEvent(1, 3, "one")),
            ("call_1", LogEvent("info", {"step": 1}, "report")),
            ("call_1", ProgressEvent(2.5, 3)),
            ("call_1", ProgressEvent(3)),
        ]
        assert sink.threads == {threading.get_ident()}

    async def test_reach_event_listeners_with_or_without_a_host(self) -> None:
        registry, _ = registry_with(report)
        seen = Sink()
        registry.on_event(seen)
        await registry.execute(make_input("report"))
        assert seen.events[0] == ("call_1", ProgressEvent(1, 3, "one"))
        assert len(seen.events) == 4

    async def test_without_a_consumer_they_are_dropped(self) -> None:
        registry, published = registry_with(report)
        result = await registry.execute(make_input("report"))
        assert isinstance(result, ToolSuccess)
        assert published.only is result

    async def test_a_raising_consumer_is_contained(self, caplog: pytest.LogCaptureFixture) -> None:
        def broken(exec: ToolExecution, event: object) -> None:
            raise RuntimeError("consumer broke")

        registry, _ = registry_with(report)
        later = Sink()
        registry.on_event(broken)
        registry.on_event(later)
        result = await registry.execute(make_input("report", host=ToolHost(on_progress=broken)))
        assert isinstance(result, ToolSuccess)
        assert len(later.events) == 4  # the listeners after the broken one still see all
        contained = [r for r in caplog.records if r.levelname == "ERROR" and "raised" in r.msg]
        assert len(contained) == 3 + 4  # the host's progress consumer, then the listener

    async def test_ignored_once_the_body_returned(self) -> None:
        kept: list[ToolRunContext] = []

        @define_tool(name="keeps", description="")
        async def keeps(args: TextArgs, exec: ToolRunContext) -> str:
            kept.append(exec)
            return "done"

        sink = Sink()
        registry, _ = registry_with(keeps)
        await registry.execute(make_input("keeps", host=sink.host()))
        kept[0].progress(1)
        kept[0].log("error", "too late")
        assert sink.events == []

    async def test_a_listener_added_while_a_call_runs_sees_only_later_calls(self) -> None:
        entered = anyio.Event()
        release = anyio.Event()

        @define_tool(name="slow", description="")
        async def slow(args: TextArgs, exec: ToolRunContext) -> str:
            entered.set()
            await release.wait()
            exec.progress(1)
            return "done"

        registry, _ = registry_with(slow)
        seen = Sink()
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.execute, make_input("slow"))
            await entered.wait()
            registry.on_event(seen)  # each call snapshots its listeners (contract §5)
            release.set()
        assert seen.events == []

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            ((float("nan"),), r"^progress\(\): `progress` must be a finite number, got nan$"),
            ((1, float("inf")), r"^progress\(\): `total` must be a finite number, got inf$"),
            ((True,), r"^progress\(\): `progress` must be a finite number, got True$"),
        ],
    )
    async def test_bad_progress_raises_into_the_body(
        self, args: tuple[Any, ...], message: str
    ) -> None:
        @define_tool(name="bad", description="")
        async def bad(args_: TextArgs, exec: ToolRunContext) -> str:
            with pytest.raises(ValueError, match=message):
                exec.progress(*args)
            return "checked"

        registry, _ = registry_with(bad)
        result = await registry.execute(make_input("bad"))
        assert isinstance(result, ToolSuccess)
        assert result.value == "checked"

    async def test_bad_log_level_and_data(self) -> None:
        @define_tool(name="bad", description="")
        async def bad(args: TextArgs, exec: ToolRunContext) -> str:
            with pytest.raises(ValueError, match=r"^log\(\): `level` must be one of debug, "):
                exec.log("loud", "x")  # type: ignore[arg-type]
            with pytest.raises(ValueError, match=r"\$: set is not JSON"):
                exec.log("info", {1, 2})  # type: ignore[arg-type]
            return "checked"

        registry, _ = registry_with(bad)
        result = await registry.execute(make_input("bad"))
        assert isinstance(result, ToolSuccess)

    async def test_a_sync_body_reports_from_its_thread_to_the_loop(self) -> None:
        loop_thread = threading.get_ident()
        body_threads: list[int] = []

        @define_tool(name="sync", description="")
        def sync(args: TextArgs, exec: ToolRunContext) -> str:
            body_threads.append(threading.get_ident())
            for step in range(100):
                exec.progress(step, 100)
            exec.log("debug", "last")
            return "done"

        sink = Sink()
        registry, _ = registry_with(sync)
        result = await registry.execute(make_input("sync", host=sink.host()))
        assert isinstance(result, ToolSuccess)
        assert body_threads[0] != loop_thread
        # Every event was delivered, in order, in the loop's thread, before the call ended.
        assert sink.threads == {loop_thread}
        assert [event for _, event in sink.events] == [
            *(ProgressEvent(step, 100) for step in range(100)),
            LogEvent("debug", "last"),
        ]

    async def test_nested_calls_report_to_the_outer_caller(self) -> None:
        @define_tool(name="outer", description="")
        async def outer(args: TextArgs, exec: ToolRunContext) -> str:
            exec.progress(0, 2)
            inner = await registry.execute(
                nested_input(exec, call_id="inner_1", name="report", arguments=args)
            )
            exec.progress(2, 2)
            return "outer" if isinstance(inner, ToolSuccess) else "inner failed"

        sink = Sink()
        tokens: list[object] = []

        def parents(exec: ToolExecution, event: ToolEvent) -> None:
            tokens.append(exec.parent)

        registry, _ = registry_with(outer, report)
        registry.on_event(parents)
        result = await registry.execute(make_input("outer", host=sink.host()))
        assert isinstance(result, ToolSuccess)
        assert [call_id for call_id, _ in sink.events] == [
            "call_1",
            *["inner_1"] * 4,
            "call_1",
        ]
        assert tokens[0] is None
        assert tokens[1] is not None
        assert tokens[1] is tokens[4]

    async def test_run_tool_calls_hands_every_call_the_host(self) -> None:
        sink = Sink()
        registry, _ = registry_with(report)
        outcomes = await run_tool_calls(
            registry,
            [ToolCall("a", "report", {"text": "1"}), ToolCall("b", "report", {"text": "2"})],
            signal=AbortController().signal,
            host=sink.host(),
        )
        assert [outcome.result.is_error for outcome in outcomes] == [False, False]
        assert sorted({call_id for call_id, _ in sink.events}) == ["a", "b"]
        assert len(sink.events) == 8

    async def test_the_body_sees_its_host(self) -> None:
        hosts: list[object] = []

        @define_tool(name="looks", description="")
        async def looks(args: TextArgs, exec: ToolRunContext) -> str:
            hosts.append(exec.host)
            return "done"

        host = ToolHost()
        registry, _ = registry_with(looks)
        await registry.execute(make_input("looks", host=host))
        await registry.execute(make_input("looks"))
        assert hosts == [host, None]

    async def test_a_host_that_is_not_a_tool_host_is_one_failure(self) -> None:
        registry, published = registry_with(report)
        result = await registry.execute(make_input("report", host={"on_progress": print}))
        assert isinstance(result, ToolFailure)
        assert result.error.message == "ToolExecutionInput.host must be a ToolHost, got dict"
        assert published.only is result


class Answers:
    """A host whose elicit/sample answer from a script, or wait for the call's signal."""

    def __init__(self, answer: object = None, *, hold: bool = False) -> None:
        self.answer = answer
        self.hold = hold
        self.requests: list[object] = []
        self.signals: list[AbortSignal] = []
        self.pending = anyio.Event()
        self.withdrawn = False
        self.finished = False

    async def __call__(self, exec: ToolExecution, request: object, signal: AbortSignal) -> Any:
        self.requests.append(request)
        self.signals.append(signal)
        try:
            if self.hold:
                self.pending.set()
                await signal.wait()
                with anyio.CancelScope(shield=True):
                    await anyio.lowlevel.checkpoint()  # withdrawing takes a moment
                self.withdrawn = True
                return Elicited[object]("cancel")
            if isinstance(self.answer, BaseException):
                raise self.answer
            return self.answer
        finally:
            self.finished = True


def asks(schema: Any) -> Any:
    @define_tool(name="asks", description="")
    async def asks(args: TextArgs, exec: ToolRunContext) -> str:
        answer = await exec.elicit("Who are you?", schema)
        return str(answer)

    return asks


class TestElicit:
    async def test_accepted_content_is_validated_as_the_typed_dict(self) -> None:
        answers = Answers(Elicited("accept", {"name": "Ada", "age": 36}))
        got: list[Elicited[Person]] = []

        @define_tool(name="asks", description="")
        async def asks_person(args: TextArgs, exec: ToolRunContext) -> str:
            answer = await exec.elicit("Who are you?", Person)
            got.append(answer)
            return str(answer)

        registry, _ = registry_with(asks_person)
        result = await registry.execute(make_input("asks", host=ToolHost(elicit=answers)))
        assert isinstance(result, ToolSuccess)
        assert result.value == 'accepted {"name": "Ada", "age": 36}'
        assert got[0].content == {"name": "Ada", "age": 36}
        assert got[0].accepted
        [request] = answers.requests
        assert isinstance(request, ElicitationRequest)
        assert request.message == "Who are you?"
        assert request.requested_schema["required"] == ["name", "age"]

    async def test_a_pydantic_model_and_a_json_schema(self) -> None:
        got: list[object] = []

        @define_tool(name="asks", description="")
        async def asks_both(args: TextArgs, exec: ToolRunContext) -> str:
            model = await exec.elicit("Name?", PersonModel)
            raw = await exec.elicit("Name?", {"type": "object", "properties": {}})
            got.extend([model.content, raw.content])
            return "done"

        answers = Answers(Elicited("accept", {"name": "Ada"}))
        registry, _ = registry_with(asks_both)
        result = await registry.execute(make_input("asks", host=ToolHost(elicit=answers)))
        assert isinstance(result, ToolSuccess), result
        assert got == [PersonModel(name="Ada"), {"name": "Ada"}]

    @pytest.mark.parametrize(("action", "text"), [("decline", "declined"), ("cancel", "cancelled")])
    async def test_declined_and_cancelled(self, action: Any, text: str) -> None:
        registry, _ = registry_with(asks(Person))
        host = ToolHost(elicit=Answers(Elicited(action, {"ignored": True})))
        result = await registry.execute(make_input("asks", host=host))
        assert isinstance(result, ToolSuccess)
        assert result.value == text

    @pytest.mark.parametrize(
        ("content", "problem"),
        [
            ({"age": 3}, "missing required name"),
            ({"name": 5}, "name: expected string, got 5"),
            ({"name": "a", "age": True}, "age: expected integer, got true"),
            ({"name": "a", "colour": "pink"}, 'colour: "pink" is not one of ["red", "blue"]'),
            ([1], "expected a JSON object, got FrozenList"),
        ],
    )
    async def test_a_json_schema_answer_is_checked_as_mcp_shapes_it(
        self, content: Any, problem: str
    ) -> None:
        schema: dict[str, JsonValue] = {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "age": {"type": "integer"},
                "colour": {"type": "string", "enum": ["red", "blue"]},
            },
            "required": ["name"],
        }
        registry, _ = registry_with(asks(schema))
        result = await registry.execute(
            make_input("asks", host=ToolHost(elicit=Answers(Elicited("accept", content))))
        )
        assert isinstance(result, ToolFailure)
        assert result.code == CAPABILITY_FAILED
        assert result.error.message == (
            f'tool "asks": the elicitation answer does not match its schema: {problem}'
        )

    async def test_a_json_schema_answer_that_fits(self) -> None:
        schema: dict[str, JsonValue] = {
            "type": "object",
            "properties": {"n": {"type": "number"}, "ok": {"type": "boolean"}},
            "required": ["n"],
        }
        answer = Elicited("accept", {"n": 1.5, "ok": False, "extra": [1]})
        registry, _ = registry_with(asks(schema))
        result = await registry.execute(make_input("asks", host=ToolHost(elicit=Answers(answer))))
        assert isinstance(result, ToolSuccess)
        assert result.value == 'accepted {"n": 1.5, "ok": false, "extra": [1]}'

    async def test_content_that_does_not_fit_is_capability_failed(self) -> None:
        registry, _ = registry_with(asks(Person))
        host = ToolHost(elicit=Answers(Elicited("accept", {"name": "Ada"})))
        result = await registry.execute(make_input("asks", host=host))
        assert isinstance(result, ToolFailure)
        assert result.code == CAPABILITY_FAILED
        assert result.error.message.startswith(
            'tool "asks": the elicitation answer does not match its schema: '
        )

    @pytest.mark.parametrize("host", [None, ToolHost(), ToolHost(sample=Answers())])
    async def test_no_such_capability_is_capability_unavailable(
        self, host: ToolHost | None
    ) -> None:
        registry, _ = registry_with(asks(Person))
        result = await registry.execute(make_input("asks", host=host))
        assert isinstance(result, ToolFailure)
        assert result.code == CAPABILITY_UNAVAILABLE
        assert result.error.message == (
            'tool "asks": elicitation is not available: the caller of this call offers none '
            "(ToolHost.elicit is not set)"
        )

    async def test_a_failing_host_is_capability_failed(self) -> None:
        registry, _ = registry_with(asks(Person))
        host = ToolHost(elicit=Answers(ConnectionError("client went away")))
        result = await registry.execute(make_input("asks", host=host))
        assert isinstance(result, ToolFailure)
        assert result.code == CAPABILITY_FAILED
        assert result.error.message == 'tool "asks": elicitation failed: client went away'

    @pytest.mark.parametrize(
        ("raised", "code", "message"),
        [
            (
                ToolError("the MCP client did not declare it", code=CAPABILITY_UNAVAILABLE),
                CAPABILITY_UNAVAILABLE,
                'tool "asks": elicitation is not available: the MCP client did not declare it',
            ),
            (
                ToolError("quota", code="QUOTA"),
                CAPABILITY_FAILED,
                'tool "asks": elicitation failed: quota',
            ),
        ],
    )
    async def test_a_host_that_refuses_says_why(
        self, raised: ToolError, code: str, message: str
    ) -> None:
        registry, _ = registry_with(asks(Person))
        result = await registry.execute(make_input("asks", host=ToolHost(elicit=Answers(raised))))
        assert isinstance(result, ToolFailure)
        assert result.code == code
        assert result.error.message == message

    async def test_an_abort_while_pending_withdraws_awaits_and_ends_aborted(self) -> None:
        answers = Answers(hold=True)
        registry, published = registry_with(asks(Person))
        stop = AbortController()
        results: list[object] = []

        async def call() -> None:
            results.append(
                await registry.execute(
                    make_input("asks", signal=stop.signal, host=ToolHost(elicit=answers))
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await answers.pending.wait()
            stop.abort("user pressed stop")
            await anyio.wait_all_tasks_blocked()
        [result] = results
        assert isinstance(result, ToolFailure)
        assert result.code == TOOL_ABORTED
        assert answers.withdrawn  # told,
        assert answers.finished  # and awaited to the end
        assert answers.signals[0].reason == "user pressed stop"
        assert published.only is result

    async def test_an_aborted_call_never_asks(self) -> None:
        answers = Answers(Elicited("accept", {"name": "Ada", "age": 1}))
        stop = AbortController()

        @define_tool(name="asks", description="")
        async def asks_late(args: TextArgs, exec: ToolRunContext) -> str:
            stop.abort()
            await exec.elicit("Who?", Person)
            return "asked"

        registry, _ = registry_with(asks_late)
        result = await registry.execute(
            make_input("asks", signal=stop.signal, host=ToolHost(elicit=answers))
        )
        assert isinstance(result, ToolFailure)
        assert result.code == TOOL_ABORTED
        assert answers.requests == []

    async def test_a_host_that_raises_once_told_ends_aborted(self) -> None:
        stop = AbortController()

        async def gives_up(exec: ToolExecution, request: object, signal: AbortSignal) -> Any:
            await signal.wait()
            raise ConnectionResetError("request withdrawn")

        registry, _ = registry_with(asks(Person))
        results: list[object] = []

        async def call() -> None:
            results.append(
                await registry.execute(
                    make_input("asks", signal=stop.signal, host=ToolHost(elicit=gives_up))
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.wait_all_tasks_blocked()
            stop.abort()
        assert isinstance(results[0], ToolFailure)
        assert results[0].code == TOOL_ABORTED

    async def test_host_cancellation_while_pending(self) -> None:
        answers = Answers(hold=True)
        registry, published = registry_with(asks(Person))
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(registry.execute, make_input("asks", host=ToolHost(elicit=answers)))
                await answers.pending.wait()
                scope.cancel()
        assert answers.finished
        result = published.only
        assert isinstance(result, ToolFailure)
        assert result.code == TOOL_ABORTED

    async def test_from_a_sync_body_through_from_thread(self) -> None:
        @define_tool(name="asks", description="")
        def asks_sync(args: TextArgs, exec: ToolRunContext) -> str:
            answer = anyio.from_thread.run(exec.elicit, "Who?", Person)
            return str(answer)

        answers = Answers(Elicited("accept", {"name": "Ada", "age": 36}))
        registry, _ = registry_with(asks_sync)
        result = await registry.execute(make_input("asks", host=ToolHost(elicit=answers)))
        assert isinstance(result, ToolSuccess)
        assert result.value == 'accepted {"name": "Ada", "age": 36}'

    async def test_only_while_the_body_runs(self) -> None:
        kept: list[ToolRunContext] = []

        @define_tool(name="keeps", description="")
        async def keeps(args: TextArgs, exec: ToolRunContext) -> str:
            kept.append(exec)
            return "done"

        registry, _ = registry_with(keeps)
        await registry.execute(make_input("keeps", host=ToolHost(elicit=Answers())))
        with pytest.raises(RuntimeError, match=r"^elicit\(\) is only available while"):
            await kept[0].elicit("Who?", Person)

    def test_str(self) -> None:
        accepted: Elicited[object] = Elicited("accept", {"a": 1})
        declined: Elicited[object] = Elicited("decline")
        cancelled: Elicited[object] = Elicited("cancel")
        assert (str(accepted), str(declined), str(cancelled)) == (
            'accepted {"a": 1}',
            "declined",
            "cancelled",
        )


class TestSample:
    async def test_a_string_is_one_user_message(self) -> None:
        answers = Answers(Sampled(content=[{"type": "text", "text": "4"}], model="test"))
        got: list[Sampled] = []

        @define_tool(name="asks", description="")
        async def asks_model(args: TextArgs, exec: ToolRunContext) -> str:
            sampled = await exec.sample("2+2?", max_tokens=5, system_prompt="terse")
            got.append(sampled)
            return str(sampled)

        registry, _ = registry_with(asks_model)
        result = await registry.execute(make_input("asks", host=ToolHost(sample=answers)))
        assert isinstance(result, ToolSuccess)
        assert result.value == "4"
        [request] = answers.requests
        assert isinstance(request, SamplingRequest)
        assert request.messages == ({"role": "user", "content": {"type": "text", "text": "2+2?"}},)
        assert (request.max_tokens, request.system_prompt) == (5, "terse")
        assert got[0].content == ({"type": "text", "text": "4"},)
        assert got[0].model == "test"

    async def test_mcp_shaped_messages(self) -> None:
        answers = Answers(Sampled(content=[{"type": "text", "text": "ok"}]))
        messages: list[Mapping[str, JsonValue]] = [
            {"role": "user", "content": {"type": "text", "text": "hi"}},
            {"role": "assistant", "content": {"type": "text", "text": "hello"}},
            {"role": "user", "content": {"type": "text", "text": "again"}},
        ]

        @define_tool(name="asks", description="")
        async def asks_model(args: TextArgs, exec: ToolRunContext) -> str:
            return str(await exec.sample(messages, max_tokens=10, stop_sequences=["\n"]))

        registry, _ = registry_with(asks_model)
        result = await registry.execute(make_input("asks", host=ToolHost(sample=answers)))
        assert isinstance(result, ToolSuccess)
        [request] = answers.requests
        assert isinstance(request, SamplingRequest)
        assert list(request.messages) == messages
        assert request.stop_sequences == ("\n",)

    @pytest.mark.parametrize(
        ("messages", "max_tokens", "match"),
        [
            ([], 5, r"^sample\(\): `messages` is empty$"),
            ([{"content": "x"}], 5, r"^sample\(\): messages\[0\] must be a mapping with a `role`"),
            ("hi", 0, r"^sample\(\): `max_tokens` must be a positive int, got 0$"),
        ],
    )
    async def test_bad_requests_raise_into_the_body(
        self, messages: Any, max_tokens: int, match: str
    ) -> None:
        @define_tool(name="asks", description="")
        async def asks_model(args: TextArgs, exec: ToolRunContext) -> str:
            with pytest.raises(ValueError, match=match):
                await exec.sample(messages, max_tokens=max_tokens)
            return "checked"

        registry, _ = registry_with(asks_model)
        result = await registry.execute(make_input("asks", host=ToolHost(sample=Answers())))
        assert isinstance(result, ToolSuccess)

    async def test_unavailable(self) -> None:
        @define_tool(name="asks", description="")
        async def asks_model(args: TextArgs, exec: ToolRunContext) -> str:
            return str(await exec.sample("hi", max_tokens=5))

        registry, _ = registry_with(asks_model)
        result = await registry.execute(make_input("asks"))
        assert isinstance(result, ToolFailure)
        assert result.code == CAPABILITY_UNAVAILABLE
        assert "sampling is not available" in result.error.message

    async def test_an_abort_while_pending_ends_aborted(self) -> None:
        answers = Answers(hold=True)
        stop = AbortController()

        @define_tool(name="asks", description="")
        async def asks_model(args: TextArgs, exec: ToolRunContext) -> str:
            return str(await exec.sample("hi", max_tokens=5))

        registry, _ = registry_with(asks_model)
        results: list[object] = []

        async def call() -> None:
            results.append(
                await registry.execute(
                    make_input("asks", signal=stop.signal, host=ToolHost(sample=answers))
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await answers.pending.wait()
            stop.abort()
        assert isinstance(results[0], ToolFailure)
        assert results[0].code == TOOL_ABORTED
        assert answers.withdrawn
        assert answers.finished

    async def test_a_wrong_answer_is_capability_failed(self) -> None:
        @define_tool(name="asks", description="")
        async def asks_model(args: TextArgs, exec: ToolRunContext) -> str:
            return str(await exec.sample("hi", max_tokens=5))

        registry, _ = registry_with(asks_model)
        result = await registry.execute(make_input("asks", host=ToolHost(sample=Answers("4"))))
        assert isinstance(result, ToolFailure)
        assert result.code == CAPABILITY_FAILED
        assert result.error.message == 'tool "asks": the host\'s sample() returned str, not Sampled'

    def test_str_is_the_text(self) -> None:
        sampled = Sampled(
            content=[
                {"type": "text", "text": "a"},
                {"type": "image", "data": "", "mimeType": "image/png"},
                {"type": "text", "text": "b"},
            ]
        )
        assert str(sampled) == "ab"


def test_the_input_field_is_optional_and_typed() -> None:
    signal = AbortController().signal
    plain = ToolExecutionInput(call_id="c", name="n", arguments={}, signal=signal)
    assert plain.host is None
    with pytest.raises(AttributeError):
        plain.host = ToolHost()  # type: ignore[misc]


async def test_abort_error_is_what_the_body_sees() -> None:
    answers = Answers(hold=True)
    stop = AbortController()
    seen: list[BaseException] = []

    @define_tool(name="asks", description="")
    async def asks_seen(args: TextArgs, exec: ToolRunContext) -> str:
        try:
            await exec.elicit("Who?", Person)
        except AbortError as error:
            seen.append(error)
            raise
        return "never"

    registry, _ = registry_with(asks_seen)
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            registry.execute, make_input("asks", signal=stop.signal, host=ToolHost(elicit=answers))
        )
        await answers.pending.wait()
        stop.abort("stop")
    assert isinstance(seen[0], AbortError)
    assert str(seen[0]) == "operation aborted: stop"


async def test_a_leftover_thread_s_event_posted_after_the_call_settled_is_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: a thread the body left behind passed the body's check, then posted its
    event after the call had settled; it reached the caller's host (found by the kit's
    review, issue 26.6)."""
    import toolseam._delivery

    checked = threading.Event()  # the leftover thread passed exec.progress's check
    settled = threading.Event()  # the call has returned
    original = toolseam._delivery.Delivery.emit

    def emit_late(self: Any, exec: ToolExecution, event: ToolEvent) -> None:
        if threading.current_thread().name == "leftover":
            checked.set()
            settled.wait()
        original(self, exec, event)

    monkeypatch.setattr(toolseam._delivery.Delivery, "emit", emit_late)
    leftover_threads: list[threading.Thread] = []

    @define_tool(name="leaves", description="")
    def leaves(args: TextArgs, exec: ToolRunContext) -> str:
        thread = threading.Thread(target=exec.progress, args=(1,), name="leftover")
        leftover_threads.append(thread)
        thread.start()
        checked.wait()
        return "done"

    sink = Sink()
    registry, _ = registry_with(leaves)
    result = await registry.execute(make_input("leaves", host=sink.host()))
    assert isinstance(result, ToolSuccess)
    settled.set()
    await anyio.to_thread.run_sync(leftover_threads[0].join)
    for _ in range(3):  # let the posted delivery run, were it still to be delivered
        await anyio.lowlevel.checkpoint()
    assert sink.events == []
