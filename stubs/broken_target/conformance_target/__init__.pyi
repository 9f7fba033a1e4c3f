# A deliberately NON-conforming contract: the meta-test (typetests/test_broken_target.py)
# runs every negative case of the suite against it and fails unless each one stops
# reporting its expected error here. Every name of the default target exists (an import
# error would make a case fail for the wrong reason); every rule of contract §3, §4 and §6 that
# the suite checks is broken on purpose, as a careless registry would break it.

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, TypeVar

ArgsT = TypeVar("ArgsT", contravariant=True)
ResultT = TypeVar("ResultT", covariant=True)
T = TypeVar("T")

# Codes from an untyped module: neither Final nor literal.
TOOL_ABORTED: Any
TOOL_ABORTED_BEFORE_DISPATCH: Any
TOOL_TIMEOUT: Any
UNKNOWN_TOOL: Any
INVALID_ARGS: Any
INVALID_TOOL_OUTPUT: Any

JsonValue: TypeAlias = Any
ContentBlock: TypeAlias = Any

class AbortSignal:
    # A public constructor, and a signal that aborts itself: any stage may cancel the call.
    aborted: bool
    reason: object
    def __init__(self) -> None: ...
    def abort(self, reason: object = None) -> None: ...
    def raise_if_aborted(self) -> None: ...
    def add_listener(self, callback: Callable[[AbortSignal], object], /) -> object: ...
    async def wait(self) -> None: ...
    def wait_sync(self, timeout: float | None = None) -> bool: ...
    @staticmethod
    def aborted_signal(reason: object = None) -> AbortSignal: ...

class AbortController:
    signal: AbortSignal
    def abort(self, reason: object = None) -> None: ...

class ExecutionToken:
    def __init__(self) -> None: ...  # anyone can mint one

@dataclass
class ToolExecutionInput:  # mutable, and the signal is optional
    call_id: str
    name: str
    arguments: object
    signal: AbortSignal | None = None
    root_call_id: str | None = None
    agent: object | None = None
    parent: ExecutionToken | None = None

class ToolExecution(Protocol):
    # Plain mutable attributes, and a signal any stage may replace, drop or delete (it
    # still reads as an AbortSignal, so code that uses it looks fine).
    token: ExecutionToken
    call_id: str
    root_call_id: str
    name: str
    arguments: Any
    agent: object | None
    parent: ExecutionToken | None
    @property
    def signal(self) -> AbortSignal: ...
    @signal.setter
    def signal(self, value: AbortSignal | None) -> None: ...
    @signal.deleter
    def signal(self) -> None: ...
    def defer_context(self, context: Any) -> None: ...  # any stage, any value

class ToolRunContext(ToolExecution, Protocol): ...

class ToolDispatchExecution(ToolExecution, Protocol):
    @property
    def signal(self) -> AbortSignal: ...
    @signal.setter
    def signal(self, value: object) -> None: ...  # a controller, a string: anything
    @signal.deleter
    def signal(self) -> None: ...

@dataclass
class ToolResult:  # one class for both outcomes: nothing to narrow
    is_error: bool
    value: Any
    error: Any
    content: Sequence[Mapping[str, Any]] = ()
    meta: Any = None
    additional_contexts: Any = ()

ToolSuccess: TypeAlias = ToolResult
ToolFailure: TypeAlias = ToolResult

class _AnyDecision:
    def __init__(self, *args: Any, **kwargs: Any) -> None: ...
    def __getattr__(self, name: str) -> Any: ...

class Allow(_AnyDecision): ...
class Deny(_AnyDecision): ...
class Ask(_AnyDecision): ...
class Accept(_AnyDecision): ...
class ReplaceValue(_AnyDecision): ...
class Block(_AnyDecision): ...

PreDecision: TypeAlias = Any
PostDecision: TypeAlias = Any
Next: TypeAlias = Callable[[], Awaitable[T]]

ApprovalAnswer: TypeAlias = str  # any answer at all

@dataclass
class ApprovalRequest:
    execution: ToolExecution
    reason: str | None
    signal: AbortSignal | None

class ToolDefinition(Protocol[ArgsT, ResultT]):
    @property
    def name(self) -> str: ...
    def run(self, args: ArgsT, exec: Any, /) -> Any: ...
    def is_concurrency_safe(self, args: Any, /) -> object: ...

class ToolDecorator:
    def __call__(self, body: Callable[..., Any], /) -> ToolDefinition[Any, Any]: ...

# Takes any callable and loses every inferred type.
def define_tool(**options: Any) -> Callable[[Callable[..., Any]], ToolDefinition[Any, Any]]: ...

class ToolRegistry:
    # Every stage takes any callable: a listener may demand any view.
    def __init__(self, approval: Any = None) -> None: ...
    def register(self, definition: Any) -> object: ...
    def on_pre_execute(self, listener: Callable[..., Any], *, prepend: bool = False) -> object: ...
    def on_execute(self, wrapper: Callable[..., Any], *, prepend: bool = False) -> object: ...
    def on_post_execute(self, listener: Callable[..., Any], *, prepend: bool = False) -> object: ...
    def on_result(self, observer: Callable[..., Any]) -> object: ...
    def add_guard(self, guard: Callable[..., Any]) -> object: ...
    async def execute(self, input: ToolExecutionInput) -> ToolResult: ...
