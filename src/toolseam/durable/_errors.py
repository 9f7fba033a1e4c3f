"""The codes `toolseam.durable` adds to the registry's, and the errors that carry them.

::

    ToolError
    ├── OutcomeUnknownError      OUTCOME_UNKNOWN: ran when its worker died, not run again
    └── UnrecordableResultError  RESULT_NOT_RECORDABLE: the engine could not store the result

Each ends a call as a `ToolFailure` built by the registry's own rule for a raised
`ToolError` (``ErrorInfo(<class name>, <code>)``, content ``Error: <message>``).
"""

from __future__ import annotations

from typing import Final

from .._errors import ToolError, safe_str

__all__ = [
    "OUTCOME_UNKNOWN",
    "RESULT_NOT_RECORDABLE",
    "OutcomeUnknownError",
    "UnrecordableResultError",
]

OUTCOME_UNKNOWN: Final = "OUTCOME_UNKNOWN"
"""A call was running when its worker stopped, and its tool is not idempotent: it is not run
again, and whether its side effects happened is unknown."""

RESULT_NOT_RECORDABLE: Final = "RESULT_NOT_RECORDABLE"
"""A call's result could not be serialized by the durable engine, so it could not be
recorded; the body ran."""


class OutcomeUnknownError(ToolError):
    """The outcome of a call that was running when its worker stopped, never recorded.

    Args:
        name: The tool.
        call_id: The call.
    """

    code = OUTCOME_UNKNOWN

    def __init__(self, name: str, call_id: str) -> None:
        super().__init__(
            f'tool "{name}" (call {call_id!r}) was running when its worker stopped, before '
            "its outcome was recorded; the tool is not idempotent, so the call was not run "
            "again: its side effects may or may not have happened"
        )


class UnrecordableResultError(ToolError):
    """A call's result that the durable engine could not serialize.

    Args:
        name: The tool.
        problem: What the engine's serializer said.
    """

    code = RESULT_NOT_RECORDABLE

    def __init__(self, name: str, problem: BaseException) -> None:
        super().__init__(
            f'tool "{name}" ran, but its result could not be recorded: the durable engine '
            f"cannot serialize it ({type(problem).__name__}: {safe_str(problem)})"
        )
