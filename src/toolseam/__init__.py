"""toolseam: a tool registry contract with cooperative cancellation at the registry boundary.

Every tool invocation carries a required, caller-owned `AbortSignal`; each pipeline stage
sees exactly the mutability it needs; a cancelled call always yields exactly one result
that says whether the tool body ran; started work is awaited until it stops.
"""

from ._errors import INVALID_ARGS as INVALID_ARGS
from ._errors import INVALID_TOOL_OUTPUT as INVALID_TOOL_OUTPUT
from ._errors import TOOL_ABORTED as TOOL_ABORTED
from ._errors import TOOL_ABORTED_BEFORE_DISPATCH as TOOL_ABORTED_BEFORE_DISPATCH
from ._errors import TOOL_TIMEOUT as TOOL_TIMEOUT
from ._errors import UNKNOWN_TOOL as UNKNOWN_TOOL
from ._errors import AbortError as AbortError
from ._errors import ToolArgsError as ToolArgsError
from ._errors import ToolError as ToolError
from ._errors import ToolNotFoundError as ToolNotFoundError
from ._errors import ToolOutputError as ToolOutputError
from ._errors import ToolTimeoutError as ToolTimeoutError
from ._registration import Registration as Registration
from ._signals import AbortController as AbortController
from ._signals import AbortSignal as AbortSignal
from ._signals import FusedSignal as FusedSignal
from ._signals import fuse as fuse
from ._util import fixup_module_metadata as _fixup_module_metadata

__all__ = (
    "INVALID_ARGS",
    "INVALID_TOOL_OUTPUT",
    "TOOL_ABORTED",
    "TOOL_ABORTED_BEFORE_DISPATCH",
    "TOOL_TIMEOUT",
    "UNKNOWN_TOOL",
    "AbortController",
    "AbortError",
    "AbortSignal",
    "FusedSignal",
    "Registration",
    "ToolArgsError",
    "ToolError",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolTimeoutError",
    "fuse",
)

__version__ = "0.1.0.dev0"

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
