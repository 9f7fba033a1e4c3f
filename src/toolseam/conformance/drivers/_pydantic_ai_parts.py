"""How the pydantic-ai drivers read a tool call's outcome from pydantic-ai's history.

Shared by the ``pydantic-ai`` and ``codemode`` drivers, which run on different pydantic-ai
releases (pydantic-ai-harness pins its own): this module uses only what both have.
"""

from __future__ import annotations

from typing import Final

from pydantic_ai.messages import ToolReturnPart

from .._driver import Outcome

__all__ = ["TIMED_OUT", "outcome"]

TIMED_OUT: Final = "Timed out after"
"""How pydantic-ai's retry prompt for a tool that ran past its ``timeout`` begins."""


def outcome(call_id: str, part: ToolReturnPart) -> Outcome:
    """The kit's outcome of the call ``part`` returns for."""
    if part.outcome == "success":
        return Outcome(call_id, "ok", value=part.content)
    if part.outcome == "interrupted":
        return Outcome(call_id, "cancelled", f"outcome='interrupted': {part.content}")
    # A failure is a retry prompt for the model (``outcome='retried'``); so is a timeout.
    timed_out = part.outcome == "retried" and str(part.content).startswith(TIMED_OUT)
    detail = f"outcome={part.outcome!r}: {part.content}"
    return Outcome(call_id, "timeout" if timed_out else "error", detail)
