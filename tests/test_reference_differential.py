"""The fast engine equals the reference pipeline, call for call (issue 38).

Every scenario runs once through `ToolRegistry` and once through
`toolseam.reference.ReferenceRegistry`, each with a fresh harness, on the same backend. Both
must publish the same result (type, value, content, code, message, contexts), return it or
re-raise the host's cancellation alike, run the same stages in the same order (the trace),
reach quiescence (every body that started has finished before `execute()` or `wait_idle()`
returns) and leave no listener on the caller's signal.

Three families: an explicit grid (an event at every stage x every kind of body x caller
abort or host cancellation x stages that return or raise the abort), rows of the hostile
behaviour table of docs/reliability.md, and hypothesis-generated pipelines and batches.

Batches are compared call for call when their events land in an exclusive call's body (it
runs alone, so what every other call has done is fixed). An abort in a parallel call's body
lands wherever the schedule has put its siblings — the engine runs a dispatch in the batch's
task until its body blocks, the reference pre-executes the next call first — which the
contract leaves open (§7); there both engines are checked against the contract instead.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.from_thread
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typing_extensions import TypedDict

from support import checked_boundaries
from toolseam import (
    AbortController,
    Accept,
    ApprovalRequest,
    Ask,
    Block,
    Deny,
    JsonValue,
    Next,
    PostDecision,
    PreDecision,
    ReplaceValue,
    ToolCall,
    ToolDispatchExecution,
    ToolError,
    ToolExecution,
    ToolExecutionInput,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    define_tool,
    reference,
    run_tool_calls,
)
from toolseam._outcomes import classify
from toolseam._run import Boundary, CallState, _check_invariants
from toolseam.policies import timeout_policy

pytestmark = pytest.mark.anyio

Engine = Literal["fast", "reference"]
ENGINES: tuple[Engine, ...] = ("fast", "reference")
CHECKPOINTS = ("pre", "approval", "guard", "wrap-before", "body", "wrap-after", "post", "finalize")
BodyKind = Literal["async", "thread", "hand-written", "plain"]


@dataclass(frozen=True)
class Scenario:
    """How every stage of one call behaves, and what happens where."""

    body: BodyKind = "async"
    tool: Literal["success", "failure", "invalid-output", "ignore-signal", "timeout"] = "success"
    # The "timeout" tool's deadline. Short to end a call nothing else ends; long where the
    # caller or the host also stops the call, so that their stop, not a clock, comes first.
    deadline: float = 0.01
    cooperative: bool = True  # the body raises its abort once its signal aborted
    defer: bool = False  # the body defers a context
    pre: Literal["none", "allow", "deny", "ask", "raise", "honour", "wrong-type"] = "allow"
    approval: Literal[
        "allowed-once", "rejected", "cancelled", "unavailable", "raise", "bogus", "honour"
    ] = "allowed-once"
    guard: Literal["none", "pass", "deny", "raise", "honour"] = "pass"
    wrapper: Literal[
        "none",
        "delegate",
        "own-signal",
        "short-circuit",
        "fail",
        "raise",
        "honour",
        "not-a-result",
        "bad-signal",
        "late-await",
        "twice",
    ] = "delegate"
    post: Literal[
        "none", "accept", "context", "block", "replace", "raise", "honour", "wrong-type"
    ] = "accept"
    finalize: Literal["keep", "replace", "raise"] = "keep"
    observer: Literal["ok", "raise"] = "ok"
    event: Literal["none", "caller", "wrapper-signal", "host"] = "none"
    at: str = "body"
    interrupt: str = "none"  # the checkpoint that raises `Interrupt`, a BaseException
    base_reason: bool = False  # the caller aborts with a BaseException as the reason


@pytest.fixture(autouse=True)
def _states_checked() -> Iterator[None]:
    """`CallState`'s invariants, asserted at every stage boundary of every fast-engine call."""
    with checked_boundaries():
        yield


class Interrupt(BaseException):
    """A BaseException that is not the host's cancellation (contract §5)."""


class Args(TypedDict):
    n: int


@dataclass
class Harness:
    """One registry (fast or reference) with every stage driven by ``scenario``."""

    scenario: Scenario
    engine: Engine
    caller: AbortController = field(default_factory=AbortController)
    wrapper_controller: AbortController | None = None
    scope: anyio.CancelScope | None = None
    loop_thread: int = 0
    fired: bool = False
    trace: list[str] = field(default_factory=list[str])
    started: int = 0
    finished: int = 0
    published: list[tuple[str, ToolResult]] = field(default_factory=list[tuple[str, ToolResult]])
    host_cancelled: bool = False
    kept: list[Awaitable[ToolResult]] = field(default_factory=list[Awaitable[ToolResult]])

    def fire(self, checkpoint: str, call_id: str = "c") -> None:
        self.trace.append(f"{call_id}:{checkpoint}")
        s = self.scenario
        if s.interrupt == checkpoint:
            raise Interrupt(checkpoint)
        if s.event == "none" or self.fired or s.at != checkpoint:
            return
        self.fired = True
        if s.event == "caller":
            self.caller.abort(Interrupt("caller stop") if s.base_reason else RuntimeError("stop"))
        elif s.event == "wrapper-signal":
            if self.wrapper_controller is not None:
                self.wrapper_controller.abort("wrapper deadline")
        else:
            assert self.scope is not None
            self.host_cancelled = True
            if threading.get_ident() == self.loop_thread:
                self.scope.cancel()
            else:
                anyio.from_thread.run_sync(self.scope.cancel)

    def host_fired_here(self, call_id: str) -> bool:
        """Whether this body just cancelled the host (a thread body then waits to hear it)."""
        return self.trace[-1] == f"{call_id}:body" and self.host_cancelled

    async def hit(self, checkpoint: str, exec: ToolExecution) -> None:
        self.fire(checkpoint, exec.call_id)
        await anyio.lowlevel.checkpoint()


def _outcome(h: Harness, exec: ToolRunContext) -> int | str:
    s = h.scenario
    if s.defer:
        exec.defer_context({"deferred": exec.call_id})
    if s.cooperative and exec.signal.aborted:
        exec.signal.raise_if_aborted()
    if s.tool == "failure":
        raise ToolError("body failed", code="BODY_FAILED")
    if s.tool == "invalid-output":
        return "invalid output"
    return 7


def build(h: Harness) -> ToolRegistry | reference.ReferenceRegistry:
    """The registry of ``h.engine`` with the harness's stages registered."""
    s = h.scenario

    class Approver:
        async def request(self, request: ApprovalRequest, /) -> Any:
            await h.hit("approval", request.execution)
            if s.approval == "raise":
                raise RuntimeError("approval raised")
            if s.approval == "bogus":
                return "maybe"
            if s.approval == "honour":
                request.signal.raise_if_aborted()
                return "allowed-once"
            return s.approval

    registry: ToolRegistry | reference.ReferenceRegistry = (
        ToolRegistry(approval=Approver())
        if h.engine == "fast"
        else reference.ReferenceRegistry(approval=Approver())
    )

    def finalize(exec: ToolExecution, result: ToolResult) -> Any:
        h.fire("finalize", exec.call_id)
        if s.finalize == "raise":
            raise RuntimeError("finalize raised")
        if s.finalize == "replace":
            return ({"type": "text", "text": "final"},)
        return None

    timeout = s.deadline if s.tool == "timeout" else None

    async def async_body(args: Args, exec: ToolRunContext) -> int | str:
        h.started += 1
        try:
            await h.hit("body", exec)
            if s.tool in ("ignore-signal", "timeout"):
                await exec.signal.wait()  # stops only once its signal aborts
                if s.tool == "ignore-signal":
                    return 7
            return _outcome(h, exec)
        finally:
            h.finished += 1

    def parallel(args: Args) -> bool:
        return args["n"] == 1  # n=2: exclusive

    @define_tool(
        name="async_tool",
        description="",
        finalize_content=finalize,
        timeout=timeout,
        is_concurrency_safe=parallel,
    )
    async def async_tool(args: Args, exec: ToolRunContext) -> int:
        return await async_body(args, exec)  # type: ignore[return-value]

    @define_tool(
        name="thread_tool",
        description="",
        finalize_content=finalize,
        timeout=timeout,
        is_concurrency_safe=parallel,
    )
    def thread_tool(args: Args, exec: ToolRunContext) -> int:
        h.started += 1
        try:
            h.fire("body", exec.call_id)
            if h.host_fired_here(exec.call_id):
                # The registry hears of the host's cancellation in the loop's thread; wait
                # for it to abort this body's signal, or the outcome would be a race.
                exec.signal.wait_sync()
            if s.tool in ("ignore-signal", "timeout"):
                exec.signal.wait_sync()
                if s.tool == "ignore-signal":
                    return 7
            return _outcome(h, exec)  # type: ignore[return-value]
        finally:
            h.finished += 1

    class HandWritten:
        """A `ToolDefinition` written by hand, without define_tool."""

        name = "hand_tool"
        description = ""
        parameters: dict[str, JsonValue] = {"type": "object"}  # noqa: RUF012

        @property
        def timeout(self) -> float | None:
            return timeout

        def parse_arguments(self, arguments: JsonValue, /) -> Args:
            assert isinstance(arguments, dict)
            return {"n": int(arguments["n"])}  # type: ignore[arg-type]

        def run(self, args: Args, exec: ToolRunContext, /) -> Awaitable[int | str]:
            return async_body(args, exec)

        def serialize_output(self, output: int | str, /) -> JsonValue:
            if not isinstance(output, int):
                raise TypeError("output must be an int")
            return output

        def render(self, args: Args, value: JsonValue, /) -> Sequence[Any]:
            return ({"type": "text", "text": f"n={value}"},)

        def is_concurrency_safe(self, args: Args, /) -> bool:
            return parallel(args)

        def finalize_content(self, exec: ToolExecution, result: ToolResult, /) -> Any:
            return finalize(exec, result)

    @define_tool(name="plain_tool", description="")
    async def plain_tool(args: Args, exec: ToolRunContext) -> str:
        """No option at all (no finalize_content, no concurrency answer) and a str output."""
        output = await async_body(args, exec)
        return "seven" if output == 7 else output  # type: ignore[return-value]

    registry.register(async_tool)
    registry.register(thread_tool)
    registry.register(HandWritten())  # type: ignore[arg-type]
    registry.register(plain_tool)

    async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        await h.hit("pre", exec)
        decision = await next()
        if s.pre == "deny":
            return Deny("pre denied")
        if s.pre == "ask":
            return Ask("please")
        if s.pre == "raise":
            raise RuntimeError("pre raised")
        if s.pre == "honour":
            exec.signal.raise_if_aborted()
        if s.pre == "wrong-type":
            return "allow"  # type: ignore[return-value]
        return decision

    def guard(exec: ToolExecution) -> str | None:
        h.fire("guard", exec.call_id)
        if s.guard == "deny":
            return "guard denied"
        if s.guard == "raise":
            raise RuntimeError("guard raised")
        if s.guard == "honour":
            exec.signal.raise_if_aborted()
        return None

    async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
        choice = s.wrapper
        upstream = exec.signal
        if choice == "own-signal":
            h.wrapper_controller = AbortController()
            exec.signal = h.wrapper_controller.signal
        if choice == "bad-signal":
            exec.signal = "not a signal"  # type: ignore[assignment]
        try:
            await h.hit("wrap-before", exec)
            if choice == "short-circuit":
                result: ToolResult = ToolSuccess(value=1, additional_contexts=("short",))
            elif choice == "twice":
                result = await next()
                result = await next()
            elif choice == "late-await":
                h.kept.append(next())
                return ToolSuccess(value=2)
            else:
                result = await next()
            await h.hit("wrap-after", exec)
        finally:
            if choice != "bad-signal":
                exec.signal = upstream
        if choice == "fail":
            return ToolFailure.from_message("wrapper failed", additional_contexts=("wf",))
        if choice == "raise":
            raise RuntimeError("wrapper raised")
        if choice == "honour":
            upstream.raise_if_aborted()
        if choice == "not-a-result":
            return "result"  # type: ignore[return-value]
        return replace_contexts(result, ("wrapped",))

    async def post(
        exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
    ) -> PostDecision:
        await h.hit("post", exec)
        await next()
        choice = s.post
        if choice == "block":
            return Block("post blocked", additional_contexts=("blocked",))
        if choice == "replace":
            return ReplaceValue(3, additional_contexts=("replaced",))
        if choice == "raise":
            raise RuntimeError("post raised")
        if choice == "honour":
            exec.signal.raise_if_aborted()
        if choice == "context":
            return Accept(additional_contexts=("post",))
        if choice == "wrong-type":
            return "accept"  # type: ignore[return-value]
        return Accept()

    def observe(exec: ToolExecution, result: ToolResult) -> None:
        h.published.append((exec.call_id, result))
        h.fire("observed", exec.call_id)
        if s.observer == "raise":
            raise RuntimeError("observer raised")

    if s.pre != "none":
        registry.on_pre_execute(pre)
    if s.guard != "none":
        registry.add_guard(guard)
    if s.wrapper != "none":
        registry.on_execute(wrap)
    if s.post != "none":
        registry.on_post_execute(post)
    registry.on_result(observe)
    return registry


def replace_contexts(result: ToolResult, extra: tuple[str, ...]) -> ToolResult:
    from dataclasses import replace

    return replace(result, additional_contexts=(*result.additional_contexts, *extra))


TOOLS = {
    "async": "async_tool",
    "thread": "thread_tool",
    "hand-written": "hand_tool",
    "plain": "plain_tool",
}


def summary(result: ToolResult) -> tuple[object, ...]:
    """Everything a consumer can see of a result."""
    if isinstance(result, ToolSuccess):
        return ("ok", result.value, result.content, result.meta, result.additional_contexts)
    info = result.error.info
    return (
        "error",
        result.error.message,
        None if info is None else (info.name, info.code),
        result.content,
        result.additional_contexts,
    )


@dataclass
class Observed:
    """What one engine did with one scenario."""

    returned: tuple[object, ...] | None
    published: list[tuple[str, tuple[object, ...]]]
    trace: list[str]
    quiescent: bool
    listeners: int


async def run_one(
    scenario: Scenario,
    engine: Engine,
    *,
    via: Literal["execute", "exclusive batch", "parallel batch"] = "execute",
    arguments: object = None,
    prepare: Callable[[ToolRegistry | reference.ReferenceRegistry], None] | None = None,
) -> Observed:
    """Run ``scenario`` through ``engine``: `execute`, or a batch of that one call.

    A one-call batch runs its call as `execute` does (an exclusive call through the same
    stages, a parallel one through the sequencer), so its observations are the same.
    """
    h = Harness(scenario, engine, loop_thread=threading.get_ident())
    registry = build(h)
    if prepare is not None:
        prepare(registry)
    if arguments is None:
        arguments = {"n": 2 if via == "exclusive batch" else 1}
    returned: ToolResult | None = None
    with anyio.CancelScope() as scope:
        h.scope = scope
        try:
            if via == "execute":
                returned = await registry.execute(
                    ToolExecutionInput(
                        call_id="c",
                        name=TOOLS[scenario.body],
                        arguments=arguments,
                        signal=h.caller.signal,
                    )
                )
            else:
                assert isinstance(registry, ToolRegistry)
                [outcome] = await run_tool_calls(
                    registry,
                    [ToolCall("c", TOOLS[scenario.body], arguments)],
                    signal=h.caller.signal,
                )
                returned = outcome.result
        except Interrupt as interrupt:  # propagates once the result is published
            h.trace.append(f"raised {interrupt.args[0]}")
    quiescent = h.started == h.finished  # before wait_idle: execute() itself waited
    for late in h.kept:  # awaited after the wrappers returned: raises, the body never runs
        with pytest.raises(RuntimeError) as raised:
            await late
        h.trace.append(f"late: {raised.value}")
    await registry.wait_idle()
    return Observed(
        None if returned is None else summary(returned),
        [(call_id, summary(result)) for call_id, result in h.published],
        h.trace,
        quiescent,
        h.caller.signal._listener_count(),
    )


async def assert_same(scenario: Scenario) -> Observed:
    fast = await run_one(scenario, "fast")
    ref = await run_one(scenario, "reference")
    assert ref == fast, scenario
    assert fast.quiescent
    assert fast.listeners == 0
    assert len(fast.published) == 1
    return fast


# -- the grid: an event at every stage x every kind of body x caller / host ---------------


@pytest.mark.parametrize("style", ["return", "honour"])
@pytest.mark.parametrize("event", ["caller", "host"])
@pytest.mark.parametrize("body", ["async", "thread", "hand-written"])
@pytest.mark.parametrize("at", CHECKPOINTS)
async def test_an_event_at_every_stage_matches(
    at: str, body: BodyKind, event: Literal["caller", "host"], style: str
) -> None:
    """A caller abort or host cancellation at each stage; stages return or raise the abort."""
    honour = style == "honour"
    await assert_same(
        Scenario(
            body=body,
            pre="honour" if honour else "allow",
            approval="honour" if honour else "allowed-once",
            guard="honour" if honour else "pass",
            wrapper="honour" if honour else "delegate",
            post="honour" if honour else "accept",
            defer=True,
            event=event,
            at=at,
        )
    )


@pytest.mark.parametrize("body", ["async", "thread", "hand-written"])
async def test_ask_then_abort_at_approval_matches(body: BodyKind) -> None:
    for approval in ("allowed-once", "cancelled", "rejected", "honour"):
        await assert_same(
            Scenario(body=body, pre="ask", approval=approval, event="caller", at="approval")  # type: ignore[arg-type]
        )


# -- the hostile-behaviour table (docs/reliability.md), where it is one call ---------------

HOSTILE = {
    "late next": Scenario(wrapper="late-await"),
    "wrapper sets a non-signal": Scenario(wrapper="bad-signal"),
    "wrapper returns a non-result": Scenario(wrapper="not-a-result"),
    "pre-execute answers a wrong type": Scenario(pre="wrong-type"),
    "approval answers a bogus string": Scenario(pre="ask", approval="bogus"),
    "post-execute answers a wrong type": Scenario(post="wrong-type"),
    "finalizer raises": Scenario(finalize="raise"),
    "observer raises": Scenario(observer="raise"),
    "invalid output": Scenario(tool="invalid-output"),
    "invalid output, hand-written": Scenario(body="hand-written", tool="invalid-output"),
    "replace after a denial": Scenario(guard="deny", post="replace"),
    "abort while pre-execute runs, post keeps contexts": Scenario(
        post="context", event="caller", at="pre"
    ),
    "body ignores its signal until it aborts (async)": Scenario(
        tool="ignore-signal", event="caller", at="body"
    ),
    "body ignores its signal until it aborts (thread)": Scenario(
        body="thread", tool="ignore-signal", event="host", at="body"
    ),
    "deadline (async)": Scenario(tool="timeout"),
    "deadline (thread)": Scenario(body="thread", tool="timeout"),
    "deadline, host cancels first": Scenario(tool="timeout", event="host", at="body"),
    "a wrapper calls next() twice": Scenario(wrapper="twice"),
    "a BaseException reason, the body raises it": Scenario(
        event="caller", at="body", base_reason=True
    ),
    "a BaseException reason, stages raise it": Scenario(
        event="caller", at="pre", base_reason=True, pre="honour", post="honour"
    ),
    "a BaseException reason, thread body": Scenario(
        body="thread", event="caller", at="body", base_reason=True
    ),
    **{
        f"an interrupt from {where} ({body})": Scenario(
            body=body, interrupt=where, pre="ask" if where == "approval" else "allow"
        )
        for where in ("pre", "approval", "guard", "wrap-before", "body", "wrap-after", "post")
        for body in ("async", "thread")
    },
    "an interrupt from the finalizer": Scenario(interrupt="finalize"),
    "an interrupt from an observer": Scenario(interrupt="observed"),
    "an interrupt after the caller aborted": Scenario(interrupt="post", event="caller", at="body"),
    "wrapper's own signal aborts": Scenario(
        wrapper="own-signal", event="wrapper-signal", at="body"
    ),
    "wrapper's own signal aborts before delegating": Scenario(
        wrapper="own-signal", event="wrapper-signal", at="wrap-before"
    ),
}


@pytest.mark.parametrize("name", list(HOSTILE))
async def test_hostile_behaviour_matches(name: str) -> None:
    await assert_same(HOSTILE[name])


async def test_pre_aborted_and_materialization_failures_match() -> None:
    async def one(engine: Engine, arguments: object, aborted: bool) -> tuple[object, ...]:
        h = Harness(Scenario(), engine)
        registry = build(h)
        if aborted:
            h.caller.abort("before")
        result = await registry.execute(
            ToolExecutionInput(
                call_id="c", name="async_tool", arguments=arguments, signal=h.caller.signal
            )
        )
        assert h.trace == ["c:finalize", "c:observed"]
        return summary(result)

    for arguments, aborted in (
        ({"n": 1}, True),
        ({"n": {1, 2}}, True),
        ({"n": float("nan")}, False),
    ):
        assert await one("fast", arguments, aborted) == await one("reference", arguments, aborted)


async def test_hostile_input_fields_match() -> None:
    class Hostile(str):
        __slots__ = ()

        def __hash__(self) -> int:
            raise RuntimeError("no hash")

    async def one(engine: Engine, call_id: object, name: object, root: object) -> object:
        h = Harness(Scenario(), engine)
        registry = build(h)
        result = await registry.execute(
            ToolExecutionInput(
                call_id=call_id,  # type: ignore[arg-type]
                name=name,  # type: ignore[arg-type]
                arguments={"n": 1},
                signal=h.caller.signal,
                root_call_id=root,  # type: ignore[arg-type]
            )
        )
        return summary(result), h.trace

    for fields in (
        (Hostile("c"), Hostile("async_tool"), Hostile("r")),
        (1, "async_tool", None),
        ("c", 2.5, None),
        ("c", "async_tool", 3),
    ):
        assert await one("fast", *fields) == await one("reference", *fields), fields


# -- hypothesis: generated pipelines ------------------------------------------------------


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    event = draw(st.sampled_from(["none", "caller", "caller", "host", "wrapper-signal"]))
    wrapper = draw(
        st.sampled_from(
            ["delegate"] * 6
            + ["none", "own-signal", "short-circuit", "fail", "raise", "honour", "not-a-result"]
        )
    )
    if event == "wrapper-signal":
        wrapper = "own-signal"
    return Scenario(
        body=draw(st.sampled_from(["async", "thread", "hand-written"])),
        tool=draw(st.sampled_from(["success"] * 4 + ["failure", "invalid-output"])),
        cooperative=draw(st.booleans()),
        defer=draw(st.booleans()),
        pre=draw(st.sampled_from(["allow"] * 4 + ["none", "deny", "ask", "raise", "honour"])),
        approval=draw(
            st.sampled_from(
                ["allowed-once"] * 2 + ["rejected", "cancelled", "unavailable", "raise", "honour"]
            )
        ),
        guard=draw(st.sampled_from(["pass"] * 4 + ["none", "deny", "raise", "honour"])),
        wrapper=wrapper,
        post=draw(
            st.sampled_from(
                ["accept"] * 3 + ["none", "context", "block", "replace", "raise", "honour"]
            )
        ),
        finalize=draw(st.sampled_from(["keep"] * 4 + ["replace", "raise"])),
        event=event,
        at=draw(st.sampled_from(CHECKPOINTS)),
        interrupt=draw(st.sampled_from(["none"] * 12 + [*CHECKPOINTS, "observed"])),
        base_reason=draw(st.booleans()),
    )


@settings(
    max_examples=150,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    deadline=None,
)
@given(scenario=scenarios())
async def test_generated_pipelines_match(scenario: Scenario) -> None:
    await assert_same(scenario)


# -- batches -------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchCall:
    body: BodyKind
    exclusive: bool


async def run_batch(
    calls: Sequence[BatchCall],
    abort_at: int | None,
    host_at: int | None,
    engine: Engine,
    max_parallel: int,
    fails: bool = False,
    *,
    anywhere: bool = False,
    interrupt_at: tuple[int, str] | None = None,
) -> tuple[object, ...]:
    scenario = Scenario(post="context", defer=True, tool="failure" if fails else "success")
    h = Harness(scenario, engine, loop_thread=threading.get_ident())
    registry = build(h)
    fire_on: dict[str, Callable[[], None]] = {}
    # Unless ``anywhere``, events only in the body of an exclusive call, which runs alone:
    # every call before it has published and none after it has started, whatever the
    # schedule. An abort in a parallel call's body is schedule-dependent (module docstring).
    if not anywhere:
        abort_at = abort_at if abort_at is not None and calls[abort_at].exclusive else None
        host_at = host_at if host_at is not None and calls[host_at].exclusive else None
    if abort_at is not None:
        fire_on[f"b{abort_at}"] = lambda: h.caller.abort("stop")

    def hook(checkpoint: str, call_id: str = "c") -> None:
        h.trace.append(f"{call_id}:{checkpoint}")
        if interrupt_at is not None and (f"b{interrupt_at[0]}", interrupt_at[1]) == (
            call_id,
            checkpoint,
        ):
            raise Interrupt(checkpoint)
        if checkpoint == "body" and call_id in fire_on:
            action = fire_on.pop(call_id)
            if threading.get_ident() == h.loop_thread:
                action()
            else:
                anyio.from_thread.run_sync(action)

    h.fire = hook  # type: ignore[method-assign]
    tool_calls = [
        ToolCall(
            f"b{i}",
            "thread_tool"
            if c.body == "thread"
            else ("hand_tool" if c.body == "hand-written" else "async_tool"),
            {"n": 2 if c.exclusive else 1},
        )
        for i, c in enumerate(calls)
    ]
    outcomes: list[Any] | None = None
    raised: str | None = None
    with anyio.CancelScope() as scope:
        if host_at is not None:

            def cancel() -> None:
                h.host_cancelled = True
                scope.cancel()

            fire_on[f"b{host_at}"] = cancel
        try:
            if engine == "fast":
                assert isinstance(registry, ToolRegistry)
                outcomes = await run_tool_calls(
                    registry, tool_calls, signal=h.caller.signal, max_parallel=max_parallel
                )
            else:
                assert isinstance(registry, reference.ReferenceRegistry)
                outcomes = await reference.run_tool_calls(
                    registry, tool_calls, signal=h.caller.signal, max_parallel=max_parallel
                )
        except Interrupt as interrupt:  # bare, once every call has its result
            raised = interrupt.args[0]
    quiescent = h.started == h.finished
    await registry.wait_idle()
    per_call = {
        call.call_id: [t for t in h.trace if t.startswith(f"{call.call_id}:")]
        for call in tool_calls
    }
    pre_order = [t for t in h.trace if t.endswith(":pre")]
    post_order = [t for t in h.trace if t.endswith(":post")]
    published = sorted((call_id, summary(result)) for call_id, result in h.published)
    returned = (
        None
        if outcomes is None
        else [(o.call.call_id, o.dispatched, summary(o.result)) for o in outcomes]
    )
    return (returned, published, per_call, pre_order, post_order, raised, quiescent)


@settings(
    max_examples=50,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    deadline=None,
)
@given(
    calls=st.lists(
        st.builds(
            BatchCall,
            body=st.sampled_from(["async", "thread", "hand-written"]),
            exclusive=st.booleans(),
        ),
        min_size=1,
        max_size=4,
    ),
    abort_at=st.none() | st.integers(0, 3),
    host_at=st.none() | st.integers(0, 3),
    fails=st.booleans(),
    max_parallel=st.integers(1, 3),
)
async def test_generated_batches_match(
    calls: list[BatchCall],
    abort_at: int | None,
    host_at: int | None,
    fails: bool,
    max_parallel: int,
) -> None:
    """Batches with exclusive calls, aborts and host cancellation in an exclusive body."""
    abort_at = None if abort_at is None else abort_at % len(calls)
    host_at = None if host_at is None else host_at % len(calls)
    fast = await run_batch(calls, abort_at, host_at, "fast", max_parallel, fails)
    ref = await run_batch(calls, abort_at, host_at, "reference", max_parallel, fails)
    assert ref == fast
    assert fast[-1] is True


@settings(
    max_examples=30,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    deadline=None,
)
@given(
    calls=st.lists(
        st.builds(
            BatchCall,
            body=st.sampled_from(["async", "thread", "hand-written"]),
            exclusive=st.booleans(),
        ),
        min_size=1,
        max_size=4,
    ),
    abort_at=st.none() | st.integers(0, 3),
    host_at=st.none() | st.integers(0, 3),
    max_parallel=st.integers(1, 3),
)
async def test_batches_with_an_event_in_any_body_keep_the_contract(
    calls: list[BatchCall], abort_at: int | None, host_at: int | None, max_parallel: int
) -> None:
    """An event in a parallel call's body: both engines keep the contract (§7).

    Not compared with each other: where a sibling is when the abort lands depends on the
    schedule — the engine runs a dispatch in the batch's task until its body blocks, the
    reference pre-executes the next call first — and the contract leaves it open.
    """
    abort_at = None if abort_at is None else abort_at % len(calls)
    host_at = None if host_at is None else host_at % len(calls)
    for engine in ENGINES:
        returned, published, per_call, pre_order, post_order, _, quiescent = await run_batch(
            calls, abort_at, host_at, engine, max_parallel, anywhere=True
        )
        assert quiescent
        ids = [f"b{i}" for i in range(len(calls))]
        assert pre_order == sorted(pre_order, key=lambda t: ids.index(t.split(":")[0]))
        assert post_order == sorted(post_order, key=lambda t: ids.index(t.split(":")[0]))
        once = [call_id for call_id, _ in published]  # type: ignore[attr-defined]
        assert len(once) == len(set(once))
        if returned is not None:
            assert [r[0] for r in returned] == ids  # type: ignore[attr-defined]
            assert sorted(once) == ids
        for call_id, result in published:  # type: ignore[attr-defined]
            code = result[2][1] if result[0] == "error" and result[2] else None
            ran = f"{call_id}:body" in per_call[call_id]  # type: ignore[index]
            if code == "ABORTED":
                assert ran, (engine, call_id)
            if code == "ABORTED_BEFORE_DISPATCH":
                assert not ran, (engine, call_id)


@pytest.mark.parametrize("where", ["pre", "body", "post", "finalize", "observed"])
@pytest.mark.parametrize("body", ["async", "thread"])
async def test_an_interrupt_in_a_batch_matches(where: str, body: BodyKind) -> None:
    """An interrupt from one call: the batch stops as on an abort, then raises it bare."""
    calls = [BatchCall(body, exclusive=True) for _ in range(3)]
    fast = await run_batch(calls, None, None, "fast", 2, interrupt_at=(1, where))
    ref = await run_batch(calls, None, None, "reference", 2, interrupt_at=(1, where))
    assert ref == fast
    assert fast[-2] == where


# -- the legal states of a call (CallState's table) -----------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
async def test_the_state_checks_run_at_every_boundary(engine: Engine) -> None:
    """Both engines pass the same boundaries, in the same order, for a call."""
    with checked_boundaries() as checked:
        await run_one(Scenario(), engine)
    assert checked == [
        "started",
        "started",
        "before dispatch",
        "before dispatch",
        "dispatched",
        "dispatched",
        "post-executed",
        "published",
        "published",
    ]


def test_the_state_checks_refuse_an_illegal_state() -> None:
    def fresh() -> CallState:
        return CallState(0, "c", "c", "t", None, None, AbortController().signal, None, 0, None)

    _check_invariants(fresh(), "started")
    illegal: list[tuple[str, Boundary, Callable[[CallState], None]]] = [
        ("invoked before dispatch", "before dispatch", lambda run: run._invoke(run._signal)),
        ("in the body between stages", "dispatched", lambda run: setattr(run, "_in_body", True)),
        ("final without a result", "before dispatch", lambda run: setattr(run, "_final", True)),
        ("no result after dispatch", "dispatched", lambda run: None),
        (
            "a denial that is a success",
            "post-executed",
            lambda run: (
                setattr(run, "_denied", True),
                setattr(run, "_result", ToolSuccess(value=1)),
            ),
        ),
        (
            "ABORTED, body not invoked",
            "published",
            lambda run: setattr(run, "_result", classify(body_invoked=True)),
        ),
        (
            "ABORTED_BEFORE_DISPATCH, body invoked",
            "published",
            lambda run: (
                setattr(run, "_result", classify(body_invoked=False)),
                run._invoke(run._signal),
                setattr(run, "_in_body", False),
                setattr(run, "_pending", None),
            ),
        ),
        (
            "exec.signal left replaced",
            "started",
            lambda run: setattr(run, "_signal", AbortController().signal),
        ),
    ]
    for name, boundary, make_illegal in illegal:
        run = fresh()
        make_illegal(run)
        try:
            _check_invariants(run, boundary)
        except AssertionError:
            continue
        pytest.fail(f"not refused: {name}")
    # A wrapper's own cancellation result is the wrapper's: not classified.
    run = fresh()
    run._result = classify(body_invoked=True)
    _check_invariants(run, "dispatched", wrapper_results=True)


# -- the fast paths: each "≡" of the engine against the reference ---------------------------

# The engine's fast paths for a pipeline without some stage's listeners (`_stage_before`,
# `_stage_dispatch`, `_stage_after` in _engine.py), each with events where they decide.
FAST_PATHS = {
    "no pre-execute listener, no guard": Scenario(pre="none", guard="none"),
    "no around-dispatch wrapper": Scenario(wrapper="none"),
    "no post-execute listener": Scenario(post="none"),
    "no listener at all": Scenario(pre="none", guard="none", wrapper="none", post="none"),
}
FAST_PATH_EVENTS = (
    ("none", "body"),
    ("caller", "body"),
    ("host", "body"),
    ("caller", "finalize"),
    ("caller", "post"),
)


@pytest.mark.parametrize(("event", "at"), FAST_PATH_EVENTS)
@pytest.mark.parametrize("body", ["async", "thread", "hand-written", "plain"])
@pytest.mark.parametrize("name", list(FAST_PATHS))
async def test_fast_paths_match(name: str, body: BodyKind, event: str, at: str) -> None:
    """A stage without listeners takes the engine's fast path; the reference runs its chain."""
    scenario = FAST_PATHS[name]
    for tool in ("success", "failure"):
        await assert_same(
            Scenario(
                **{
                    **scenario.__dict__,
                    "body": body,
                    "tool": tool,
                    "defer": True,
                    "event": event,
                    "at": at,
                }
            )
        )


async def test_an_abort_between_the_start_and_before_dispatch_matches() -> None:
    """`_stage_before` with no listener, the caller aborted after `_start` (a thread's abort).

    Driven stage by stage: `execute` reads the caller's signal in `_start` and then at
    once in `_stage_before`, so only another thread's abort lands in between.
    """
    published: dict[Engine, object] = {}
    for engine in ENGINES:
        h = Harness(Scenario(pre="none", guard="none", post="context"), engine)
        registry = build(h)
        call_input = ToolExecutionInput(
            call_id="c", name="async_tool", arguments={"n": 1}, signal=h.caller.signal
        )
        if isinstance(registry, ToolRegistry):
            run = registry._start(call_input)
            h.caller.abort("stop")
            assert registry._stage_before(run) is None
            for step in (registry._stage_dispatch(run), registry._stage_after(run)):
                if step is not None:
                    await step
            registry._publish(run)
        else:
            call = registry._start(call_input)
            h.caller.abort("stop")
            await registry._stage(call, registry._before_dispatch)
            await registry._stage(call, registry._after_dispatch)
            registry._publish(call)
        published[engine] = ([(c, summary(r)) for c, r in h.published], h.trace)
    assert published["fast"] == published["reference"]
    [(_, result)] = published["fast"][0]  # type: ignore[index]
    assert result[2][1] == "ABORTED_BEFORE_DISPATCH"


@pytest.mark.parametrize("via", ["exclusive batch", "parallel batch"])
@pytest.mark.parametrize("event", ["none", "caller", "host"])
@pytest.mark.parametrize("at", CHECKPOINTS)
@pytest.mark.parametrize("body", ["async", "thread"])
async def test_a_one_call_batch_matches_execute(
    via: Literal["exclusive batch", "parallel batch"], event: str, at: str, body: BodyKind
) -> None:
    """`run_tool_calls` drives a call as `execute` does (exclusive: the stages in a row;
    parallel: the sequencer, which steps the dispatch by hand), against the reference.

    Only what the batch returns may differ, on a host cancellation after the result was
    published (at ``finalize``): `execute` returns it, the batch reaches one more checkpoint
    (its task group's end) and re-raises the cancellation (contract §7).
    """
    scenario = Scenario(body=body, event=event, at=at, defer=True)  # type: ignore[arg-type]
    batch = await run_one(scenario, "fast", via=via)
    ref = await run_one(scenario, "reference")
    if event == "host" and at == "finalize" and batch.returned is None:
        batch.returned = ref.returned
    assert batch == ref


@pytest.mark.parametrize(
    "arguments",
    [
        {"n": 1},
        {"n": "one"},
        {},
        {"n": 1, "extra": True},
        {"n": 1, "pad": ["x" * 64] * 2_000},  # large: a private plain copy, where taken
        [1],
    ],
    ids=["valid", "wrong type", "missing", "extra key", "large", "not an object"],
)
@pytest.mark.parametrize("stages", ["all", "none"])
@pytest.mark.parametrize("body", ["async", "thread", "hand-written", "plain"])
async def test_arguments_are_validated_alike(
    arguments: object, stages: str, body: BodyKind
) -> None:
    """define_tool's `_parse` (the snapshot's UTF-8 flag, the private plain copy) and the
    hand-written `parse_arguments`, against the reference's `parse_arguments`."""
    scenario = (
        Scenario(body=body)
        if stages == "all"
        else Scenario(body=body, pre="none", guard="none", wrapper="none", post="none")
    )
    fast = await run_one(scenario, "fast", arguments=arguments)
    ref = await run_one(scenario, "reference", arguments=arguments)
    assert fast == ref


def test_execution_mode_matches() -> None:
    """`Engine._mode`'s define_tool branch and its general one, against the reference."""
    fast = build(Harness(Scenario(), "fast"))
    ref = build(Harness(Scenario(), "reference"))
    signal = AbortController().signal
    for name in (*TOOLS.values(), "missing_tool"):
        for arguments in ({"n": 1}, {"n": 2}, {"n": "x"}, {}, {"n": {1}}):
            call_input = ToolExecutionInput(
                call_id="c", name=name, arguments=arguments, signal=signal
            )
            assert fast.execution_mode(call_input) == ref.execution_mode(call_input), (
                name,
                arguments,
            )


@pytest.mark.parametrize("tool", ["success", "timeout", "failure"])
@pytest.mark.parametrize("event", ["none", "caller", "host"])
@pytest.mark.parametrize("body", ["async", "thread"])
async def test_a_sole_timeout_policy_matches_the_built_in_deadline(
    tool: str, event: str, body: BodyKind
) -> None:
    """`timeout_policy(registry)` as the only wrapper takes the built-in deadline's path;
    the reference (which has no timeout_policy) enforces the built-in deadline."""
    # A 10 ms deadline beside a caller's or host's stop would race them (a loaded CI machine
    # once saw TOOL_TIMEOUT against ABORTED): those runs get a deadline that never comes.
    deadline = 0.01 if event == "none" else 600.0
    scenario = Scenario(
        body=body,
        tool=tool,  # type: ignore[arg-type]
        wrapper="none",
        event=event,  # type: ignore[arg-type]
        at="body",
        deadline=deadline,
    )

    def policy(registry: ToolRegistry | reference.ReferenceRegistry) -> None:
        assert isinstance(registry, ToolRegistry)
        registry.on_execute(timeout_policy(registry))

    fast = await run_one(scenario, "fast", prepare=policy)
    ref = await run_one(scenario, "reference")
    assert fast == ref
