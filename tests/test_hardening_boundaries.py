"""Hostile behaviour at the boundaries between stages, threads and entry points.

Each class guards one hole an adversarial probe found (issue 25): something crossing from
one stage, thread or entry point to the next that cost a call its one result, hung it, or
escaped in another shape than it was raised. docs/reliability.md's hostile-behaviour table
names the test that proves each row. Every test runs on asyncio and trio; ``GUARD`` only
turns a hang into a failure, it decides no ordering.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from support import Published, TextArgs, make_input
from toolseam import ToolFailure, ToolRegistry, ToolRunContext, define_tool

GUARD = 10  # seconds: a hang guard, never an ordering


class _ClassRaises(Exception):
    """An exception whose ``__class__`` raises: ``isinstance`` on it raises."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # type: ignore[override]
        raise RuntimeError("__class__ refuses")


class _WithTracebackRaises(Exception):
    """An exception whose ``with_traceback`` raises (trio's thread hand-off calls it)."""

    def with_traceback(self, tb: object) -> _WithTracebackRaises:  # type: ignore[override]
        raise RuntimeError("with_traceback refuses")


class TestHostileExceptionsLeaveWorkerThreads:
    """Contract §5, §8: what a synchronous body raises never reaches the thread machinery.

    anyio's asyncio worker asks ``isinstance(error, StopIteration)`` in a loop callback, and
    trio's thread hand-off calls ``error.with_traceback``: a hostile exception made either
    raise there, so the thread's outcome was never delivered and the call hung for ever.
    """

    @pytest.mark.parametrize("error", [_ClassRaises, _WithTracebackRaises])
    async def test_a_sync_body_raising_it_ends_in_one_failure(
        self, error: Callable[[], Exception]
    ) -> None:
        registry = ToolRegistry()
        published = Published()
        registry.on_result(published)

        @define_tool(name="s", description="")
        def tool(args: TextArgs, exec: ToolRunContext) -> str:
            raise error()

        registry.register(tool)
        with anyio.fail_after(GUARD):
            result = await registry.execute(make_input("s"))
        assert isinstance(result, ToolFailure)
        assert type(result.error.message) is str
        assert published.only is result
