"""`ptc_tool`: the ``run_code`` tool, and the pool of sandbox workers it owns."""

from __future__ import annotations

import json
import keyword
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, final

import anyio
import anyio.to_thread
from pydantic_monty import Monty

from .._definitions import ToolSchema, check_timeout
from .._errors import ToolArgsError
from .._json import FrozenDict, JsonValue
from .._registry import ToolRegistry
from .._results import ContentBlock, ToolFailure, ToolResult, render_value, text_block
from .._views import ToolExecution, ToolRunContext
from ._errors import PtcClosedError
from ._output import listing
from ._run import CONTEXT_KEY, Run, RunConfig
from ._stubs import SYNC_SUFFIX, describe, positional_names

__all__ = ["PtcLimits", "PtcTool", "ptc_tool"]

# How many runs may wait in worker threads at once (each run uses one at a time).
_THREADS: Final = 64


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class PtcLimits:
    """The limits of one ``run_code`` run; reaching one ends the run with `PTC_LIMIT`.

    ``None`` turns a limit off. A limit ends the run the way an abort does: nested calls
    in flight are told and awaited, then the sandbox is stopped (at the nested-call limit,
    without a grace). ``output_chars`` ends nothing: it cuts what the model is shown.

    Raises:
        ValueError: A limit is not positive (and finite).
    """

    wall_clock: float | None = 60.0
    """Seconds the whole run may take, nested calls included (the host's clock)."""
    memory: int | None = 256 * 1024 * 1024
    """Bytes of heap the program may use (enforced inside the sandbox)."""
    nested_calls: int | None = 200
    """How many tool calls the program may make; its next call ends the run, and is not made."""
    max_parallel: int = 10
    """How many of its tool calls may be in flight at once."""
    output_chars: int = 8000
    """Characters the model is shown of each: the printed output, the output value, a
    traceback, the list of tool calls (past it: head and tail, and how much was cut)."""

    def __post_init__(self) -> None:
        for field in ("wall_clock", "memory", "nested_calls", "max_parallel", "output_chars"):
            value = getattr(self, field)
            if value is None and field in ("wall_clock", "memory", "nested_calls"):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"PtcLimits.{field} must be a number, got {type(value).__name__}")
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"PtcLimits.{field} must be positive, got {value!r}")


def _run_context(result: ToolResult) -> Mapping[str, Any] | None:
    for context in result.additional_contexts:
        if isinstance(context, FrozenDict) and CONTEXT_KEY in context:
            found = context[CONTEXT_KEY]
            if isinstance(found, Mapping):
                return found  # pyright: ignore[reportUnknownVariableType]
    return None


@final
class PtcTool:
    """The ``run_code`` tool: a `ToolDefinition` that owns a pool of sandbox workers.

    Build it with `ptc_tool`. ``async with`` opens the pool (its warm workers) and closing
    it stops every run still going (`PTC_CLOSED`), awaits them, and ends every worker
    process; a call outside the ``async with`` fails with `PTC_CLOSED` without running.
    Register it like any tool: ``registry.register(run_code)``.
    """

    _run_class: type[Run] = Run  # one call's run (the kit's mutants replace it)

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        schemas: Sequence[ToolSchema],
        name: str,
        description: str | None,
        limits: PtcLimits,
        timeout: float | None,
        grace: float,
        pool_size: int,
    ) -> None:
        self._registry = registry
        self._schemas = tuple(schemas)
        self._name = name
        self._limits = limits
        self._timeout = check_timeout(name, timeout)
        self._grace = grace
        self._pool_size = pool_size
        self._description = description or describe(
            self._schemas,
            nested_calls=limits.nested_calls,
            wall_clock=limits.wall_clock,
            output_chars=limits.output_chars,
        )
        tools: dict[str, str] = {}
        for schema in self._schemas:
            tools[schema.name] = schema.name
            tools[schema.name + SYNC_SUFFIX] = schema.name
        self._tools = tools
        self._positional = {
            schema.name: positional_names(schema.parameters) for schema in self._schemas
        }
        self._pool: Monty | None = None
        self._config: RunConfig | None = None
        self._runs: set[Run] = set()
        self._idle = anyio.Event()
        self._idle.set()

    # The definition (contract §6).

    @property
    def name(self) -> str:
        """The tool's name (``run_code`` unless given)."""
        return self._name

    @property
    def description(self) -> str:
        """How to write a program, and the exposed tools as typed Python stubs."""
        return self._description

    @property
    def parameters(self) -> Mapping[str, JsonValue]:
        """One required string: the program."""
        return {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The Python program to run."}},
            "required": ["code"],
            "additionalProperties": False,
        }

    @property
    def timeout(self) -> float | None:
        """The registry's deadline for a whole call (`TOOL_TIMEOUT`), or ``None``."""
        return self._timeout

    @property
    def tools(self) -> tuple[str, ...]:
        """The names of the registry tools the program can call."""
        return tuple(schema.name for schema in self._schemas)

    def parse_arguments(self, arguments: JsonValue, /) -> str:
        """The program's text. Raises `ToolArgsError` unless the arguments are ``{"code": str}``."""
        if isinstance(arguments, Mapping):
            code = arguments.get("code")
            if isinstance(code, str) and set(arguments) == {"code"}:
                return code
        raise ToolArgsError(
            f'invalid arguments for tool "{self._name}": expected {{"code": <the program>}}'
        )

    async def run(self, args: str, exec: ToolRunContext, /) -> JsonValue:
        """Run the program; its value is ``{"output", "stdout", "nested_calls"}``."""
        config = self._config
        if config is None:
            raise PtcClosedError(
                f'tool "{self._name}" has no sandbox open: call it inside `async with` the tool'
            )
        run = self._run_class(config, exec, args)
        self._runs.add(run)
        self._idle = anyio.Event()
        try:
            return await run.run()
        finally:
            self._runs.discard(run)
            if not self._runs:
                self._idle.set()

    def serialize_output(self, output: JsonValue, /) -> JsonValue:
        """The value as `run` built it (JSON already)."""
        return output

    def render(self, args: str, value: JsonValue, /) -> Sequence[ContentBlock]:
        """The output and what the program printed (`finalize_content` adds the calls)."""
        if not isinstance(value, Mapping):
            return render_value(value)
        output = json.dumps(value.get("output"), ensure_ascii=False)
        text = f"output: {output}"
        stdout = value.get("stdout")
        if isinstance(stdout, str) and stdout:
            text += f"\nprinted:\n{stdout.rstrip()}"
        return (text_block(text),)

    def is_concurrency_safe(self, args: str, /) -> bool:
        """Never: a program's nested calls have side effects of their own (exclusive)."""
        return False

    def finalize_content(
        self, exec: ToolExecution, result: ToolResult, /
    ) -> Sequence[ContentBlock] | None:
        """Every result of a run that started, abort and timeout too, lists its tool calls."""
        context = _run_context(result)
        if context is None:
            return None
        blocks = list(result.content)
        if isinstance(result, ToolFailure):
            stdout = context.get("stdout")
            if isinstance(stdout, str) and stdout:
                blocks.append(text_block(f"printed:\n{stdout.rstrip()}"))
        nested = context.get("nested_calls", ())
        blocks.append(text_block(listing(nested, self._limits.output_chars)))
        return blocks

    # The pool.

    async def __aenter__(self) -> PtcTool:
        if self._pool is not None:
            raise RuntimeError(f'tool "{self._name}": its sandbox pool is already open')
        pool = Monty(min_processes=self._pool_size)
        await anyio.to_thread.run_sync(pool.__enter__)
        self._pool = pool
        limits = self._limits
        self._config = RunConfig(
            registry=self._registry,
            pool=pool,
            limiter=anyio.CapacityLimiter(_THREADS),
            tools=self._tools,
            positional=self._positional,
            wall_clock=limits.wall_clock,
            max_memory=limits.memory,
            nested_calls=limits.nested_calls,
            max_parallel=limits.max_parallel,
            grace=self._grace,
            output_chars=limits.output_chars,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the runs still going, await them, and end every worker process.

        Shielded: a host cancellation of the closing task waits for all of it, so no worker
        process outlives the tool.
        """
        with anyio.CancelScope(shield=True):
            self._config = None
            for run in list(self._runs):
                run.stop(PtcClosedError(f'tool "{self._name}" closed while the program ran'))
            await self._idle.wait()
            pool, self._pool = self._pool, None
            if pool is not None:
                await anyio.to_thread.run_sync(pool.__exit__, None, None, None)


def ptc_tool(
    registry: ToolRegistry,
    *,
    tools: Iterable[str] | None = None,
    name: str = "run_code",
    description: str | None = None,
    limits: PtcLimits | None = None,
    timeout: float | None = None,
    grace: float = 0.5,
    pool_size: int = 1,
) -> PtcTool:
    """Build a ``run_code`` tool whose programs call ``registry``'s tools (contract §7, nested).

    The program runs in a pydantic-monty sandbox: no host files, network, environment or
    subprocesses. Each exposed tool is an ``async def`` of the same name and a ``<name>_sync``
    twin, typed from its schema in the generated description. Every call the program makes is
    a nested dispatch of the ``run_code`` call through the registry's whole pipeline.

    Args:
        registry: The registry whose tools the program calls (and that runs each nested call).
        tools: The names to expose; ``None`` exposes every tool registered now.
        name: The tool's name.
        description: Replaces the generated description (how to write a program, the stubs).
        limits: `PtcLimits` (wall clock, memory, nested calls, parallelism, output size).
        timeout: The registry's deadline for the whole call: `TOOL_TIMEOUT`, through the same
            stop as an abort.
        grace: Seconds a stopped program has, once its nested calls settled, to end by itself
            before its worker process is killed.
        pool_size: Sandbox workers kept warm.

    Raises:
        ValueError: A name in ``tools`` is not registered, is not a Python identifier, or its
            ``_sync`` twin clashes with another exposed name; ``grace`` is negative;
            ``pool_size`` is below 1.
    """
    if not math.isfinite(grace) or grace < 0:
        raise ValueError(f"grace must be a non-negative number of seconds, got {grace!r}")
    if pool_size < 1:
        raise ValueError(f"pool_size must be at least 1, got {pool_size!r}")
    available = {schema.name: schema for schema in registry.schemas()}
    chosen = list(available) if tools is None else list(dict.fromkeys(tools))
    schemas: list[ToolSchema] = []
    for tool in chosen:
        if tool == name and tools is None:
            continue
        schema = available.get(tool)
        if schema is None:
            raise ValueError(f'tool "{tool}" is not registered in the registry')
        if not tool.isidentifier() or keyword.iskeyword(tool):
            raise ValueError(f'tool "{tool}" is not a Python name: a program cannot call it')
        if tool + SYNC_SUFFIX in chosen:
            raise ValueError(f'tool "{tool}{SYNC_SUFFIX}" clashes with the sync twin of "{tool}"')
        schemas.append(schema)
    return PtcTool(
        registry,
        schemas=schemas,
        name=name,
        description=description,
        limits=limits or PtcLimits(),
        timeout=timeout,
        grace=float(grace),
        pool_size=pool_size,
    )
