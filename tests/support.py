"""Shared test helpers: a registry whose every stage records itself."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from typing_extensions import TypedDict

from toolseam import (
    AbortController,
    AbortSignal,
    ExecutionToken,
    ToolExecution,
    ToolExecutionInput,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    _json,
    define_tool,
)

# The two ways a snapshot of a large argument is taken: the C pass (toolseam._speedups, where
# the build has it) and the Python walks (a build without a C compiler).
WALKS = ("C", "Python") if _json._copy_json is not None else ("Python",)


@contextlib.contextmanager
def walk(name: str) -> Iterator[None]:
    """Snapshots taken as ``name`` (one of `WALKS`) takes them, for the duration."""
    saved = _json._copy_json
    if name == "Python":
        setattr(_json, "_copy_json", None)  # noqa: B010  # a Final, set aside for a test
    try:
        yield
    finally:
        setattr(_json, "_copy_json", saved)  # noqa: B010


class TextArgs(TypedDict):
    text: str


@dataclass
class Published:
    """Every result the registry published, with the execution it came from."""

    results: list[ToolResult] = field(default_factory=list[ToolResult])
    tokens: list[ExecutionToken] = field(default_factory=list[ExecutionToken])
    parents: list[ExecutionToken | None] = field(default_factory=list["ExecutionToken | None"])

    def __call__(self, exec: ToolExecution, result: ToolResult) -> None:
        self.results.append(result)
        self.tokens.append(exec.token)
        self.parents.append(exec.parent)

    @property
    def only(self) -> ToolResult:
        assert len(self.results) == 1, f"expected exactly one result, got {self.results}"
        return self.results[0]


def make_input(
    name: str = "echo",
    arguments: object = None,
    *,
    signal: AbortSignal | None = None,
    call_id: str = "call_1",
    **kwargs: object,
) -> ToolExecutionInput:
    if signal is None:
        signal = AbortController().signal
    return ToolExecutionInput(
        call_id=call_id,
        name=name,
        arguments={"text": "hi"} if arguments is None else arguments,
        signal=signal,
        **kwargs,  # type: ignore[arg-type]
    )


def registry_with_echo() -> tuple[ToolRegistry, Published, list[str]]:
    """A registry with an ``echo`` tool; returns it, its published results and a trace."""
    registry = ToolRegistry()
    trace: list[str] = []

    @define_tool(name="echo", description="Echo the text.")
    async def echo(args: TextArgs, exec: ToolRunContext) -> str:
        trace.append("body")
        return args["text"]

    registry.register(echo)
    published = Published()
    registry.on_result(published)
    return registry, published, trace


def code_of(result: ToolResult) -> str | None:
    if not result.is_error:
        return None
    info = result.error.info
    return None if info is None else info.code


Hook = Callable[[], None]
