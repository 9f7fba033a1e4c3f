"""`ToolRegistry`: the public API of the pipeline every tool call goes through (contract §5).

Registration, classification (`execution_mode`), `execute` and `wait_idle`. The stages of
one call are `_engine.Engine`'s, a base of `ToolRegistry` (so that the hot path calls them as
methods, as before the split); `wait_idle`'s accounting is `_idle.Generations`'.
"""

from __future__ import annotations

import functools
import types
from typing import Any, Literal, cast, final

from . import _hooks  # tracing hook
from ._approval import ApprovalService
from ._definitions import ToolDefinition, ToolSchema, check_timeout, scopes_of
from ._engine import Engine
from ._errors import type_name
from ._principal import Principal
from ._registration import Registration
from ._results import ToolResult
from ._stages import (
    AroundDispatch,
    EventListener,
    Guard,
    Listeners,
    PostExecuteListener,
    PreExecuteListener,
    ResultObserver,
)
from ._timeouts import TimeoutPolicyBase
from ._views import ToolExecutionInput

__all__ = ["ToolRegistry"]

# What register() gets when someone forgets @define_tool.
_PLAIN_CALLABLES = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    functools.partial,
)


@final
class ToolRegistry(Engine):
    """Registers tools and runs every call through the cancellation-aware pipeline.

    Args:
        approval: Decides calls a pre-execute listener answers with `Ask`. Without one,
            `Ask` is a denial.
        timeouts: Enforce each tool's ``timeout`` (the default), as if
            `toolseam.policies.timeout_policy` were the innermost around-dispatch wrapper.
            Registering ``timeout_policy(registry)`` yourself places it where you register
            it instead; a call's timeout is never enforced twice. ``False`` leaves
            timeouts to you.

    Registration methods are meant for setup; they are safe to call while calls run (each
    call snapshots the listeners it uses) but not from several threads at once.
    """

    __slots__ = (
        "_approval",
        "_events",
        "_guards",
        "_hooks",  # tracing hook
        "_observers",
        "_only_the_tool_reads",
        "_post",
        "_pre",
        "_scopes",
        "_timeouts",
        "_tools",
        "_wrappers",
    )

    def __init__(self, approval: ApprovalService | None = None, *, timeouts: bool = True) -> None:
        given = cast("object", timeouts)  # checked at runtime too: untyped callers
        if type(given) is not bool:
            raise TypeError(f"ToolRegistry(timeouts=...) must be a bool, got {given!r}")
        self._approval = approval
        self._timeouts = timeouts
        super().__init__()  # wait_idle(): see _idle.Generations
        self._tools: dict[str, ToolDefinition[Any, Any]] = {}
        # The scopes of every registered tool that declares some (contract §14).
        self._scopes: dict[str, frozenset[str]] = {}
        self._pre: Listeners[PreExecuteListener] = Listeners("pre-execute listener")
        self._wrappers: Listeners[AroundDispatch] = Listeners("around-dispatch wrapper")
        self._post: Listeners[PostExecuteListener] = Listeners("post-execute listener")
        self._observers: Listeners[ResultObserver] = Listeners("result observer")
        self._guards: Listeners[Guard] = Listeners("guard")
        self._events: Listeners[EventListener] = Listeners("event listener")
        self._hooks: tuple[_hooks.CallHook, ...] = ()  # tracing hook: see _hooks
        # Whether no stage can read a call's arguments before its body: then a large
        # argument is taken as a private plain copy, checked now and frozen only if read
        # (see CallState.arguments). Kept current by every registration that changes it.
        self._only_the_tool_reads = True

    # -- setup -------------------------------------------------------------------------

    def register(self, definition: ToolDefinition[Any, Any]) -> Registration:
        """Register a tool.

        Args:
            definition: A `ToolDefinition`, from `define_tool` or written by hand.

        Returns:
            A `Registration` that unregisters this definition.

        Raises:
            ValueError: A tool of the same name is already registered.
            TypeError: ``definition`` lacks a member of the `ToolDefinition` protocol.
        """
        if isinstance(definition, _PLAIN_CALLABLES):
            function = getattr(definition, "__name__", type_name(type(definition)))
            raise TypeError(
                f"register() expects a ToolDefinition, got the plain callable {function!r}: "
                'decorate it with @define_tool(name="...", description="...") first'
            )
        name = getattr(definition, "name", None)
        if not isinstance(name, str) or not name:
            raise TypeError(
                "register() expects a ToolDefinition (from @define_tool, or written by hand) "
                f"with a non-empty str `name`, got {type_name(type(definition))}"
            )
        for member in (
            "parse_arguments",
            "run",
            "serialize_output",
            "render",
            "is_concurrency_safe",
            "finalize_content",
        ):
            if not callable(getattr(definition, member, None)):
                raise TypeError(f'tool "{name}": the definition has no callable `{member}`')
        if not isinstance(getattr(definition, "description", None), str):
            raise TypeError(f'tool "{name}": the definition needs a str `description`')
        check_timeout(name, getattr(definition, "timeout", None))
        scopes = scopes_of(name, definition)
        if name in self._tools:
            raise ValueError(f'tool "{name}" is already registered')
        self._tools[name] = definition
        if scopes:
            self._scopes[name] = scopes

        def unregister() -> None:
            if self._tools.get(name) is definition:
                del self._tools[name]
                self._scopes.pop(name, None)

        return Registration(unregister)

    def get(self, name: str) -> ToolDefinition[Any, Any] | None:
        """The definition registered under ``name``, or ``None``."""
        return self._tools.get(name)

    def schemas(self, *, principal: Principal | None = None) -> list[ToolSchema]:
        """Name, description and parameters of every tool, in registration order.

        Args:
            principal: List only the tools this caller may call: those whose declared
                scopes it holds (contract §14). ``None``: every tool.
        """
        if principal is None or not self._scopes:
            return [ToolSchema(d.name, d.description, d.parameters) for d in self._tools.values()]
        held = principal.scopes
        scoped = self._scopes
        return [
            ToolSchema(d.name, d.description, d.parameters)
            for name, d in self._tools.items()
            if name not in scoped or scoped[name] <= held
        ]

    def on_pre_execute(
        self, listener: PreExecuteListener, *, prepend: bool = False
    ) -> Registration:
        """Add a pre-execute listener; the first added is outermost unless ``prepend``."""
        return self._reader(self._pre.add(listener, prepend=prepend))

    def on_execute(self, wrapper: AroundDispatch, *, prepend: bool = False) -> Registration:
        """Add an around-dispatch wrapper; the first added is outermost unless ``prepend``."""
        return self._reader(self._wrappers.add(wrapper, prepend=prepend))

    def on_post_execute(
        self, listener: PostExecuteListener, *, prepend: bool = False
    ) -> Registration:
        """Add a post-execute listener; the first added is outermost unless ``prepend``."""
        return self._post.add(listener, prepend=prepend)

    def on_result(self, observer: ResultObserver) -> Registration:
        """Add a result observer: it sees every published result exactly once."""
        return self._observers.add(observer)

    def add_guard(self, guard: Guard) -> Registration:
        """Add a guard: after an allowing pre-execute chain, a returned string denies."""
        return self._reader(self._guards.add(guard))

    def on_event(self, listener: EventListener) -> Registration:
        """Add an event listener: it sees each progress and log event a body reports.

        Called in the event loop's thread, synchronously, for calls that start after it was
        added (each call snapshots its listeners); it must not block. An `Exception` it
        raises is logged and contained.
        """
        return self._events.add(listener)

    def _install_hook(self, hook: _hooks.CallHook) -> Registration:
        """Add a call hook (tracing hook; see _hooks); the `Registration` takes it out.

        Later calls see the change; a call in flight may see a hook's publish without its
        start, or its start without its publish, which is why removal is the hook's business
        too (see `toolseam.tracing`).
        """
        self._hooks = (*self._hooks, hook)

        def uninstall() -> None:
            self._hooks = tuple(h for h in self._hooks if h is not hook)

        return self._reader(Registration(uninstall))

    def _reader(self, registration: Registration) -> Registration:
        """``registration`` of a stage that may read arguments before the body, tracked."""
        self._readers_changed()

        def detach() -> None:
            registration.remove()
            self._readers_changed()

        return Registration(detach)

    def _readers_changed(self) -> None:
        # A timeout policy never reads the arguments (see policies.timeout_policy).
        self._only_the_tool_reads = not (
            self._pre.items
            or self._guards.items
            or self._hooks
            or any(not isinstance(w, TimeoutPolicyBase) for w in self._wrappers.items)
        )

    # -- classification ----------------------------------------------------------------

    def execution_mode(self, input: ToolExecutionInput) -> Literal["parallel", "exclusive"]:
        """Whether a call may overlap others: ``"parallel"`` only on an exact ``True``.

        Unknown tools, unparseable arguments, a raising ``is_concurrency_safe`` and any
        hostile input field all mean ``"exclusive"``: this never raises, so one bad call
        cannot tear down the batch around it.
        """
        return self._mode(input)[0]

    # -- execution ---------------------------------------------------------------------

    async def execute(self, input: ToolExecutionInput) -> ToolResult:
        """Run one call through the pipeline and return its one published result.

        Never raises for anything a tool, a stage or the arguments do: every outcome is a
        result. If the awaiting task is cancelled by its host, the call still publishes
        exactly one result (`ABORTED` or `ABORTED_BEFORE_DISPATCH`, or a failure already
        established) and the cancellation is re-raised unchanged. A ``KeyboardInterrupt``
        or ``SystemExit`` raised by a result observer or ``finalize_content`` propagates
        once every observer has seen the published result.

        Raises:
            TypeError: ``input`` is not a `ToolExecutionInput` with an `AbortSignal`.
        """
        run = self._start(input)
        # The run holds what it needs of the input: the caller's input is not kept alive
        # (nor its arguments) while the call is in flight.
        del input
        # The stages, unrolled (run_tool_calls drives the same ones): each is awaited only if
        # it has something to await; pinned by benchmarks/bench_overhead.py "define_tool".
        step = self._stage_before(run)
        if step is not None:
            await step
        step = self._stage_dispatch(run)
        if step is not None:
            await step
        step = self._stage_after(run)
        if step is not None:
            await step
        return self._publish(run)

    def __repr__(self) -> str:
        return f"<ToolRegistry tools={list(self._tools)!r}>"
