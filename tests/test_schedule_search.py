"""Schedule search: the contract holds at every moment a cancellation can land.

Hypothesis picks how every stage behaves and the named checkpoint at which the caller
aborts, a wrapper's own signal aborts, or the host cancels. Each scenario runs twice on the
same backend: once without the event (the baseline) and once with it. Because the stages
behave the same in both runs (except a cooperative body, which is the point), the baseline
says what the outcome "would have been", and the invariants compare against it.

Profiles (``TOOLSEAM_HYPOTHESIS_PROFILE``): ``ci`` (default, 300 examples per backend) and
``thorough`` (10 000). See docs/reliability.md.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.from_thread
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typing_extensions import TypedDict

from support import checked_boundaries
from toolseam import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    AbortController,
    AbortError,
    Accept,
    ApprovalAnswer,
    ApprovalRequest,
    Ask,
    Block,
    Deny,
    Next,
    PostDecision,
    PreDecision,
    ReplaceValue,
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
)

CHECKPOINTS = (
    "pre",
    "approval",
    "guard",
    "wrap-before",
    "body",
    "wrap-after",
    "post",
    "finalize",
)
Event = Literal["none", "caller", "wrapper-signal", "host"]

# Every failure a stage can produce has its own message, so a result names its origin.
STAGE_FAILURES = {
    "pre denied": "pre",
    "approval required": "pre",
    "pre raised": "pre",
    "rejected by approval": "approval",
    "approval unavailable": "approval",
    "approval cancelled": "approval",
    "approval raised": "approval",
    "guard denied": "guard",
    "guard raised": "guard",
    "body failed": "body",
    "invalid output": "body",
    "wrapper failed": "wrap-after",
    "wrapper raised": "wrap-after",
    "post blocked": "post",
    "post raised": "post",
    "finalize raised": "finalize",
}


@dataclass(frozen=True)
class Scenario:
    body_kind: Literal["async", "thread"]
    tool: Literal["success", "failure", "invalid-output"]
    cooperative: bool
    pre: Literal["allow", "deny", "ask", "raise"]
    approval: Literal["allowed-once", "rejected", "cancelled", "unavailable", "raise"]
    guard: Literal["pass", "deny", "raise"]
    wrapper: Literal["delegate", "own-signal", "short-circuit", "fail", "raise"]
    post: Literal["accept", "block", "replace", "raise"]
    finalize: Literal["keep", "raise"]
    event: Event
    at: str


def _mostly(happy: str, *others: str) -> st.SearchStrategy[Any]:
    """The happy choice four times as often as the others together.

    Otherwise some stage fails in nearly every example and events rarely reach the body.
    """
    return st.sampled_from([happy] * (4 * len(others)) + list(others))


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    event: Event = draw(st.sampled_from(["caller", "caller", "wrapper-signal", "host"]))
    wrapper = draw(_mostly("delegate", "own-signal", "short-circuit", "fail", "raise"))
    if event == "wrapper-signal":
        # A wrapper's own signal exists only while the wrapper delegates.
        wrapper = "own-signal"
        at = draw(st.sampled_from(["wrap-before", "body", "wrap-after", "post"]))
    else:
        at = draw(st.sampled_from(CHECKPOINTS))
    return Scenario(
        body_kind=draw(st.sampled_from(["async", "thread"])),
        tool=draw(_mostly("success", "failure", "invalid-output")),
        cooperative=draw(st.booleans()),
        pre=draw(_mostly("allow", "deny", "ask", "raise")),
        approval=draw(_mostly("allowed-once", "rejected", "cancelled", "unavailable", "raise")),
        guard=draw(_mostly("pass", "deny", "raise")),
        wrapper=wrapper,
        post=draw(_mostly("accept", "block", "replace", "raise")),
        finalize=draw(_mostly("keep", "raise")),
        event=event,
        at=at,
    )


@pytest.fixture(autouse=True)
def _states_checked() -> Iterator[None]:
    """`CallState`'s invariants, asserted at every stage boundary of every fast-engine call."""
    with checked_boundaries():
        yield


class Args(TypedDict):
    n: int


@dataclass
class Run:
    """What one execution did, as the harness saw it."""

    scenario: Scenario
    with_event: bool
    caller: AbortController = field(default_factory=AbortController)
    wrapper_controller: AbortController | None = None
    scope: anyio.CancelScope | None = None
    loop_thread: int = 0
    fired: bool = False
    ran: list[str] = field(default_factory=list[str])
    body_started: bool = False
    body_finished: bool = False
    published: list[ToolResult] = field(default_factory=list[ToolResult])

    async def hit(self, checkpoint: str) -> None:
        """Record an async checkpoint and fire the event there; always a checkpoint."""
        self.fire(checkpoint)
        await anyio.lowlevel.checkpoint()

    def fire(self, checkpoint: str) -> None:
        self.ran.append(checkpoint)
        scenario = self.scenario
        if not self.with_event or self.fired or scenario.at != checkpoint:
            return
        self.fired = True
        if scenario.event == "caller":
            self.caller.abort("caller stop")
        elif scenario.event == "wrapper-signal":
            if self.wrapper_controller is not None:
                self.wrapper_controller.abort("wrapper deadline")
        elif scenario.event == "host":
            assert self.scope is not None
            if threading.get_ident() == self.loop_thread:
                self.scope.cancel()
            else:  # a sync body in its worker thread
                anyio.from_thread.run_sync(self.scope.cancel)


def build(current: list[Run]) -> ToolRegistry:
    """One harness registry; every stage consults ``current[-1]``."""

    class Approver:
        async def request(self, request: ApprovalRequest, /) -> ApprovalAnswer:
            run = current[-1]
            await run.hit("approval")
            answer = run.scenario.approval
            if answer == "raise":
                raise RuntimeError("approval raised")
            return answer

    registry = ToolRegistry(approval=Approver())

    def outcome(run: Run, exec: ToolRunContext) -> Any:
        scenario = run.scenario
        if scenario.cooperative and scenario.tool == "success" and exec.signal.aborted:
            raise AbortError(exec.signal.reason)
        if scenario.tool == "failure":
            raise ToolError("body failed", code="BODY_FAILED")
        if scenario.tool == "invalid-output":
            return "invalid output"  # not an int: INVALID_TOOL_OUTPUT
        return 7

    def finalize(exec: ToolExecution, result: ToolResult) -> None:
        run = current[-1]
        run.fire("finalize")
        if run.scenario.finalize == "raise":
            raise RuntimeError("finalize raised")

    @define_tool(name="async_tool", description="", finalize_content=finalize)
    async def async_tool(args: Args, exec: ToolRunContext) -> int:
        run = current[-1]
        run.body_started = True
        try:
            await run.hit("body")
            return outcome(run, exec)  # type: ignore[no-any-return]
        finally:
            run.body_finished = True

    @define_tool(name="thread_tool", description="", finalize_content=finalize)
    def thread_tool(args: Args, exec: ToolRunContext) -> int:
        run = current[-1]
        run.body_started = True
        try:
            run.fire("body")
            if run.scenario.cooperative:
                exec.signal.wait_sync(0)  # a thread that checks its signal
            return outcome(run, exec)  # type: ignore[no-any-return]
        finally:
            run.body_finished = True

    for tool in (async_tool, thread_tool):
        registry.register(tool)

    async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        run = current[-1]
        await run.hit("pre")
        decision = await next()
        choice = run.scenario.pre
        if choice == "deny":
            return Deny("pre denied")
        if choice == "ask":
            return Ask("please")
        if choice == "raise":
            raise RuntimeError("pre raised")
        return decision

    def guard(exec: ToolExecution) -> str | None:
        run = current[-1]
        run.fire("guard")
        if run.scenario.guard == "deny":
            return "guard denied"
        if run.scenario.guard == "raise":
            raise RuntimeError("guard raised")
        return None

    async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
        run = current[-1]
        choice = run.scenario.wrapper
        upstream = exec.signal
        if choice == "own-signal":
            run.wrapper_controller = AbortController()
            exec.signal = run.wrapper_controller.signal
        try:
            await run.hit("wrap-before")
            if choice == "short-circuit":
                result: ToolResult = ToolSuccess(value=1)
            else:
                result = await next()
            await run.hit("wrap-after")
        finally:
            exec.signal = upstream
        if choice == "fail":
            return ToolFailure.from_message("wrapper failed")
        if choice == "raise":
            raise RuntimeError("wrapper raised")
        return result

    async def post(
        exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
    ) -> PostDecision:
        run = current[-1]
        await run.hit("post")
        choice = run.scenario.post
        if choice == "block":
            return Block("post blocked")
        if choice == "replace":
            return ReplaceValue(3)
        if choice == "raise":
            raise RuntimeError("post raised")
        return Accept()

    registry.on_pre_execute(pre)
    registry.add_guard(guard)
    registry.on_execute(wrap)
    registry.on_post_execute(post)
    registry.on_result(lambda exec, result: current[-1].published.append(result))
    return registry


async def execute_once(
    registry: ToolRegistry, current: list[Run], scenario: Scenario, *, with_event: bool
) -> tuple[Run, ToolResult | None]:
    run = Run(scenario, with_event, loop_thread=threading.get_ident())
    current.append(run)
    name = "async_tool" if scenario.body_kind == "async" else "thread_tool"
    call = ToolExecutionInput(call_id="c", name=name, arguments={"n": 1}, signal=run.caller.signal)
    returned: ToolResult | None = None
    with anyio.CancelScope() as scope:
        run.scope = scope
        returned = await registry.execute(call)
    return run, returned


def _code(result: ToolResult) -> str | None:
    if not isinstance(result, ToolFailure):
        return None
    return None if result.error.info is None else result.error.info.code


def _origin(result: ToolResult) -> str | None:
    """The stage whose failure this is, or None for successes and cancellations."""
    if not isinstance(result, ToolFailure) or _code(result) in (
        TOOL_ABORTED,
        TOOL_ABORTED_BEFORE_DISPATCH,
    ):
        return None
    message = result.error.message
    for text, stage in STAGE_FAILURES.items():
        if message.startswith(text) or message.endswith(text) or text in message:
            return stage
    if message.startswith('tool "') and "invalid output" in message:
        return "body"
    if message.startswith("operation aborted"):  # a body stopped by a wrapper's own signal
        return "body"
    return "unknown: " + message


def check_invariants(
    base: Run, base_result: ToolResult | None, run: Run, result: ToolResult | None
) -> None:
    scenario = run.scenario
    # Exactly one published result; execute() returned it, unless the host cancelled.
    assert len(run.published) == 1, run.published
    published = run.published[0]
    if result is not None:
        assert result is published
    else:
        assert scenario.event == "host"
        assert run.fired
    # Started work reached quiescence before execute() returned or re-raised.
    assert run.body_started == run.body_finished
    # The registry never holds on to the caller's signal.
    assert run.caller.signal._listener_count() == 0
    code = _code(published)
    if code == TOOL_ABORTED:
        assert run.body_started, "ABORTED although the body never ran"
    if code == TOOL_ABORTED_BEFORE_DISPATCH:
        assert not run.body_started, "ABORTED_BEFORE_DISPATCH although the body ran"
    origin = _origin(published)
    assert origin is None or not origin.startswith("unknown"), origin
    if origin is not None:
        # A failure is only ever one that a stage of *this* run produced.
        assert origin in run.ran or (origin == "body" and run.body_started), (origin, run.ran)
    if not run.fired:
        # No event: the outcome is deterministic.
        assert base_result is not None
        assert base.published
        assert _summary(published) == _summary(base.published[0])
        return
    if scenario.event == "caller" and code in (TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH):
        # Cancellation never replaces a failure: the baseline's failure can only be
        # missing here because the stage that produced it never ran.
        base_origin = _origin(base.published[0])
        # An approval answer of "cancelled" means "because the caller aborted" when the
        # caller did abort; only without an abort is it a denial (contract §5).
        cancelled_approval = base_origin == "approval" and scenario.approval == "cancelled"
        if base_origin not in (None, "finalize") and not cancelled_approval:
            assert base_origin not in run.ran or (base_origin == "body" and not run.body_started), (
                base_origin,
                run.ran,
                _summary(published),
            )
    if scenario.event == "wrapper-signal":
        # Only the caller's signal makes a cancellation result.
        assert code not in (TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH) or (
            code == TOOL_ABORTED_BEFORE_DISPATCH and not run.body_started
        )


def _summary(result: ToolResult) -> tuple[object, ...]:
    if isinstance(result, ToolSuccess):
        return ("ok", result.value)
    return ("error", result.error.message, _code(result))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(scenario=scenarios())
async def test_every_cancellation_point_keeps_the_contract(scenario: Scenario) -> None:
    current: list[Run] = []
    registry = build(current)
    tasks_before = len(anyio.get_running_tasks())
    base, base_result = await execute_once(registry, current, scenario, with_event=False)
    run, result = await execute_once(registry, current, scenario, with_event=True)
    check_invariants(base, base_result, run, result)
    published = run.published[0]
    event(f"{scenario.event} fired at {scenario.at}" if run.fired else "event not reached")
    event(f"result: {_code(published) or ('success' if not published.is_error else 'failure')}")
    assert len(anyio.get_running_tasks()) == tasks_before
