"""What pre-execute and post-execute listeners decide."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias, final

from ._json import JsonValue
from ._results import ContentBlock

__all__ = ["Accept", "Allow", "Ask", "Block", "Deny", "PostDecision", "PreDecision", "ReplaceValue"]


@final
@dataclass(frozen=True, slots=True)
class Allow:
    """Let the call proceed (the default of the pre-execute chain)."""


@final
@dataclass(frozen=True, slots=True)
class Deny:
    """Refuse the call; the result is a failure ``tool call denied: <reason>``."""

    reason: str
    """Why, for the model."""


@final
@dataclass(frozen=True, slots=True)
class Ask:
    """Ask the registry's `ApprovalService`; without one, ``Ask`` is a denial."""

    reason: str | None = None
    """Why approval is needed, shown to whoever approves."""


PreDecision: TypeAlias = Allow | Deny | Ask
"""The outcome of the pre-execute chain."""


@final
@dataclass(frozen=True, slots=True)
class Accept:
    """Keep the result; optionally replace its content and add contexts."""

    content: Sequence[ContentBlock] | None = None
    """New model-facing content, or ``None`` to keep the result's."""
    additional_contexts: Sequence[JsonValue] = ()
    """Contexts appended to the result's."""


@final
@dataclass(frozen=True, slots=True)
class ReplaceValue:
    """Replace the result with a success carrying ``value`` (content rendered anew)."""

    value: JsonValue
    """The new value."""
    additional_contexts: Sequence[JsonValue] = ()
    """Contexts appended to the result's."""


@final
@dataclass(frozen=True, slots=True)
class Block:
    """Replace the result with a failure whose message is ``feedback``."""

    feedback: str
    """What the model is told instead of the result."""
    additional_contexts: Sequence[JsonValue] = ()
    """Contexts appended to the result's."""


PostDecision: TypeAlias = Accept | ReplaceValue | Block
"""The outcome of the post-execute chain."""
