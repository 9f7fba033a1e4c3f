"""The private, registry-owned run object behind the execution views.

`CallState` implements `ToolExecution` and `ToolRunContext` directly: every public attribute is a
getter-only property and the class has ``__slots__``, so assignment and deletion raise
`AttributeError` at runtime just as the type checkers reject them. `DispatchView` is the one
object with a ``signal`` setter; it writes through to the run. The caller's signal lives in
a slot no view exposes (contract §5: every cancellation decision reads that captured signal).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast, final, get_args, overload

from ._capabilities import (
    Elicited,
    LogLevel,
    Root,
    Sampled,
    elicitation_request,
    elicited,
    host_failed,
    log_event,
    progress_event,
    roots_answer,
    roots_request,
    sampled,
    sampling_request,
    unavailable,
)
from ._delivery import Delivery
from ._errors import TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH
from ._json import JsonValue, MaterializationError, materialize
from ._outcomes import body_raised, is_abort
from ._results import ContentBlock, ToolFailure, ToolResult
from ._signals import AbortSignal, FusedSignal, fuse_owned
from ._timeouts import Deadline, Elsewhere
from ._views import ExecutionToken

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._principal import Principal
    from ._views import ToolExecution, ToolHost

T = TypeVar("T")
R = TypeVar("R")

__all__ = [
    "Boundary",
    "CallState",
    "DispatchView",
    "_body_failure",
    "_check_invariants",
    "_is_abort_reason",
    "_told_to_stop",
]

Finalizer = Callable[["ToolExecution", ToolResult], "Sequence[ContentBlock] | None"]

# Guards the one-time fusion of a body's signal (and minting of a token): an async body may
# read ``exec.signal`` from a thread of its own while the event loop's thread reads it too.
# Re-entrant, as the signal module's lock is: a garbage collection at any allocation inside
# may run a finalizer that reads another execution's signal or token in this very thread (a
# collected body coroutine whose ``finally`` checks ``exec.signal``). So each section
# allocates first and then publishes its result in stores that allocate nothing.
_fusing = threading.RLock()
_new_token = object.__new__  # ExecutionToken without its guarding __init__


@final
class CallState:
    """One execution's state. Only a registry (the engine, or the reference) creates and mutates it.

    The legal states of a call, at each boundary between the stages the registry drives
    (`_check_invariants` asserts them; the schedule search and the differential tests call
    it at every boundary, of the reference pipeline's calls too). Between stages, always:
    the body is not running (``_in_body`` false, nothing ``_pending``), ``_signal`` is the
    caller's again, a ``_final`` call has its ``_result``, and a ``_denied`` call has a
    failure and never invoked its body.

    ===============  ============================  ===========  ===========  ==============
    boundary         ``_result``                   ``_final``   ``_denied``  body invoked
    ===============  ============================  ===========  ===========  ==============
    started          ``None``, settled at entry,   iff settled  with a       no
                     or denied at entry                         denial
    before dispatch  ``None`` (dispatch next), a   may be       with a       no
                     denial, a cancellation, or    (a stage     denial
                     a stage's failure             failed)
    dispatched       set                           may be       may be       may be
    post-executed    set                           may be       may be       may be
    published        set                           may be       may be       may be
    ===============  ============================  ===========  ===========  ==============

    And the classification (contract §5): a cancellation result the registry made says
    ``ABORTED`` only if the body was invoked, ``ABORTED_BEFORE_DISPATCH`` only if it was
    not — unless an around-dispatch wrapper returned a cancellation result of its own
    making, which is the wrapper's result like any other. "Body invoked" has one writer,
    this class: `_invoke` right before the body call, `_never_started` for a synchronous
    body whose thread job was withdrawn before it started.
    """

    __slots__ = (
        "_agent",
        "_arguments",
        "_body_invoked",
        "_body_result",
        "_call_id",
        "_caller_signal",
        "_contexts",
        "_deadline",
        "_denied",
        "_epoch",
        "_final",
        "_finalizer",
        "_fusion",
        "_in_body",
        "_name",
        "_parent",
        "_pending",
        "_principal",
        "_reach",
        "_result",
        "_root_call_id",
        "_signal",
        "_token",
        "_utf8",
    )

    # The frozen snapshot, or (for a large argument only the body reads) a private plain
    # copy of the arguments until they are first read: see `arguments`.
    _arguments: JsonValue
    _result: ToolResult | None

    def __init__(
        self,
        level: int,
        call_id: str,
        root_call_id: str,
        name: str,
        agent: object | None,
        parent: ExecutionToken | None,
        signal: AbortSignal,
        finalizer: Finalizer | None,
        epoch: int,
        reach: Delivery | None,
    ) -> None:
        # Positional: this runs once per call, and keywords cost more to bind.
        # The thread level of the token to mint (`_the_token`), then the token itself.
        self._token: ExecutionToken | int = level
        self._call_id = call_id
        self._root_call_id = root_call_id
        self._name = name
        self._agent = agent
        self._parent = parent
        self._caller_signal = signal
        self._signal: Any = signal  # a wrapper may store anything here at runtime
        self._finalizer = finalizer
        self._arguments = None
        # Whether every string of the arguments is UTF-8 (define_tool's Python mode).
        self._utf8 = False
        # A tuple until the body defers a context (most never do), then a list.
        self._contexts: Sequence[JsonValue] = ()
        self._body_invoked = False
        # The body's own normalized result, kept for host cancellation (a failure stays).
        self._body_result: ToolResult | None = None
        # While the body runs and until it first reads ``exec.signal``: the signal the
        # wrappers handed down, fused with the caller's on that first read (`_body_signal`).
        self._pending: AbortSignal | None = None
        self._fusion: FusedSignal | None = None
        # The deadline enforced around the body, or ELSEWHERE: a timeout policy enforces
        # this call's timeout itself (the first policy to see a call owns its timeout).
        self._deadline: Deadline | Elsewhere | None = None
        self._in_body = False
        # The registry's wait_idle() generation this call started in.
        self._epoch = epoch
        # The caller's host and the event listeners, if there are any (see _delivery).
        self._reach = reach
        self._final = False
        self._denied = False
        self._result = None
        # Who is calling: set by the registry's `_start` when the input names one.
        self._principal: Principal | None = None

    # -- "body invoked" (contract §5.6): written here only, by the two transitions below --

    def _invoke(self, handed: AbortSignal) -> None:
        """The body is called next: it runs, ``handed`` fused into its signal when read.

        "Body invoked" is recorded immediately before the body call (argument validation is
        part of the body call); both engines call this, and nothing else sets it.
        """
        self._pending = handed
        self._in_body = True
        self._body_invoked = True

    def _never_started(self) -> None:
        """A synchronous body's thread job was withdrawn before a thread ran the function.

        The function never ran, so the body was not invoked after all (contract §5.6): the
        call ends ``ABORTED_BEFORE_DISPATCH``. Only `toolseam._threads` knows this.
        """
        self._body_invoked = False

    def _body_signal(self) -> AbortSignal:
        """The body's signal, fused from its sources now if nobody has read it yet.

        A body that never reads ``exec.signal`` can have handed it to nothing, so the fusion
        (and its detaching) is only paid for by bodies that look (contract §5.6: what they
        get is the same signal, aborted by either source and by host cancellation).
        """
        with _fusing:
            handed = self._pending
            if handed is not None:
                caller = self._caller_signal
                # Without wrappers the body is handed the caller's own signal: one source.
                sources: tuple[AbortSignal, ...] = (
                    (caller,) if handed is caller else (caller, handed)
                )
                deadline = self._deadline
                if deadline is not None:
                    sources = deadline.sources(sources)
                fusion = fuse_owned(*sources)
                if self._pending is handed:
                    self._pending = None
                    self._fusion = fusion
                    self._signal = fusion.signal
                else:  # a finalizer run by the allocations above fused it first
                    fusion.close()
        return self._signal  # type: ignore[no-any-return]

    @property
    def _host(self) -> AbortSignal | None:
        """The body's signal once fused: aborted by the registry on host cancellation."""
        fusion = self._fusion
        return None if fusion is None else fusion.signal

    def _the_token(self) -> ExecutionToken:
        """This execution's token, minted on first use: most calls never look at theirs.

        Unobservable until read, and the same object from then on (minted under a lock: a
        body may read it from a thread of its own). It carries the thread level the call
        started with.
        """
        token = self._token
        if type(token) is ExecutionToken:
            return token
        with _fusing:
            token = self._token
            if type(token) is not ExecutionToken:
                minted = _new_token(ExecutionToken)
                minted._thread_level = token
                token = self._token
                if type(token) is not ExecutionToken:  # no finalizer minted one meanwhile
                    self._token = token = minted
        return token

    @property
    def token(self) -> ExecutionToken:
        """This execution's identity."""
        token = self._token
        if type(token) is ExecutionToken:
            return token
        return self._the_token()

    @property
    def call_id(self) -> str:
        """The caller's id for this call."""
        return self._call_id

    @property
    def root_call_id(self) -> str:
        """The id of the outermost call."""
        return self._root_call_id

    @property
    def name(self) -> str:
        """The tool name as requested."""
        return self._name

    @property
    def arguments(self) -> JsonValue:
        """The frozen snapshot of the arguments."""
        arguments = self._arguments
        if type(arguments) is dict:
            return self._freeze_arguments(cast("dict[str, JsonValue]", arguments))
        return arguments

    def _freeze_arguments(self, plain: dict[str, JsonValue]) -> JsonValue:
        """The snapshot of a private plain copy (`materialize_arguments` with ``plain``).

        Nobody else holds that copy (the body gets what validating it built, never a part
        of it), so its snapshot is the one that would have been taken at entry. Made once:
        every reader, in any thread, gets the same snapshot.
        """
        frozen = materialize(plain)
        with _fusing:
            current = self._arguments
            if type(current) is dict:
                self._arguments = current = frozen
        return current

    @property
    def agent(self) -> object | None:
        """The opaque agent value from the input."""
        return self._agent

    @property
    def parent(self) -> ExecutionToken | None:
        """The parent execution's token."""
        return self._parent

    @property
    def host(self) -> ToolHost | None:
        """What the caller offers the body."""
        reach = self._reach
        return None if reach is None else reach.host

    @property
    def principal(self) -> Principal | None:
        """Who is calling (``None``: an in-process caller)."""
        return self._principal

    @property
    def signal(self) -> AbortSignal:
        """The current abort signal (read-only here)."""
        if self._pending is not None:
            return self._body_signal()
        return self._signal  # type: ignore[no-any-return]

    # -- capabilities (contract §5, "Capabilities") --------------------------------------

    def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress to the caller (tool body only; ignored once it returned)."""
        reach = self._reach
        if reach is None or not self._in_body:
            # Nobody to tell: only the checks. Equivalent to progress_event() without
            # building the event (benchmarks/bench_capabilities.py: no consumer ≤ 2 µs).
            # ``x - x == 0`` is false for NaN and infinities alone.
            kind: object = type(progress)
            of_total: object = type(total)
            if (
                (kind is int or (kind is float and progress - progress == 0))
                and (total is None or of_total is int or (of_total is float and total - total == 0))
                and (message is None or type(message) is str)
            ):
                return
        event = progress_event(progress, total, message)  # raises for what failed above
        if reach is not None and self._in_body:
            reach.emit(self, event)

    def log(self, level: LogLevel, data: JsonValue, *, logger: str | None = None) -> None:
        """Send a log message to the caller (tool body only; ignored once it returned)."""
        event = log_event(level, data, logger)
        reach = self._reach
        if reach is not None and self._in_body:
            reach.emit(self, event)

    async def _ask_host(
        self,
        capability: str,
        ask: Callable[[Any, R, AbortSignal], Awaitable[object]],
        request: R,
    ) -> object:
        """Ask the host with the call's signal: what elicit, sample and roots share."""
        signal = self.signal
        signal.raise_if_aborted()  # never ask for a call that has been stopped
        try:
            answer = await ask(self, request, signal)
        except Exception as error:
            signal.raise_if_aborted()  # the host gave up because it was told to
            raise host_failed(capability, self._name, error) from error
        # Aborted while pending: the host has withdrawn the request (it was awaited, not
        # raced) and whatever it answered is moot.
        signal.raise_if_aborted()
        return answer

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
        """Ask the user through the caller; carries the call's signal."""
        self._check_in_body("elicit")
        request, validate = elicitation_request(message, schema, key)
        host = self.host
        ask = None if host is None else host.elicit
        if ask is None:
            raise unavailable("elicitation", "elicit", self._name)
        answer = await self._ask_host("elicitation", ask, request)
        return elicited(answer, validate, self._name)

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
        """Ask the caller's model for a completion; carries the call's signal."""
        self._check_in_body("sample")
        request = sampling_request(
            messages,
            max_tokens,
            system_prompt,
            temperature,
            stop_sequences,
            model_preferences,
            metadata,
            key,
        )
        host = self.host
        ask = None if host is None else host.sample
        if ask is None:
            raise unavailable("sampling", "sample", self._name)
        answer = await self._ask_host("sampling", ask, request)
        return sampled(answer, self._name)

    async def roots(self, *, key: str | None = None) -> tuple[Root, ...]:
        """The caller's roots; carries the call's signal."""
        self._check_in_body("roots")
        request = roots_request(key)
        host = self.host
        ask = None if host is None else host.roots
        if ask is None:
            raise unavailable("roots", "roots", self._name)
        answer = await self._ask_host("roots", ask, request)
        return roots_answer(answer, self._name)

    def _check_in_body(self, method: str) -> None:
        if not self._in_body:
            raise RuntimeError(f"{method}() is only available while the tool body runs")

    def defer_context(self, context: JsonValue) -> None:
        """Attach extra context to this call's result (tool body only)."""
        if not self._in_body:
            raise RuntimeError("defer_context() is only available while the tool body runs")
        try:
            frozen = materialize(context)
        except MaterializationError as error:
            raise ValueError(
                f"deferred context must be losslessly JSON-serializable ({error})"
            ) from None
        contexts = self._contexts
        if type(contexts) is list:
            cast("list[JsonValue]", contexts).append(frozen)
        else:
            self._contexts = [frozen]

    def __repr__(self) -> str:
        return f"<ToolExecution {self._name!r} call_id={self._call_id!r}>"


@final
class DispatchView:
    """The around-dispatch wrappers' view: ``signal`` may be replaced, never deleted."""

    __slots__ = ("_run",)

    def __init__(self, run: CallState) -> None:
        self._run = run

    @property
    def token(self) -> ExecutionToken:
        """This execution's identity."""
        return self._run._the_token()

    @property
    def call_id(self) -> str:
        """The caller's id for this call."""
        return self._run._call_id

    @property
    def root_call_id(self) -> str:
        """The id of the outermost call."""
        return self._run._root_call_id

    @property
    def name(self) -> str:
        """The tool name as requested."""
        return self._run._name

    @property
    def arguments(self) -> JsonValue:
        """The frozen snapshot of the arguments."""
        return self._run.arguments

    @property
    def agent(self) -> object | None:
        """The opaque agent value from the input."""
        return self._run._agent

    @property
    def parent(self) -> ExecutionToken | None:
        """The parent execution's token."""
        return self._run._parent

    @property
    def host(self) -> ToolHost | None:
        """What the caller offers the body."""
        return self._run.host

    @property
    def principal(self) -> Principal | None:
        """Who is calling (``None``: an in-process caller)."""
        return self._run._principal

    @property
    def signal(self) -> AbortSignal:
        """The signal handed down to inner wrappers and the body."""
        run = self._run
        if run._pending is not None:
            return run._body_signal()
        return run._signal  # type: ignore[no-any-return]

    @signal.setter
    def signal(self, value: AbortSignal) -> None:
        # contract §3: the type is the typed contract's job; the registry copes with garbage.
        run = self._run
        if run._pending is not None:
            run._body_signal()  # set while the body runs: as if the body's signal existed
        run._signal = value

    def __repr__(self) -> str:
        return f"<ToolDispatchExecution {self._run._name!r} call_id={self._run._call_id!r}>"


def _is_abort_reason(run: CallState, error: BaseException) -> bool:
    """`_outcomes.is_abort` for ``run``: ``error`` is it stopping because it was told to.

    For the body and for every stage: the caller aborted, and ``error`` is an `AbortError`,
    the caller's reason or the reason of the body's own signal.
    """
    caller = run._caller_signal
    if not caller._aborted:  # the common case, without a call
        return False
    host = run._host
    return is_abort(
        error,
        caller_reason=caller._reason,
        caller_aborted=True,
        host_reason=None if host is None else host._reason,
    )


def _told_to_stop(run: CallState, error: BaseException) -> bool:
    """`_is_abort_reason`; a shared reason it recognises is let go of its traceback.

    One reason raised by many bodies or stages must not keep their frames alive.
    BaseException's own method: a reason's override (or ``__traceback__`` setter) may raise,
    and the call would end in that error instead of ``ABORTED``.
    """
    if not _is_abort_reason(run, error):
        return False
    host = run._host
    if error is run._caller_signal._reason or (host is not None and error is host._reason):
        BaseException.with_traceback(error, None)
    return True


def _body_failure(run: CallState, error: BaseException) -> ToolFailure:
    """The body's exception as its outcome (`_outcomes.body_raised`).

    A sync body's job withdrawn before a thread started it (an `AbortError` while the body
    is not invoked, whichever signal aborted) never ran (contract §5.6).
    """
    return body_raised(
        error, body_invoked=run._body_invoked, told_to_stop=_told_to_stop(run, error)
    )


Boundary = Literal["started", "before dispatch", "dispatched", "post-executed", "published"]
_BOUNDARIES: tuple[Boundary, ...] = get_args(Boundary)


def _check_invariants(run: CallState, boundary: Boundary, *, wrapper_results: bool = False) -> None:
    """Assert that ``run`` is in a legal state at ``boundary`` (the table of `CallState`).

    For tests only: the engine never calls it. ``wrapper_results``: a wrapper may have
    returned a cancellation result of its own making, so the classification is not checked.

    Raises:
        AssertionError: naming the broken invariant and the flags.
    """
    stage = _BOUNDARIES.index(boundary)
    result = run._result
    flags = (
        f"at {boundary}: result={result!r} final={run._final} denied={run._denied} "
        f"body_invoked={run._body_invoked} in_body={run._in_body} pending={run._pending!r}"
    )
    if run._in_body or run._pending is not None:
        raise AssertionError(f"the body runs between stages {flags}")
    if run._signal is not run._caller_signal:
        raise AssertionError(f"exec.signal is not the caller's between stages {flags}")
    if run._final and result is None:
        raise AssertionError(f"final without a result {flags}")
    if run._denied and (type(result) is not ToolFailure or run._body_invoked):
        raise AssertionError(f"a denial that is not a failure, or invoked its body {flags}")
    if stage <= 1 and run._body_invoked:
        raise AssertionError(f"the body was invoked before dispatch {flags}")
    if stage == 0 and result is not None and not (run._final or run._denied):
        raise AssertionError(f"a call settled at entry is final (or denied) {flags}")
    if stage == 1 and result is None and (run._final or run._denied):
        raise AssertionError(f"final or denied without a result {flags}")
    if stage >= 2 and result is None:
        raise AssertionError(f"no result after dispatch {flags}")
    if type(result) is ToolFailure and not wrapper_results:
        code = result.code
        if code == TOOL_ABORTED and not run._body_invoked:
            raise AssertionError(f"ABORTED although the body was not invoked {flags}")
        if code == TOOL_ABORTED_BEFORE_DISPATCH and run._body_invoked:
            raise AssertionError(f"ABORTED_BEFORE_DISPATCH although the body was invoked {flags}")


_FIELDS = (
    "token",
    "call_id",
    "root_call_id",
    "name",
    "arguments",
    "agent",
    "parent",
    "host",
    "principal",
    "signal",
)


def _read_only(view: str, field: str) -> tuple[Callable[[Any, Any], None], Callable[[Any], None]]:
    """A setter and a deleter that refuse, naming the public view rather than this class."""
    if field == "signal" and view == "ToolExecution":
        why = (
            "exec.signal is read-only in ToolExecution and ToolRunContext (pre-execute, "
            "guards, approval, post-execute, observers and the tool body borrow it); only an "
            "around-dispatch wrapper's ToolDispatchExecution may replace it"
        )
    else:
        why = f"{view}.{field} is read-only"

    def refuse_set(self: object, value: object) -> None:
        raise AttributeError(why)

    def refuse_delete(self: object) -> None:
        if field == "signal":
            raise AttributeError(f"{view}.signal cannot be deleted: every call keeps a signal")
        raise AttributeError(why)

    return refuse_set, refuse_delete


def _install_refusals() -> None:
    # At runtime only: the type checkers see getter-only properties (and the dispatch
    # view's one setter), which is the typed contract (contract §3).
    for cls, view in ((CallState, "ToolExecution"), (DispatchView, "ToolDispatchExecution")):
        for field in _FIELDS:
            prop: property = cls.__dict__[field]
            refuse_set, refuse_delete = _read_only(view, field)
            if prop.fset is None:
                prop = prop.setter(refuse_set)
            setattr(cls, field, prop.deleter(refuse_delete))


_install_refusals()
