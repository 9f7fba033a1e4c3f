r"""The stdio transport `serve_stdio` runs on: `stdio_streams`.

The SDK's ``stdio_server`` reads every line and makes every write (and its flush) in a
worker thread, three thread round trips a ``tools/call`` that cost a stdio server more CPU
than the call itself. When the process's stdin and stdout are pipes or sockets (as an MCP
client starts a stdio server), this transport reads and writes them without a thread:
non-blocking descriptors, read and written when the event loop says they are ready
(``anyio.wait_readable``/``wait_writable``, on asyncio and trio alike).

It keeps what the SDK's does: file descriptors 0 and 1 are claimed, diverted (to the null
device and to stderr) while it serves and restored after, by the SDK's own claim, so
stray prints cannot corrupt the wire and a second stdio server in the process is refused;
each line is decoded as UTF-8 (an invalid byte replaced) and parsed into a JSON-RPC
message, a line that does not parse reaches the server as its exception; each message is
written as one line of JSON. What it changes: the descriptors are non-blocking while it
serves (restored after; a process sharing the same pipe would see that), and a line may
end in ``\n`` or ``\r\n`` (a bare ``\r`` is not a line break here, as it is for the SDK's
text reader; JSON-RPC over stdio has one message a line, ``\n``-delimited).

Anything else (a regular file, a terminal, Windows, an SDK without the claim this relies
on) is served by the SDK's ``stdio_server`` as before.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from typing import Any, Final, cast

import anyio
import mcp_types
from mcp.server import stdio as sdk_stdio
from mcp.shared.message import SessionMessage

__all__ = ["stdio_streams"]

_READ_SIZE: Final = 1 << 16

# `stdio_server` carries no return annotation; its streams are the SDK's private
# `ReadStream`/`WriteStream` protocols, which `Server.run` accepts as they come.
_sdk_stdio_server = cast(
    "Callable[[], AbstractAsyncContextManager[tuple[Any, Any]]]",
    sdk_stdio.stdio_server,
)


def _is_stream(fd: int) -> bool:
    """Whether ``fd`` is a pipe or a socket (what a readiness wait works on)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _fits() -> bool:
    if sys.platform == "win32":
        return False
    if not all(
        hasattr(sdk_stdio, name)
        for name in ("_claim_fd", "_open_stdin_diversion", "_open_stdout_diversion")
    ):
        return False  # an SDK whose claim is not the one this relies on: its own transport
    # sys.stdin/sys.stdout replaced (a host, a test runner): the SDK serves what they are.
    return _backed(sys.stdin, 0) and _backed(sys.stdout, 1) and _is_stream(0) and _is_stream(1)


def _backed(stream: object, fd: int) -> bool:
    try:
        return cast("Any", stream).buffer.fileno() == fd  # type: ignore[no-any-return]
    except (AttributeError, OSError, ValueError):
        return False


def stdio_streams() -> AbstractAsyncContextManager[tuple[Any, Any]]:
    """The read and write streams of an MCP server on this process's stdin and stdout.

    Threadless over pipes and sockets (see the module); the SDK's ``stdio_server``
    otherwise.
    """
    if not _fits():
        return _sdk_stdio_server()
    return _threadless()


@asynccontextmanager
async def _threadless() -> AsyncGenerator[tuple[Any, Any]]:
    from mcp.shared._context_streams import create_context_streams

    claim = cast("Callable[..., tuple[Any, Callable[[], None] | None]]", sdk_stdio._claim_fd)  # pyright: ignore[reportPrivateUsage]
    restore_in: Callable[[], None] | None = None
    restore_out: Callable[[], None] | None = None
    blocking: list[tuple[int, bool]] = []
    try:
        wire_in, restore_in = claim(0, sys.stdin, "rb", sdk_stdio._open_stdin_diversion)  # pyright: ignore[reportPrivateUsage]
        wire_out, restore_out = claim(1, sys.stdout, "wb", sdk_stdio._open_stdout_diversion)  # pyright: ignore[reportPrivateUsage]
        fd_in: int = wire_in.fileno()
        fd_out: int = wire_out.fileno()
        if fd_out == 1:
            sys.stdout.flush()  # served in place: what was printed before goes out first
        for fd in (fd_in, fd_out):
            blocking.append((fd, os.get_blocking(fd)))
            os.set_blocking(fd, False)

        read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
        write_stream, write_reader = create_context_streams[SessionMessage](0)

        async def reader() -> None:
            async with read_writer:
                pending = bytearray()
                while True:
                    try:
                        chunk = os.read(fd_in, _READ_SIZE)
                    except BlockingIOError:
                        await anyio.wait_readable(fd_in)
                        continue
                    if not chunk:
                        if pending:
                            await _deliver(read_writer, bytes(pending))
                        return
                    searched = len(pending)  # a long line is scanned once, not per chunk
                    pending += chunk
                    start = 0
                    while (end := pending.find(b"\n", searched)) >= 0:
                        await _deliver(read_writer, bytes(pending[start : end + 1]))
                        start = searched = end + 1
                    del pending[:start]

        async def writer() -> None:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await _write_all(fd_out, (data + "\n").encode())

        async with anyio.create_task_group() as group:
            group.start_soon(reader, name="toolseam.mcp stdio reader")
            group.start_soon(writer, name="toolseam.mcp stdio writer")
            yield read_stream, write_stream
    finally:
        for fd, was in blocking:
            with suppress(OSError):
                os.set_blocking(fd, was)
        if restore_out is not None:
            restore_out()
        if restore_in is not None:
            restore_in()


async def _deliver(stream: Any, line: bytes) -> None:
    text = line.decode("utf-8", errors="replace")
    if text.endswith("\r\n"):
        text = text[:-2] + "\n"
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except Exception as error:  # as the SDK's transport: the server answers the bad line
        await stream.send(error)
        return
    await stream.send(SessionMessage(message))


async def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            await anyio.wait_writable(fd)
            continue
        view = view[written:]
