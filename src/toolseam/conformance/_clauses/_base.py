"""A clause: one behaviour of contract §2 to §8, with a stable id, checked against a driver."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from .._driver import Capability, Outcome, Status
from .._kit import Kit, Running

__all__ = ["CLAUSES", "Clause", "clause", "expect_awaited", "expect_quiet", "expect_status"]


@dataclass(frozen=True, slots=True)
class Clause:
    """One behaviour the kit checks."""

    id: str
    title: str
    section: str
    requires: tuple[Capability, ...]
    check: Callable[[Kit], Awaitable[str]]


CLAUSES: list[Clause] = []


def clause(
    id: str, title: str, *, section: str, requires: Sequence[Capability] = ()
) -> Callable[[Callable[[Kit], Awaitable[str]]], Callable[[Kit], Awaitable[str]]]:
    """Register a clause; its check returns a detail on success and fails through the kit."""

    def register(check: Callable[[Kit], Awaitable[str]]) -> Callable[[Kit], Awaitable[str]]:
        if any(c.id == id for c in CLAUSES):
            raise ValueError(f"duplicate clause id {id!r}")
        CLAUSES.append(Clause(id, title, section, tuple(requires), check))
        return check

    return register


_WORDS: dict[Status, str] = {
    "ok": "a success",
    "error": "a failure",
    "aborted": "ABORTED (cancelled after the body ran)",
    "aborted_before_dispatch": "ABORTED_BEFORE_DISPATCH (cancelled, the body never ran)",
    "cancelled": "cancelled (without saying whether the body ran)",
    "timeout": "a timeout",
    "unknown": "an unknown outcome (the body may or may not have run)",
    "none": "no result",
}


def describe(outcome: Outcome) -> str:
    """An outcome in words, with the registry's own."""
    words = _WORDS[outcome.status]
    return f"{words} ({outcome.detail})" if outcome.detail else words


def expect_status(kit: Kit, outcome: Outcome, *wanted: Status) -> None:
    """Fail unless ``outcome`` has one of the ``wanted`` statuses."""
    if outcome.status not in wanted:
        kit.fail(
            f"{outcome.call_id}: expected {' or '.join(_WORDS[w] for w in wanted)}, "
            f"got {describe(outcome)}"
        )


def expect_quiet(kit: Kit, running: Running) -> None:
    """Fail unless every body had finished when the call returned (quiescence, measured)."""
    problems = running.quiet_at_return()
    if problems:
        ended = "returned" if running.cancelled is False else "let the cancellation go on"
        kit.fail(f"when the call {ended}, " + "; ".join(problems))


def expect_awaited(kit: Kit, running: Running, key: str, problem: str) -> None:
    """Fail with ``problem`` unless the call returned only after ``key`` had finished.

    The verdict of `Running.awaited`: two numbers of the probe's sequence, never a guess
    about which tasks were blocked.
    """
    if not running.awaited(key):
        kit.fail(running.not_awaited(key, problem))
