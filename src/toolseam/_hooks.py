"""The registry's private seam for instrumentation that spans a whole call (contract §12).

A `ToolRegistry` keeps a tuple of `CallHook` objects in ``_hooks``: empty unless something
(`toolseam.tracing`) installed one. The registry tests it at three points of every call
(lines marked ``# tracing hook``) and calls into this module only when it is not empty:

* entry (``_new_run``), before the arguments are materialized, so a call that fails
  materialization, a pre-aborted call and a call a batch skipped are all seen;
* the body invocation, which runs in one task: `enter_body` and `leave_body` bracket
  ``_invoke_body`` (in ``_invoke_hooked``, the innermost step of an instrumented
  registry's dispatch), so a hook can make something current while the body runs (a
  span, so that nested calls and whatever the body traces become its children);
* publish (``_publish``), once the one result is final.

A registry never instrumented pays a truth test at each point (one to choose the
innermost step of dispatch). `ToolRegistry._install_hook` adds a hook; this module sits
below the registry and never imports it. All the logic lives here and in the hooks;
nothing a hook raises may cost a call its result (contract §5): an `Exception` from a
hook is logged and contained.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Protocol

from ._results import ToolResult
from ._run import CallState

__all__ = ["CallHook", "Entered", "enter_body", "leave_body", "published", "started"]

logger = logging.getLogger("toolseam")


class CallHook(Protocol):
    """What the registry calls at entry, around the body, and at publish of each call.

    Every method runs in the event loop's thread, synchronously, and should be cheap. A hook
    may see a call it never saw start (installed meanwhile): it must cope.
    """

    def call_started(self, run: CallState, /) -> None:
        """The call has entered the registry; its arguments are not materialized yet."""
        ...

    def body_entered(self, run: CallState, /) -> object:
        """The body is about to be called, in the task that awaits it.

        Returns what `body_left` needs to undo it; ``None`` when nothing was done (then
        `body_left` is not called).
        """
        ...

    def body_left(self, run: CallState, undo: object, /) -> None:
        """The body has settled (or the host cancelled it); same task as `body_entered`."""
        ...

    def call_published(self, run: CallState, result: ToolResult, /) -> None:
        """The call's one result is final and has been handed to the observers."""
        ...


def _contain(hook: CallHook, error: Exception) -> None:
    # Never raising: a broken log handler must not cost the call its result either.
    with contextlib.suppress(Exception):
        logger.error("call hook %r raised; contained", hook, exc_info=error)


def started(hooks: tuple[CallHook, ...], run: CallState) -> None:
    """Tell every hook that ``run`` has entered the registry."""
    for hook in hooks:
        try:
            hook.call_started(run)
        except Exception as error:
            _contain(hook, error)


Entered = list[tuple[CallHook, object]]
"""What `enter_body` did: each hook that made something current, and how to undo it."""


def enter_body(hooks: tuple[CallHook, ...], run: CallState) -> Entered | None:
    """Let every hook make something current for the body; ``None`` if none did.

    Called in the task that is about to call and await the body; `leave_body` is called
    in the same task once the body has settled (or the host cancelled it). Bracketing the
    body in place, rather than wrapping it, costs no coroutine frame, and the body is
    *called* inside (a definition's ``run`` may do work before returning its awaitable).
    """
    entered: Entered | None = None
    for hook in hooks:
        try:
            undo = hook.body_entered(run)
        except Exception as error:
            _contain(hook, error)
            continue
        if undo is not None:
            if entered is None:
                entered = []
            entered.append((hook, undo))
    return entered


def leave_body(entered: Entered, run: CallState) -> None:
    """Undo what `enter_body` did, innermost first."""
    for hook, undo in reversed(entered):
        try:
            hook.body_left(run, undo)
        except Exception as error:
            _contain(hook, error)


def published(hooks: tuple[CallHook, ...], run: CallState, result: ToolResult) -> None:
    """Tell every hook that ``run`` has published ``result``."""
    for hook in hooks:
        try:
            hook.call_published(run, result)
        except Exception as error:
            _contain(hook, error)
