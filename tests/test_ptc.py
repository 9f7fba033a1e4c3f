"""`toolseam.ptc`: ``run_code`` runs a program in a pydantic-monty sandbox; every tool call it
makes is a nested call through the registry's whole pipeline; a stop tells and awaits the nested
calls, lets no further one run, and kills the sandbox process before the call returns.

Every test runs on asyncio and trio. Orderings are decided by events (a nested body reports it
started; the test aborts then); the only clock in here is a limit or a grace under test, whose
expiry is the behaviour checked, never a wait that decides an ordering.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from typing_extensions import TypedDict

from toolseam import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    TOOL_TIMEOUT,
    AbortController,
    Deny,
    ElicitationRequest,
    Elicited,
    ExecutionToken,
    LogEvent,
    Next,
    PreDecision,
    ProgressEvent,
    ToolExecution,
    ToolExecutionInput,
    ToolFailure,
    ToolHost,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    ToolSuccess,
    define_tool,
)
from toolseam.ptc import (
    CONTEXT_KEY,
    PTC_CLOSED,
    PTC_CRASH,
    PTC_ERROR,
    PTC_LIMIT,
    PtcLimits,
    PtcTool,
    ptc_tool,
)
from toolseam.ptc._output import Printed, listing

GRACE = 0.05  # seconds a stopped program keeps its worker; its expiry is what kills a spinner


def monty_workers() -> set[int]:
    """The live (not zombie) monty worker processes this test process has spawned."""
    me = os.getpid()
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                text = stat.read()
        except OSError:
            continue
        name, rest = text.split("(", 1)[1].rsplit(")", 1)
        state, ppid = rest.split()[:2]
        if int(ppid) == me and state != "Z" and "monty" in name:
            found.add(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Key(TypedDict):
    key: str


class Index(TypedDict):
    i: int


class Tools:
    """The registry's tools, and what their bodies saw."""

    def __init__(self, expected: int = 0) -> None:
        self.registry = ToolRegistry()
        self.started: list[int] = []
        self.told: list[int] = []
        self.cancelled: list[int] = []
        self.ended: list[int] = []
        self.workers_when_told: list[set[int]] = []
        self.parents: list[ExecutionToken | None] = []
        self.roots: list[str] = []
        self.expected = expected
        self.all_started = anyio.Event()
        self.results: list[tuple[ToolExecution, ToolResult]] = []
        self.registry.on_result(lambda exec, result: self.results.append((exec, result)))

        @define_tool(name="lookup", description="Look a key up.", is_concurrency_safe=_parallel)
        async def lookup(args: Key, exec: ToolRunContext) -> str:
            self.parents.append(exec.parent)
            self.roots.append(exec.root_call_id)
            return args["key"].upper()

        @define_tool(
            name="wait", description="Wait until told to stop.", is_concurrency_safe=_parallel
        )
        async def wait(args: Index, exec: ToolRunContext) -> int:
            self.started.append(args["i"])
            if len(self.started) == self.expected:
                self.all_started.set()
            try:
                await exec.signal.wait()
            except anyio.get_cancelled_exc_class():
                self.cancelled.append(args["i"])  # torn down rather than told: a failure
                raise
            self.told.append(args["i"])
            self.workers_when_told.append(monty_workers())
            self.ended.append(args["i"])
            exec.signal.raise_if_aborted()
            return args["i"]

        @define_tool(name="secret", description="Denied by policy.")
        async def secret(args: Key, exec: ToolRunContext) -> str:
            self.started.append(-1)
            return "never"

        for tool in (lookup, wait, secret):
            self.registry.register(tool)

    def nested_results(self, token: ExecutionToken) -> list[ToolResult]:
        return [result for exec, result in self.results if exec.parent is token]


def _parallel(_args: object) -> bool:
    return True


@asynccontextmanager
async def opened(tools: Tools, **options: Any) -> AsyncIterator[PtcTool]:
    options.setdefault("grace", GRACE)
    async with ptc_tool(tools.registry, tools=["lookup", "wait", "secret"], **options) as run:
        registration = tools.registry.register(run)
        try:
            yield run
        finally:
            registration.remove()
    assert not monty_workers(), "a worker process outlived its tool"


async def run_code(
    tools: Tools, code: str, signal: AbortController | None = None, call_id: str = "run"
) -> ToolResult:
    controller = signal or AbortController()
    return await tools.registry.execute(
        ToolExecutionInput(
            call_id=call_id, name="run_code", arguments={"code": code}, signal=controller.signal
        )
    )


def context(result: ToolResult) -> dict[str, Any]:
    for item in result.additional_contexts:
        if isinstance(item, dict) and CONTEXT_KEY in item:
            return dict(item[CONTEXT_KEY])
    raise AssertionError(f"no {CONTEXT_KEY} context in {result!r}")


def codes(result: ToolResult) -> list[tuple[str, str]]:
    return [(entry["name"], entry["code"]) for entry in context(result)["nested_calls"]]


def text(result: ToolResult) -> str:
    return "\n".join(str(block["text"]) for block in result.content)


def run_token(tools: Tools) -> ExecutionToken:
    (token,) = [exec.token for exec, _ in tools.results if exec.name == "run_code"]
    return token


# What the program sees, and what it is told.


async def test_sync_and_parallel_calls_return_values_and_list_each_call() -> None:
    tools = Tools()
    async with opened(tools):
        code = (
            "import asyncio\n"
            "first = lookup_sync(key='a')\n"
            "both = await asyncio.gather(lookup(key='b'), lookup('c'))\n"
            "print('got', first)\n"
            "[first, *both]"
        )
        result = await run_code(tools, code)
    assert isinstance(result, ToolSuccess), result
    assert result.value == {
        "output": ["A", "B", "C"],
        "stdout": "got A\n",
        "nested_calls": [
            {"call_id": "run.1", "name": "lookup", "arguments": {"key": "a"}, "code": "OK"},
            {"call_id": "run.2", "name": "lookup", "arguments": {"key": "b"}, "code": "OK"},
            {"call_id": "run.3", "name": "lookup", "arguments": {"key": "c"}, "code": "OK"},
        ],
    }
    assert 'output: ["A", "B", "C"]' in text(result)
    assert '3. lookup {"key": "c"} -> OK' in text(result)
    # Each nested call is a nested dispatch of the run_code call.
    token = run_token(tools)
    assert tools.parents == [token, token, token]
    assert tools.roots == ["run", "run", "run"]
    assert len(tools.nested_results(token)) == 3


async def test_a_tool_read_without_a_call_is_a_function_the_program_can_call_later() -> None:
    tools = Tools()
    async with opened(tools):
        code = (
            "f = lookup\n"
            "g = lookup_sync\n"
            "pick = {'async': f, 'sync': g}\n"
            "[await pick['async'](key='a'), pick['sync']('b')]"
        )
        result = await run_code(tools, code)
    assert isinstance(result, ToolSuccess), result
    assert result.value["output"] == ["A", "B"]  # type: ignore[index, call-overload]
    assert codes(result) == [("lookup", "OK"), ("lookup", "OK")]


async def test_nested_events_reach_the_callers_host_and_run_code_reports_each_settled_call() -> (
    None
):
    registry = ToolRegistry()
    events: list[tuple[ToolExecution, ProgressEvent | LogEvent]] = []
    asked: list[tuple[str, ElicitationRequest]] = []

    @define_tool(name="report", description="Report, log and ask.", is_concurrency_safe=_parallel)
    async def report(args: Index, exec: ToolRunContext) -> int:
        exec.progress(1, total=2, message=f"half of {args['i']}")
        exec.log("info", {"i": args["i"]}, logger="report")
        answer = await exec.elicit("go on?", {"type": "object", "properties": {}})
        return args["i"] if answer.accepted else -1

    async def elicit(
        exec: ToolExecution, request: ElicitationRequest, signal: Any
    ) -> Elicited[Any]:
        asked.append((exec.call_id, request))
        return Elicited("accept", {})

    host = ToolHost(
        on_progress=lambda exec, event: events.append((exec, event)),
        on_log=lambda exec, event: events.append((exec, event)),
        elicit=elicit,
    )
    registry.register(report)
    code = (
        "import asyncio\nr = await asyncio.gather(report(i=1), report(i=2))\nr + [report_sync(i=3)]"
    )
    async with ptc_tool(registry, tools=["report"], grace=GRACE) as run:
        registry.register(run)
        result = await registry.execute(
            ToolExecutionInput(
                call_id="run",
                name="run_code",
                arguments={"code": code},
                signal=AbortController().signal,
                host=host,
            )
        )
    assert isinstance(result, ToolSuccess), result
    assert result.value["output"] == [1, 2, 3]  # type: ignore[index, call-overload]
    (run_exec,) = {exec for exec, _ in events if exec.name == "run_code"}
    nested = [(exec, event) for exec, event in events if exec.name == "report"]
    # Each nested body's progress and log reached the run_code caller's host, from a nested
    # execution whose parent is the run_code call; its question too.
    assert {exec.call_id for exec, _ in nested} == {"run.1", "run.2", "run.3"}
    assert all(exec.parent is run_exec.token for exec, _ in nested)
    assert sorted(event.message for _, event in nested if isinstance(event, ProgressEvent)) == [
        "half of 1",
        "half of 2",
        "half of 3",
    ]
    assert sorted(
        event.data["i"]
        for _, event in nested
        if isinstance(event, LogEvent)  # type: ignore[index, call-overload]
    ) == [1, 2, 3]
    assert sorted(call_id for call_id, _ in asked) == ["run.1", "run.2", "run.3"]
    # run_code itself reports one step per settled nested call, in the order they settled.
    own = [event for exec, event in events if exec is run_exec]
    assert [(event.progress, event.total) for event in own] == [(1, None), (2, None), (3, None)]
    assert all(isinstance(event, ProgressEvent) for event in own)
    assert [event.message for event in own][-1] == "run.3 report -> OK"


async def test_description_has_typed_stubs_of_the_exposed_tools_only() -> None:
    tools = Tools()
    run = ptc_tool(tools.registry, tools=["lookup"], limits=PtcLimits(nested_calls=7))
    assert run.tools == ("lookup",)
    assert "async def lookup(*, key: str) -> Any:" in run.description
    assert "def lookup_sync(*, key: str) -> Any:" in run.description
    assert "at most 7 tool calls" in run.description
    assert "cut past 8000 characters" in run.description
    assert "def wait" not in run.description
    assert run.parameters["required"] == ["code"]
    with pytest.raises(ValueError, match="not registered"):
        ptc_tool(tools.registry, tools=["nope"])


async def test_a_denied_nested_call_fails_inside_the_program() -> None:
    tools = Tools()

    async def deny_secret(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        return Deny("not for programs") if exec.name == "secret" else await next()

    tools.registry.on_pre_execute(deny_secret)
    async with opened(tools):
        code = "try:\n    secret_sync(key='x')\nexcept RuntimeError as e:\n    r = str(e)\nr"
        result = await run_code(tools, code)
    assert isinstance(result, ToolSuccess)
    assert result.value["output"] == "ERROR: tool call denied: not for programs"  # type: ignore[index, call-overload]
    assert codes(result) == [("secret", "ERROR")]
    assert -1 not in tools.started


async def test_program_errors_come_back_with_their_traceback() -> None:
    tools = Tools()
    async with opened(tools):
        raised = await run_code(tools, "def f():\n    return 1 / 0\nprint('before')\nf()")
        unparsable = await run_code(tools, "def f(:\n    pass")
        unknown = await run_code(tools, "nope(x=1)")
    assert isinstance(raised, ToolFailure)
    assert raised.code == PTC_ERROR
    assert "ZeroDivisionError: division by zero" in raised.error.message
    assert "line 2, in f" in raised.error.message
    assert "printed:\nbefore" in text(raised)
    assert isinstance(unparsable, ToolFailure)
    assert unparsable.code == PTC_ERROR
    assert "SyntaxError" in unparsable.error.message
    assert isinstance(unknown, ToolFailure)
    assert "NameError" in unknown.error.message
    assert codes(unknown) == []


async def test_a_long_traceback_is_bounded() -> None:
    tools = Tools()
    async with opened(tools, limits=PtcLimits(output_chars=600)):
        result = await run_code(tools, "raise ValueError('x' * 5000 + ' the end')")
    assert isinstance(result, ToolFailure)
    assert result.code == PTC_ERROR
    assert "characters cut" in result.error.message
    assert len(result.error.message) < 700
    assert result.error.message.startswith("Traceback (most recent call last):")
    assert result.error.message.endswith("x the end")


async def test_printing_past_output_chars_keeps_what_fits_and_says_it_was_cut() -> None:
    """Issue 35: ``print('x' * 9000)`` failed the program with PTC_LIMIT and a false memory
    message, losing everything printed. Now the program goes on; head and tail are kept."""
    tools = Tools()
    code = "print('x' * 9000)\nprint('the end')\nlookup_sync(key='a')"
    async with opened(tools):  # the default output_chars: 8000
        result = await run_code(tools, code)
    assert isinstance(result, ToolSuccess), result
    assert result.value["output"] == "A"  # type: ignore[index, call-overload]
    stdout = result.value["stdout"]  # type: ignore[index, call-overload]
    assert stdout == context(result)["stdout"]
    assert stdout.startswith("x" * 2666 + "\n... (1009 characters cut) ...\nxxx")
    assert stdout.endswith("x\nthe end\n")
    assert len(stdout) < 8100
    assert "characters cut" in text(result)
    assert "memory" not in text(result)
    assert codes(result) == [("lookup", "OK")]


async def test_a_program_that_prints_without_end_is_stopped_by_its_clock_not_its_output() -> None:
    tools = Tools()
    code = "i = 0\nwhile True:\n    print('line', i)\n    i += 1"
    async with opened(tools, limits=PtcLimits(wall_clock=0.2, output_chars=300)):
        result = await run_code(tools, code)
    assert isinstance(result, ToolFailure)
    assert result.code == PTC_LIMIT
    assert "wall-clock" in result.error.message
    stdout = context(result)["stdout"]
    assert stdout.startswith("line 0\nline 1\n")
    assert "characters cut" in stdout
    assert len(stdout) < 400


async def test_a_huge_output_value_is_cut_to_output_chars() -> None:
    """Issue 35: ``'a' * 10**7`` as the last expression gave 10,000,025 characters of
    content. A value past ``output_chars`` becomes its text (its JSON if not a string), cut;
    one that fits stays a JSON value."""
    tools = Tools()
    async with opened(tools):  # the default output_chars: 8000
        string = await run_code(tools, "'a' * 10**7")
        listed = await run_code(tools, "list(range(100000))")
        fits = await run_code(tools, "list(range(100))")
    assert isinstance(string, ToolSuccess), string
    output = string.value["output"]  # type: ignore[index, call-overload]
    assert output == "a" * 2666 + "\n... (9992000 characters cut) ...\n" + "a" * 5334
    assert len(text(string)) < 8200
    assert isinstance(listed, ToolSuccess), listed
    output = listed.value["output"]  # type: ignore[index, call-overload]
    assert isinstance(output, str)
    assert output.startswith("[0, 1, 2, ")
    assert output.endswith(", 99998, 99999]")
    assert "characters cut" in output
    assert len(text(listed)) < 8200
    assert isinstance(fits, ToolSuccess), fits
    assert fits.value["output"] == list(range(100))  # type: ignore[index, call-overload]


async def test_a_traceback_of_ten_million_characters_is_cut_to_output_chars() -> None:
    tools = Tools()
    async with opened(tools):
        result = await run_code(tools, "raise ValueError('x' * 10**7)")
    assert isinstance(result, ToolFailure)
    assert result.code == PTC_ERROR
    assert "characters cut" in result.error.message
    assert len(result.error.message) < 8100
    assert len(text(result)) < 8300


async def test_a_memory_error_the_program_raises_is_its_error_not_the_limit() -> None:
    tools = Tools()
    code = "raise MemoryError('memory limit exceeded: 8192 bytes > 8000 bytes')"
    async with opened(tools):
        result = await run_code(tools, code)
    assert isinstance(result, ToolFailure)
    assert result.code == PTC_ERROR
    assert "memory limit of" not in result.error.message


async def test_the_list_of_calls_in_the_content_is_cut_and_the_context_keeps_it_whole() -> None:
    """Issue 35: 10,000 calls gave a 287,819-character list in the content."""
    tools = Tools()
    code = (
        "for i in range(60):\n"
        "    try:\n"
        "        secret_sync(key='x') if i % 3 == 0 else lookup_sync(key='k')\n"
        "    except RuntimeError:\n"
        "        pass\n"
    )

    async def deny_secret(exec: ToolExecution, next: Next[PreDecision]) -> PreDecision:
        return Deny("no") if exec.name == "secret" else await next()

    tools.registry.on_pre_execute(deny_secret)
    async with opened(tools, limits=PtcLimits(output_chars=600, nested_calls=None)):
        result = await run_code(tools, code)
    assert isinstance(result, ToolSuccess), result
    assert len(context(result)["nested_calls"]) == 60
    assert len(result.value["nested_calls"]) == 60  # type: ignore[index, call-overload, arg-type]
    (listing,) = [block["text"] for block in result.content if "tool calls" in block["text"]]
    lines = listing.splitlines()
    assert lines[0] == "tool calls (60):"
    assert lines[1] == '1. secret {"key": "x"} -> ERROR: tool call denied: no'
    assert lines[-1] == '60. lookup {"key": "k"} -> OK'
    (middle,) = [line for line in lines if "not listed" in line]
    left_out = 60 - (len(lines) - 2)
    errors = sum(1 for i in range(60) if i % 3 == 0)
    assert middle.startswith(f"... ({left_out} calls not listed: ")
    listed_errors = sum(1 for line in lines if "-> ERROR" in line)
    assert f"{errors - listed_errors} ERROR" in middle
    assert len(listing) < 700


async def test_the_program_reaches_no_file_environment_network_or_process() -> None:
    tools = Tools()
    attempts = {
        "open": "open('/etc/hostname').read()",
        "path": "from pathlib import Path\nPath('/etc/hostname').read_text()",
        "env": "import os\nos.getenv('PATH')",
        "environ": "import os\nos.environ['PATH']",
        "socket": "import socket",
        "subprocess": "import subprocess",
        "ctypes": "import ctypes",
    }
    async with opened(tools):
        for name, code in attempts.items():
            result = await run_code(tools, code, call_id=name)
            assert isinstance(result, ToolFailure), (name, result)
            assert result.code == PTC_ERROR
            assert any(
                error in result.error.message
                for error in ("PermissionError", "not supported", "ModuleNotFoundError")
            ), (name, result.error.message)


# Stopping: the caller's abort, the deadline, the host, the limits.


PARALLEL_THEN_MORE = (
    "import asyncio\n"
    "try:\n"
    "    await asyncio.gather(*[wait(i=i) for i in range(3)])\n"
    "except RuntimeError:\n"
    "    pass\n"
    "try:\n"
    "    await wait(i=99)\n"
    "except RuntimeError as e:\n"
    "    print('refused:', e)\n"
    "while True:\n"
    "    pass\n"
)


def assert_stopped_in_order(tools: Tools, result: ToolResult) -> None:
    """Told and awaited; the call after the stop never ran; the sandbox process is gone."""
    assert sorted(tools.started) == [0, 1, 2]
    assert sorted(tools.told) == [0, 1, 2]
    assert sorted(tools.ended) == [0, 1, 2]
    assert tools.cancelled == []
    assert 99 not in tools.started
    listed = codes(result)
    assert sorted(listed[:3]) == [("wait", TOOL_ABORTED)] * 3
    assert listed[3] == ("wait", TOOL_ABORTED_BEFORE_DISPATCH)
    assert len(listed) == 4
    # Exactly one published result per nested call, the same ones the list shows.
    nested = tools.nested_results(run_token(tools))
    assert len(nested) == 4
    assert [r.code for r in nested if isinstance(r, ToolFailure)].count(
        TOOL_ABORTED_BEFORE_DISPATCH
    ) == 1
    assert '4. wait {"i": 99} -> ABORTED_BEFORE_DISPATCH (never ran)' in text(result)
    pid = context(result)["worker_pid"]
    # The sandbox was still running while each nested call was told and settled: it is
    # stopped only after them; and it is gone once run_code has returned.
    assert all(pid in workers for workers in tools.workers_when_told)
    assert isinstance(pid, int)
    assert not alive(pid)


async def test_abort_tells_and_awaits_nested_calls_then_kills_the_sandbox() -> None:
    tools = Tools(expected=3)
    stop = AbortController()
    async with opened(tools), anyio.create_task_group() as tg:
        outcome: list[ToolResult] = []

        async def call() -> None:
            outcome.append(await run_code(tools, PARALLEL_THEN_MORE, stop))

        tg.start_soon(call)
        await tools.all_started.wait()
        stop.abort()
    (result,) = outcome
    assert isinstance(result, ToolFailure)
    assert result.code == TOOL_ABORTED
    assert_stopped_in_order(tools, result)
    assert "refused: ABORTED_BEFORE_DISPATCH" in context(result)["stdout"]


async def test_timeout_is_tool_timeout_through_the_same_path() -> None:
    tools = Tools(expected=3)
    async with opened(tools, timeout=0.2):
        result = await run_code(tools, PARALLEL_THEN_MORE)
    assert isinstance(result, ToolFailure)
    assert result.code == TOOL_TIMEOUT
    assert_stopped_in_order(tools, result)


async def test_host_cancellation_tells_nested_calls_and_propagates() -> None:
    tools = Tools(expected=3)
    async with opened(tools):
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(run_code, tools, PARALLEL_THEN_MORE)
                await tools.all_started.wait()
                scope.cancel()
        assert scope.cancelled_caught
        # The host's cancellation reached run_code; nested bodies heard it through their
        # signal (none was torn down), and the call published its one result.
        (published,) = [result for exec, result in tools.results if exec.name == "run_code"]
    assert isinstance(published, ToolFailure)
    assert published.code == TOOL_ABORTED
    assert_stopped_in_order(tools, published)


async def test_wall_clock_limit_is_ptc_limit() -> None:
    tools = Tools()
    async with opened(tools, limits=PtcLimits(wall_clock=0.2)):
        result = await run_code(tools, "lookup_sync(key='a')\nwhile True:\n    pass")
    assert isinstance(result, ToolFailure)
    assert result.code == PTC_LIMIT
    assert "wall-clock limit of 0.2s" in result.error.message
    assert codes(result) == [("lookup", "OK")]
    assert not alive(context(result)["worker_pid"])


async def test_memory_limit_is_ptc_limit_even_when_the_program_catches_it() -> None:
    tools = Tools()
    code = (
        "x = []\n"
        "try:\n"
        "    while True:\n"
        "        x.append('a' * 10000)\n"
        "except BaseException:\n"
        "    x = 'swallowed'\n"
        "x"
    )
    async with opened(tools, limits=PtcLimits(memory=2_000_000)):
        result = await run_code(tools, code)
    assert isinstance(result, ToolFailure)
    assert result.code == PTC_LIMIT
    assert "memory limit of 2000000 bytes" in result.error.message


CATCH_ALL = (
    "for i in range(10000):\n"
    "    try:\n"
    "        {call}\n"
    "    except Exception:\n"
    "        pass\n"
    "print('past the loop')\n"
)


@pytest.mark.parametrize("call", ["lookup_sync(key='k')", "await lookup(key='k')"])
async def test_a_catch_all_loop_past_the_nested_call_limit_is_ended_at_its_next_call(
    call: str,
) -> None:
    """Issue 35: the call past the limit is not made and the program ends at once.

    Before, the stopped program kept its grace, swallowed each failure and called again:
    1,040-1,528 published ABORTED_BEFORE_DISPATCH calls past a limit of 200. A grace of 30 s
    here would time the test out if the program were given one.
    """
    tools = Tools()
    async with opened(tools, limits=PtcLimits(nested_calls=3), grace=30.0):
        result = await run_code(tools, CATCH_ALL.format(call=call))
    assert isinstance(result, ToolFailure)
    assert result.code == PTC_LIMIT
    assert result.error.message == (
        "the program reached its limit of 3 tool calls: it was ended at its next call "
        "(lookup), which was not made"
    )
    # Nothing past the limit was made, listed or published; the program never went on.
    assert codes(result) == [("lookup", "OK")] * 3
    assert len(tools.parents) == 3
    assert len(tools.nested_results(run_token(tools))) == 3
    assert "past the loop" not in context(result)["stdout"]
    assert "memory" not in text(result)
    assert not alive(context(result)["worker_pid"])


async def test_calls_made_before_the_limit_but_not_begun_never_run() -> None:
    """At the call past the limit no further call begins: those made before and not yet
    begun end ABORTED_BEFORE_DISPATCH; exactly the limit's calls are listed and published."""
    tools = Tools()
    code = "import asyncio\nawait asyncio.gather(*[lookup(key=str(i)) for i in range(30)])"
    async with opened(tools, limits=PtcLimits(nested_calls=10), grace=30.0):
        result = await run_code(tools, code)
    assert isinstance(result, ToolFailure)
    assert result.code == PTC_LIMIT
    listed = codes(result)
    assert len(listed) == 10
    ran = len(tools.parents)
    assert set(listed[ran:]) <= {("lookup", TOOL_ABORTED_BEFORE_DISPATCH)}
    assert len(tools.nested_results(run_token(tools))) == 10
    assert not alive(context(result)["worker_pid"])


async def test_after_a_stop_a_catch_all_loop_is_ended_by_the_limit_or_the_grace() -> None:
    """After an abort, each further call ends ABORTED_BEFORE_DISPATCH (published) until
    the limit is reached (then at once) or, with no limit, until the grace ends."""
    for limit, grace in ((5, 30.0), (None, GRACE)):
        tools = Tools(expected=1)
        stop = AbortController()
        code = "try:\n    await wait(i=0)\nexcept RuntimeError:\n    pass\n" + CATCH_ALL.format(
            call="lookup_sync(key='k')"
        )
        outcome: list[ToolResult] = []
        async with (
            opened(tools, limits=PtcLimits(nested_calls=limit), grace=grace),
            anyio.create_task_group() as tg,
        ):

            async def call() -> None:
                outcome.append(await run_code(tools, code, stop))  # noqa: B023

            tg.start_soon(call)
            await tools.all_started.wait()
            stop.abort()
        (result,) = outcome
        assert isinstance(result, ToolFailure)
        assert result.code == TOOL_ABORTED
        listed = codes(result)
        assert listed[0] == ("wait", TOOL_ABORTED)
        assert set(listed[1:]) == {("lookup", TOOL_ABORTED_BEFORE_DISPATCH)}
        if limit is not None:
            assert len(listed) == limit
        assert len(tools.nested_results(run_token(tools))) == len(listed)
        assert tools.parents == []
        assert not alive(context(result)["worker_pid"])


async def test_a_sandbox_that_dies_is_ptc_crash_and_keeps_its_call_list() -> None:
    killer = Tools()  # a registry whose tool kills the worker running the program

    @define_tool(name="crash", description="Kill the sandbox.")
    async def crash(args: Index, exec: ToolRunContext) -> int:
        (pid,) = monty_workers() & pids_in_use
        os.kill(pid, signal.SIGKILL)
        return 0

    pids_in_use: set[int] = set()
    killer.registry.register(crash)
    async with ptc_tool(killer.registry, tools=["crash"], grace=GRACE) as run:
        killer.registry.register(run)
        pids_in_use.update(monty_workers())
        result = await run_code(killer, "crash_sync(i=1)\nwhile True:\n    pass")
    assert isinstance(result, ToolFailure)
    assert result.code == PTC_CRASH
    assert codes(result) == [("crash", "OK")]
    assert not monty_workers()


async def test_a_stopped_program_may_end_by_itself_within_the_grace() -> None:
    tools = Tools(expected=1)
    stop = AbortController()
    code = "try:\n    await wait(i=0)\nexcept RuntimeError as e:\n    print('stopping:', e)\n'done'"
    async with opened(tools, grace=30.0), anyio.create_task_group() as tg:
        outcome: list[ToolResult] = []

        async def call() -> None:
            outcome.append(await run_code(tools, code, stop))

        tg.start_soon(call)
        await tools.all_started.wait()
        stop.abort()
    (result,) = outcome
    # The program ended on its own (no 30 s grace waited out); the worker is gone all the same.
    assert isinstance(result, ToolFailure)
    assert result.code == TOOL_ABORTED
    assert context(result)["stdout"] == "stopping: ABORTED: tool call aborted\n"
    assert not alive(context(result)["worker_pid"])


# The pool's lifetime.


async def test_a_call_outside_the_pool_is_ptc_closed_without_a_worker() -> None:
    tools = Tools()
    run = ptc_tool(tools.registry, tools=["lookup"])
    tools.registry.register(run)
    result = await run_code(tools, "lookup_sync(key='a')")
    assert isinstance(result, ToolFailure)
    assert result.code == PTC_CLOSED
    assert tools.parents == []
    assert not monty_workers()


async def test_closing_the_pool_stops_a_run_and_leaves_no_worker() -> None:
    tools = Tools(expected=1)
    outcome: list[ToolResult] = []
    async with anyio.create_task_group() as tg, opened(tools) as run:

        async def call() -> None:
            outcome.append(await run_code(tools, "await wait(i=0)"))

        tg.start_soon(call)
        await tools.all_started.wait()
        await run.aclose()
        assert not monty_workers()
    (result,) = outcome
    assert isinstance(result, ToolFailure)
    assert result.code == PTC_CLOSED
    assert codes(result) == [("wait", TOOL_ABORTED)]


async def test_host_cancellation_of_the_pool_owner_leaves_no_worker() -> None:
    tools = Tools(expected=2)
    with anyio.CancelScope() as scope:
        async with opened(tools), anyio.create_task_group() as tg:
            tg.start_soon(
                run_code, tools, "import asyncio\nawait asyncio.gather(wait(i=0), wait(i=1))"
            )
            await tools.all_started.wait()
            assert monty_workers()
            scope.cancel()
    assert scope.cancelled_caught
    assert not monty_workers()
    assert sorted(tools.told) == [0, 1]
    assert tools.cancelled == []


@pytest.fixture(autouse=True)
def _no_worker_left() -> Iterator[None]:
    yield
    assert not monty_workers()


def test_invalid_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="wall_clock"):
        PtcLimits(wall_clock=0)
    with pytest.raises(ValueError, match="max_parallel"):
        PtcLimits(max_parallel=0)


def test_import_toolseam_does_not_import_monty() -> None:
    probe = "import sys, toolseam; assert 'pydantic_monty' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", probe], check=True)


def test_printed_text_keeps_head_and_tail_across_chunks() -> None:
    printed = Printed(9)
    for chunk in ("ab", "cdef", "g"):
        printed("stdout", chunk)
    assert printed.text == "abcdefg"
    printed("stderr", "hijklmn")
    assert printed.text == "abc\n... (5 characters cut) ...\nijklmn"


def test_the_listing_of_no_call_or_of_calls_that_fit_is_whole() -> None:
    assert listing([], 10) == "tool calls (0):"
    entries = [{"name": "t", "arguments": {}, "code": "OK"}] * 2
    assert listing(entries, 1000) == "tool calls (2):\n1. t {} -> OK\n2. t {} -> OK"
