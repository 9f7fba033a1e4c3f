"""The scripted scenario behind ``python -m toolseam demo``.

Every call runs against one registry whose stages all write to a per-call trace; the
scenario decides at which stage the caller (or the host) aborts. Orderings are driven by
the stages themselves, never by sleeps, so the output is the same on every run.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import IO, Any, Literal

import anyio
import anyio.lowlevel
from pydantic import BaseModel, ModelWrapValidatorHandler, ValidationError, model_validator

from ._approval import ApprovalAnswer, ApprovalRequest
from ._capabilities import ProgressEvent
from ._decisions import Ask, PostDecision, PreDecision
from ._define import define_tool
from ._errors import AbortError
from ._registry import ToolRegistry
from ._results import ToolResult, ToolSuccess
from ._signals import AbortController, AbortSignal
from ._stages import Next
from ._views import (
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionInput,
    ToolHost,
    ToolRunContext,
)

__all__ = ["run_demo"]

WIDTH = 80


@dataclasses.dataclass
class Scenario:
    """One scripted call."""

    title: str
    tool: str
    arguments: object
    reason: str = "user pressed stop"
    abort_at: str | None = None
    host_cancel_at: str | None = None
    pre_aborted: bool = False
    abort_at_progress: float | None = None
    trace: list[str] = dataclasses.field(default_factory=list[str])
    progress: list[str] = dataclasses.field(default_factory=list[str])
    controller: AbortController = dataclasses.field(default_factory=AbortController)
    scope: anyio.CancelScope | None = None
    published: ToolResult | None = None
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def enter(self, stage: str) -> None:
        """Record a stage, then fire the scripted abort if this is its stage."""
        with self.lock:
            self.trace.append(stage)
        if stage == self.abort_at:
            self.controller.abort(self.reason)
        if stage == self.host_cancel_at and self.scope is not None:
            with self.lock:
                self.trace.append("!host-cancel")
            self.scope.cancel()

    def on_progress(self, exec: ToolExecution, event: ProgressEvent) -> None:
        """The caller's progress sink (`ToolHost.on_progress`); may fire the abort."""
        total = "" if event.total is None else f"/{event.total:g}"
        self.progress.append(f"{event.progress:g}{total}")
        if event.progress == self.abort_at_progress:
            self.controller.abort(self.reason)


def scenarios() -> list[Scenario]:
    """The nine scripted calls, fresh for each run (controllers are single-use)."""
    return [
        Scenario("a successful call", "echo", {"text": "hello"}),
        Scenario(
            "the caller aborted before calling",
            "echo",
            {"text": "hi"},
            reason="turn already over",
            pre_aborted=True,
        ),
        Scenario(
            "abort while approval waits",
            "dangerous",
            {"text": "rm"},
            reason="user said no more",
            abort_at="approval",
        ),
        Scenario("abort while a cooperative body runs", "slow", {"text": "x"}, abort_at="body"),
        Scenario(
            "wrapper short-circuit overtaken by abort",
            "cached",
            {"text": "c"},
            reason="session closed",
            abort_at="wrap",
        ),
        Scenario(
            "sync body in a worker thread, aborted",
            "blocking",
            {"text": "t"},
            reason="user pressed stop",
            abort_at="body",
        ),
        Scenario(
            "the host cancels the awaiting task", "slow", {"text": "h"}, host_cancel_at="body"
        ),
        Scenario("invalid arguments", "echo", {"text": 42}),
        Scenario(
            "a long call reports progress; stopped at 3 of 10",
            "long",
            {"text": "l"},
            abort_at_progress=3,
        ),
    ]


def build_registry(current: Callable[[], Scenario]) -> ToolRegistry:
    """The demo registry: four tools and a tracing listener on every stage."""

    class Approver:
        async def request(self, request: ApprovalRequest, /) -> ApprovalAnswer:
            current().enter("approval")
            # A cooperative approval UI: it stops waiting when the caller aborts.
            await request.signal.wait()
            return "cancelled"

    registry = ToolRegistry(approval=Approver())

    class EchoArgs(BaseModel):
        """Arguments of the demo tools; validating them is part of the body call."""

        text: str

        @model_validator(mode="wrap")
        @classmethod
        def _traced(cls, data: Any, handler: ModelWrapValidatorHandler[EchoArgs]) -> EchoArgs:
            try:
                return handler(data)
            except ValidationError:
                current().enter("body: args rejected")
                raise

    @define_tool(name="echo", description="Echo the text.")
    async def echo(args: EchoArgs, exec: ToolRunContext) -> str:
        current().enter("body")
        return args.text

    @define_tool(name="slow", description="Wait until aborted (a cooperative body).")
    async def slow(args: EchoArgs, exec: ToolRunContext) -> str:
        current().enter("body")
        await exec.signal.wait()
        exec.signal.raise_if_aborted()
        return args.text

    @define_tool(name="blocking", description="Block a worker thread until aborted.")
    def blocking(args: EchoArgs, exec: ToolRunContext) -> str:
        current().enter("body")
        exec.signal.wait_sync()
        raise AbortError(exec.signal.reason)

    @define_tool(name="cached", description="Served from a wrapper's cache.")
    async def cached(args: EchoArgs, exec: ToolRunContext) -> str:
        current().enter("body")
        return args.text

    @define_tool(name="dangerous", description="Needs approval.")
    async def dangerous(args: EchoArgs, exec: ToolRunContext) -> str:
        current().enter("body")
        return args.text

    @define_tool(name="long", description="Ten steps, reporting progress after each.")
    async def long(args: EchoArgs, exec: ToolRunContext) -> str:
        current().enter("body")
        for step in range(1, 11):
            await anyio.lowlevel.checkpoint()  # a step of real work
            exec.progress(step, 10, f"step {step}")
            exec.signal.raise_if_aborted()  # stop between steps when told
        return args.text

    for tool in (echo, slow, blocking, cached, dangerous, long):
        registry.register(tool)

    async def pre(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        current().enter("pre")
        decision = await next()
        return Ask("deletes files") if exec.name == "dangerous" else decision

    async def wrap(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
        current().enter("wrap")
        if exec.name == "cached":
            return ToolSuccess(value="from cache")
        return await next()

    async def post(
        exec: ToolExecution, result: ToolResult, next: Next[PostDecision]
    ) -> PostDecision:
        current().enter("post")
        return await next()

    def observe(exec: ToolExecution, result: ToolResult) -> None:
        scenario = current()
        scenario.enter("result")
        scenario.published = result

    registry.on_pre_execute(pre)
    registry.on_execute(wrap)
    registry.on_post_execute(post)
    registry.on_result(observe)
    registry.add_guard(lambda exec: None)
    return registry


def _code(result: ToolResult) -> str:
    if isinstance(result, ToolSuccess):
        return "OK"
    info = result.error.info
    return info.code if info is not None else "ERROR"


def _clip(line: str) -> str:
    return line if len(line) <= WIDTH else line[: WIDTH - 3] + "..."


def _timeline(trace: list[str]) -> str:
    marks = {"!host-cancel": "[HOST CANCEL]"}
    return _clip(" > ".join(marks.get(step, step) for step in trace))


async def _run(out: IO[str]) -> None:
    current: list[Scenario] = []
    registry = build_registry(lambda: current[-1])
    out.write(f"toolseam demo: {len(scenarios())} calls, one registry\n")
    out.write("-" * WIDTH + "\n")
    for number, scenario in enumerate(scenarios(), start=1):
        current.append(scenario)

        def on_abort(signal: AbortSignal, scenario: Scenario = scenario) -> None:
            with scenario.lock:
                scenario.trace.append(f"[ABORT {signal.reason!r}]")

        if scenario.pre_aborted:
            scenario.controller.abort(scenario.reason)
            scenario.trace.append(f"[ABORT {scenario.reason!r}]")
        else:
            scenario.controller.signal.add_listener(on_abort)
        call = ToolExecutionInput(
            call_id=f"call_{number}",
            name=scenario.tool,
            arguments=scenario.arguments,
            signal=scenario.controller.signal,
            # What the caller offers the body beyond the signal: here, a progress sink.
            host=ToolHost(on_progress=scenario.on_progress),
        )
        returned: ToolResult | None = None
        with anyio.CancelScope() as scope:
            scenario.scope = scope
            returned = await registry.execute(call)
        published = scenario.published
        assert published is not None, "every call publishes exactly one result"
        if isinstance(published, ToolSuccess):
            detail = f"OK: {published.value!r}"
        else:
            detail = f"{_code(published)}: {published.error.message}"
        out.write(f"{number}. {scenario.title}\n")
        out.write(f"   {_timeline(scenario.trace)}\n")
        if scenario.progress:
            out.write(_clip(f"   progress {' '.join(scenario.progress)}") + "\n")
        out.write(_clip(f"   => {detail}") + "\n")
        if returned is not None:
            assert returned is published, "execute() returns the published result"
        else:
            out.write("   (published; then execute() re-raised the host's cancellation)\n")
    out.write("-" * WIDTH + "\n")
    out.write(_LEGEND)


_LEGEND = """\
Legend
  pre     pre-execute chain          approval  ApprovalService.request (Ask)
  wrap    around-dispatch wrapper    body      the tool body (sync: in a thread)
  post    post-execute chain         result    result observers, once per call
  [ABORT 'reason']  the caller's signal aborted here, with that reason
  [HOST CANCEL]     the task awaiting execute() was cancelled by its host
  ABORTED                  the body was invoked, then cancellation won
  ABORTED_BEFORE_DISPATCH  cancellation stopped the call before its body
  INVALID_ARGS             the body call validates its arguments first
                           (body: args rejected): invoked, yet never ran
  progress 1/10 ...        exec.progress() events, as the caller's ToolHost
                           received them (the stop came from that sink)
Why post runs where it runs: every call that reached the stages goes through
post-execute, cancelled ones too, so its listeners can attach context (3-6,
8, 9). A pre-aborted call (2) skips every stage; a host cancellation (7)
publishes its one result at once and lets the cancellation go on.
"""


Backend = Literal["asyncio", "trio"]


def run_demo(*, backend: Backend = "asyncio", out: IO[str]) -> int:
    """Run the scenario on ``backend``, writing the report to ``out``; returns 0."""
    anyio.run(_run, out, backend=backend)
    return 0
