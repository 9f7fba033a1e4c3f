"""Human (or policy) approval for calls a pre-execute listener answered with `Ask`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias, final

from ._signals import AbortSignal
from ._views import ToolExecution

__all__ = ["ApprovalAnswer", "ApprovalRequest", "ApprovalService"]

ApprovalAnswer: TypeAlias = Literal["allowed-once", "rejected", "cancelled", "unavailable"]
"""What an `ApprovalService` answers."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """One request for approval.

    ``signal`` is the caller's: a service that waits for a human should stop waiting and
    answer ``"cancelled"`` when it aborts.
    """

    execution: ToolExecution
    """The (read-only) execution awaiting approval."""
    reason: str | None
    """The reason the pre-execute listener gave with `Ask`."""
    signal: AbortSignal
    """The caller's abort signal."""


class ApprovalService(Protocol):
    """Decides calls that a pre-execute listener answered with `Ask`."""

    async def request(self, request: ApprovalRequest, /) -> ApprovalAnswer:
        """Return the decision; the registry awaits it without racing cancellation."""
        ...
