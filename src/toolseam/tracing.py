"""OpenTelemetry spans for every tool call, shaped by the GenAI semantic conventions.

``toolseam.tracing.instrument(registry)`` (extra ``toolseam[otel]``, which needs only
``opentelemetry-api``) opens one ``execute_tool {tool name}`` span per call, from the moment
the call enters the registry to the moment its one result is published, and records how
the call ended: ran or never ran, and with which code (contract §12). Only this module
imports OpenTelemetry; ``import toolseam`` never does, and a registry that was never
instrumented pays nothing for it.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, cast, final

from opentelemetry import context, trace
from opentelemetry.trace import (
    INVALID_SPAN,
    NoOpTracer,
    ProxyTracer,
    Span,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
    TracerProvider,
)

from . import __version__
from ._capabilities import ProgressEvent, ToolEvent
from ._json import dumps
from ._registration import Registration
from ._registry import ToolRegistry
from ._results import ToolFailure, ToolResult, ToolSuccess
from ._views import ExecutionToken, ToolExecution

if TYPE_CHECKING:
    from collections.abc import Mapping
    from contextvars import Token

    from opentelemetry.context import Context
    from opentelemetry.util.types import AttributeValue

    from ._run import CallState

__all__ = ["instrument"]

OPERATION = "execute_tool"
OTHER_ERROR = "_OTHER"  # the conventions' `error.type` for a failure without a code
_DESCRIBED_MAX = 1024


def instrument(
    registry: ToolRegistry,
    *,
    tracer_provider: TracerProvider | None = None,
    capture_content: bool = False,
) -> Registration:
    """Open an OpenTelemetry span for every call ``registry`` runs (contract §12).

    Each call gets one span named ``execute_tool {tool name}``, kind ``INTERNAL``, that
    starts when the call enters the registry and ends when its one result is published:
    calls that never reach a stage (arguments that are not JSON, a signal aborted before
    the call, calls a batch skipped) get theirs too. Its attributes follow the GenAI
    semantic conventions — ``gen_ai.operation.name = "execute_tool"``,
    ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type = "function"`` and
    ``gen_ai.tool.description`` (when the tool is registered) — plus
    ``toolseam.body_invoked`` and ``toolseam.root_call_id``, and for a call made with a
    `toolseam.Principal` its name as ``enduser.id`` (never its claims, nor any token: a
    principal holds none). A failure sets the status
    ``ERROR`` and ``error.type`` to the result's code (``ABORTED``,
    ``ABORTED_BEFORE_DISPATCH``, ``TOOL_TIMEOUT``, ``INVALID_ARGS``, ...), or ``_OTHER``
    for a failure without one.

    Progress and log events the body reports (``exec.progress``, ``exec.log``) become span
    events named ``toolseam.progress`` (``toolseam.progress``, ``toolseam.progress.total``)
    and ``toolseam.log`` (``toolseam.log.level``, ``toolseam.log.logger``).

    The span is the current span while the tool body runs, in its worker thread too, so
    spans the body opens are its children; so is the span of a nested call (one whose
    input names this call's token as its ``parent``, as `toolseam.nested_input` does).
    Otherwise a span's parent is the span current where the call entered the registry.

    Args:
        registry: The registry to instrument. Instrumenting it twice gives two spans per
            call (one per registration), which is how to feed two tracer providers.
        tracer_provider: Where the spans go; ``None`` means the global tracer provider
            (``opentelemetry.trace.set_tracer_provider``), looked up per span, so one set
            later is used from then on.
        capture_content: Also record the arguments (``gen_ai.tool.call.arguments``) and,
            on success, the output (``gen_ai.tool.call.result``) as JSON text, a
            failure's message as the span's status description, a progress event's
            message (``toolseam.progress.message``) and a log event's data
            (``toolseam.log.data``, JSON text). Off by default: these may hold sensitive
            data.

    Returns:
        A `Registration`: `Registration.remove` stops opening spans (calls already in
        flight still end theirs when they publish).

    Raises:
        TypeError: ``registry`` is not a `ToolRegistry`, or ``capture_content`` not a bool.
    """
    given: object = registry
    if type(given) is not ToolRegistry:
        raise TypeError(f"instrument() expects a ToolRegistry, got {type(given).__name__}")
    flag: object = capture_content
    if type(flag) is not bool:
        raise TypeError(f"instrument(capture_content=...) must be a bool, got {flag!r}")
    tracer = trace.get_tracer("toolseam", __version__, tracer_provider)
    hook = _SpanHook(registry, tracer, capture_content=capture_content)
    hook.installed = registry._install_hook(hook)
    hook.listening = registry.on_event(hook.call_event)
    return Registration(hook.remove)


_Described = tuple[object, str, "Mapping[str, AttributeValue]"]


@final
class _SpanHook:
    """The registry's call hook that keeps one span per call in flight, by token."""

    __slots__ = (
        "_capture",
        "_described",
        "_open",
        "_registry",
        "_removed",
        "_tracer",
        "installed",
        "listening",
    )

    def __init__(self, registry: ToolRegistry, tracer: Tracer, *, capture_content: bool) -> None:
        self._registry = registry
        self._tracer = tracer
        self._capture = capture_content
        # The span of every call in flight, by its token: how a nested call finds its
        # parent's span whatever task or thread it is made from (calls of one batch
        # interleave in one task, so the current context cannot tell them apart).
        self._open: dict[ExecutionToken, Span] = {}
        # Per registered tool name: its definition when described, and the span name and
        # attributes every call of it shares (a new definition under the name redoes it).
        self._described: dict[str, _Described] = {}
        self._removed = False
        self.installed: Registration | None = None
        self.listening: Registration | None = None

    def remove(self) -> None:
        """Open no more spans; leave the registry once the spans in flight have ended."""
        self._removed = True
        if self.listening is not None:
            self.listening.remove()  # calls in flight keep the listener they started with
        if not self._open and self.installed is not None:
            self.installed.remove()

    # -- the CallHook protocol -----------------------------------------------------------

    def call_started(self, run: CallState, /) -> None:
        if self._removed:
            return
        tracer = self._tracer
        if type(tracer) is ProxyTracer:
            # The global provider's tracer once one is set: resolved as ProxyTracer's own
            # start_span resolves it (a property private to the API).
            tracer = tracer._tracer  # pyright: ignore[reportPrivateUsage]
        if type(tracer) is NoOpTracer:
            return  # its spans record and propagate nothing: no span to keep for the call
        name = run._name
        definition = self._registry._tools.get(name)
        described = self._described.get(name)
        if described is None or described[0] is not definition:
            described = self._describe(name, definition)
        parent = run._parent
        parent_span = self._open.get(parent) if type(parent) is ExecutionToken else None
        # What every call of the tool shares goes in at creation, for samplers (the
        # conventions ask for gen_ai.operation.name then): a shared, read-only mapping.
        span = tracer.start_span(
            described[1],
            None if parent_span is None else trace.set_span_in_context(parent_span),
            SpanKind.INTERNAL,
            described[2],
        )
        if span.is_recording():
            span.set_attributes(
                {
                    "gen_ai.tool.call.id": run._call_id,
                    "toolseam.root_call_id": run._root_call_id,
                }
            )
        elif span is INVALID_SPAN or not span.get_span_context().is_valid:
            return  # a no-op tracer's span: nothing to record or to propagate
        # Minting the token (it is lazy, see CallState) only for calls with a span to find.
        self._open[run._the_token()] = span

    def _describe(self, name: str, definition: object) -> _Described:
        """The span name and the attributes every call of this tool shares."""
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": OPERATION,
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
        }
        description: object = getattr(definition, "description", None)
        if type(description) is str and description:
            attributes["gen_ai.tool.description"] = description
        described = (definition, f"{OPERATION} {name}", MappingProxyType(attributes))
        if definition is not None:
            # Only registered names (a model may ask for any number of unknown ones), and
            # a bounded number of them: tools may come and go under ever new names.
            if len(self._described) >= _DESCRIBED_MAX:
                self._described.clear()
            self._described[name] = described
        return described

    def call_event(self, exec: ToolExecution, event: ToolEvent, /) -> None:
        """A progress or log event of a call: an event on its span (an event listener)."""
        token = cast("CallState", exec)._token  # the registry hands listeners the run itself
        span = self._open.get(token) if type(token) is ExecutionToken else None
        if span is None or not span.is_recording():
            return
        attributes: dict[str, AttributeValue]
        if type(event) is ProgressEvent:
            attributes = {"toolseam.progress": event.progress}
            if event.total is not None:
                attributes["toolseam.progress.total"] = event.total
            if self._capture and event.message is not None:
                attributes["toolseam.progress.message"] = event.message
            span.add_event("toolseam.progress", attributes)
            return
        log = event
        attributes = {"toolseam.log.level": log.level}
        if log.logger is not None:
            attributes["toolseam.log.logger"] = log.logger
        if self._capture:
            attributes["toolseam.log.data"] = dumps(log.data)
        span.add_event("toolseam.log", attributes)

    def body_entered(self, run: CallState, /) -> object:
        token = run._token
        # An unminted token: call_started opened no span for this call.
        span = self._open.get(token) if type(token) is ExecutionToken else None
        if span is None:
            return None
        # Attached in the task that awaits the body, detached in that task (body_left):
        # the body's own spans, its worker thread (anyio copies the context) and nested
        # calls all see this span as current.
        return context.attach(trace.set_span_in_context(span))

    def body_left(self, run: CallState, undo: object, /) -> None:
        if undo is not None:
            context.detach(cast("Token[Context]", undo))

    def call_published(self, run: CallState, result: ToolResult, /) -> None:
        token = run._token
        span = self._open.pop(token, None) if type(token) is ExecutionToken else None
        if span is None:
            return
        try:
            if span.is_recording():
                self._record(span, run, result)
        finally:
            span.end()
            if self._removed and not self._open and self.installed is not None:
                self.installed.remove()

    def _record(self, span: Span, run: CallState, result: ToolResult) -> None:
        attributes: dict[str, AttributeValue] = {"toolseam.body_invoked": run._body_invoked}
        principal = run._principal
        if principal is not None:
            # Who called, by name only: never a token, and not the claims (contract §14).
            attributes["enduser.id"] = principal.name
        capture = self._capture
        if capture and run._arguments is not None:
            attributes["gen_ai.tool.call.arguments"] = dumps(run.arguments)
        if type(result) is ToolFailure:
            attributes["error.type"] = result.code or OTHER_ERROR
            span.set_attributes(attributes)
            # The message may quote the arguments: it is content too.
            span.set_status(Status(StatusCode.ERROR, result.error.message if capture else None))
            return
        if capture and type(result) is ToolSuccess:
            # The conventions record a result only for a successful execution.
            attributes["gen_ai.tool.call.result"] = dumps(result.value)
        span.set_attributes(attributes)
