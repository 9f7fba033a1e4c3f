"""The `ToolDefinition` protocol the registry runs, and the schema it lists."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, final

from ._json import JsonValue
from ._principal import check_scopes
from ._results import ContentBlock, ToolResult
from ._views import ToolExecution, ToolRunContext

__all__ = ["ToolDefinition", "ToolSchema", "check_timeout", "is_idempotent", "scopes_of"]

ArgsT = TypeVar("ArgsT")
ResultT = TypeVar("ResultT")


class ToolDefinition(Protocol[ArgsT, ResultT]):
    """What `ToolRegistry.register` accepts: `define_tool` builds one, or write your own.

    The registry calls, in order and all inside the body's dispatch: `parse_arguments` on
    the frozen arguments, `run` with the parsed arguments, `serialize_output` on what `run`
    returned, and `render` for the model-facing content.

    ``ArgsT`` is the parsed arguments type, ``ResultT`` the body's return type.

    Optional member: ``idempotent``, a ``bool`` attribute or property saying that running a
    call twice does no more than running it once. It is not part of the protocol, so a
    definition without it still type-checks and registers; it is read with a default of
    ``False`` (`define_tool`'s ``idempotent`` option sets it). Durable execution
    (`toolseam.durable`) reads it to decide whether a call interrupted by a crash may run
    again.

    Optional member: ``scopes``, an iterable of scope names (read once, at registration;
    default none) that a caller's `Principal` must all hold to see the tool and to call it
    (`define_tool`'s ``scopes`` option sets it; contract §14).
    """

    @property
    def name(self) -> str:
        """The unique tool name the model calls."""
        ...

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        ...

    @property
    def parameters(self) -> Mapping[str, JsonValue]:
        """The JSON schema of the arguments."""
        ...

    @property
    def timeout(self) -> float | None:
        """Seconds the timeout policy allows a call, or ``None``. Never part of schemas."""
        ...

    def parse_arguments(self, arguments: JsonValue, /) -> ArgsT:
        """Validate the frozen arguments. Raise `ToolArgsError` when they are invalid."""
        ...

    def run(self, args: ArgsT, exec: ToolRunContext, /) -> Awaitable[ResultT]:
        """Run the tool body to completion (a synchronous body in a worker thread).

        The registry only awaits what this returns, so an ``async def run`` and a plain
        ``def run`` returning any awaitable both implement it.
        """
        ...

    def serialize_output(self, output: ResultT, /) -> JsonValue:
        """Turn the body's output into JSON. Raise `ToolOutputError` when it is invalid."""
        ...

    def render(self, args: ArgsT, value: JsonValue, /) -> Sequence[ContentBlock]:
        """The model-facing content for a successful value."""
        ...

    def is_concurrency_safe(self, args: ArgsT, /) -> bool:
        """Whether this call may overlap others; only an exact ``True`` makes it parallel."""
        ...

    def finalize_content(
        self, exec: ToolExecution, result: ToolResult, /
    ) -> Sequence[ContentBlock] | None:
        """Last word on the content of every result of this tool, or ``None`` to keep it."""
        ...


@final
@dataclass(frozen=True, slots=True)
class ToolSchema:
    """What a model is told about a tool: name, description and parameters only."""

    name: str
    """The tool name."""
    description: str
    """What the tool does."""
    parameters: Mapping[str, JsonValue]
    """JSON schema of the arguments."""

    def to_json(self) -> dict[str, JsonValue]:
        """The plain JSON form, as most model APIs take it."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


def check_timeout(name: str, timeout: object) -> float | None:
    """Validate a definition's ``timeout``: ``None``, or positive and finite seconds."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(
            f'tool "{name}": `timeout` must be a positive number of seconds, '
            f"got {type(timeout).__name__}"
        )
    if not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(
            f'tool "{name}": `timeout` must be a positive number of seconds, got {timeout!r}'
        )
    return float(timeout)


def is_idempotent(definition: object) -> bool:
    """A definition's optional ``idempotent`` member: only an exact ``True`` counts.

    Absent (a hand-written definition that predates the option), anything but ``True``, or
    raising when read: not idempotent, the safe answer (never run twice). Never raises.
    """
    try:
        return getattr(definition, "idempotent", False) is True
    except Exception:
        return False


def scopes_of(name: str, definition: object) -> frozenset[str]:
    """A definition's optional ``scopes`` member, checked (absent: none).

    Raises:
        TypeError: ``scopes`` is a single str, or holds a non-string.
        ValueError: A scope is empty or holds whitespace.
    """
    return check_scopes(getattr(definition, "scopes", ()), f'tool "{name}"')
