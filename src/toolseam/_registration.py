"""`Registration`: the handle that undoes one ``add_*``/``on_*`` call."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Self, final

__all__ = ["Registration"]


@final
class Registration:
    """Undoes one registration: a signal listener, a tool, a stage listener or a guard.

    `remove` is idempotent and thread-safe. A `Registration` is also a context manager that
    removes on exit, so a listener can be scoped to a block::

        with registry.on_result(record):
            await registry.execute(call)

    Only toolseam creates registrations.
    """

    __slots__ = ("_detach",)

    _detach: Callable[[], object] | None

    def __init__(self, detach: Callable[[], object], /) -> None:
        self._detach = detach

    def remove(self) -> None:
        """Detach what this registration attached. Calling it again does nothing."""
        # Swap first: concurrent removers race for the callable, and the detach callables
        # toolseam passes are themselves idempotent.
        detach, self._detach = self._detach, None
        if detach is not None:
            detach()

    @property
    def active(self) -> bool:
        """Whether `remove` has not been called yet."""
        return self._detach is not None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"<Registration {'active' if self.active else 'removed'}>"
