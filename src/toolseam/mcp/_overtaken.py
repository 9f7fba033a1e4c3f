"""Cancellations that overtake their call: `EarlyCancels`, one per MCP session.

A 2025-era client over streamable HTTP sends a ``tools/call`` and its
``notifications/cancelled`` as two POSTs, which may travel on two connections; the
notification can reach the server first. The SDK ignores a cancellation for a request id
it is not running. The server remembers it instead, for `EARLY_CANCEL_WINDOW` seconds: the
call that arrives with that id within the window ends ``ABORTED_BEFORE_DISPATCH`` without
running its body, and is left unanswered, as for any cancelled request (``_server``).

Memory is bounded: at most `EARLY_CANCEL_LIMIT` ids per session, the oldest forgotten
first, and expired ids are dropped whenever one is added. The SDK does not say which
cancellations it applied, so one for a call that is running or already finished is
remembered too, and expires unused: MCP forbids reusing a request id within a session.
"""

from __future__ import annotations

from typing import Final, cast, final

__all__ = ["EARLY_CANCEL_LIMIT", "EARLY_CANCEL_WINDOW", "EarlyCancels", "request_key"]

EARLY_CANCEL_WINDOW: Final = 10.0
"""Seconds a cancellation for a request id not seen yet waits for its call."""

EARLY_CANCEL_LIMIT: Final = 256
"""How many such cancellations one session remembers at most (the oldest go first)."""


def request_key(value: object) -> int | str | None:
    """The id a JSON-RPC request is known by: ``7`` and ``"7"`` are one id (as in the SDK).

    Anything that is not an ``int`` (``bool`` excluded) or a ``str`` is no request id.
    """
    kind = type(value)
    if kind is int:  # the common id, checked first (a bool is no id)
        return cast("int", value)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return value
    return value


@final
class EarlyCancels:
    """The cancellations one session received for request ids it was not running.

    Used from the event loop's thread only. Times are the event loop's clock
    (``anyio.current_time()``).
    """

    __slots__ = ("_expiries",)

    def __init__(self) -> None:
        self._expiries: dict[int | str, float] = {}

    def remember(self, key: int | str, now: float) -> None:
        """Remember a cancellation of ``key`` until ``now + EARLY_CANCEL_WINDOW``."""
        expiries = self._expiries
        for old in [old for old, expiry in expiries.items() if expiry < now]:
            del expiries[old]
        expiries.pop(key, None)
        while len(expiries) >= EARLY_CANCEL_LIMIT:
            del expiries[next(iter(expiries))]
        expiries[key] = now + EARLY_CANCEL_WINDOW

    def take(self, key: int | str, now: float) -> bool:
        """Whether ``key`` was cancelled in the window; forget it either way."""
        expiry = self._expiries.pop(key, None)
        return expiry is not None and expiry >= now

    def __len__(self) -> int:
        return len(self._expiries)
