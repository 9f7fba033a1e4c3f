"""Shared test helpers: a registry whose every stage records itself; stage-boundary checks."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

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
from toolseam._engine import Engine
from toolseam._run import Boundary, CallState, _check_invariants
from toolseam.reference import ReferenceRegistry

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


# The stages `ToolRegistry.execute` and the batch drive (its base `Engine`'s), each with the
# boundary it starts from and the one it ends at (the table of `CallState`).
_STAGES: tuple[tuple[str, Boundary, Boundary], ...] = (
    ("_stage_before", "started", "before dispatch"),
    ("_stage_dispatch", "before dispatch", "dispatched"),
    ("_stage_after", "dispatched", "post-executed"),
)


@contextlib.contextmanager
def checked_boundaries(*, wrapper_results: bool = False) -> Iterator[list[Boundary]]:
    """Assert `CallState`'s invariants at every stage boundary of every call of either engine.

    Patches the stages of `ToolRegistry` (on its base `Engine`) and of the reference's
    `ReferenceRegistry` for the duration: each is checked on entry and once it has completed
    (not when it raised: an interrupted stage publishes, which is checked), and so is every
    run the engines start (`_start`, `_skip_run`) and every run they publish. Yields the
    boundaries checked, so that a test can see the checks ran.
    """
    checked: list[Boundary] = []

    def check(run: CallState, boundary: Boundary) -> None:
        _check_invariants(run, boundary, wrapper_results=wrapper_results)
        checked.append(boundary)

    def stage(name: str, entry: Boundary, exit: Boundary) -> Callable[..., Any]:
        original = getattr(Engine, name)

        def checked_stage(self: ToolRegistry, run: CallState, *args: Any, **kwargs: Any) -> Any:
            check(run, entry)
            step: Awaitable[object] | None = original(self, run, *args, **kwargs)
            if step is None:
                check(run, exit)
                return None

            async def awaited() -> None:
                await step
                check(run, exit)

            return awaited()

        return checked_stage

    def made(name: str) -> Callable[..., Any]:
        original = getattr(Engine, name)

        def checked_start(self: ToolRegistry, *args: Any, **kwargs: Any) -> CallState:
            run: CallState = original(self, *args, **kwargs)
            check(run, "started")
            return run

        return checked_start

    original_publish = Engine._publish  # pyright: ignore[reportPrivateUsage]

    def checked_publish(self: ToolRegistry, run: CallState) -> ToolResult:
        check(run, "published")
        try:
            return original_publish(self, run)
        finally:
            check(run, "published")

    patches: dict[str, Any] = {name: stage(name, entry, exit) for name, entry, exit in _STAGES}
    patches["_start"] = made("_start")
    patches["_skip_run"] = made("_skip_run")
    patches["_publish"] = checked_publish

    # The reference keeps a call's result, finality and denial on its own `_Call`: checked
    # as the run would hold them.
    def check_call(call: Any, boundary: Boundary) -> None:
        run: CallState = call.run
        saved = (run._result, run._final, run._denied)
        run._result, run._final, run._denied = call.result, call.final, call.denied
        try:
            check(run, boundary)
        finally:
            run._result, run._final, run._denied = saved

    reference_stages: dict[str, tuple[Boundary, Boundary]] = {
        "_before_dispatch": ("started", "before dispatch"),
        "_dispatch": ("before dispatch", "dispatched"),
        "_after_dispatch": ("dispatched", "post-executed"),
        "_checkpoint": ("dispatched", "post-executed"),  # a call settled early: a checkpoint
    }
    original_stage = ReferenceRegistry._stage  # pyright: ignore[reportPrivateUsage]
    original_start = ReferenceRegistry._start  # pyright: ignore[reportPrivateUsage]
    original_ref_publish = ReferenceRegistry._publish  # pyright: ignore[reportPrivateUsage]

    async def checked_ref_stage(self: ReferenceRegistry, call: Any, stage: Any) -> None:
        entry, exit = reference_stages[stage.__name__]
        check_call(call, entry)
        await original_stage(self, call, stage)
        check_call(call, exit)

    def checked_ref_start(self: ReferenceRegistry, *args: Any, **kwargs: Any) -> Any:
        call = original_start(self, *args, **kwargs)
        check_call(call, "started")
        return call

    def checked_ref_publish(self: ReferenceRegistry, call: Any) -> ToolResult:
        check_call(call, "published")
        try:
            return original_ref_publish(self, call)
        finally:
            check_call(call, "published")

    classes: list[tuple[type, dict[str, Any]]] = [
        (Engine, patches),
        (
            ReferenceRegistry,
            {
                "_stage": checked_ref_stage,
                "_start": checked_ref_start,
                "_publish": checked_ref_publish,
            },
        ),
    ]
    saved = [(cls, {name: cls.__dict__[name] for name in names}) for cls, names in classes]
    try:
        for cls, names in classes:
            for name, patched in names.items():
                setattr(cls, name, patched)
        yield checked
    finally:
        for cls, originals in saved:
            for name, original in originals.items():
                setattr(cls, name, original)
