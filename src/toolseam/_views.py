"""The execution views: what each pipeline stage may read, and the one it may write.

One private, registry-owned run object stands behind three `Protocol` views (contract §3).
Observers, policies and tool bodies *borrow* the caller's cancellation: their view's
``signal`` is a read-only property. Only around-dispatch wrappers receive
`ToolDispatchExecution`, whose ``signal`` has a setter (to scope a deadline) and no deleter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, final

from ._json import JsonValue
from ._signals import AbortSignal

__all__ = [
    "ExecutionToken",
    "ToolDispatchExecution",
    "ToolExecution",
    "ToolExecutionInput",
    "ToolRunContext",
]


class _ConstructorKey:
    """Proof that the caller is toolseam itself: only this module holds the instance."""

    __slots__ = ()


_KEY = _ConstructorKey()


@final
class ExecutionToken:
    """The identity of one execution, minted by the registry.

    Opaque, hashable, compared by identity. Nested calls carry their parent's token in
    `ToolExecutionInput.parent`. It has no public constructor.
    """

    # ``_thread_level``: how many synchronous bodies are running (blocked in their threads)
    # above this execution; nested sync calls queue for that level's thread limiter.
    __slots__ = ("__weakref__", "_thread_level")

    _thread_level: int

    if TYPE_CHECKING:

        def __init__(self, key: _ConstructorKey, /) -> None: ...

    else:

        def __init__(self, *args, **kwargs):
            if kwargs or len(args) != 1 or args[0] is not _KEY:
                raise TypeError("toolseam.ExecutionToken has no public constructor")

    def __repr__(self) -> str:
        return f"<ExecutionToken at {id(self):#x}>"


def mint_token(parent: object) -> ExecutionToken:
    """A fresh token for a call whose input names ``parent`` (registry-internal)."""
    # Skip the guarding __init__. A nested call inherits its parent's thread level.
    token = object.__new__(ExecutionToken)
    token._thread_level = parent._thread_level if type(parent) is ExecutionToken else 0
    return token


@final
@dataclass(frozen=True, kw_only=True, slots=True)
class ToolExecutionInput:
    """What a caller hands to `ToolRegistry.execute`.

    ``signal`` is required: every call carries the abort signal of the operation the
    caller owns. There is no default, no overload without it, and no sentinel.
    """

    call_id: str
    """The caller's id for this call (a model's tool-call id)."""
    name: str
    """The tool to run."""
    arguments: object
    """JSON-like arguments; the registry takes a frozen, lossless snapshot of them."""
    signal: AbortSignal
    """The caller-owned abort signal of this call."""
    root_call_id: str | None = None
    """The id of the outermost call of a nested tree; defaults to ``call_id``."""
    agent: object | None = None
    """Opaque value carried through to every stage."""
    parent: ExecutionToken | None = None
    """The token of the execution that started this nested call."""


class ToolExecution(Protocol):
    """The read-only view of one execution.

    Received by pre-execute listeners, guards, approval, post-execute listeners and result
    observers. Every attribute is read-only; ``signal`` can be observed (``aborted``,
    ``wait()``, ``add_listener``) but not replaced or aborted.
    """

    @property
    def token(self) -> ExecutionToken:
        """This execution's identity."""
        ...

    @property
    def call_id(self) -> str:
        """The caller's id for this call."""
        ...

    @property
    def root_call_id(self) -> str:
        """The id of the outermost call (``input.root_call_id or input.call_id``)."""
        ...

    @property
    def name(self) -> str:
        """The tool name as requested."""
        ...

    @property
    def arguments(self) -> JsonValue:
        """The frozen snapshot of the arguments."""
        ...

    @property
    def agent(self) -> object | None:
        """The opaque agent value from the input."""
        ...

    @property
    def parent(self) -> ExecutionToken | None:
        """The parent execution's token, for nested calls."""
        ...

    @property
    def signal(self) -> AbortSignal:
        """The current abort signal: borrowed, read-only."""
        ...


class ToolRunContext(ToolExecution, Protocol):
    """The tool body's view: read-only, plus `defer_context`."""

    def defer_context(self, context: JsonValue) -> None:
        """Attach extra context to this call's result.

        Deferred contexts survive cancellation: an aborted result keeps them.

        Raises:
            ValueError: ``context`` is not losslessly JSON-serializable.
            RuntimeError: Called after the body returned.
        """
        ...


class ToolDispatchExecution(ToolExecution, Protocol):
    """The around-dispatch wrapper's view: ``signal`` may be replaced, never deleted.

    A wrapper may set ``signal`` to another `AbortSignal` for the lifetime of its
    delegation (a deadline, a lexical scope). The registry still fuses the caller's signal
    back in before the body runs, so no wrapper can detach the caller.
    """

    @property
    def signal(self) -> AbortSignal:
        """The signal handed down to inner wrappers and the body."""
        ...

    @signal.setter
    def signal(self, value: AbortSignal) -> None: ...
