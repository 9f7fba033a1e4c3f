"""Mutants of toolseam's driver for the clauses of what a body reaches: progress,
elicitation, processes.

Each class is toolseam with exactly one rule broken where a registry would break it: its
progress channel, the way it awaits the caller's elicitation, its process helper. The rest
of toolseam's driver is unchanged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import subprocess
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

from toolseam import (
    AbortSignal,
    ElicitationRequest,
    Elicited,
    ProgressEvent,
    ToolDefinition,
    ToolExecution,
    ToolHost,
    ToolRegistry,
    ToolRunContext,
    define_tool,
)
from toolseam.conformance import Outcome, Scenario, ScriptedTool
from toolseam.conformance.drivers._toolseam import (
    ExecReach,
    KeyArgs,
    define,
    host_for,
    registry_for,
    run_on,
)
from toolseam.conformance.drivers._toolseam import Listen as BodyListen

from ._base import Mutant, ToolseamMutant, race_abort

Elicit = Callable[[ToolExecution, ElicitationRequest, AbortSignal], Awaitable[Elicited[Any]]]

# -- progress ------------------------------------------------------------------------------


class _Unchecked(ExecReach):
    """Progress straight to the caller's host, whether or not the call still runs."""

    async def progress(self, progress: float, message: str) -> None:
        host = self._exec.host
        if host is not None and host.on_progress is not None:
            host.on_progress(self._exec, ProgressEvent(progress, None, message))


class LateProgress(ToolseamMutant):
    """Delivers progress reported after the call settled (no check that the body runs)."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        unchecked = functools.partial(define, reach=_Unchecked)
        return await run_on(registry_for(scenario), scenario, unchecked)


class _Batching(ExecReach):
    def __init__(self, exec: ToolRunContext) -> None:
        super().__init__(exec)
        self.held: list[tuple[float, str]] = []

    async def progress(self, progress: float, message: str) -> None:
        self.held.append((progress, message))

    async def flush(self) -> None:
        held, self.held = self.held, []
        for progress, message in held:
            await super().progress(progress, message)


class BatchedProgress(ToolseamMutant):
    """Hands the caller an async body's progress only once the body has returned."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        def batching(registry: ToolRegistry, tool: ScriptedTool) -> ToolDefinition[KeyArgs, str]:
            if tool.sync or not tool.reaches:
                return define(registry, tool)

            @define_tool(name=tool.name, description=tool.description)
            async def body(args: KeyArgs, exec: ToolRunContext) -> str:
                reach = _Batching(exec)
                try:
                    return await tool.run(args, BodyListen(registry, exec), reach)
                finally:
                    await reach.flush()  # with the result, as a batch

            return body

        return await run_on(registry_for(scenario), scenario, batching)


class ThreadProgressAfterReturn(ToolseamMutant):
    """Posts a thread body's progress on a path not ordered with the thread's completion:
    the caller receives it only after the call has returned."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        pending: list[tuple[str, float, str]] = []

        class Posting(ExecReach):
            def __init__(self, exec: ToolRunContext) -> None:
                super().__init__(exec)
                self._call_id = exec.call_id

            def progress_sync(self, progress: float, message: str) -> None:
                pending.append((self._call_id, progress, message))

        outcomes = await run_on(
            registry_for(scenario), scenario, functools.partial(define, reach=Posting)
        )
        sink = scenario.progress
        if sink is not None and pending:
            _after_this_step(lambda: [sink(*event) for event in pending])
        return outcomes


def _after_this_step(callback: Callable[[], object]) -> None:
    """Run ``callback`` on the event loop once the current task has yielded."""
    try:
        asyncio.get_running_loop().call_soon(callback)
    except RuntimeError:  # trio
        import trio

        trio.lowlevel.current_trio_token().run_sync_soon(callback)


# -- elicitation ---------------------------------------------------------------------------


def _with_elicit(scenario: Scenario, change: Callable[[Elicit | None], Elicit | None]) -> ToolHost:
    host = host_for(scenario) or ToolHost()
    return dataclasses.replace(host, elicit=change(host.elicit))


class AbandonsElicitation(ToolseamMutant):
    """Answers a pending elicitation ``cancel`` at the abort and leaves the caller's request
    running."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        def racing(honest: Elicit | None) -> Elicit | None:
            if honest is None:
                return None

            async def elicit(
                exec: ToolExecution, request: ElicitationRequest, signal: AbortSignal
            ) -> Elicited[Any]:
                answer = await race_abort(lambda: honest(exec, request, signal), signal.wait)
                return Elicited("cancel") if answer is None else answer[0]

            return elicit

        return await run_on(registry_for(scenario), scenario, host=_with_elicit(scenario, racing))


class TearsElicitationDown(ToolseamMutant):
    """Cancels the caller's pending elicitation (a cancel scope) at the abort."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        def tearing(honest: Elicit | None) -> Elicit | None:
            if honest is None:
                return None

            async def elicit(
                exec: ToolExecution, request: ElicitationRequest, signal: AbortSignal
            ) -> Elicited[Any]:
                with anyio.CancelScope() as scope:
                    registration = signal.add_listener(lambda _: scope.cancel())
                    try:
                        return await honest(exec, request, signal)
                    finally:
                        registration.remove()
                return Elicited("cancel")

            return elicit

        return await run_on(registry_for(scenario), scenario, host=_with_elicit(scenario, tearing))


class DeclinesWithoutHost(ToolseamMutant):
    """Answers ``decline`` for a caller that offers no elicitation, instead of failing."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        async def decline(
            exec: ToolExecution, request: ElicitationRequest, signal: AbortSignal
        ) -> Elicited[Any]:
            return Elicited("decline")

        host = _with_elicit(scenario, lambda honest: honest or decline)
        return await run_on(registry_for(scenario), scenario, host=host)


class LosesTheAnswer(ToolseamMutant):
    """Asks the caller, then hands the body a decline whatever it answered."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        def losing(honest: Elicit | None) -> Elicit | None:
            if honest is None:
                return None

            async def elicit(
                exec: ToolExecution, request: ElicitationRequest, signal: AbortSignal
            ) -> Elicited[Any]:
                await honest(exec, request, signal)
                return Elicited("decline")

            return elicit

        return await run_on(registry_for(scenario), scenario, host=_with_elicit(scenario, losing))


# -- processes -----------------------------------------------------------------------------


class _LeaderOnly(ExecReach):
    """A process helper that kills the process it started (SIGKILL), and not its group."""

    async def run_process(self, argv: Sequence[str]) -> None:
        process = await anyio.open_process(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            with anyio.CancelScope() as scope:
                registration = self._exec.signal.add_listener(lambda _: scope.cancel())
                try:
                    await process.wait()
                finally:
                    registration.remove()
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()
                await process.aclose()
        self._exec.signal.raise_if_aborted()


class LeavesProcessGroup(ToolseamMutant):
    """Its process helper stops the process it started, leaving that process's children."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        leader_only = functools.partial(define, reach=_LeaderOnly)
        return await run_on(registry_for(scenario), scenario, leader_only)


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "late-progress",
        LateProgress,
        frozenset({"progress.after-settle", "progress.after-settle-batch"}),
    ),
    Mutant("batched-progress", BatchedProgress, frozenset({"progress.delivered"})),
    Mutant(
        "thread-progress-after-return", ThreadProgressAfterReturn, frozenset({"progress.thread"})
    ),
    Mutant("abandons-elicitation", AbandonsElicitation, frozenset({"elicit.withdrawn"})),
    Mutant("tears-elicitation-down", TearsElicitationDown, frozenset({"elicit.withdrawn"})),
    Mutant("declines-without-host", DeclinesWithoutHost, frozenset({"elicit.unavailable"})),
    Mutant("loses-the-answer", LosesTheAnswer, frozenset({"elicit.answered"})),
    Mutant(
        "leaves-process-group",
        LeavesProcessGroup,
        frozenset({"process.no-child", "process.host-cancel"}),
    ),
)
"""Every mutant of this module, with exactly the clauses it breaks."""
