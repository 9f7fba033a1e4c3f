"""What every mutant shares: the table's row type, the honest driver they derive from, and
the two ways a defective registry leaves started work behind (racing it, abandoning it)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TypeVar

import anyio

from toolseam.conformance import Capability, Driver, Outcome, Scenario
from toolseam.conformance.drivers._toolseam import capabilities, registry_for, run_on

T = TypeVar("T")

BOTH = ("asyncio", "trio")


@dataclass(frozen=True)
class Mutant:
    """One row of the table: a driver with one defect, and the clauses it must fail."""

    name: str
    """The test id."""
    driver: Callable[[], Driver]
    """Builds the defective driver."""
    breaks: frozenset[str]
    """Exactly the clause ids the defect violates; every other clause must pass (or skip)."""
    backends: Sequence[str] = BOTH
    """The backends the defect can be expressed on (the test runs it on each)."""
    sometimes: frozenset[str] = frozenset()
    """Clauses the defect fails only when it loses a race it cannot be made to lose every
    time (say which in the row's comment): each may fail or pass; every other clause not in
    `breaks` must pass."""


class ToolseamMutant:
    """toolseam's own driver, as a base for one defect (a subclass overrides `run`).

    Without ``durable``: each durable clause runs a DBOS workflow (on asyncio only), and a
    defect of the in-process registry is measured on it; the durable family's mutants
    (kit_mutants/durable.py) offer it.
    """

    subject = "toolseam (mutant)"
    backends: Sequence[str] = BOTH

    @property
    def capabilities(self) -> Collection[Capability]:
        return [c for c in capabilities() if c != "durable"]

    def versions(self) -> dict[str, str]:
        return {}

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        return await run_on(registry_for(scenario), scenario)


_ABANDONED: set[asyncio.Task[object]] = set()  # keeps the abandoned tasks alive


def _on_asyncio() -> bool:
    try:
        asyncio.current_task()
    except RuntimeError:
        return False
    return True


async def race_abort(
    work: Callable[[], Awaitable[T]], aborted: Callable[[], Awaitable[None]]
) -> tuple[T] | None:
    """The defect itself: await ``work`` only until ``aborted()`` returns, then leave it.

    ``(result,)`` when the work finished first; ``None`` when the abort came first — the
    work goes on running in a task nobody awaits (on asyncio a bare task, raced with
    ``asyncio.wait``, as an asyncio author writes it; on trio a system task).
    """
    if _on_asyncio():
        job = asyncio.ensure_future(work())
        abort = asyncio.ensure_future(aborted())
        try:
            done, _ = await asyncio.wait({job, abort}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            abort.cancel()
            if not job.done():  # abandoned: at the abort, or at the host's cancellation
                _ABANDONED.add(job)  # type: ignore[arg-type]
                job.add_done_callback(_forget)
        await asyncio.wait({abort})  # the registry's own helper: gone before it returns
        return (job.result(),) if job in done else None
    import trio

    outcome: list[tuple[T] | BaseException] = []
    finished = anyio.Event()

    async def run() -> None:
        try:
            outcome.append((await work(),))
        except Exception as error:  # read below, unless the work was abandoned by then
            outcome.append(error)
        finally:
            finished.set()

    trio.lowlevel.spawn_system_task(run)
    async with anyio.create_task_group() as group:

        async def until(event: Callable[[], Awaitable[object]]) -> None:
            await event()
            group.cancel_scope.cancel()

        group.start_soon(until, finished.wait)
        group.start_soon(until, aborted)
    if not outcome:
        return None
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _forget(job: asyncio.Future[object]) -> None:
    """An abandoned task ended: nobody reads what it raised."""
    _ABANDONED.discard(job)  # type: ignore[arg-type]
    if not job.cancelled():
        job.exception()
