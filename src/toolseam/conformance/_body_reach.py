"""What a scripted body reaches beyond its cancellation, and the caller's side of it (§11).

A registry may let a tool body report progress to its caller, ask the caller's user a
question (elicitation) and start a process through a helper of its own. The driver builds a
`Reach` per body — the body's way to each of those in that registry — and wires the
scenario's caller side (`ProgressSink`, `ElicitationScript`) to wherever its registry
delivers progress and asks questions. The kit plays that caller: it records every progress
event it receives and answers (or holds) every question, with a probe record of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, Protocol, TypeAlias

from ._driver import Call, Listen

__all__ = ["ElicitationScript", "ProgressSink", "Reach", "Reaching"]

Reaching: TypeAlias = Literal["progress", "elicit", "process"]
"""What a scripted body reaches through its `Reach` (`ScriptedTool.reaches`)."""

ProgressSink: TypeAlias = Callable[[str, float, str | None], None]
"""The kit's progress sink, the caller's: the driver calls it with ``(call_id, progress,
message)`` for every progress event its registry delivers to the caller of a call, from
wherever the registry delivers it (a host's consumer, a callback, an event stream)."""

ElicitationScript: TypeAlias = Callable[[Call, str, Listen], Awaitable[str | None]]
"""The kit's scripted elicitation, the caller's: the driver calls it where its registry asks
the caller a body's question, with the call, the question and a `Listen` on the request's
own cancellation, and hands the body the answer: the text, or ``None`` for a declined or
withdrawn question."""


class Reach(Protocol):
    """A scripted body's way to what its registry lets it reach, built by the driver per body.

    Only what the driver's capabilities say must work: ``progress`` and ``progress_sync``
    (``progress``; ``progress_sync`` when it also has ``sync_bodies``), ``elicit``
    (``elicitation``), ``run_process`` (``process``). A method the registry does not offer
    raises `NotImplementedError` saying so. The object may outlive its call: the kit keeps
    one and reports through it once the call has settled.
    """

    async def progress(self, progress: float, message: str) -> None:
        """Report progress to the call's caller, from an async body (or after it returned)."""
        ...

    def progress_sync(self, progress: float, message: str) -> None:
        """Report progress from a synchronous body, in the worker thread it runs in."""
        ...

    async def elicit(self, question: str) -> str | None:
        """Ask the call's caller ``question`` and return the answer (``None``: declined).

        Raises what the registry raises: its abort when the call was stopped while the
        question was pending, its tool error when the caller offers no elicitation.
        """
        ...

    async def run_process(self, argv: Sequence[str]) -> None:
        """Run ``argv`` through the registry's process helper, with the call's cancellation.

        Returns when the process has ended; raises what the registry's helper raises when
        the call is stopped (the kit does not look at the process's output or status).
        """
        ...
