"""The execution views: what each pipeline stage may read, and the one it may write.

One private, registry-owned run object stands behind three `Protocol` views (contract §3).
Observers, policies and tool bodies *borrow* the caller's cancellation: their view's
``signal`` is a read-only property. Only around-dispatch wrappers receive
`ToolDispatchExecution`, whose ``signal`` has a setter (to scope a deadline) and no deleter.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast, final, overload

from ._capabilities import (
    ElicitationRequest,
    Elicited,
    LogEvent,
    LogLevel,
    ProgressEvent,
    Root,
    RootsRequest,
    Sampled,
    SamplingRequest,
)
from ._json import JsonValue
from ._principal import Principal
from ._signals import AbortSignal

__all__ = [
    "ExecutionToken",
    "ToolDispatchExecution",
    "ToolExecution",
    "ToolExecutionInput",
    "ToolHost",
    "ToolRunContext",
]

T = TypeVar("T")


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


@final
@dataclass(frozen=True, kw_only=True, slots=True)
class ToolHost:
    """What the caller of a call offers its tool body beyond the signal (contract §5).

    Given per call (``ToolExecutionInput(host=...)``, ``run_tool_calls(..., host=...)``) and
    forwarded to nested calls by `nested_input`. Every member is optional: a body that asks
    for a capability its caller does not offer gets a `ToolError` coded
    ``CAPABILITY_UNAVAILABLE``, never a hang.

    ``on_progress`` and ``on_log`` receive the events a body reports, in the event loop's
    thread (a synchronous body's events are handed over to it without blocking the body),
    synchronously: they must not block; an `Exception` they raise is logged and contained.
    ``elicit``, ``sample`` and ``roots`` answer the body's requests; each receives the call's signal
    and must withdraw its request when that signal aborts (MCP: ``notifications/cancelled``)
    and return or raise promptly: the registry awaits it, it never races it. One that
    cannot offer the capability for this call after all raises a `ToolError` coded
    ``CAPABILITY_UNAVAILABLE`` whose message says why; the body gets that code and reason
    (any other exception is ``CAPABILITY_FAILED``).
    """

    on_progress: Callable[[ToolExecution, ProgressEvent], object] | None = None
    """Receives each ``exec.progress(...)`` of the call (and of its nested calls)."""
    on_log: Callable[[ToolExecution, LogEvent], object] | None = None
    """Receives each ``exec.log(...)`` of the call (and of its nested calls)."""
    elicit: (
        Callable[[ToolExecution, ElicitationRequest, AbortSignal], Awaitable[Elicited[Any]]] | None
    ) = None
    """Asks the user; answers with ``Elicited(action, content)`` (content as JSON)."""
    sample: Callable[[ToolExecution, SamplingRequest, AbortSignal], Awaitable[Sampled]] | None = (
        None
    )
    """Asks the caller's model for a completion."""
    roots: (
        Callable[[ToolExecution, RootsRequest, AbortSignal], Awaitable[Sequence[Root]]] | None
    ) = None
    """Lists the roots the caller lets the tool work in (MCP: ``roots/list``)."""


@final
@dataclass(frozen=True, kw_only=True, slots=True, init=False)
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
    host: ToolHost | None = None
    """What the caller offers the body: progress and log sinks, elicitation, sampling."""
    principal: Principal | None = None
    """Who is calling, authenticated (contract §14); ``None``: an in-process caller."""

    def __init__(
        self,
        *,
        call_id: str,
        name: str,
        arguments: object,
        signal: AbortSignal,
        root_call_id: str | None = None,
        agent: object | None = None,
        parent: ExecutionToken | None = None,
        host: ToolHost | None = None,
        principal: Principal | None = None,
    ) -> None:
        # ≡ the __init__ dataclass writes (object.__setattr__ per field), through the slots'
        # own setters: 0.4 us less on every call a caller makes. Pinned by
        # tests/test_perf_engine.py::TestBatchPool::
        # test_the_constructor_keeps_the_dataclass_behaviour; its speed by
        # benchmarks/bench_overhead.py "define_tool".
        _set_input_call_id(self, call_id)
        _set_input_name(self, name)
        _set_input_arguments(self, arguments)
        _set_input_signal(self, signal)
        _set_input_root(self, root_call_id)
        _set_input_agent(self, agent)
        _set_input_parent(self, parent)
        _set_input_host(self, host)
        _set_input_principal(self, principal)


_INPUT_FIELDS = (
    "call_id",
    "name",
    "arguments",
    "signal",
    "root_call_id",
    "agent",
    "parent",
    "host",
    "principal",
)
"""Every field of `ToolExecutionInput`, in order (a test checks it against the dataclass)."""
(
    _set_input_call_id,
    _set_input_name,
    _set_input_arguments,
    _set_input_signal,
    _set_input_root,
    _set_input_agent,
    _set_input_parent,
    _set_input_host,
    _set_input_principal,
) = cast(
    "tuple[Callable[[ToolExecutionInput, object], None], ...]",
    tuple(getattr(cast("Any", ToolExecutionInput), field).__set__ for field in _INPUT_FIELDS),
)


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
    def host(self) -> ToolHost | None:
        """What the caller offers the body (``None``: nothing beyond the signal)."""
        ...

    @property
    def principal(self) -> Principal | None:
        """Who is calling, authenticated (contract §14); ``None``: an in-process caller."""
        ...

    @property
    def signal(self) -> AbortSignal:
        """The current abort signal: borrowed, read-only."""
        ...


class ToolRunContext(ToolExecution, Protocol):
    """The tool body's view: read-only, plus `defer_context` and the capabilities.

    ``progress`` and ``log`` report to the caller and never block or fail for a slow
    consumer; ``elicit``, ``sample`` and ``roots`` ask the caller and carry the call's signal
    (an abort while one is pending withdraws it, and the method raises the signal's
    `AbortError`). A synchronous body calls them from its worker thread: ``progress`` and
    ``log`` directly, the others through ``anyio.from_thread.run``.

    A body never learns how its caller carries a question: over MCP 2025-11-25 it is a
    request to the client during the call, over 2026-07-28 an ``InputRequiredResult`` that
    the client answers by retrying the call, while the body stays suspended at its question
    (docs/mcp.md). ``key=`` names a question within the call (2026-07-28 uses it as the
    input request's key); without one the MCP server numbers them.
    """

    def defer_context(self, context: JsonValue) -> None:
        """Attach extra context to this call's result.

        Deferred contexts survive cancellation: an aborted result keeps them.

        Raises:
            ValueError: ``context`` is not losslessly JSON-serializable.
            RuntimeError: Called after the body returned.
        """
        ...

    def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress to the caller (MCP: a progress notification).

        Never blocks and never raises for a slow or failing consumer; ignored once the
        body has returned. Safe from the body's worker thread.

        Raises:
            ValueError: ``progress`` or ``total`` is not a finite number.
        """
        ...

    def log(self, level: LogLevel, data: JsonValue, *, logger: str | None = None) -> None:
        """Send a log message to the caller (MCP: ``notifications/message``).

        ``level`` is an RFC 5424 severity (``"debug"`` ... ``"emergency"``). Never blocks;
        ignored once the body has returned. Safe from the body's worker thread.

        Raises:
            ValueError: ``level`` is not a severity, or ``data`` is not lossless JSON.
        """
        ...

    @overload
    async def elicit(
        self, message: str, schema: type[T], *, key: str | None = None
    ) -> Elicited[T]: ...

    @overload
    async def elicit(
        self, message: str, schema: Mapping[str, JsonValue], *, key: str | None = None
    ) -> Elicited[Mapping[str, JsonValue]]: ...

    async def elicit(
        self, message: str, schema: object, *, key: str | None = None
    ) -> Elicited[Any]:
        """Ask the user a question through the caller (MCP: ``elicitation/create``).

        Args:
            message: The question.
            schema: The answer's shape: a `TypedDict`, dataclass or pydantic model (the
                content comes back validated as that type), or a JSON Schema dict.
            key: A name for the question, unique within the call (optional).

        Returns:
            The answer: accepted with its content, declined or cancelled.

        Raises:
            AbortError: The call's signal aborted (before or while the request was
                pending; a pending request is withdrawn first).
            ToolError: ``CAPABILITY_UNAVAILABLE`` when the caller offers no elicitation;
                ``CAPABILITY_FAILED`` when it failed or its answer does not fit ``schema``.
        """
        ...

    async def sample(
        self,
        messages: str | Sequence[Mapping[str, JsonValue]],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        temperature: float | None = None,
        stop_sequences: Sequence[str] = (),
        model_preferences: Mapping[str, JsonValue] | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        key: str | None = None,
    ) -> Sampled:
        """Ask the caller's model for a completion (MCP: ``sampling/createMessage``).

        Args:
            messages: One user message as a string, or MCP-shaped message mappings
                (``{"role": "user", "content": {"type": "text", "text": "..."}}``).
            max_tokens: The most tokens the completion may have.
            system_prompt: A system prompt for the caller's model.
            temperature: Sampling temperature.
            stop_sequences: Where to stop.
            model_preferences: MCP's ``modelPreferences``.
            metadata: Provider-specific metadata.
            key: A name for the request, unique within the call (optional).

        Raises:
            AbortError: The call's signal aborted (a pending request is withdrawn first).
            ToolError: ``CAPABILITY_UNAVAILABLE`` or ``CAPABILITY_FAILED``, as for `elicit`.
        """
        ...

    async def roots(self, *, key: str | None = None) -> tuple[Root, ...]:
        """The roots the caller lets the tool work in (MCP: ``roots/list``).

        Args:
            key: A name for the request, unique within the call (optional).

        Returns:
            The caller's roots, in its order (possibly none).

        Raises:
            AbortError: The call's signal aborted (a pending request is withdrawn first).
            ToolError: ``CAPABILITY_UNAVAILABLE`` or ``CAPABILITY_FAILED``, as for `elicit`.
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
