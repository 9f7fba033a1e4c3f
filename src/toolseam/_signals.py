"""Abort signals: `AbortController`, the read-only `AbortSignal`, and `fuse`.

Modelled on the WHATWG split: only the controller aborts; the signal is a read-only view
that any stage may borrow. One module-wide lock guards every signal's state, listeners and
fused dependents, so that an abort sets the state of a signal *and of every signal fused
from it* before any listener runs (contract §2), and so that the dependency graph can never
deadlock on lock order. Listeners always run outside the lock.

The lock is re-entrant because a finalizer can run at any allocation, in whichever thread
allocates: a task suspended in `AbortSignal.wait` that is garbage-collected removes its
listener from its ``finally``, and a ``__del__`` may call `Registration.remove` or
`AbortSignal.add_listener`. Were that thread already inside the lock, a plain lock would
deadlock it for good. Every critical section below therefore leaves the state consistent
before each allocation: a re-entrant call only ever sees a whole state, never half of one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, cast, final

import anyio
import anyio.lowlevel

from ._errors import AbortError
from ._registration import Registration

__all__ = [
    "AbortController",
    "AbortSignal",
    "FusedSignal",
    "abort_owned",
    "fuse",
    "fuse_owned",
    "in_loop",
]

logger = logging.getLogger("toolseam")

_lock = threading.RLock()
_acquire = _lock.acquire
_get_ident = threading.get_ident
_release = _lock.release
_keys = itertools.count()
_new_signal = object.__new__

Listener = Callable[["AbortSignal"], object]


class _ConstructorKey:
    """Proof that the caller is toolseam itself: only this module holds the instance."""

    __slots__ = ()


_KEY = _ConstructorKey()


@final
class AbortSignal:
    """A read-only view of an abort: whether it happened, and why.

    A signal has no method that aborts it; only its `AbortController` (or a fusion of
    signals it depends on) can. Obtain one from `AbortController.signal`, `fuse`, or
    `AbortSignal.aborted_signal`; it has no public constructor.

    Every method is thread-safe.
    """

    __slots__ = ("__weakref__", "_aborted", "_dependents", "_listeners", "_reason")

    _aborted: bool
    _reason: object
    _listeners: dict[int, Listener] | None
    _dependents: dict[AbortSignal, None] | None

    if TYPE_CHECKING:

        def __init__(self, key: _ConstructorKey, /) -> None: ...

    else:

        def __init__(self, *args, **kwargs):
            if kwargs or len(args) != 1 or args[0] is not _KEY:
                raise TypeError(
                    "toolseam.AbortSignal has no public constructor; "
                    "use AbortController().signal or AbortSignal.aborted_signal()"
                )
            self._aborted = False
            self._reason = None
            self._listeners = None
            self._dependents = None

    @staticmethod
    def aborted_signal(reason: object = None) -> AbortSignal:
        """Return a signal that is already aborted.

        Args:
            reason: The abort reason; ``None`` means a fresh `AbortError`.
        """
        signal = AbortSignal(_KEY)
        signal._aborted = True
        signal._reason = AbortError() if reason is None else reason
        return signal

    @property
    def aborted(self) -> bool:
        """Whether the signal has aborted. Never reverts to ``False``."""
        return self._aborted

    @property
    def reason(self) -> object:
        """The abort reason: ``None`` until aborted, then fixed by the first abort."""
        return self._reason

    def raise_if_aborted(self) -> None:
        """Raise if the signal has aborted; otherwise do nothing.

        The reason is raised with a fresh traceback: one shared reason raised from many
        bodies must not keep the frames of every earlier raise alive through its
        ``__traceback__``.

        Raises:
            Exception: The reason itself, when it is an `Exception` instance.
            AbortError: Wrapping the reason otherwise, a `BaseException` such as
                ``KeyboardInterrupt`` or a cancellation included: those are never raised
                into the code that checks the signal.
        """
        if not self._aborted:
            return
        reason = self._reason
        # type(), not isinstance(): a hostile reason's __class__ could raise; and
        # BaseException's own with_traceback, as a reason may override it with one that raises.
        if issubclass(type(reason), Exception):
            raise BaseException.with_traceback(cast("Exception", reason), None)
        raise AbortError(reason)

    def add_listener(self, callback: Listener, /) -> Registration:
        """Call ``callback(signal)`` once when the signal aborts.

        The callback runs synchronously in the thread that calls ``abort()``, after the
        state of this signal and of every signal fused from it is set. On a signal that has
        already aborted, it runs immediately, before this method returns. A callback that
        raises is logged on the ``"toolseam"`` logger and contained: the other listeners
        still run and ``abort()`` does not raise.

        Args:
            callback: Called with this signal.

        Returns:
            A `Registration` whose ``remove()`` detaches the callback (idempotent).

        Raises:
            TypeError: ``callback`` is not callable.
        """
        if not callable(callback):
            raise TypeError(f"add_listener() expects a callable, got {type(callback).__name__}")
        key = self._attach(callback)
        if key is not None:
            return Registration(lambda: self._remove_listener(key))
        interrupt = _run_listener(callback, self)
        if interrupt is not None:
            raise interrupt
        return Registration(_nothing)

    async def wait(self) -> None:
        """Return once the signal has aborted.

        Works under asyncio and trio (through anyio), and is woken when ``abort()`` is
        called from another thread. Always reaches a checkpoint, so it can be cancelled.
        """
        if self._aborted:
            await anyio.lowlevel.checkpoint()
            return
        # Fast paths ≡ the anyio.Event wait at the end, with the backend's own wait: an abort then
        # costs one listener call and the loop's wake-up, as an Event would (anyio's Event adds a
        # layer on each side); pinned by tests/test_signals.py::TestWaitPaths (each test on both
        # paths); its speed by benchmarks/bench_cancel_latency.py.
        loop = _running_loop()
        if loop is not None:
            future = loop.create_future()
            key = self._attach(_future_waker(loop, future))
            if key is None:
                future.cancel()
                await anyio.lowlevel.checkpoint()
                return
            try:
                await future
            finally:
                # An abort has already detached every listener of this signal (under the
                # lock, with the state): only a wait that ends otherwise removes its own.
                if not self._aborted:
                    self._remove_listener(key)
            return
        trio = _trio_lowlevel()
        if trio is not None:
            await self._wait_trio(trio)
            return
        event = anyio.Event()
        registration = self.add_listener(in_loop(event.set))
        try:
            await event.wait()
        finally:
            if not self._aborted:
                registration.remove()

    async def _wait_trio(self, lowlevel: Any) -> None:
        task = lowlevel.current_task()
        token = lowlevel.current_trio_token()
        loop_thread = threading.get_ident()
        done = False  # rescheduled or cancelled: the task must be rescheduled once only

        def reschedule() -> None:
            nonlocal done
            if not done:
                done = True
                lowlevel.reschedule(task)

        def wake(_signal: AbortSignal) -> None:
            nonlocal done
            if _get_ident() == loop_thread:
                # ≡ reschedule(), inline: on every abort (bench_cancel_latency); pinned by
                # tests/test_signals.py::TestWaitPaths::test_an_abort_in_the_loop_wakes_the_waiter
                if not done:
                    done = True
                    lowlevel.reschedule(task)
                return
            with contextlib.suppress(RuntimeError):  # the run has finished
                token.run_sync_soon(reschedule)

        def abort(_raise_cancel: object) -> object:
            nonlocal done
            done = True
            return lowlevel.Abort.SUCCEEDED

        key = self._attach(wake)
        if key is None:
            await lowlevel.checkpoint()
            return
        try:
            await lowlevel.wait_task_rescheduled(abort)
        finally:
            if not self._aborted:
                self._remove_listener(key)

    def _attach(self, callback: Listener) -> int | None:
        """Add a listener under its key; ``None`` (nothing added, nothing called) once aborted.

        Stored first, then checked: the lock is re-entrant, so a Python signal handler (a
        CLI's Ctrl-C wired to ``abort()``) can abort this very signal in the middle of this
        section, on this thread. `_trigger` empties the listener dict it takes, so a key
        still in it was stored too late to be called.
        """
        with _lock:
            if self._aborted:
                return None
            key = next(_keys)
            listeners = self._listeners
            if listeners is None:
                listeners = self._listeners = {}
            listeners[key] = callback
            # mypy keeps the narrowing from the check above: it cannot know of re-entry.
            if self._aborted and listeners.pop(key, None) is not None:  # type: ignore[unreachable]
                return None  # type: ignore[unreachable]  # aborted meanwhile, without it
            return key

    def wait_sync(self, timeout: float | None = None) -> bool:
        """Block the calling thread until the signal aborts or ``timeout`` seconds pass.

        For code running in worker threads, such as a synchronous tool body.

        Args:
            timeout: Seconds to wait at most; ``None`` waits without limit.

        Returns:
            Whether the signal has aborted.
        """
        if self._aborted:
            return True
        event = threading.Event()
        registration = self.add_listener(lambda _signal: event.set())
        try:
            event.wait(timeout)
        finally:
            registration.remove()
        return self._aborted

    def _remove_listener(self, key: int) -> None:
        with _lock:
            if self._listeners is not None:
                self._listeners.pop(key, None)

    def _listener_count(self) -> int:
        """Callbacks and fused dependents currently attached (for leak tests)."""
        with _lock:
            return len(self._listeners or ()) + len(self._dependents or ())

    def __repr__(self) -> str:
        if self._aborted:
            return f"<AbortSignal aborted reason={self._reason!r}>"
        return "<AbortSignal pending>"


def _nothing() -> None:
    pass


_new_exception = BaseException.__new__


_running_loop = asyncio._get_running_loop  # None outside asyncio: no exception to pay for
_trio_module: list[Any] = []  # [trio.lowlevel or None], once looked up


def _trio_lowlevel() -> Any:
    """``trio.lowlevel`` when running under trio, else ``None``."""
    if not _trio_module:
        try:
            import trio.lowlevel
        except ImportError:
            _trio_module.append(None)
        else:
            _trio_module.append(trio.lowlevel)
    lowlevel = _trio_module[0]
    if lowlevel is None:
        return None
    try:
        lowlevel.current_task()
    except RuntimeError:
        return None
    return lowlevel


def _future_waker(loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]) -> Listener:
    """A listener that resolves ``future`` in ``loop``'s thread, from whichever thread."""
    loop_thread = threading.get_ident()

    def wake(_signal: AbortSignal) -> None:
        if _get_ident() == loop_thread:
            if not future.done():  # done: the wait was cancelled
                future.set_result(None)
            return
        with contextlib.suppress(RuntimeError):  # the event loop has finished
            loop.call_soon_threadsafe(_resolve, future)

    return wake


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _run_listener(callback: Listener, signal: AbortSignal) -> BaseException | None:
    """Run one listener; contain what it raises (returned only for interrupts)."""
    try:
        callback(signal)
    except BaseException as error:
        return _listener_raised(callback, error)
    return None


def _listener_raised(callback: Listener, error: BaseException) -> BaseException | None:
    """What a listener raised, from inside the ``except`` block (the log has its traceback).

    An interrupt is returned: not ours to swallow, it is re-raised once every listener ran.
    Anything else is contained, CancelledError included: a listener is synchronous, so a
    cancellation it raises cancels nothing here (contract §2: abort() never raises because
    of a listener, and the other listeners still run).
    """
    if issubclass(type(error), (KeyboardInterrupt, SystemExit)):
        return error
    logger.exception("abort listener %r raised; contained", callback)
    return None


def in_loop(callback: Callable[[], object]) -> Listener:
    """A listener that runs ``callback()`` in the current event loop's thread.

    Called where the listener is built (inside the loop); the abort may come from any
    thread. Once the loop has finished, nobody is left to wake: the call is dropped.
    """
    loop_thread = threading.get_ident()
    native: Any = anyio.lowlevel.current_token().native_token

    def listener(_signal: AbortSignal) -> None:
        if threading.get_ident() == loop_thread:
            callback()
            return
        try:
            if isinstance(native, asyncio.AbstractEventLoop):
                native.call_soon_threadsafe(callback)
            else:  # a trio token
                native.run_sync_soon(callback)
        except RuntimeError:
            pass  # the event loop has finished

    return listener


def _trigger(root: AbortSignal, reason: object) -> BaseException | None:
    """Abort ``root`` and every signal fused from it, then run their listeners.

    Returns the first ``KeyboardInterrupt``/``SystemExit`` a listener raised (every
    listener has run by then), for the caller to raise or to handle.
    """
    listeners: dict[int, Listener] | None = None  # of ``root``, once detached
    calls: Sequence[tuple[Listener, AbortSignal]] = ()
    # ≡ `with _lock:` (as around `_abort_fused`), cheaper bound (bench_cancel_latency.py), on every
    # abort; pinned by tests/test_signals.py::TestFastPathsEqualTheirSlowPaths.
    _acquire()
    try:
        if root._aborted:
            return None
        dependents = root._dependents
        if dependents is None:
            # Fast path ≡ `_abort_fused` of a signal nothing is fused from: no walk, no lists;
            # pinned by tests/test_signals.py::TestFastPathsEqualTheirSlowPaths::
            # test_an_abort_equals_the_general_walk ("alone, ..."); its speed by
            # benchmarks/bench_cancel_latency.py "AbortSignal.wait". The listeners are detached
            # under the lock, and emptied once taken (see AbortSignal._attach).
            root._aborted = True
            root._reason = reason
            listeners = root._listeners
            if listeners is None:
                return None
            root._listeners = None
        elif len(dependents) == 1 and root._listeners is None:
            # Fast path ≡ `_abort_fused` of a signal with one fused dependent and no listener of its
            # own (a caller's signal and its body's): no walk; pinned by tests/test_signals.py::
            # TestFastPathsEqualTheirSlowPaths::test_an_abort_equals_the_general_walk ("one
            # dependent, ..."); its speed by benchmarks/bench_cancel_latency.py "tool body".
            [fused] = dependents
            if fused._dependents is not None:
                calls = _abort_fused(root, reason)
            else:
                root._dependents = None
                root._aborted = True
                root._reason = reason
                if fused._aborted:
                    return None
                fused._aborted = True
                fused._reason = reason
                listeners = fused._listeners
                if listeners is None:
                    return None
                fused._listeners = None
                root = fused  # the signal its listeners are called with
        else:
            calls = _abort_fused(root, reason)
    finally:
        _release()
    if listeners is not None:
        if len(listeners) == 1:
            # Taken and emptied in one call (see AbortSignal._attach): cheaper than
            # unpacking the values alone.
            callback = listeners.popitem()[1]
            # Fast path ≡ `_run_listener(callback, root)` without its frame: one listener is the
            # common case; pinned by tests/test_signals.py::TestFastPathsEqualTheirSlowPaths::
            # test_an_abort_equals_the_general_walk ("..., one listener"); its speed by
            # benchmarks/bench_cancel_latency.py.
            try:
                callback(root)
            except BaseException as error:
                return _listener_raised(callback, error)
            return None
        calls = [(callback, root) for callback in listeners.values()]
        listeners.clear()  # taken (see AbortSignal._attach)
    elif len(calls) == 1:
        return _run_listener(*calls[0])
    interrupt = None
    for callback, signal in calls:
        raised = _run_listener(callback, signal)
        interrupt = interrupt or raised
    return interrupt


def _abort_fused(root: AbortSignal, reason: object) -> list[tuple[Listener, AbortSignal]]:
    """Under the lock: abort ``root`` and what is fused from it; return their listeners."""
    # Allocated before the state changes: a finalizer that the allocation runs must
    # not see ``root`` aborted while its dependents are not yet.
    calls: list[tuple[Listener, AbortSignal]] = []
    aborted = [root]
    root._aborted = True
    root._reason = reason
    # Breadth-first over the fused dependents; ``aborted`` doubles as the queue (a list's
    # iterator sees what is appended while it runs).
    for signal in aborted:
        dependents = signal._dependents
        if dependents is not None:
            signal._dependents = None
            for dependent in dependents:
                if not dependent._aborted:
                    dependent._aborted = True
                    dependent._reason = reason
                    aborted.append(dependent)
    for signal in aborted:
        listeners = signal._listeners
        if listeners is not None:
            signal._listeners = None
            for callback in listeners.values():
                calls.append((callback, signal))  # noqa: PERF401 - no generator frame
            listeners.clear()  # taken (see AbortSignal._attach)
    return calls


@final
class AbortController:
    """The owner of an abort: the only object that can abort its `signal`.

    Create one per operation you own, hand its `signal` to what you call, and call
    `abort` when the operation should stop. Thread-safe.
    """

    __slots__ = ("_signal",)

    def __init__(self) -> None:
        # ≡ AbortSignal(_KEY) without its guarding __init__: one controller per call; pinned by
        # tests/test_signals.py::TestFastPathsEqualTheirSlowPaths::
        # test_signals_are_built_as_the_constructor_builds_them; its speed by
        # benchmarks/bench_overhead.py (each call builds a controller).
        signal = _new_signal(AbortSignal)
        signal._aborted = False
        signal._reason = None
        signal._listeners = None
        signal._dependents = None
        self._signal = signal

    @property
    def signal(self) -> AbortSignal:
        """The read-only signal this controller aborts."""
        return self._signal

    def abort(self, reason: object = None) -> None:
        """Abort the signal. Idempotent: the first call fixes the reason.

        Sets the state of the signal and of every signal fused from it, then runs their
        listeners in this thread. Never raises because of a listener.

        Args:
            reason: Any object; ``None`` means a fresh `AbortError`.
        """
        signal = self._signal
        if signal._aborted:
            return
        if reason is None:
            # ≡ AbortError(), without its __init__ (its reason is the class's None): one per abort
            # without a reason; pinned by tests/test_signals.py::TestFastPathsEqualTheirSlowPaths::
            # test_an_abort_without_a_reason_is_a_plain_abort_error; its speed by
            # benchmarks/bench_cancel_latency.py.
            reason = _new_exception(AbortError)
        interrupt = _trigger(signal, reason)
        if interrupt is not None:
            raise interrupt

    def __repr__(self) -> str:
        return f"<AbortController signal={self._signal!r}>"


@final
class FusedSignal:
    """A signal that aborts when any of its sources aborts; created by `fuse`.

    A context manager: leaving it (or calling `close`) detaches the fusion from every
    source, so a long-lived source keeps no trace of it. The fused `signal` keeps whatever
    state it had. Fusion never aborts a source.
    """

    __slots__ = ("_signal", "_sources")

    def __init__(self, signal: AbortSignal, sources: tuple[AbortSignal, ...], /) -> None:
        self._signal = signal
        self._sources = sources

    @property
    def signal(self) -> AbortSignal:
        """The fused signal."""
        return self._signal

    def close(self) -> None:
        """Detach from every source. Idempotent and thread-safe."""
        sources, self._sources = self._sources, ()
        if not sources:
            return
        fused = self._signal
        with _lock:
            for source in sources:
                if source._dependents is not None:
                    source._dependents.pop(fused, None)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<FusedSignal of {len(self._sources)} sources: {self._signal!r}>"


def fuse(*signals: AbortSignal) -> FusedSignal:
    """Fuse signals into one that aborts when any of them aborts.

    The fused signal takes the reason of the source that aborted first. Where several
    sources have already aborted at fusion time, the last one given wins, so callers pass
    the signal whose reason should prevail (a wrapper's own) last. Fusing a signal with
    itself yields that very signal.

    Args:
        *signals: At least one `AbortSignal`.

    Returns:
        A `FusedSignal`; use it as a context manager so its listeners are removed.

    Raises:
        ValueError: No signal was given.
        TypeError: An argument is not an `AbortSignal`.
    """
    if not signals:
        raise ValueError("fuse() needs at least one signal")
    unique: dict[AbortSignal, None] = {}
    for signal in signals:
        if type(signal) is not AbortSignal:
            raise TypeError(f"fuse() expects AbortSignal instances, got {type(signal).__name__}")
        unique[signal] = None
    if len(unique) == 1:
        return FusedSignal(signals[0], ())
    return _attach(signals, tuple(unique))


def fuse_owned(*signals: AbortSignal) -> FusedSignal:
    """`fuse` for the registry's body signal: always a fresh signal, abortable by its owner.

    Unlike `fuse`, a single distinct source still yields a new signal, so the registry can
    abort the body's signal on host cancellation (`abort_owned`) without touching any
    source: the caller's signal is never aborted. The arguments are `AbortSignal`s.
    """
    return _attach(signals, signals if len(signals) == 1 else tuple(dict.fromkeys(signals)))


def _attach(signals: tuple[AbortSignal, ...], sources: tuple[AbortSignal, ...]) -> FusedSignal:
    """A new signal fused from ``sources`` (distinct ``signals``), in one locked step."""
    # ≡ AbortSignal(_KEY) without its guarding __init__, as in AbortController (one fusion per body
    # that reads its signal: benchmarks/bench_cancel_latency.py "tool body"); pinned by
    # tests/test_signals.py::TestFastPathsEqualTheirSlowPaths::
    # test_signals_are_built_as_the_constructor_builds_them.
    fused = _new_signal(AbortSignal)
    fused._aborted = False
    fused._reason = None
    fused._listeners = None
    fused._dependents = None
    with _lock:
        # contract §2: where several sources have already aborted, the last one given wins.
        for source in reversed(signals):
            if source._aborted:
                fused._aborted = True
                fused._reason = source._reason
                return FusedSignal(fused, ())
        for source in sources:
            dependents = source._dependents
            if dependents is None:
                dependents = source._dependents = {}
            dependents[fused] = None
        # Attached first, then checked again: a signal handler on this thread may have
        # aborted a source after the check above, before the fusion was attached to it
        # (the lock is re-entrant; see AbortSignal._attach).
        if not fused._aborted:
            for source in reversed(signals):
                if source._aborted:
                    fused._aborted = True  # nothing listens to a fusion this new
                    fused._reason = source._reason
                    break
    return FusedSignal(fused, sources)


def abort_owned(signal: AbortSignal, reason: object) -> BaseException | None:
    """Abort a signal from `fuse_owned` itself, as its sources would (idempotent).

    Returns, rather than raises, a ``KeyboardInterrupt``/``SystemExit`` from a listener:
    the registry decides what it means on its host-cancellation path.
    """
    return _trigger(signal, reason)
