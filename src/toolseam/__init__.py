"""toolseam: a tool registry contract with cooperative cancellation at the registry boundary.

Every tool invocation carries a required, caller-owned `AbortSignal`; each pipeline stage
sees exactly the mutability it needs; a cancelled call always yields exactly one result
that says whether the tool body ran; started work is awaited until it stops.
"""

from ._approval import ApprovalAnswer as ApprovalAnswer
from ._approval import ApprovalRequest as ApprovalRequest
from ._approval import ApprovalService as ApprovalService
from ._batch import CallOutcome as CallOutcome
from ._batch import ToolCall as ToolCall
from ._batch import run_tool_calls as run_tool_calls
from ._capabilities import CAPABILITY_FAILED as CAPABILITY_FAILED
from ._capabilities import CAPABILITY_UNAVAILABLE as CAPABILITY_UNAVAILABLE
from ._capabilities import ElicitationRequest as ElicitationRequest
from ._capabilities import Elicited as Elicited
from ._capabilities import LogEvent as LogEvent
from ._capabilities import LogLevel as LogLevel
from ._capabilities import ProgressEvent as ProgressEvent
from ._capabilities import Root as Root
from ._capabilities import RootsRequest as RootsRequest
from ._capabilities import Sampled as Sampled
from ._capabilities import SamplingRequest as SamplingRequest
from ._capabilities import ToolEvent as ToolEvent
from ._decisions import Accept as Accept
from ._decisions import Allow as Allow
from ._decisions import Ask as Ask
from ._decisions import Block as Block
from ._decisions import Deny as Deny
from ._decisions import PostDecision as PostDecision
from ._decisions import PreDecision as PreDecision
from ._decisions import ReplaceValue as ReplaceValue
from ._define import ToolDecorator as ToolDecorator
from ._define import define_tool as define_tool
from ._definitions import ToolDefinition as ToolDefinition
from ._definitions import ToolSchema as ToolSchema
from ._errors import INVALID_ARGS as INVALID_ARGS
from ._errors import INVALID_TOOL_OUTPUT as INVALID_TOOL_OUTPUT
from ._errors import TOOL_ABORTED as TOOL_ABORTED
from ._errors import TOOL_ABORTED_BEFORE_DISPATCH as TOOL_ABORTED_BEFORE_DISPATCH
from ._errors import TOOL_ERROR_WITHOUT_CODE as TOOL_ERROR_WITHOUT_CODE
from ._errors import TOOL_TIMEOUT as TOOL_TIMEOUT
from ._errors import UNKNOWN_TOOL as UNKNOWN_TOOL
from ._errors import AbortError as AbortError
from ._errors import ToolArgsError as ToolArgsError
from ._errors import ToolError as ToolError
from ._errors import ToolNotFoundError as ToolNotFoundError
from ._errors import ToolOutputError as ToolOutputError
from ._errors import ToolTimeoutError as ToolTimeoutError
from ._json import FrozenDict as FrozenDict
from ._json import FrozenList as FrozenList
from ._json import JsonValue as JsonValue
from ._nested import nested_input as nested_input
from ._principal import Principal as Principal
from ._registration import Registration as Registration
from ._registry import ToolRegistry as ToolRegistry
from ._results import ContentBlock as ContentBlock
from ._results import ErrorInfo as ErrorInfo
from ._results import ToolErrorDetail as ToolErrorDetail
from ._results import ToolFailure as ToolFailure
from ._results import ToolResult as ToolResult
from ._results import ToolSuccess as ToolSuccess
from ._signals import AbortController as AbortController
from ._signals import AbortSignal as AbortSignal
from ._signals import FusedSignal as FusedSignal
from ._signals import fuse as fuse
from ._stages import AroundDispatch as AroundDispatch
from ._stages import EventListener as EventListener
from ._stages import Guard as Guard
from ._stages import Next as Next
from ._stages import PostExecuteListener as PostExecuteListener
from ._stages import PreExecuteListener as PreExecuteListener
from ._stages import ResultObserver as ResultObserver
from ._util import fixup_module_metadata as _fixup_module_metadata
from ._views import ExecutionToken as ExecutionToken
from ._views import ToolDispatchExecution as ToolDispatchExecution
from ._views import ToolExecution as ToolExecution
from ._views import ToolExecutionInput as ToolExecutionInput
from ._views import ToolHost as ToolHost
from ._views import ToolRunContext as ToolRunContext

__all__ = (
    "CAPABILITY_FAILED",
    "CAPABILITY_UNAVAILABLE",
    "INVALID_ARGS",
    "INVALID_TOOL_OUTPUT",
    "TOOL_ABORTED",
    "TOOL_ABORTED_BEFORE_DISPATCH",
    "TOOL_ERROR_WITHOUT_CODE",
    "TOOL_TIMEOUT",
    "UNKNOWN_TOOL",
    "AbortController",
    "AbortError",
    "AbortSignal",
    "Accept",
    "Allow",
    "ApprovalAnswer",
    "ApprovalRequest",
    "ApprovalService",
    "AroundDispatch",
    "Ask",
    "Block",
    "CallOutcome",
    "ContentBlock",
    "Deny",
    "ElicitationRequest",
    "Elicited",
    "ErrorInfo",
    "EventListener",
    "ExecutionToken",
    "FrozenDict",
    "FrozenList",
    "FusedSignal",
    "Guard",
    "JsonValue",
    "LogEvent",
    "LogLevel",
    "Next",
    "PostDecision",
    "PostExecuteListener",
    "PreDecision",
    "PreExecuteListener",
    "Principal",
    "ProgressEvent",
    "Registration",
    "ReplaceValue",
    "ResultObserver",
    "Root",
    "RootsRequest",
    "Sampled",
    "SamplingRequest",
    "ToolArgsError",
    "ToolCall",
    "ToolDecorator",
    "ToolDefinition",
    "ToolDispatchExecution",
    "ToolError",
    "ToolErrorDetail",
    "ToolEvent",
    "ToolExecution",
    "ToolExecutionInput",
    "ToolFailure",
    "ToolHost",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolRegistry",
    "ToolResult",
    "ToolRunContext",
    "ToolSchema",
    "ToolSuccess",
    "ToolTimeoutError",
    "define_tool",
    "fuse",
    "nested_input",
    "run_tool_calls",
)

__version__ = "0.1.0.dev0"

_fixup_module_metadata(__name__, globals())
del _fixup_module_metadata
