# The default conformance target: toolseam's own contract, re-exported under the module name
# the typetests import (`conformance_target`). Another registry copies this file, points
# each name at its own types and sets TOOLSEAM_CONFORMANCE_TARGET to the folder holding its
# `conformance_target/` (see docs/conformance.md). These are the names the suite uses.

from toolseam import INVALID_ARGS as INVALID_ARGS
from toolseam import INVALID_TOOL_OUTPUT as INVALID_TOOL_OUTPUT
from toolseam import TOOL_ABORTED as TOOL_ABORTED
from toolseam import TOOL_ABORTED_BEFORE_DISPATCH as TOOL_ABORTED_BEFORE_DISPATCH
from toolseam import TOOL_TIMEOUT as TOOL_TIMEOUT
from toolseam import UNKNOWN_TOOL as UNKNOWN_TOOL
from toolseam import AbortController as AbortController
from toolseam import AbortSignal as AbortSignal
from toolseam import Accept as Accept
from toolseam import Allow as Allow
from toolseam import ApprovalAnswer as ApprovalAnswer
from toolseam import ApprovalRequest as ApprovalRequest
from toolseam import Ask as Ask
from toolseam import Block as Block
from toolseam import ContentBlock as ContentBlock
from toolseam import Deny as Deny
from toolseam import ExecutionToken as ExecutionToken
from toolseam import JsonValue as JsonValue
from toolseam import Next as Next
from toolseam import PostDecision as PostDecision
from toolseam import PreDecision as PreDecision
from toolseam import ReplaceValue as ReplaceValue
from toolseam import ToolDecorator as ToolDecorator
from toolseam import ToolDefinition as ToolDefinition
from toolseam import ToolDispatchExecution as ToolDispatchExecution
from toolseam import ToolExecution as ToolExecution
from toolseam import ToolExecutionInput as ToolExecutionInput
from toolseam import ToolFailure as ToolFailure
from toolseam import ToolRegistry as ToolRegistry
from toolseam import ToolResult as ToolResult
from toolseam import ToolRunContext as ToolRunContext
from toolseam import ToolSuccess as ToolSuccess
from toolseam import define_tool as define_tool
