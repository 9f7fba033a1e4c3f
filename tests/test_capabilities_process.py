"""`toolseam.capabilities.run_process`: a process group owned by one call (contract §5).

The processes are real: small Python scripts (``_SCRIPT``) that report, over a TCP
connection to the test on 127.0.0.1, their pid and those of the grandchildren they start,
once each has set up its SIGTERM handling; the test waits for those reports, never for
time. Whether a process is still running is read from ``/proc`` (Linux): a pid that is gone
or a zombie no longer runs. Durations are never asserted: that a SIGTERM-handling process
was not killed is read from the warning `run_process` logs when it has to send SIGKILL.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from typing_extensions import TypedDict

from toolseam import (
    TOOL_ABORTED,
    TOOL_TIMEOUT,
    AbortController,
    AbortError,
    AbortSignal,
    ToolExecutionInput,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
)
from toolseam.capabilities import (
    DEFAULT_GRACE,
    PROCESS_FAILED,
    ProcessFailedError,
    ProcessResult,
    _process,
    run_process,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc (Linux)")

# argv: PORT ROLE [GRANDCHILDREN]. Roles: "handle" exits on SIGTERM, "ignore" ignores it,
# "exit" exits at once (leaving its grandchildren running), "grandchild" ignores SIGTERM.
# Each process reports once its SIGTERM handler is in place: the leader "leader <pid>
# <grandchild pids>", a grandchild "ready <pid>"; and "term <pid>" on SIGTERM.
_SCRIPT = """
import os, signal, socket, subprocess, sys

port, role = int(sys.argv[1]), sys.argv[2]
count = int(sys.argv[3]) if len(sys.argv) > 3 else 0
link = socket.create_connection(("127.0.0.1", port))

def say(text):
    link.sendall((text + "\\n").encode())

def on_term(signum, frame):
    say(f"term {os.getpid()}")
    if role == "handle":
        sys.exit(0)

signal.signal(signal.SIGTERM, on_term)
pids = [
    subprocess.Popen([sys.executable, sys.argv[0], str(port), "grandchild"]).pid
    for _ in range(count)
]
say(("ready " if role == "grandchild" else "leader ") + " ".join(map(str, [os.getpid(), *pids])))
if role == "exit":
    sys.exit(0)
while True:
    signal.pause()
"""


class _Reports:
    """What the scripts report: one line at a time, whichever process sent it."""

    def __init__(self, port: int, lines: anyio.abc.ObjectReceiveStream[str]) -> None:
        self.port = port
        self._lines = lines

    async def next(self) -> str:
        return await self._lines.receive()

    async def ready(self, grandchildren: int) -> list[int]:
        """Wait until the leader and its grandchildren are ready; their pids, leader first."""
        leader: list[int] = []
        ready: set[int] = set()
        while not leader or len(ready) < grandchildren:
            kind, *pids = (await self.next()).split()
            if kind == "leader":
                leader = [int(pid) for pid in pids]
            else:
                assert kind == "ready", kind
                ready.update(int(pid) for pid in pids)
        assert set(leader[1:]) == ready
        return leader

    async def heard_term(self, pid: int) -> None:
        """Wait until ``pid`` reports the SIGTERM it got (other lines are passed over)."""
        while await self.next() != f"term {pid}":
            pass


@asynccontextmanager
async def _reports() -> AsyncIterator[_Reports]:
    send, receive = anyio.create_memory_object_stream[str](100)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)

    async def serve(connection: anyio.abc.SocketStream) -> None:
        lines = BufferedByteReceiveStream(connection)
        async with connection:
            while True:
                try:
                    line = await lines.receive_until(b"\n", 1000)
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                    return
                await send.send(line.decode())

    async with send, receive, listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, serve)
        yield _Reports(listener.extra(anyio.abc.SocketAttribute.local_port), receive)
        group.cancel_scope.cancel()


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "child.py"
    path.write_text(_SCRIPT)
    return str(path)


def _argv(script: str, reports: _Reports, role: str, grandchildren: int = 0) -> list[str]:
    return [sys.executable, script, str(reports.port), role, str(grandchildren)]


def _running(pid: int) -> bool:
    """Whether ``pid`` runs: it exists and is not a zombie (``/proc/<pid>/stat``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in {"Z", "X"}


def _exists(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _kills(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "sending SIGKILL" in r.getMessage()]


class TestAbort:
    async def test_a_process_that_handles_sigterm_exits_within_the_grace(
        self, script: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        controller = AbortController()
        raised: list[BaseException] = []
        async with _reports() as reports:
            async with anyio.create_task_group() as group:

                async def run() -> None:
                    with pytest.raises(AbortError) as caught:
                        await run_process(
                            _argv(script, reports, "handle", 2),
                            signal=controller.signal,
                            grace=60,
                        )
                    raised.append(caught.value)

                group.start_soon(run)
                pids = await reports.ready(2)
                controller.abort("stop")
            await reports.heard_term(pids[0])
        assert [str(error) for error in raised] == ["operation aborted: stop"]
        assert not any(map(_running, pids))
        # The leader left within the grace: no SIGKILL was needed for it.
        assert _kills(caplog) == []

    async def test_a_process_that_ignores_sigterm_is_killed_after_the_grace(
        self, script: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        controller = AbortController()
        async with _reports() as reports, anyio.create_task_group() as group:

            async def run() -> None:
                with pytest.raises(AbortError):
                    await run_process(
                        _argv(script, reports, "ignore", 1),
                        signal=controller.signal,
                        grace=0.2,
                    )

            group.start_soon(run)
            pids = await reports.ready(1)
            controller.abort()
        assert not any(map(_running, pids))
        assert not _exists(pids[0])  # the leader is reaped, not a zombie
        assert _kills(caplog) == [
            f"process {pids[0]} ignored SIGTERM for 0.2s; sending SIGKILL to its process group"
        ]

    async def test_the_abort_reason_is_raised_as_the_signal_raises_it(self, script: str) -> None:
        controller = AbortController()
        reason = ValueError("deadline")
        async with _reports() as reports, anyio.create_task_group() as group:

            async def run() -> None:
                with pytest.raises(ValueError, match=r"^deadline$") as caught:
                    await run_process(_argv(script, reports, "handle"), signal=controller.signal)
                assert caught.value is reason

            group.start_soon(run)
            await reports.ready(0)
            controller.abort(reason)

    async def test_an_aborted_signal_starts_no_process(self, tmp_path: Path) -> None:
        marker = tmp_path / "ran"
        with pytest.raises(AbortError, match=r"^operation aborted: early$"):
            await run_process(["touch", str(marker)], signal=AbortSignal.aborted_signal("early"))
        assert not marker.exists()


class TestNoProcessIsLeft:
    async def test_what_a_process_leaves_in_its_group_is_killed_when_it_exits(
        self, script: str
    ) -> None:
        # The grandchildren hold the output pipe too: without the group kill, reading it to
        # its end would wait for them forever.
        async with _reports() as reports:
            result = await run_process(
                _argv(script, reports, "exit", 2), signal=AbortController().signal
            )
            left = await reports.next()
        kind, *pids = left.split()
        assert (kind, len(pids), result.returncode) == ("leader", 3, 0)
        assert not any(_running(int(pid)) for pid in pids)

    async def test_host_cancellation_stops_the_group_and_propagates(
        self, script: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        controller = AbortController()
        scope = anyio.CancelScope()
        pids: list[int] = []
        running_after: list[bool] = []
        async with _reports() as reports:
            async with anyio.create_task_group() as group:

                async def run() -> None:
                    with scope:
                        await run_process(
                            _argv(script, reports, "handle", 2),
                            signal=controller.signal,
                            grace=60,
                        )
                    running_after.append(any(map(_running, pids)))

                group.start_soon(run)
                pids += await reports.ready(2)
                scope.cancel()
            await reports.heard_term(pids[0])
        # The cancellation reached the scope that made it: re-raised, never swallowed.
        assert scope.cancelled_caught
        assert running_after == [False]
        assert not controller.signal.aborted
        assert _kills(caplog) == []

    @pytest.mark.parametrize("anyio_backend", ["asyncio"])
    async def test_native_task_cancel_twice_still_stops_the_group_after_the_grace(
        self, script: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """asyncio only: ``Task.cancel()`` breaks through anyio's shield (the Agents SDK's way)."""
        import asyncio

        async with _reports() as reports:
            task = asyncio.ensure_future(
                run_process(
                    _argv(script, reports, "ignore", 1), signal=AbortController().signal, grace=2
                )
            )
            pids = await reports.ready(1)
            task.cancel()
            await reports.heard_term(pids[0])  # in the grace period now
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert not any(map(_running, pids))
        # Neither cancel cut the grace short: the group got SIGKILL only after it.
        assert _kills(caplog) == [
            f"process {pids[0]} ignored SIGTERM for 2s; sending SIGKILL to its process group"
        ]

    async def test_an_error_inside_stops_the_group_and_propagates(
        self, script: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        real = _process._signal_group
        failed: list[int] = []

        def fail_once(process: anyio.abc.Process, signum: int) -> None:
            if not failed:
                failed.append(signum)
                raise RuntimeError("cannot signal")
            real(process, signum)  # type: ignore[arg-type]

        monkeypatch.setattr(_process, "_signal_group", fail_once)
        controller = AbortController()
        pids: list[int] = []
        running_after: list[bool] = []
        async with _reports() as reports, anyio.create_task_group() as group:

            async def run() -> None:
                try:
                    await run_process(
                        _argv(script, reports, "handle", 1), signal=controller.signal, grace=60
                    )
                except* RuntimeError:
                    running_after.append(any(map(_running, pids)))

            group.start_soon(run)
            pids += await reports.ready(1)
            controller.abort()  # its SIGTERM fails: the error ends the call instead
        assert failed == [15]
        assert running_after == [False]


class TestInsideARegistry:
    class Args(TypedDict):
        argv: list[str]

    @staticmethod
    def _registry(pids: list[int], timeout: float | None = None) -> tuple[ToolRegistry, list[bool]]:
        """A registry whose tool runs ``argv``; and, per published result, "none of pids runs"."""
        registry = ToolRegistry()
        quiet: list[bool] = []

        @define_tool(name="run", description="Runs a program.", timeout=timeout)
        async def run(args: TestInsideARegistry.Args, exec: ToolRunContext) -> str:
            result = await run_process(args["argv"], signal=exec.signal, grace=0.2)
            return (result.stdout or b"").decode()

        registry.register(run)
        registry.on_result(lambda exec, result: quiet.append(not any(map(_running, pids))))
        return registry, quiet

    async def test_an_aborted_call_ends_aborted_once_its_processes_are_gone(
        self, script: str
    ) -> None:
        pids: list[int] = []
        registry, quiet = self._registry(pids)
        controller = AbortController()
        async with _reports() as reports, anyio.create_task_group() as group:
            results: list[ToolResult] = []

            async def call() -> None:
                argv = _argv(script, reports, "ignore", 1)
                results.append(
                    await registry.execute(
                        ToolExecutionInput(
                            call_id="c1",
                            name="run",
                            arguments={"argv": argv},
                            signal=controller.signal,
                        )
                    )
                )

            group.start_soon(call)
            pids += await reports.ready(1)
            controller.abort()
        [result] = results
        assert isinstance(result, ToolFailure)
        assert result.code == TOOL_ABORTED
        # When the registry published the call's one result, no process of it ran any more.
        assert quiet == [True]

    async def test_a_sync_body_runs_it_through_anyio_from_thread(
        self, script: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        pids: list[int] = []
        quiet: list[bool] = []
        registry = ToolRegistry()

        @define_tool(name="run_sync", description="Runs a program from a worker thread.")
        def run_sync(args: TestInsideARegistry.Args, exec: ToolRunContext) -> int:
            run = partial(run_process, args["argv"], signal=exec.signal, grace=0)
            return anyio.from_thread.run(run).returncode

        registry.register(run_sync)
        registry.on_result(lambda exec, result: quiet.append(not any(map(_running, pids))))
        controller = AbortController()
        async with _reports() as reports, anyio.create_task_group() as group:
            results: list[ToolResult] = []

            async def call() -> None:
                argv = _argv(script, reports, "ignore", 1)
                call = ToolExecutionInput(
                    call_id="c1",
                    name="run_sync",
                    arguments={"argv": argv},
                    signal=controller.signal,
                )
                results.append(await registry.execute(call))

            group.start_soon(call)
            pids += await reports.ready(1)
            controller.abort()
        [result] = results
        assert isinstance(result, ToolFailure)
        assert result.code == TOOL_ABORTED
        assert quiet == [True]
        assert _kills(caplog) == []  # grace=0: SIGKILL at once, as asked, without a warning

    async def test_a_tool_timeout_stops_the_process_and_ends_timed_out(
        self, tmp_path: Path
    ) -> None:
        registry, _ = self._registry([], timeout=1.0)
        pids = tmp_path / "pids"
        # The shell and its sleep ignore SIGTERM (an ignored signal stays ignored across exec).
        command = f"trap '' TERM; echo $$ > {pids}; sleep 60 & echo $! >> {pids}; wait"
        result = await registry.execute(
            ToolExecutionInput(
                call_id="c1",
                name="run",
                arguments={"argv": ["sh", "-c", command]},
                signal=AbortController().signal,
            )
        )
        assert isinstance(result, ToolFailure)
        assert result.code == TOOL_TIMEOUT
        assert not any(_running(int(pid)) for pid in pids.read_text().split())


class TestOutput:
    async def test_input_is_the_standard_input_and_output_is_captured(self) -> None:
        code = (
            "import sys; data = sys.stdin.read(); print(data.upper()); print('e', file=sys.stderr)"
        )
        result = await run_process(
            [sys.executable, "-c", code], signal=AbortController().signal, input=b"hi"
        )
        assert result == ProcessResult(
            args=(sys.executable, "-c", code),
            returncode=0,
            stdout=b"HI\n",
            stderr=b"e\n",
        )

    async def test_without_input_the_standard_input_is_empty(self) -> None:
        result = await run_process(["cat"], signal=AbortController().signal)
        assert result.stdout == b""

    async def test_input_the_process_never_reads_is_not_an_error(self) -> None:
        result = await run_process(["true"], signal=AbortController().signal, input=b"x" * 2**20)
        assert result.returncode == 0

    async def test_captured_output_is_bounded_and_the_rest_counted(self) -> None:
        code = "import sys; sys.stdout.write('a' * 100000); sys.stderr.write('b' * 10)"
        result = await run_process(
            [sys.executable, "-c", code], signal=AbortController().signal, max_output=1000
        )
        assert (result.stdout, result.stdout_dropped) == (b"a" * 1000, 99000)
        assert (result.stderr, result.stderr_dropped) == (b"b" * 10, 0)

    async def test_standard_error_may_join_the_output_or_be_discarded(self) -> None:
        argv = ["sh", "-c", "echo out; echo err >&2"]
        merged = await run_process(argv, signal=AbortController().signal, stderr=subprocess.STDOUT)
        assert (merged.stdout, merged.stderr) == (b"out\nerr\n", None)
        discarded = await run_process(
            argv, signal=AbortController().signal, stdout=subprocess.DEVNULL
        )
        assert (discarded.stdout, discarded.stderr) == (None, b"err\n")

    async def test_cwd_and_env_are_the_process_own(self, tmp_path: Path) -> None:
        result = await run_process(
            ["sh", "-c", 'echo "$PWD $ONLY"'],
            signal=AbortController().signal,
            cwd=tmp_path,
            env={"ONLY": "this", "PATH": os.environ["PATH"]},
        )
        assert result.stdout == f"{tmp_path} this\n".encode()


class TestExitStatus:
    async def test_a_failing_process_raises_a_coded_tool_error(self) -> None:
        with pytest.raises(ProcessFailedError) as caught:
            await run_process(
                ["sh", "-c", "echo partial; echo 'no such branch' >&2; exit 3"],
                signal=AbortController().signal,
            )
        error = caught.value
        assert error.code == PROCESS_FAILED == "PROCESS_FAILED"
        assert str(error) == (
            "command `sh -c 'echo partial; echo '\"'\"'no such branch'\"'\"' >&2; exit 3'` "
            "exited with status 3: no such branch"
        )
        assert (error.result.returncode, error.result.stdout) == (3, b"partial\n")

    async def test_a_failure_inside_a_tool_is_routable_by_its_code(self) -> None:
        registry = ToolRegistry()

        @define_tool(name="fail", description="Fails.")
        async def fail(args: dict[str, object], exec: ToolRunContext) -> None:
            await run_process(["false"], signal=exec.signal)

        registry.register(fail)
        result = await registry.execute(
            ToolExecutionInput(
                call_id="c", name="fail", arguments={}, signal=AbortController().signal
            )
        )
        assert isinstance(result, ToolFailure)
        assert result.error.message == "command `false` exited with status 1"
        assert result.error.info is not None
        assert (result.error.info.name, result.code) == ("ProcessFailedError", PROCESS_FAILED)

    async def test_a_killed_process_names_its_signal(self) -> None:
        result = await run_process(
            ["sh", "-c", "kill -9 $$"], signal=AbortController().signal, check=False
        )
        assert result.returncode == -9
        with pytest.raises(
            ProcessFailedError, match=r"^command `sh -c 'kill -9 \$\$'` was killed by SIGKILL$"
        ):
            result.check_returncode()

    async def test_without_check_a_failure_is_a_result(self) -> None:
        result = await run_process(["false"], signal=AbortController().signal, check=False)
        assert result.returncode == 1

    async def test_a_long_standard_error_is_quoted_by_its_end(self) -> None:
        code = "import sys; sys.stderr.write('x' * 5000 + 'END'); sys.exit(2)"
        with pytest.raises(ProcessFailedError) as caught:
            await run_process([sys.executable, "-c", code], signal=AbortController().signal)
        message = caught.value.message
        assert message.endswith("…" + "x" * 1997 + "END")
        assert "x" * 2001 not in message


class TestMisuse:
    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            ("ls -l", r"^`argv` must be a sequence of the program and its arguments"),
            (b"ls", r"^`argv` must be a sequence"),
            ([], r"^`argv` must name a program, got an empty sequence$"),
        ],
    )
    async def test_argv_is_a_non_empty_sequence(self, argv: object, message: str) -> None:
        with pytest.raises(TypeError, match=message):
            await run_process(argv, signal=AbortController().signal)  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        ("options", "error", "message"),
        [
            (
                {"grace": -1},
                ValueError,
                r"^`grace` must be a finite number of seconds, zero or more, got -1$",
            ),
            ({"grace": float("inf")}, ValueError, r"^`grace` must be a finite"),
            ({"grace": "5"}, TypeError, r"^`grace` must be a number of seconds, got '5'$"),
            ({"max_output": -1}, ValueError, r"^`max_output` must be zero or more bytes, got -1$"),
            ({"max_output": 1.5}, TypeError, r"^`max_output` must be a number of bytes, got 1.5$"),
            ({"signal": None}, TypeError, r"^`signal` must be an AbortSignal, got NoneType$"),
        ],
    )
    async def test_options_are_checked_before_anything_starts(
        self, options: dict[str, object], error: type[Exception], message: str
    ) -> None:
        kwargs: dict[str, object] = {"signal": AbortController().signal, **options}
        with pytest.raises(error, match=message):
            await run_process(["true"], **kwargs)  # type: ignore[arg-type]

    async def test_without_process_groups_it_fails_clearly(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delattr(os, "killpg")
        with pytest.raises(NotImplementedError, match=r"^run_process needs POSIX process groups"):
            await run_process(["true"], signal=AbortController().signal)

    def test_the_default_grace_is_trio_s(self) -> None:
        assert DEFAULT_GRACE == 5.0


class TestPublicNames:
    def test_all_matches_the_public_names_exactly(self) -> None:
        import inspect

        import toolseam.capabilities as capabilities

        public = {
            name
            for name, value in vars(capabilities).items()
            if not name.startswith("_") and not inspect.ismodule(value)
        }
        # The HTTP helpers are imported on first use (they need httpx): listed, not loaded.
        assert set(capabilities.__all__) == public | {"http_request", "http_stream"}
        assert len(capabilities.__all__) == len(set(capabilities.__all__))
        for name in capabilities.__all__:
            value = getattr(capabilities, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                assert value.__module__ == "toolseam.capabilities", name
                assert inspect.getdoc(value), name

    def test_the_result_is_final_and_frozen(self) -> None:
        assert getattr(ProcessResult, "__final__", False) is True
        result = ProcessResult(args=("true",), returncode=0, stdout=b"", stderr=None)
        with pytest.raises(AttributeError):
            result.returncode = 1  # type: ignore[misc]
