"""Contract §2: AbortController, AbortSignal, fuse."""

from __future__ import annotations

import gc
import logging
import sys
import threading
import tracemalloc
from collections.abc import Callable
from types import FrameType

import anyio
import pytest

from toolseam import AbortController, AbortError, AbortSignal, FusedSignal, fuse


class TestAbortController:
    def test_only_the_controller_aborts_the_signal_is_read_only(self) -> None:
        controller = AbortController()
        signal = controller.signal
        assert not hasattr(signal, "abort")
        with pytest.raises(AttributeError):
            signal.aborted = True  # type: ignore[misc]
        with pytest.raises(AttributeError):
            signal.reason = "x"  # type: ignore[misc]
        assert not signal.aborted
        assert signal.reason is None
        controller.abort("stop")
        assert signal.aborted
        assert signal.reason == "stop"

    def test_signal_is_the_same_object_each_time(self) -> None:
        controller = AbortController()
        assert controller.signal is controller.signal

    def test_first_reason_wins_later_aborts_do_nothing(self) -> None:
        controller = AbortController()
        calls: list[object] = []
        controller.signal.add_listener(lambda s: calls.append(s.reason))
        controller.abort("first")
        controller.abort("second")
        controller.abort()
        assert controller.signal.reason == "first"
        assert calls == ["first"]

    def test_default_reason_is_an_abort_error_instance(self) -> None:
        controller = AbortController()
        controller.abort()
        assert type(controller.signal.reason) is AbortError
        assert str(controller.signal.reason) == "operation aborted"

    @pytest.mark.parametrize("reason", [0, "", False, (), object(), ValueError("v"), [1]])
    def test_any_object_is_a_valid_reason(self, reason: object) -> None:
        controller = AbortController()
        controller.abort(reason)
        assert controller.signal.reason is reason


class TestAbortSignalConstruction:
    def test_signal_has_no_public_constructor(self) -> None:
        with pytest.raises(TypeError, match=r"^toolseam\.AbortSignal has no public constructor"):
            AbortSignal()  # type: ignore[call-arg]

    def test_aborted_signal_factory(self) -> None:
        signal = AbortSignal.aborted_signal("gone")
        assert signal.aborted
        assert signal.reason == "gone"

    def test_aborted_signal_default_reason_is_abort_error(self) -> None:
        assert isinstance(AbortSignal.aborted_signal().reason, AbortError)


class TestRaiseIfAborted:
    def test_does_nothing_while_pending(self) -> None:
        AbortController().signal.raise_if_aborted()

    def test_raises_the_reason_when_it_is_an_exception(self) -> None:
        reason = KeyError("k")
        signal = AbortSignal.aborted_signal(reason)
        with pytest.raises(KeyError) as info:
            signal.raise_if_aborted()
        assert info.value is reason

    def test_wraps_a_non_exception_reason_in_abort_error(self) -> None:
        signal = AbortSignal.aborted_signal("user pressed stop")
        with pytest.raises(AbortError, match=r"^operation aborted: user pressed stop$") as info:
            signal.raise_if_aborted()
        assert info.value.reason == "user pressed stop"


class TestListeners:
    def test_listener_runs_once_with_the_signal(self) -> None:
        controller = AbortController()
        seen: list[AbortSignal] = []
        controller.signal.add_listener(seen.append)
        controller.abort()
        controller.abort()
        assert seen == [controller.signal]

    def test_listeners_run_in_registration_order(self) -> None:
        controller = AbortController()
        order: list[int] = []
        for i in range(5):
            controller.signal.add_listener(lambda _s, i=i: order.append(i))
        controller.abort()
        assert order == [0, 1, 2, 3, 4]

    def test_listener_on_already_aborted_signal_runs_immediately(self) -> None:
        signal = AbortSignal.aborted_signal("r")
        seen: list[object] = []
        registration = signal.add_listener(lambda s: seen.append(s.reason))
        assert seen == ["r"]
        registration.remove()
        assert signal._listener_count() == 0

    def test_removed_listener_is_not_called_and_remove_is_idempotent(self) -> None:
        controller = AbortController()
        seen: list[object] = []
        registration = controller.signal.add_listener(seen.append)
        registration.remove()
        registration.remove()
        controller.abort()
        assert seen == []
        assert controller.signal._listener_count() == 0

    def test_registration_is_a_context_manager(self) -> None:
        controller = AbortController()
        seen: list[object] = []
        with controller.signal.add_listener(seen.append):
            assert controller.signal._listener_count() == 1
        assert controller.signal._listener_count() == 0
        controller.abort()
        assert seen == []

    def test_listeners_are_dropped_after_abort(self) -> None:
        controller = AbortController()
        controller.signal.add_listener(lambda _s: None)
        controller.abort()
        assert controller.signal._listener_count() == 0

    def test_raising_listener_is_logged_and_contained(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        controller = AbortController()
        seen: list[str] = []

        def bad(_signal: AbortSignal) -> None:
            raise RuntimeError("listener boom")

        controller.signal.add_listener(lambda _s: seen.append("before"))
        controller.signal.add_listener(bad)
        controller.signal.add_listener(lambda _s: seen.append("after"))
        with caplog.at_level(logging.ERROR, logger="toolseam"):
            controller.abort()  # must not raise
        assert seen == ["before", "after"]
        [record] = [r for r in caplog.records if r.name == "toolseam"]
        assert record.exc_info is not None
        assert str(record.exc_info[1]) == "listener boom"

    def test_raising_listener_on_aborted_signal_is_contained(self) -> None:
        def bad(_signal: AbortSignal) -> None:
            raise RuntimeError("boom")

        AbortSignal.aborted_signal().add_listener(bad)  # must not raise

    @pytest.mark.parametrize("value", [None, 3, "callback"])
    def test_non_callable_listener_is_a_type_error(self, value: object) -> None:
        with pytest.raises(TypeError, match=r"^add_listener\(\) expects a callable, got "):
            AbortController().signal.add_listener(value)  # type: ignore[arg-type]

    def test_state_is_set_on_signal_and_fused_dependents_before_any_listener(self) -> None:
        controller = AbortController()
        other = AbortController()
        observed: list[tuple[bool, bool, bool, object]] = []
        with fuse(controller.signal, other.signal) as fused, fuse(fused.signal) as refused:
            inner = fuse(fused.signal, AbortController().signal)

            def snapshot(_s: AbortSignal) -> None:
                observed.append(
                    (
                        controller.signal.aborted,
                        fused.signal.aborted,
                        inner.signal.aborted,
                        inner.signal.reason,
                    )
                )

            controller.signal.add_listener(snapshot)
            refused.signal.add_listener(snapshot)
            inner.signal.add_listener(snapshot)
            controller.abort("r")
            inner.close()
        assert observed == [(True, True, True, "r")] * 3

    def test_listener_may_abort_another_controller(self) -> None:
        first, second = AbortController(), AbortController()
        first.signal.add_listener(lambda _s: second.abort("chained"))
        first.abort()
        assert second.signal.reason == "chained"


class TestWait:
    async def test_wait_returns_after_abort(self) -> None:
        controller = AbortController()
        woke = anyio.Event()

        async def waiter() -> None:
            await controller.signal.wait()
            woke.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            assert not woke.is_set()
            controller.abort()
        assert woke.is_set()
        assert controller.signal._listener_count() == 0

    async def test_wait_on_aborted_signal_returns_at_a_checkpoint(self) -> None:
        await AbortSignal.aborted_signal().wait()

    async def test_wait_is_cancellable_and_leaves_no_listener(self) -> None:
        controller = AbortController()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await controller.signal.wait()
        assert scope.cancelled_caught
        assert controller.signal._listener_count() == 0

    async def test_thread_abort_wakes_a_registered_waiter(self) -> None:
        controller = AbortController()
        results: list[object] = []

        async def waiter() -> None:
            await controller.signal.wait()
            results.append(controller.signal.reason)

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            assert controller.signal._listener_count() == 1
            thread = threading.Thread(target=controller.abort, args=("t",))
            thread.start()
            thread.join()
        assert results == ["t"]


class TestWaitSync:
    def test_wait_sync_times_out_and_reports_pending(self) -> None:
        controller = AbortController()
        assert controller.signal.wait_sync(0) is False
        assert controller.signal._listener_count() == 0

    def test_wait_sync_returns_true_when_aborted(self) -> None:
        assert AbortSignal.aborted_signal().wait_sync() is True

    def test_wait_sync_is_woken_from_another_thread(self) -> None:
        controller = AbortController()
        started = threading.Event()
        result: list[bool] = []

        def worker() -> None:
            started.set()
            result.append(controller.signal.wait_sync())

        thread = threading.Thread(target=worker)
        thread.start()
        started.wait()
        controller.abort()
        thread.join()
        assert result == [True]
        assert controller.signal._listener_count() == 0


class TestFuse:
    def test_fused_signal_aborts_with_the_first_source_reason(self) -> None:
        a, b = AbortController(), AbortController()
        with fuse(a.signal, b.signal) as fused:
            assert isinstance(fused, FusedSignal)
            assert not fused.signal.aborted
            b.abort("b first")
            a.abort("a later")
            assert fused.signal.reason == "b first"

    def test_already_aborted_sources_last_given_wins(self) -> None:
        a = AbortSignal.aborted_signal("a")
        b = AbortSignal.aborted_signal("b")
        live = AbortController().signal
        with fuse(a, live, b) as fused:
            assert fused.signal.reason == "b"
        with fuse(b, live, a) as fused:
            assert fused.signal.reason == "a"
        assert live._listener_count() == 0

    def test_fusing_a_signal_with_itself_yields_it(self) -> None:
        signal = AbortController().signal
        with fuse(signal, signal) as fused:
            assert fused.signal is signal
            assert signal._listener_count() == 0
        assert fuse(signal).signal is signal

    def test_exit_removes_every_listener_it_put_on_sources(self) -> None:
        a, b = AbortController(), AbortController()
        with fuse(a.signal, b.signal, a.signal) as fused:
            assert a.signal._listener_count() == 1
            assert b.signal._listener_count() == 1
        assert a.signal._listener_count() == 0
        assert b.signal._listener_count() == 0
        a.abort()
        assert not fused.signal.aborted

    def test_close_is_idempotent(self) -> None:
        a, b = AbortController(), AbortController()
        fused = fuse(a.signal, b.signal)
        fused.close()
        fused.close()
        assert a.signal._listener_count() == 0

    def test_fusion_never_aborts_a_source(self) -> None:
        a, b = AbortController(), AbortController()
        with fuse(a.signal, b.signal) as fused:
            a.abort()
            assert fused.signal.aborted
            assert not b.signal.aborted

    def test_fused_signal_keeps_its_state_after_exit(self) -> None:
        a, b = AbortController(), AbortController()
        with fuse(a.signal, b.signal) as fused:
            a.abort("x")
        assert fused.signal.reason == "x"

    def test_fusion_of_fusions_propagates(self) -> None:
        a, b, c = AbortController(), AbortController(), AbortController()
        with fuse(a.signal, b.signal) as ab, fuse(ab.signal, c.signal) as abc:
            a.abort("deep")
            assert abc.signal.reason == "deep"

    def test_no_signals_is_a_value_error(self) -> None:
        with pytest.raises(ValueError, match=r"^fuse\(\) needs at least one signal$"):
            fuse()

    def test_non_signal_is_a_type_error(self) -> None:
        with pytest.raises(TypeError, match=r"^fuse\(\) expects AbortSignal instances, got int$"):
            fuse(AbortController().signal, 3)  # type: ignore[arg-type]


class TestThreadSafety:
    def test_hundred_threads_aborting_run_each_listener_exactly_once(self) -> None:
        controller = AbortController()
        counts = [0] * 10
        lock = threading.Lock()

        def make(i: int) -> object:
            def listener(_s: AbortSignal) -> None:
                with lock:
                    counts[i] += 1

            return listener

        for i in range(10):
            controller.signal.add_listener(make(i))  # type: ignore[arg-type]
        barrier = threading.Barrier(100)

        def abort(n: int) -> None:
            barrier.wait()
            controller.abort(n)

        threads = [threading.Thread(target=abort, args=(n,)) for n in range(100)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert counts == [1] * 10
        assert controller.signal.reason in range(100)

    def test_concurrent_add_and_remove_leave_no_listener(self) -> None:
        controller = AbortController()
        barrier = threading.Barrier(8)

        def churn() -> None:
            barrier.wait()
            for _ in range(2000):
                controller.signal.add_listener(lambda _s: None).remove()
                with fuse(controller.signal, AbortController().signal):
                    pass

        threads = [threading.Thread(target=churn) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert controller.signal._listener_count() == 0


class TestNoLeaks:
    def test_hundred_thousand_fusions_leave_zero_listeners_and_bounded_memory(self) -> None:
        long_lived = AbortController().signal
        other = AbortController().signal

        def cycles(n: int) -> None:
            for _ in range(n):
                with fuse(long_lived, other) as fused:
                    fused.signal.add_listener(lambda _s: None)

        cycles(1000)  # warm caches and free lists before measuring
        gc.collect()
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            cycles(100_000)
            gc.collect()
            after, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert long_lived._listener_count() == 0
        assert other._listener_count() == 0
        assert after - before < 64 * 1024


def _lines_of(function: object) -> list[int]:
    code = function.__code__  # type: ignore[attr-defined]
    return sorted({line for _, _, line in code.co_lines() if line is not None})


def _abort_at(code_name: str, line: int, abort: Callable[[], None]) -> Callable[[], bool]:
    """Run ``abort`` as a real signal handler would: at ``line`` of ``code_name``.

    A Python signal handler runs on the main thread at the interpreter's next check, in
    the middle of whatever that thread was doing, locks held (they are re-entrant). A trace
    function raises the signal when the line is reached, so the handler lands there.
    Returns a function that stops tracing and tells whether the handler ran.
    """
    import signal as os_signal

    from toolseam import _signals

    ran: list[bool] = []
    os_signal.signal(os_signal.SIGUSR1, lambda *_: (ran.append(True), abort()))

    def tracer(frame: FrameType, event: str, arg: object) -> object:
        if frame.f_code.co_filename != _signals.__file__:
            return None
        here = frame.f_code.co_name == code_name and frame.f_lineno == line
        if here and event == "line" and not ran:
            os_signal.raise_signal(os_signal.SIGUSR1)
        return tracer

    sys.settrace(tracer)

    def stop() -> bool:
        sys.settrace(None)
        os_signal.signal(os_signal.SIGUSR1, os_signal.SIG_DFL)
        return bool(ran)

    return stop


@pytest.mark.skipif(sys.platform == "win32", reason="SIGUSR1 is POSIX")
class TestSignalHandlerReentry:
    """Contract §2: abort() from a signal handler that interrupts this very thread.

    Whichever line of add_listener() or fuse() the handler lands on, the listener is called
    exactly once and the fusion aborts with its source.
    """

    def test_add_listener(self) -> None:
        from toolseam._signals import AbortSignal as Signal

        landed = 0
        for code_name, function in (
            ("add_listener", Signal.add_listener),
            ("_attach", Signal._attach),  # pyright: ignore[reportPrivateUsage]
        ):
            for line in _lines_of(function):
                controller = AbortController()
                calls: list[AbortSignal] = []
                stop = _abort_at(code_name, line, lambda c=controller: c.abort("stop pressed"))
                try:
                    registration = controller.signal.add_listener(calls.append)
                finally:
                    ran = stop()
                landed += ran
                if ran:
                    assert calls == [controller.signal], (code_name, line)
                registration.remove()
                assert controller.signal._listener_count() == 0, (code_name, line)
        assert landed > 5  # the handler really did land inside, line after line

    def test_fuse(self) -> None:
        from toolseam import _signals

        landed = 0
        for code_name, function in (("fuse", _signals.fuse), ("_attach", _signals._attach)):
            for line in _lines_of(function):
                a, b = AbortController(), AbortController()
                stop = _abort_at(code_name, line, lambda b=b: b.abort("stop pressed"))
                try:
                    fused = fuse(a.signal, b.signal)
                finally:
                    ran = stop()
                landed += ran
                if ran:
                    assert fused.signal.aborted, (code_name, line)
                    assert fused.signal.reason == "stop pressed"
                fused.close()
        assert landed > 5


class TestFastPathsEqualTheirSlowPaths:
    """Each "≡" of `toolseam._signals`, against the slower path it stands for."""

    @staticmethod
    def _shape(name: str) -> tuple[AbortSignal, dict[str, AbortSignal], list[tuple[str, str]]]:
        """A signal to abort, every signal of the shape by label, and the log of calls."""
        log: list[tuple[str, str]] = []
        root = AbortController().signal
        signals = {"root": root}

        def listen(label: str, signal: AbortSignal, raises: BaseException | None = None) -> None:
            def listener(called_with: AbortSignal) -> None:
                labels = [k for k, v in signals.items() if v is called_with]
                log.append((label, labels[0]))
                if raises is not None:
                    raise raises

            signal.add_listener(listener)

        def dependent(label: str) -> AbortSignal:
            fused = fuse(root, AbortController().signal).signal
            signals[label] = fused
            return fused

        if name == "alone, one listener":
            listen("a", root)
        elif name == "alone, three listeners":
            for label in "abc":
                listen(label, root)
        elif name == "alone, an interrupting listener among others":
            listen("a", root)
            listen("b", root, KeyboardInterrupt())
            listen("c", root, RuntimeError("contained"))
        elif name.startswith("one dependent,"):
            fused = dependent("fused")
            listeners = 0 if "no listener" in name else name.count("listener")
            for label in "xy"[:listeners]:
                listen(label, fused)
            if "its own dependent" in name:
                inner = fuse(fused, AbortController().signal).signal
                signals["inner"] = inner
                listen("i", inner)
        elif name == "two dependents":
            listen("x", dependent("first"))
            listen("y", dependent("second"))
        elif name == "a listener and one dependent":
            listen("a", root)
            listen("x", dependent("fused"))
        return root, signals, log

    SHAPES = (
        "alone, no listener",
        "alone, one listener",
        "alone, three listeners",
        "alone, an interrupting listener among others",
        "one dependent, no listener",
        "one dependent, one listener",
        "one dependent, listener, listener",
        "one dependent, one listener, its own dependent",
        "two dependents",
        "a listener and one dependent",
    )

    @pytest.mark.parametrize("shape", SHAPES)
    def test_an_abort_equals_the_general_walk(self, shape: str) -> None:
        """`_trigger`'s fast paths (no dependent, one dependent, one listener, the lock's
        bound acquire) ≡ `_abort_fused` under ``with _lock:``, then `_run_listener` each."""
        from toolseam import _signals

        reason = RuntimeError("stop")
        root, signals, fast_log = self._shape(shape)
        fast_interrupt = _signals._trigger(root, reason)

        slow_root, slow_signals, slow_log = self._shape(shape)
        with _signals._lock:
            calls = _signals._abort_fused(slow_root, reason)
        slow_interrupt: BaseException | None = None
        for callback, signal in calls:
            raised = _signals._run_listener(callback, signal)
            slow_interrupt = slow_interrupt or raised

        assert fast_log == slow_log
        assert type(fast_interrupt) is type(slow_interrupt)

        def state(signal: AbortSignal) -> tuple[object, ...]:
            return (signal._aborted, signal._reason, signal._listeners, signal._dependents)

        assert {k: state(v) for k, v in signals.items()} == {
            k: state(v) for k, v in slow_signals.items()
        }

    def test_signals_are_built_as_the_constructor_builds_them(self) -> None:
        """`AbortController()` and a fusion's signal ≡ ``AbortSignal(_KEY)``."""
        from toolseam._signals import _KEY

        def state(signal: AbortSignal) -> tuple[object, ...]:
            return (type(signal), signal._aborted, signal._reason, signal._listeners)

        built = AbortSignal(_KEY)
        assert built._dependents is None
        assert state(AbortController().signal) == state(built)
        assert AbortController().signal._dependents is None
        fused = fuse(AbortController().signal, AbortController().signal).signal
        assert state(fused) == state(built)
        assert fused._dependents is None

    def test_an_abort_without_a_reason_is_a_plain_abort_error(self) -> None:
        """``abort()``'s reason, made without `AbortError.__init__` ≡ ``AbortError()``."""
        controller = AbortController()
        controller.abort()
        made = controller.signal.reason
        plain = AbortError()
        assert type(made) is AbortError
        assert isinstance(made, AbortError)
        assert (made.reason, made.args, str(made), repr(made)) == (
            plain.reason,
            plain.args,
            str(plain),
            repr(plain),
        )
        with pytest.raises(AbortError, match=r"^operation aborted$"):
            controller.signal.raise_if_aborted()


@pytest.fixture(params=["native", "anyio.Event"])
def wait_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """`AbortSignal.wait`'s path: the backend's own wait, or its general anyio.Event wait."""
    from toolseam import _signals

    if request.param == "anyio.Event":
        monkeypatch.setattr(_signals, "_running_loop", lambda: None)
        monkeypatch.setattr(_signals, "_trio_lowlevel", lambda: None)
    return str(request.param)


class TestWaitPaths:
    """`wait`'s fast paths (an asyncio future; trio's reschedule, inline or from a thread)
    ≡ the anyio.Event wait it ends with."""

    async def test_an_abort_in_the_loop_wakes_the_waiter(self, wait_path: str) -> None:
        controller = AbortController()
        woke: list[object] = []

        async def waiter() -> None:
            await controller.signal.wait()
            woke.append(controller.signal.reason)

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            assert controller.signal._listener_count() == 1
            controller.abort("here")
        assert woke == ["here"]
        assert controller.signal._listener_count() == 0

    async def test_an_abort_from_a_thread_wakes_the_waiter(self, wait_path: str) -> None:
        controller = AbortController()
        woke: list[object] = []

        async def waiter() -> None:
            await controller.signal.wait()
            woke.append(controller.signal.reason)

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            thread = threading.Thread(target=controller.abort, args=("there",))
            thread.start()
            thread.join()
        assert woke == ["there"]

    async def test_a_cancelled_wait_leaves_no_listener(self, wait_path: str) -> None:
        controller = AbortController()
        async with anyio.create_task_group() as tg:
            tg.start_soon(controller.signal.wait)
            await anyio.wait_all_tasks_blocked()
            assert controller.signal._listener_count() == 1
            tg.cancel_scope.cancel()
        assert controller.signal._listener_count() == 0
        assert not controller.signal.aborted

    async def test_an_aborted_signal_returns_at_a_checkpoint(self, wait_path: str) -> None:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await AbortSignal.aborted_signal().wait()
        assert scope.cancelled_caught
