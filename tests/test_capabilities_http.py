"""`toolseam.capabilities.http_request` / `http_stream`: an abort stops the request at the network.

The server is real and minimal: an anyio TCP listener on 127.0.0.1 speaking just enough
HTTP/1.1, which records each request it receives and each client that disconnects. That
the helper has released its connection when it returns is read from the kernel's table of
TCP sockets (``/proc/self/net/tcp``, Linux): a socket the process still holds has an inode,
one it has closed has none.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import httpx
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from typing_extensions import TypedDict

from toolseam import (
    TOOL_ABORTED,
    AbortController,
    AbortError,
    AbortSignal,
    ToolExecutionInput,
    ToolFailure,
    ToolRegistry,
    ToolRunContext,
    define_tool,
)
from toolseam.capabilities import http_request, http_stream

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc (Linux)")


class _Server:
    """What the server saw: the paths requested, and an event per client that left."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.paths: list[str] = []
        self.received = anyio.Event()
        self.disconnected = anyio.Event()

    def open_client_sockets(self) -> int:
        """How many sockets this process still holds open towards the server."""
        count = 0
        for line in Path("/proc/self/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].split(":")[1], 16)
            if remote_port == self.port and fields[9] != "0":
                count += 1
        return count


async def _handle(server: _Server, connection: anyio.abc.SocketStream) -> None:
    async with connection:
        buffered = BufferedByteReceiveStream(connection)
        try:
            head = await buffered.receive_until(b"\r\n\r\n", 65536)
        except (anyio.EndOfStream, anyio.IncompleteRead):
            return
        path = head.split(b" ", 2)[1].decode()
        server.paths.append(path)
        server.received.set()
        if path == "/ok":
            await connection.send(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
            return
        if path == "/stream":
            # One chunk of a body that never ends.
            await connection.send(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n"
            )
        # "/hang" and "/stream": wait until the client goes away.
        try:
            while True:
                await connection.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            server.disconnected.set()


@asynccontextmanager
async def _server() -> AsyncIterator[_Server]:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    server = _Server(listener.extra(anyio.abc.SocketAttribute.local_port))

    async def handle(connection: anyio.abc.SocketStream) -> None:
        await _handle(server, connection)

    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, handle)
        yield server
        group.cancel_scope.cancel()


def _client(server: _Server, **options: object) -> httpx.AsyncClient:
    # trust_env=False: no proxy from the environment stands between the test and its server.
    return httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{server.port}",
        trust_env=False,
        **options,  # type: ignore[arg-type]
    )


class TestRequest:
    async def test_a_request_returns_the_whole_response(self) -> None:
        async with _server() as server, _client(server) as client:
            response = await http_request(client, "GET", "/ok", signal=AbortController().signal)
        assert (response.status_code, response.content, response.is_closed) == (200, b"hello", True)
        assert server.paths == ["/ok"]

    async def test_an_abort_closes_the_connection_before_it_raises(self) -> None:
        controller = AbortController()
        async with _server() as server, _client(server) as client:
            async with anyio.create_task_group() as group:
                open_on_return: list[int] = []

                async def call() -> None:
                    with pytest.raises(AbortError, match=r"^operation aborted: stop$"):
                        await http_request(client, "GET", "/hang", signal=controller.signal)
                    open_on_return.append(server.open_client_sockets())

                group.start_soon(call)
                await server.received.wait()
                assert server.open_client_sockets() == 1
                controller.abort("stop")
            await server.disconnected.wait()  # the server saw the client go
        assert open_on_return == [0]

    async def test_an_aborted_signal_sends_nothing(self) -> None:
        sent: list[httpx.Request] = []

        async def record(request: httpx.Request) -> None:
            sent.append(request)

        async with _server() as server:
            client = _client(server, event_hooks={"request": [record]})
            async with client:
                with pytest.raises(AbortError):
                    await http_request(
                        client, "GET", "/ok", signal=AbortSignal.aborted_signal("early")
                    )
            assert server.open_client_sockets() == 0
        assert sent == []

    async def test_host_cancellation_closes_the_connection_and_propagates(self) -> None:
        scope = anyio.CancelScope()
        controller = AbortController()
        async with _server() as server, _client(server) as client:
            async with anyio.create_task_group() as group:
                open_after: list[int] = []

                async def call() -> None:
                    with scope:
                        await http_request(client, "GET", "/hang", signal=controller.signal)
                    open_after.append(server.open_client_sockets())

                group.start_soon(call)
                await server.received.wait()
                scope.cancel()
            await server.disconnected.wait()
        assert scope.cancelled_caught  # re-raised to the scope that cancelled, never swallowed
        assert open_after == [0]
        assert not controller.signal.aborted

    async def test_httpx_errors_pass_through_unchanged(self) -> None:
        async with _server() as server:
            port = server.port
        async with httpx.AsyncClient(trust_env=False) as client:
            with pytest.raises(httpx.ConnectError):
                await http_request(
                    client, "GET", f"http://127.0.0.1:{port}/", signal=AbortController().signal
                )


class TestStream:
    async def test_an_abort_while_reading_the_body_closes_the_connection(self) -> None:
        controller = AbortController()
        chunks: list[bytes] = []
        async with _server() as server, _client(server) as client:
            async with anyio.create_task_group() as group:
                open_after: list[int] = []

                async def read() -> None:
                    async with http_stream(
                        client, "GET", "/stream", signal=controller.signal
                    ) as response:
                        async for chunk in response.aiter_bytes():
                            chunks.append(chunk)  # noqa: PERF401 - seen as each arrives

                async def call() -> None:
                    with pytest.raises(AbortError):
                        await read()
                    open_after.append(server.open_client_sockets())

                group.start_soon(call)
                await server.received.wait()
                while not chunks:  # the first chunk has arrived; the next read now waits
                    await anyio.wait_all_tasks_blocked()
                controller.abort()
            await server.disconnected.wait()
        assert chunks == [b"first"]
        assert open_after == [0]

    async def test_the_code_between_reads_is_never_cancelled(self) -> None:
        controller = AbortController()
        between: list[str] = []

        async def read(client: httpx.AsyncClient) -> None:
            async with http_stream(client, "GET", "/stream", signal=controller.signal) as response:
                async for chunk in response.aiter_bytes():
                    controller.abort()
                    # The block's own awaits go on: only the next network read stops.
                    await anyio.lowlevel.checkpoint()
                    between.append(chunk.decode())

        async with _server() as server, _client(server) as client:
            with pytest.raises(AbortError):
                await read(client)
            await server.disconnected.wait()
            assert server.open_client_sockets() == 0
        assert between == ["first"]

    async def test_leaving_the_block_early_releases_the_connection(self) -> None:
        async with _server() as server, _client(server) as client:
            async with http_stream(
                client, "GET", "/stream", signal=AbortController().signal
            ) as response:
                assert response.status_code == 200
            assert server.open_client_sockets() == 0
            await server.disconnected.wait()

    async def test_an_abort_while_waiting_for_the_headers_raises_on_entry(self) -> None:
        controller = AbortController()
        entered: list[bool] = []
        async with _server() as server, _client(server) as client:
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    with pytest.raises(AbortError):
                        async with http_stream(client, "GET", "/hang", signal=controller.signal):
                            entered.append(True)

                group.start_soon(call)
                await server.received.wait()
                controller.abort()
            await server.disconnected.wait()
            assert server.open_client_sockets() == 0
        assert entered == []


class TestInsideARegistry:
    class Args(TypedDict):
        url: str

    async def test_an_aborted_call_ends_aborted_once_its_connection_is_closed(self) -> None:
        controller = AbortController()
        async with _server() as server, _client(server) as client:
            registry = ToolRegistry()
            at_publish: list[int] = []

            @define_tool(name="fetch", description="Fetches a URL.")
            async def fetch(args: TestInsideARegistry.Args, exec: ToolRunContext) -> str:
                response = await http_request(client, "GET", args["url"], signal=exec.signal)
                return response.text

            registry.register(fetch)
            registry.on_result(lambda e, r: at_publish.append(server.open_client_sockets()))
            async with anyio.create_task_group() as group:
                results: list[object] = []

                async def call() -> None:
                    results.append(
                        await registry.execute(
                            ToolExecutionInput(
                                call_id="c1",
                                name="fetch",
                                arguments={"url": "/hang"},
                                signal=controller.signal,
                            )
                        )
                    )

                group.start_soon(call)
                await server.received.wait()
                controller.abort()
            await server.disconnected.wait()
        [result] = results
        assert isinstance(result, ToolFailure)
        assert result.code == TOOL_ABORTED
        assert at_publish == [0]


class TestImport:
    def _python(self, code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=False
        )

    def test_importing_the_capabilities_does_not_import_httpx(self) -> None:
        done = self._python(
            "import sys, toolseam.capabilities as c; c.run_process; print('httpx' in sys.modules)"
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "False\n", "")

    def test_without_httpx_the_http_helpers_say_which_extra_to_install(self) -> None:
        done = self._python(
            "import sys; sys.modules['httpx'] = None\n"
            "import toolseam.capabilities\n"
            "from toolseam.capabilities import http_request"
        )
        assert done.returncode == 1
        assert done.stderr.splitlines()[-1] == (
            "ImportError: toolseam.capabilities.http_request needs httpx: "
            'pip install "toolseam[http]"'
        )

    def test_the_http_helpers_report_the_public_module(self) -> None:
        assert http_request.__module__ == http_stream.__module__ == "toolseam.capabilities"
