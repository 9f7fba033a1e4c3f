"""The codes a ``run_code`` failure carries, and the errors that carry them."""

from __future__ import annotations

from typing import Final

from .._errors import ToolError

__all__ = [
    "PTC_CLOSED",
    "PTC_CRASH",
    "PTC_ERROR",
    "PTC_LIMIT",
    "PtcClosedError",
    "PtcCrashError",
    "PtcLimitError",
    "PtcProgramError",
]

PTC_LIMIT: Final = "PTC_LIMIT"
"""The program reached a limit of its run: wall clock, memory or the number of nested calls."""

PTC_ERROR: Final = "PTC_ERROR"
"""The program did not parse, or raised an exception it did not handle."""

PTC_CRASH: Final = "PTC_CRASH"
"""The sandbox process died on its own (not stopped by toolseam)."""

PTC_CLOSED: Final = "PTC_CLOSED"
"""``run_code`` was called while its sandbox pool was not open (outside ``async with``)."""


class PtcLimitError(ToolError):
    """The program reached a limit of its run (`PTC_LIMIT`).

    Args:
        message: Which limit, and its value.
    """

    code = PTC_LIMIT


class PtcProgramError(ToolError):
    """The program did not parse, or raised an exception it did not handle (`PTC_ERROR`).

    Args:
        message: The (bounded) traceback, as the model needs it to fix the program.
    """

    code = PTC_ERROR


class PtcCrashError(ToolError):
    """The sandbox process died on its own (`PTC_CRASH`).

    Args:
        message: How it died.
    """

    code = PTC_CRASH


class PtcClosedError(ToolError):
    """``run_code`` was called while its sandbox pool was closed (`PTC_CLOSED`).

    Args:
        message: What to do about it.
    """

    code = PTC_CLOSED
