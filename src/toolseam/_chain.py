"""Listener chains: each listener gets a ``next`` that runs the rest of the chain, once.

A chain is closed as soon as the stage that ran it has returned. A listener that keeps its
``next`` and calls it later (after its own coroutine returned, from another task) would
otherwise run the rest of the chain, and for the around-dispatch chain start the tool body,
after the call published its result, with nobody awaiting it (contract §5.6). A closed
chain's ``next`` raises instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, final

__all__ = ["Chain"]


@final
class Chain:
    """One run of a listener chain; the first listener is outermost.

    Each listener is called as ``listener(*leading, next)``. Await `start()` and then call
    `close()` (in a ``finally``): every ``next`` of the chain raises from then on.
    """

    __slots__ = ("_closed", "_innermost", "_innermost_arg", "_leading", "_listeners", "_what")

    def __init__(
        self,
        listeners: tuple[Any, ...],
        leading: tuple[Any, ...],
        innermost: Callable[[Any], Awaitable[Any]],
        what: str,
        innermost_arg: object = None,
    ) -> None:
        self._listeners = listeners
        self._leading = leading
        # Called as innermost(innermost_arg): no closure or partial to build per call.
        self._innermost = innermost
        self._innermost_arg = innermost_arg
        self._what = what
        self._closed = False

    def start(self) -> Awaitable[Any]:
        """Call the outermost listener (or the innermost step if there is none)."""
        listeners = self._listeners
        if listeners:
            # What _Next(self, 0)() does, without the object: nobody else holds it.
            step: Awaitable[Any] = listeners[0](*self._leading, _Next(self, 1))
            return step
        return self._innermost(self._innermost_arg)

    def close(self) -> None:
        """Make every ``next`` of this chain raise from now on."""
        self._closed = True

    def _late_call_message(self) -> str:
        execution = self._leading[0]  # the run, or its dispatch view
        what = self._what
        body = ", and the tool body," if what == "around-dispatch wrapper" else ""
        article = "an" if what[0] in "aeiou" else "a"
        return (
            f'tool "{execution.name}" (call {execution.call_id!r}): {article} {what} called next() '
            f"after the {what}s returned; the call has ended, so the rest of the chain{body} "
            "will not run"
        )


@final
class _Next:
    """One ``next``: a plain object rather than a closure and a coroutine per link.

    ``next()`` returns the inner awaitable itself, so a chain of n listeners costs n + 1
    small objects and no extra coroutine frames.
    """

    __slots__ = ("_chain", "_index", "_used")

    def __init__(self, chain: Chain, index: int) -> None:
        self._chain = chain
        self._index = index
        self._used = False

    def __call__(self) -> Awaitable[Any]:
        chain = self._chain
        if chain._closed:
            raise RuntimeError(chain._late_call_message())
        if self._used:
            raise RuntimeError("next() may be called only once per stage listener")
        self._used = True
        index = self._index
        listeners = chain._listeners
        if index < len(listeners):
            step: Awaitable[Any] = listeners[index](*chain._leading, _Next(chain, index + 1))
            return step
        return chain._innermost(chain._innermost_arg)

    @property
    def _innermost(self) -> bool:
        """Whether this ``next`` runs the innermost step (no listener left to call)."""
        return self._index >= len(self._chain._listeners)
