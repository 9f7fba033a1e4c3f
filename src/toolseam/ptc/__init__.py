"""Programmatic tool calling: a ``run_code`` tool whose programs call registry tools.

Extra ``toolseam[ptc]`` (pydantic-monty); see docs/ptc.md. The model writes a Python program;
it runs in a pydantic-monty sandbox (no host files, network, environment or subprocesses) and
calls the registry's tools as functions. Each such call is a nested dispatch of the
``run_code`` call through the registry's whole pipeline, with a signal fused from the
``run_code`` call's own. A stop — the caller's abort, the call's deadline, a host
cancellation, a limit — tells the nested calls in flight and awaits them, lets no further one
run, gives the program ``grace`` seconds, kills its worker process, and returns once the
process has exited. Every result lists every nested call with its outcome code.

    async with ptc_tool(registry, tools=["search"]) as run_code:
        registry.register(run_code)
        ...
"""

from .._util import fixup_module_metadata as _fixup_module_metadata
from ._errors import PTC_CLOSED as PTC_CLOSED
from ._errors import PTC_CRASH as PTC_CRASH
from ._errors import PTC_ERROR as PTC_ERROR
from ._errors import PTC_LIMIT as PTC_LIMIT
from ._errors import PtcClosedError as PtcClosedError
from ._errors import PtcCrashError as PtcCrashError
from ._errors import PtcLimitError as PtcLimitError
from ._errors import PtcProgramError as PtcProgramError
from ._run import CONTEXT_KEY as CONTEXT_KEY
from ._tool import PtcLimits as PtcLimits
from ._tool import PtcTool as PtcTool
from ._tool import ptc_tool as ptc_tool

__all__ = (
    "CONTEXT_KEY",
    "PTC_CLOSED",
    "PTC_CRASH",
    "PTC_ERROR",
    "PTC_LIMIT",
    "PtcClosedError",
    "PtcCrashError",
    "PtcLimitError",
    "PtcLimits",
    "PtcProgramError",
    "PtcTool",
    "ptc_tool",
)

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
