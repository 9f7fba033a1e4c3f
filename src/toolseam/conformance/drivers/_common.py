"""What the peer drivers share: versions, host-cancellation checks, task-only listening."""

from __future__ import annotations

import asyncio
import importlib.metadata
from collections.abc import Callable, Mapping
from typing import NoReturn, final

import anyio

from .._driver import Call, Outcome, Program

__all__ = ["TaskListen", "host_cancelled", "monty_program", "no_result", "versions"]


def versions(*distributions: str) -> Mapping[str, str]:
    """``{distribution: installed version}``."""
    return {name: importlib.metadata.version(name) for name in distributions}


def host_cancelled() -> bool:
    """Whether the task running the driver was cancelled (by the kit, as the host).

    A peer that cancels work of its own raises `asyncio.CancelledError` too; only a
    cancellation of *our* task is the host's, and must propagate.
    """
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def no_result(call_id: str, what: str) -> Outcome:
    """The registry gave no result for the call: it raised ``what``."""
    return Outcome(call_id, "none", f"no result: {what}")


@final
class TaskListen:
    """The `Listen` of a registry that has nothing to tell a body: it cancels tasks.

    ``is_told`` is always ``False`` and ``wait`` never returns: task cancellation is the
    only way such a body hears of anything. ``stop`` raises `asyncio.CancelledError`.
    """

    def __init__(
        self,
        error: Callable[[str], Exception],
        nested: Callable[[Call], object] | None = None,
    ) -> None:
        self._error = error
        self._nested = nested

    def is_told(self) -> bool:
        return False

    async def wait(self) -> None:
        await anyio.sleep_forever()

    def stop(self) -> NoReturn:
        raise asyncio.CancelledError()

    def fail(self, message: str) -> NoReturn:
        raise self._error(message)

    async def call(self, call: Call) -> Outcome:
        if self._nested is None:
            raise NotImplementedError("this driver makes no nested calls")
        result = self._nested(call)
        assert asyncio.iscoroutine(result)
        outcome: Outcome = await result
        return outcome


def monty_program(program: Program) -> str:
    """``program`` in Python for a Monty sandbox whose tools are ``async def tool(*, key)``.

    Both toolseam's ``run_code`` and pydantic-ai-harness's ``CodeMode`` expose the tools so.
    """

    def call(c: Call) -> str:
        return f"{c.tool}(key={c.arguments['key']!r})"

    lines = [
        "import asyncio",
        "async def attempt(call):",
        "    try:",
        "        return await call",
        "    except Exception as error:",
        "        return 'error: ' + str(error)",
        "out = []",
        f"started = [{', '.join(call(c) for c in program.calls)}]",
    ]
    if program.await_calls:
        lines.append("out.extend(await asyncio.gather(*[attempt(c) for c in started]))")
    lines += [f"out.append(await attempt({call(c)}))" for c in program.then]
    if program.spin:
        lines += ["while True:", "    pass"]
    lines.append("out")
    return "\n".join(lines) + "\n"
