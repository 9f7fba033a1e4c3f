# minireg's conformance target: each name the suite's cases import, mapped onto minireg's
# own type. A renaming import is a re-export only when `__all__` lists it; the suite also
# reads these renames to compare mypy's messages ("Call" in minireg is "ToolExecution" in
# the cases' expected messages).

from minireg import ABORTED as TOOL_ABORTED
from minireg import BAD_ARGS as INVALID_ARGS
from minireg import BAD_OUTPUT as INVALID_TOOL_OUTPUT
from minireg import NEVER_RAN as TOOL_ABORTED_BEFORE_DISPATCH
from minireg import NO_SUCH_TOOL as UNKNOWN_TOOL
from minireg import TIMED_OUT as TOOL_TIMEOUT
from minireg import Accept as Accept
from minireg import After as PostDecision
from minireg import Allow as Allow
from minireg import Answer as ApprovalAnswer
from minireg import Ask as Ask
from minireg import Before as PreDecision
from minireg import Block as ContentBlock
from minireg import Block_ as Block
from minireg import BodyCall as ToolRunContext
from minireg import Call as ToolExecution
from minireg import CallId as ExecutionToken
from minireg import CallInput as ToolExecutionInput
from minireg import Controller as AbortController
from minireg import Decorator as ToolDecorator
from minireg import Deny as Deny
from minireg import Failure as ToolFailure
from minireg import Json as JsonValue
from minireg import Outcome as ToolResult
from minireg import Question as ApprovalRequest
from minireg import Registry as ToolRegistry
from minireg import ReplaceValue as ReplaceValue
from minireg import Signal as AbortSignal
from minireg import Success as ToolSuccess
from minireg import Then as Next
from minireg import Tool as ToolDefinition
from minireg import WrapCall as ToolDispatchExecution
from minireg import tool as define_tool

__all__ = [
    "INVALID_ARGS",
    "INVALID_TOOL_OUTPUT",
    "TOOL_ABORTED",
    "TOOL_ABORTED_BEFORE_DISPATCH",
    "TOOL_TIMEOUT",
    "UNKNOWN_TOOL",
    "AbortController",
    "AbortSignal",
    "Accept",
    "Allow",
    "ApprovalAnswer",
    "ApprovalRequest",
    "Ask",
    "Block",
    "ContentBlock",
    "Deny",
    "ExecutionToken",
    "JsonValue",
    "Next",
    "PostDecision",
    "PreDecision",
    "ReplaceValue",
    "ToolDecorator",
    "ToolDefinition",
    "ToolDispatchExecution",
    "ToolExecution",
    "ToolExecutionInput",
    "ToolFailure",
    "ToolRegistry",
    "ToolResult",
    "ToolRunContext",
    "ToolSuccess",
    "define_tool",
]
