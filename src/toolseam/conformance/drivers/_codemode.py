r"""The driver of pydantic-ai-harness's ``CodeMode``: tools called from a program in ``run_code``.

An agent whose capability is `CodeMode` sees one tool, ``run_code``; the kit's scripted
tools are `pydantic_ai.Tool`\s inside it (``sequential=`` for tools not safe to overlap,
which CodeMode renders as plain ``def``\s, ``timeout=`` their deadline). A `FunctionModel`
answers the first request with one ``run_code`` call and the next with text. The program is
the scenario's (capability ``ptc``), or, for a scenario of one plain call, a program making
that one call and returning ``["ok", value]`` or ``["error", message]`` — so every clause
measures a call made through CodeMode. The stop button is pydantic-ai's run cancellation (a
`CancellationToken`); a cancelled run raises `RunCancelled`, whose history holds no return
for ``run_code``. CodeMode tells the model nothing per nested call on a stop (only on a limit
or a crash, in the retry prompt), tells a nested body nothing but task cancellation, and
stops a program only when it suspends: a program that computes is waited for, up to its
``max_duration_secs`` (30 s by default). The sandbox's processes are the pool's Monty
workers, read off the process table while a nested body runs. Batches, approval, wrappers,
listeners and observers are not driven (pydantic-ai's own driver measures those seams):
those clauses are skipped.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final, cast, final

from pydantic_ai import Agent, CancellationToken, ModelRetry, RunCancelled, Tool
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness import CodeMode

from .._driver import Call, Capability, Outcome, Scenario
from .._scripts import ScriptedTool
from ._common import TaskListen, host_cancelled, monty_program, no_result, versions
from ._pydantic_ai_parts import TIMED_OUT, outcome

__all__ = ["CodeModeDriver"]

_CODE: Final = "run_code"
_INTERRUPTED: Final = (
    "RunCancelled; the history holds no return for run_code, nor anything about the calls "
    "its program made"
)


def _tool(tool: ScriptedTool, seen: set[int]) -> Tool[None]:
    listen = TaskListen(ModelRetry)
    options: dict[str, Any] = {
        "takes_ctx": False,
        "name": tool.name,
        "description": tool.description,
        "timeout": tool.timeout,
        "sequential": not tool.parallel,
        "max_retries": 1,
    }
    if tool.sync:

        def sync_body(key: str) -> str:
            seen.update(_monty_workers())
            return tool.run_sync({"key": key}, listen)

        return Tool(sync_body, **options)

    async def body(key: str) -> str:
        seen.update(_monty_workers())
        return await tool.run({"key": key}, listen)

    return Tool(body, **options)


def _one_call(call: Call, sequential: bool) -> str:
    """A program making ``call`` and returning ``["ok", value]`` or ``["error", message]``."""
    made = f"{call.tool}(key={call.arguments['key']!r})"
    return "\n".join(
        [
            "try:",
            f"    result = ['ok', {made if sequential else 'await ' + made}]",
            "except Exception as error:",
            "    result = ['error', str(error)]",
            "result",
        ]
    )


def _code_part(messages: Sequence[ModelMessage], call_id: str) -> ToolReturnPart | None:
    """``run_code``'s return (a success, or a retry prompt for the model), if any."""
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart) and part.tool_call_id == call_id:
                    return part
    return None


def _plain_outcome(call_id: str, part: ToolReturnPart | None) -> Outcome:
    """The one call of a plain scenario, as its program reported it.

    A ``run_code`` that did not succeed (a type error, a crash: a retry prompt for the
    model) is that call's failure.
    """
    if part is None:
        return no_result(call_id, "the history holds no return for run_code")
    if part.outcome != "success":
        return outcome(call_id, part)
    returned = cast("object", part.content)
    if isinstance(returned, list):
        content = cast("list[object]", returned)
        if len(content) == 2 and content[0] == "ok":
            return Outcome(call_id, "ok", value=content[1])
        if len(content) == 2 and content[0] == "error":
            message = str(content[1])
            detail = f"raised in the program: {message}"
            if message.startswith(TIMED_OUT):
                return Outcome(call_id, "timeout", detail)
            return Outcome(call_id, "error", detail)
    return no_result(call_id, f"run_code returned {returned!r}")


def _monty_workers() -> set[int]:
    """The Monty worker processes this process has spawned and that still run (``/proc``)."""
    me = os.getpid()
    found: set[int] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:  # pragma: no cover - no /proc: nothing to report
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf8") as stat:
                text = stat.read()
        except OSError:
            continue
        name, rest = text.split("(", 1)[1].rsplit(")", 1)
        state, ppid = rest.split()[:2]
        if int(ppid) == me and state != "Z" and "monty" in name:
            found.add(int(entry))
    return found


@final
class CodeModeDriver:
    """Drives pydantic-ai-harness's `CodeMode`: every call is made by a program in ``run_code``."""

    @property
    def subject(self) -> str:
        """``"pydantic-ai-harness CodeMode"``."""
        return "pydantic-ai-harness CodeMode"

    @property
    def capabilities(self) -> Collection[Capability]:
        """Host cancellation, thread bodies, deadlines and programs."""
        return ("host_cancel", "sync_bodies", "timeouts", "ptc")

    @property
    def backends(self) -> Sequence[str]:
        """Asyncio (CodeMode's sandbox bindings and pydantic-ai's run cancellation)."""
        return ("asyncio",)

    def versions(self) -> Mapping[str, str]:
        """pydantic-ai-harness, pydantic-ai-slim and pydantic-monty."""
        return versions("pydantic-ai-harness", "pydantic-ai-slim", "pydantic-monty")

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        """One agent run: the model asks for one ``run_code`` call."""
        (call,) = scenario.calls
        program = scenario.program
        sequential = {t.name for t in scenario.tools if not t.parallel}
        if program is not None:
            code = monty_program(program)
        else:
            code = _one_call(call, call.tool in sequential)
        token = CancellationToken()

        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            if len(messages) == 1:
                scenario.stop.connect(token.cancel)  # the call exists from here on
                return ModelResponse(
                    parts=[ToolCallPart(_CODE, {"code": code}, tool_call_id=call.call_id)]
                )
            return ModelResponse(parts=[TextPart("done")])

        workers: set[int] = set()
        agent = Agent(
            FunctionModel(model),
            tools=[_tool(t, workers) for t in scenario.tools],
            deps_type=type(None),
            capabilities=[CodeMode()],
        )
        try:
            try:
                result = await agent.run("go", cancellation_token=token)
            finally:
                # run_code's return is inside the run: its end is the nearest point the
                # driver sees (CodeMode closes its pool there too).
                if scenario.code_returned is not None:
                    scenario.code_returned(sorted(workers))
        except RunCancelled:
            return [Outcome(call.call_id, "cancelled", _INTERRUPTED)]
        except Exception as error:
            if host_cancelled():
                raise
            return [no_result(call.call_id, f"the run raised {error!r}")]
        part = _code_part(result.all_messages(), call.call_id)
        if program is None:
            return [_plain_outcome(call.call_id, part)]
        if part is not None and part.outcome == "success":
            return [Outcome(call.call_id, "ok", value=part.content)]
        return [_plain_outcome(call.call_id, part)]
