# minireg: a tiny tool registry that is NOT toolseam, written to show how another registry
# runs toolseam's static conformance suite on its own types (docs/conformance.md, "Running
# the suite on your own registry"). Its names are its own (`Signal`, `Call`, `Registry`,
# `tool`, ...); `../conformance_target` maps them onto the names the suite's cases use, and
# `../mypy.ini` tells toolseam's mypy plugin which of its classes are execution views.
# It is the type surface of the package (a stub): the suite checks types only.

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Literal, Protocol, TypeAlias, final, overload

from typing_extensions import TypeVar

Json: TypeAlias = "bool | int | float | str | Sequence[Json] | Mapping[str, Json] | None"
Block: TypeAlias = Mapping[str, Json]

# -- outcome codes ----------------------------------------------------------------------

ABORTED: Final = "ABORTED"
NEVER_RAN: Final = "ABORTED_BEFORE_DISPATCH"
TIMED_OUT: Final = "TOOL_TIMEOUT"
NO_SUCH_TOOL: Final = "UNKNOWN_TOOL"
BAD_ARGS: Final = "INVALID_ARGS"
BAD_OUTPUT: Final = "INVALID_TOOL_OUTPUT"

# -- signals ----------------------------------------------------------------------------

class _Key: ...

@final
class Signal:
    def __init__(self, key: _Key, /) -> None: ...
    @staticmethod
    def aborted_signal(reason: object = None) -> Signal: ...
    @property
    def aborted(self) -> bool: ...
    @property
    def reason(self) -> object: ...
    def raise_if_aborted(self) -> None: ...
    def add_listener(self, callback: Callable[[Signal], object], /) -> Subscription: ...
    async def wait(self) -> None: ...
    def wait_sync(self, timeout: float | None = None) -> bool: ...

@final
class Controller:
    def __init__(self) -> None: ...
    @property
    def signal(self) -> Signal: ...
    def abort(self, reason: object = None) -> None: ...

@final
class Subscription:
    def __init__(self, key: _Key, /) -> None: ...
    def remove(self) -> None: ...

# -- what a caller hands in, and the views of one call ------------------------------------

@final
class CallId:
    def __init__(self, key: _Key, /) -> None: ...

@final
@dataclass(frozen=True, kw_only=True, slots=True)
class CallInput:
    call_id: str
    name: str
    arguments: object
    signal: Signal
    root_call_id: str | None = None
    agent: object | None = None
    parent: CallId | None = None

class Call(Protocol):
    @property
    def token(self) -> CallId: ...
    @property
    def call_id(self) -> str: ...
    @property
    def root_call_id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> Json: ...
    @property
    def agent(self) -> object | None: ...
    @property
    def parent(self) -> CallId | None: ...
    @property
    def signal(self) -> Signal: ...

class BodyCall(Call, Protocol):
    def defer_context(self, context: Json) -> None: ...

class WrapCall(Call, Protocol):
    @property
    def signal(self) -> Signal: ...
    @signal.setter
    def signal(self, value: Signal) -> None: ...

# -- results and decisions --------------------------------------------------------------

@final
@dataclass(frozen=True, slots=True)
class Info:
    name: str
    code: str

@final
@dataclass(frozen=True, slots=True)
class Detail:
    message: str
    info: Info | None = None

@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Success:
    value: Json
    content: Sequence[Block] = ()
    meta: Json | None = None
    additional_contexts: Sequence[Json] = ()
    is_error: Literal[False] = field(default=False, init=False)

@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    error: Detail
    content: Sequence[Block] = ()
    meta: Json | None = None
    additional_contexts: Sequence[Json] = ()
    is_error: Literal[True] = field(default=True, init=False)

Outcome: TypeAlias = Success | Failure

@final
@dataclass(frozen=True, slots=True)
class Allow: ...

@final
@dataclass(frozen=True, slots=True)
class Deny:
    reason: str

@final
@dataclass(frozen=True, slots=True)
class Ask:
    reason: str | None = None

@final
@dataclass(frozen=True, slots=True)
class Accept:
    content: Sequence[Block] | None = None
    additional_contexts: Sequence[Json] = ()

@final
@dataclass(frozen=True, slots=True)
class ReplaceValue:
    value: Json
    additional_contexts: Sequence[Json] = ()

@final
@dataclass(frozen=True, slots=True)
class Block_:
    feedback: str
    additional_contexts: Sequence[Json] = ()

Before: TypeAlias = Allow | Deny | Ask
After: TypeAlias = Accept | ReplaceValue | Block_

T = TypeVar("T")
Then: TypeAlias = Callable[[], Awaitable[T]]

Answer: TypeAlias = Literal["allowed-once", "rejected", "cancelled", "unavailable"]

@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    execution: Call
    reason: str | None
    signal: Signal

class Approver(Protocol):
    async def request(self, request: Question, /) -> Answer: ...

# -- tools ------------------------------------------------------------------------------

ArgsT = TypeVar("ArgsT")
ResultT = TypeVar("ResultT")

class Tool(Protocol[ArgsT, ResultT]):
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def parameters(self) -> Mapping[str, Json]: ...
    @property
    def timeout(self) -> float | None: ...
    def parse_arguments(self, arguments: Json, /) -> ArgsT: ...
    def run(self, args: ArgsT, exec: BodyCall, /) -> Awaitable[ResultT]: ...
    def serialize_output(self, output: ResultT, /) -> Json: ...
    def render(self, args: ArgsT, value: Json, /) -> Sequence[Block]: ...
    def is_concurrency_safe(self, args: ArgsT, /) -> bool: ...
    def finalize_content(self, exec: Call, result: Outcome, /) -> Sequence[Block] | None: ...

A = TypeVar("A")
B = TypeVar("B")
R = TypeVar("R")
OptionArgs = TypeVar("OptionArgs", default=object)
Finalize: TypeAlias = Callable[[Call, Outcome], Sequence[Block] | None]

@final
class Decorator(Generic[OptionArgs]):
    @overload
    def __call__(
        self: Decorator[object], body: Callable[[B, BodyCall], Awaitable[R]], /
    ) -> Tool[B, R]: ...
    @overload
    def __call__(self: Decorator[object], body: Callable[[B, BodyCall], R], /) -> Tool[B, R]: ...
    @overload
    def __call__(
        self: Decorator[A], body: Callable[[A, BodyCall], Awaitable[R]], /
    ) -> Tool[A, R]: ...
    @overload
    def __call__(self: Decorator[A], body: Callable[[A, BodyCall], R], /) -> Tool[A, R]: ...

@overload
def tool(
    *,
    name: str,
    description: str,
    timeout: float | None = None,
    is_concurrency_safe: Callable[[object], bool] | None = None,
    finalize_content: Finalize | None = None,
    render: Callable[[object, Json], Sequence[Block]] | None = None,
    idempotent: bool = False,
) -> Decorator: ...
@overload
def tool(
    *,
    name: str,
    description: str,
    timeout: float | None = None,
    is_concurrency_safe: Callable[[A], bool] | None = None,
    finalize_content: Finalize | None = None,
    render: Callable[[A, Json], Sequence[Block]] | None = None,
    idempotent: bool = False,
) -> Decorator[A]: ...

# -- the registry -----------------------------------------------------------------------

@final
class Registry:
    def __init__(self, approval: Approver | None = None) -> None: ...
    def register(self, definition: Tool[Any, Any]) -> Subscription: ...
    def on_pre_execute(
        self, listener: Callable[[Call, Then[Before]], Awaitable[Before]], *, prepend: bool = False
    ) -> Subscription: ...
    def on_execute(
        self,
        wrapper: Callable[[WrapCall, Then[Outcome]], Awaitable[Outcome]],
        *,
        prepend: bool = False,
    ) -> Subscription: ...
    def on_post_execute(
        self,
        listener: Callable[[Call, Outcome, Then[After]], Awaitable[After]],
        *,
        prepend: bool = False,
    ) -> Subscription: ...
    def on_result(self, observer: Callable[[Call, Outcome], None]) -> Subscription: ...
    def add_guard(self, guard: Callable[[Call], str | None]) -> Subscription: ...
    async def execute(self, input: CallInput) -> Outcome: ...
