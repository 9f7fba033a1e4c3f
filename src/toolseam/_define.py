"""`define_tool`: turn an annotated function into a validated `ToolDefinition` (contract §6).

The first parameter's annotation (a TypedDict, dataclass or pydantic model) gives the JSON
schema of the parameters and validates the arguments; the return annotation validates the
output. pydantic is imported here only, so a registry of hand-written definitions never
pays for it.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import sys
import typing
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, Generic, cast, final, overload

from typing_extensions import TypeVar

from ._definitions import ToolDefinition, check_timeout
from ._errors import ToolArgsError, ToolOutputError, safe_str
from ._json import JsonValue, MaterializationError, materialize, text_is_utf8
from ._principal import check_scopes
from ._results import ContentBlock, ToolResult, render_value
from ._run import CallState
from ._threads import run_in_worker_thread
from ._views import ToolExecution, ToolRunContext

__all__ = ["ToolDecorator", "define_tool"]

A = TypeVar("A")
B = TypeVar("B")
R = TypeVar("R")
# The arguments type the options of a decorator accept. Its default, ``object``, is the
# decorator whose options accept any arguments (or that has none): the body decides.
OptionArgsT = TypeVar("OptionArgsT", default=object)

Finalize = Callable[[ToolExecution, ToolResult], "Sequence[ContentBlock] | None"]


# A location deeper than this shows its first and last few segments only.
_MAX_LOC_SEGMENTS = 16


def _location(loc: Sequence[object]) -> str:
    if len(loc) > _MAX_LOC_SEGMENTS:
        half = _MAX_LOC_SEGMENTS // 2
        skipped = len(loc) - 2 * half
        return f"{_location(loc[:half])}...({skipped} more)...{_location(loc[-half:])}"
    return ".".join(str(p) for p in loc) or "$"


def _summarize_validation_error(error: Any) -> str:
    try:
        parts = [
            f"{_location(item.get('loc', ()))}: {item.get('msg', 'invalid')}"
            for item in error.errors(include_url=False)[:5]
        ]
        extra = error.error_count() - len(parts)
        if extra > 0:
            parts.append(f"and {extra} more")
        return "; ".join(parts)
    except Exception:
        return safe_str(error)


def _too_deep_for_json(error: Any) -> bool:
    """Whether pydantic's JSON parser gave up on depth (not on the arguments' content)."""
    try:
        return any(
            item.get("type") == "json_invalid" and "recursion limit" in str(item.get("msg"))
            for item in error.errors(include_url=False)
        )
    except Exception:
        return False


def _too_deep_to_serialize(error: Exception) -> bool:
    return "serialization depth" in safe_str(error)


# Return annotations whose exact-type outputs pydantic validates and dumps unchanged.
_EXACT_JSON_LEAVES: tuple[type[Any], ...] = (str, int, bool)


def _annotated_callable(body: object) -> object:
    """What holds ``body``'s annotations: the function behind partials, or ``__call__``."""
    while isinstance(body, functools.partial):
        body = cast("functools.partial[object]", body).func
    if inspect.isfunction(body) or inspect.ismethod(body):
        return body
    # A callable object: its class's ``__call__`` holds the annotations.
    return getattr(type(body), "__call__", body)  # noqa: B004 - callable objects


def _awaited_type(hint: object) -> Any:
    """``R`` of an ``Awaitable[R]``/``Coroutine[..., R]`` return annotation, else ``None``."""
    origin = typing.get_origin(hint)
    if origin is Awaitable or origin is Coroutine:
        args = typing.get_args(hint)
        return args[-1] if args else Any
    if hint is Awaitable or hint is Coroutine:
        return Any
    return None


# Core-schema nodes whose Python-mode validation of a snapshot succeeds exactly when JSON
# mode does, with an equal value (tests/test_perf_validation.py checks the claim). Leaves:
_SAME_LEAVES = frozenset(("str", "int", "float", "bool", "none"))
# Nodes with sub-schemas, and the keys that hold them.
_SAME_WRAPPERS: Mapping[str, tuple[str, ...]] = {
    "nullable": ("schema",),
    "default": ("schema",),
    "list": ("items_schema",),
    "dict": ("values_schema",),
    "model": ("schema",),
    "dataclass": ("schema",),
    "definitions": ("schema",),
    "typed-dict-field": ("schema",),
    "model-field": ("schema",),
    "dataclass-field": ("schema",),
}


def _same_in_python_mode(schema: object) -> bool:
    """Whether Python mode may validate the frozen arguments for this core schema.

    JSON mode is the reference: it validates the JSON text of the snapshot, so the body
    gets fresh plain values. Python mode on the snapshot itself gives the same outcome, at
    C speed and with no encoding, where every node is a JSON leaf type, a list, a dict, a
    union or literal of those, a TypedDict, dataclass or model of those, with no custom
    validator, no ``Any`` (which would hand the body a frozen container), no extra fields
    kept as they are, and nothing strict (strict Python mode wants model instances). Where a
    Python-mode validation fails, JSON mode runs and reports the error, so only successes
    need to agree.
    """
    definitions: dict[str, object] = {}
    followed: set[str] = set()
    pending: list[object] = [schema]
    while pending:
        node = pending.pop()
        if not isinstance(node, Mapping):
            return False
        node = cast("Mapping[str, Any]", node)
        config: Any = node.get("config") or {}
        if node.get("strict") or config.get("strict"):
            return False
        if node.get("extra_behavior") == "allow" or config.get("extra_fields_behavior") == "allow":
            return False
        kind = node.get("type")
        if kind in _SAME_LEAVES:
            continue
        children = _SAME_WRAPPERS.get(cast("str", kind))
        if children is not None:
            for key in children:
                if key not in node:
                    return False  # e.g. list without items_schema: items are Any
                pending.append(node[key])
            if kind == "definitions":
                for definition in node.get("definitions", ()):
                    definitions[definition.get("ref")] = definition
                    pending.append(definition)
            elif (kind == "model" and node.get("custom_init")) or (
                kind == "dict" and node.get("keys_schema", {"type": "str"}).get("type") != "str"
            ):
                return False  # a custom __init__; keys validated as something else
            continue
        if kind in ("typed-dict", "model-fields"):
            if "extras_schema" in node:
                return False
            pending.extend(node.get("fields", {}).values())
        elif kind == "dataclass-args":
            pending.extend(node.get("fields", ()))
        elif kind == "tuple":
            pending.extend(node.get("items_schema", ()))
        elif kind == "union":
            choices: list[Any] = node.get("choices", [])
            pending.extend(
                cast("object", choice[0] if isinstance(choice, tuple) else choice)
                for choice in choices
            )
        elif kind == "literal":
            expected: Any = node.get("expected", ())
            if not all(type(value) in (str, int) or value is None for value in expected):
                return False
        elif kind == "definition-ref":
            ref: str = node.get("schema_ref", "")
            if ref not in followed:
                followed.add(ref)
                if ref not in definitions:
                    return False
        else:
            return False  # Any, a custom validator, bytes, dates, enums ...: JSON mode
    return True


@final
class DefinedTool(Generic[A, R]):
    """The `ToolDefinition` that `define_tool` builds. Not constructible directly."""

    __slots__ = (
        "__weakref__",
        "_args_adapter",
        "_body",
        "_description",
        "_errors",
        "_finalize",
        "_idempotent",
        "_is_async",
        "_is_concurrency_safe",
        "_name",
        "_output_adapter",
        "_parameters",
        "_passthrough",
        "_python_mode",
        "_render",
        "_scopes",
        "_timeout",
        "_to_json",
    )

    def __init__(
        self,
        *,
        name: str,
        description: str,
        timeout: float | None,
        body: Callable[..., Any],
        is_async: bool,
        args_adapter: Any,
        output_adapter: Any,
        output_type: Any = None,
        parameters: Mapping[str, JsonValue],
        is_concurrency_safe: Callable[[Any], object] | None,
        finalize_content: Finalize | None,
        render: Callable[[Any, JsonValue], Sequence[ContentBlock]] | None,
        idempotent: bool = False,
        scopes: frozenset[str] = frozenset(),
    ) -> None:
        self._name = name
        self._description = description
        self._timeout = timeout
        self._idempotent = idempotent
        self._scopes = scopes
        self._body = body
        self._is_async = is_async
        self._args_adapter = args_adapter
        self._output_adapter = output_adapter
        # An exact str/int/bool return annotation: such outputs need no pydantic round trip.
        self._passthrough: type[Any] | None = (
            output_type if output_type in _EXACT_JSON_LEAVES else None
        )
        self._parameters = parameters
        self._is_concurrency_safe = is_concurrency_safe
        self._finalize = finalize_content
        self._render = render
        # Bound once: a `from pydantic import ...` per call costs about a microsecond.
        from pydantic import ValidationError
        from pydantic_core import PydanticSerializationError, to_json

        self._errors: tuple[type[Exception], type[Exception]] = (
            ValidationError,
            PydanticSerializationError,
        )
        self._to_json: Callable[[object], bytes] = to_json
        try:
            python_mode = _same_in_python_mode(args_adapter.core_schema)
        except Exception:
            python_mode = False
        self._python_mode = python_mode

    @property
    def name(self) -> str:
        """The unique tool name."""
        return self._name

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        return self._description

    @property
    def parameters(self) -> Mapping[str, JsonValue]:
        """The JSON schema of the arguments type."""
        return self._parameters

    @property
    def timeout(self) -> float | None:
        """Seconds the timeout policy allows, or ``None``."""
        return self._timeout

    @property
    def idempotent(self) -> bool:
        """Whether running a call twice does no more than running it once (the option)."""
        return self._idempotent

    @property
    def scopes(self) -> frozenset[str]:
        """The scopes a caller's principal needs to see and call this tool (the option)."""
        return self._scopes

    def parse_arguments(self, arguments: JsonValue, /) -> A:
        """Validate the frozen arguments against the first parameter's annotation.

        Arguments nested deeper than pydantic's JSON parser goes (about 200 levels) are
        validated in Python mode on a plain copy instead: depth is bounded only by memory
        (contract §5.2).
        """
        return self._parse(arguments, None)

    def _parse(self, arguments: JsonValue, utf8: bool | None) -> A:
        """`parse_arguments`; ``utf8`` says whether every string of ``arguments`` is UTF-8.

        The registry knows it from the snapshot walk (``None``: find out here).
        """
        if self._python_mode:
            if utf8 is None:
                utf8 = text_is_utf8(arguments)
            # A lone surrogate is valid in Python mode but not in JSON text: JSON mode then.
            if utf8:
                try:
                    return self._args_adapter.validate_python(arguments)  # type: ignore[no-any-return]
                except self._errors[0]:
                    pass  # JSON mode reports the error, word for word as it always has
                except RecursionError:
                    pass
        try:
            # pydantic-core's encoder: ~15x faster than json.dumps on small arguments.
            text: str | bytes = self._to_json(arguments)
        except self._errors[1]:
            # Lone surrogates (UTF-8 cannot encode them): json.dumps escapes them and the
            # validator reports them, exactly as before. Too deep for either: Python mode.
            try:
                text = json.dumps(arguments)
            except RecursionError:
                return self._parse_deep(arguments)
        try:
            # The arguments *are* JSON: validate them in JSON mode. This also keeps pydantic
            # from rebuilding frozen snapshots through their (private) constructors.
            return self._args_adapter.validate_json(text)  # type: ignore[no-any-return]
        except self._errors[0] as error:
            if _too_deep_for_json(error):
                return self._parse_deep(arguments)
            raise self._args_error(error) from None

    def _parse_deep(self, arguments: JsonValue) -> A:
        # A deep copy thaws a snapshot into plain containers without recursing, so the
        # body gets fresh, mutable values, as JSON mode would give it.
        plain = copy.deepcopy(arguments)
        try:
            return self._args_adapter.validate_python(plain)  # type: ignore[no-any-return]
        except self._errors[0] as error:
            raise self._args_error(error) from None
        except RecursionError:
            raise ToolArgsError(
                f'invalid arguments for tool "{self._name}": nested too deeply for the '
                "arguments type"
            ) from None

    def _args_error(self, error: Exception) -> ToolArgsError:
        return ToolArgsError(
            f'invalid arguments for tool "{self._name}": {_summarize_validation_error(error)}'
        )

    def run(self, args: A, exec: ToolRunContext, /) -> Awaitable[R]:
        """Call the body; a synchronous body runs in a worker thread until it returns."""
        if self._is_async:
            # The body's own awaitable (its coroutine): no extra coroutine frame around it.
            return self._body(args, exec)  # type: ignore[no-any-return]
        return self._run_sync(args, exec)

    async def _run_sync(self, args: A, exec: ToolRunContext, /) -> R:
        assert isinstance(exec, CallState)
        return await run_in_worker_thread(exec, functools.partial(self._body, args, exec))

    def serialize_output(self, output: R, /) -> JsonValue:
        """Validate the output against the return annotation and dump it as JSON."""
        if self._output_adapter is None:
            return output  # type: ignore[return-value]
        if type(output) is self._passthrough:
            # Validating an exact str/int/bool against that very type and dumping it in
            # JSON mode gives the value back unchanged: skip both pydantic calls.
            return output  # type: ignore[return-value]
        try:
            validated = self._output_adapter.validate_python(output)
        except self._errors as error:
            raise self._output_error(error) from None
        except RecursionError:
            raise ToolOutputError(
                f'tool "{self._name}" returned output nested too deeply for its return type'
            ) from None
        try:
            dumped = self._output_adapter.dump_python(validated, mode="json")
        except (*self._errors, ValueError) as error:
            # pydantic's serializer stops at a fixed depth; a validated value that is plain
            # JSON already needs no dumping (materialize checks that, at any depth).
            if not _too_deep_to_serialize(error):
                raise self._output_error(error) from None
            dumped = validated
        try:
            return materialize(dumped)
        except MaterializationError as error:
            raise ToolOutputError(
                f'tool "{self._name}" returned output that is not losslessly '
                f"JSON-serializable ({error})"
            ) from None

    def _output_error(self, error: Exception) -> ToolOutputError:
        detail = (
            _summarize_validation_error(error)
            if isinstance(error, self._errors[0])
            else safe_str(error)
        )
        return ToolOutputError(f'tool "{self._name}" returned invalid output: {detail}')

    def render(self, args: A, value: JsonValue, /) -> Sequence[ContentBlock]:
        """The model-facing content: the ``render`` option, or the value as text."""
        if self._render is not None:
            return self._render(args, value)
        return render_value(value)

    def is_concurrency_safe(self, args: A, /) -> bool:
        """Only an exact ``True`` from the ``is_concurrency_safe`` option counts."""
        if self._is_concurrency_safe is None:
            return False
        return self._is_concurrency_safe(args) is True

    def finalize_content(
        self, exec: ToolExecution, result: ToolResult, /
    ) -> Sequence[ContentBlock] | None:
        """The ``finalize_content`` option, or ``None`` (keep the content)."""
        if self._finalize is None:
            return None
        return self._finalize(exec, result)

    def __repr__(self) -> str:
        return f"<ToolDefinition {self._name!r}>"


@final
class ToolDecorator(Generic[OptionArgsT]):
    """What `define_tool` returns: call it with the tool body.

    ``OptionArgsT`` is the arguments type that the ``is_concurrency_safe`` and ``render``
    options take: ``object`` (the default) when they take any arguments or are not given,
    so the body alone decides the arguments type. Otherwise the body must take exactly
    that type.

    ``__call__`` is overloaded so that mypy and pyright infer ``ToolDefinition[A, R]`` for
    both async bodies (``Callable[[A, ToolRunContext], Awaitable[R]]``, tried first; a
    ``def`` annotated ``-> Awaitable[R]`` counts as one and is awaited on the event loop)
    and sync bodies (``Callable[[A, ToolRunContext], R]``, run in a worker thread). A
    ``functools.partial`` or a callable object is a body like a function.
    """

    __slots__ = (
        "_description",
        "_finalize",
        "_idempotent",
        "_is_concurrency_safe",
        "_name",
        "_render",
        "_scopes",
        "_timeout",
    )

    def __init__(
        self,
        *,
        name: str,
        description: str,
        timeout: float | None,
        is_concurrency_safe: Callable[[OptionArgsT], bool] | None,
        finalize_content: Finalize | None,
        render: Callable[[OptionArgsT, JsonValue], Sequence[ContentBlock]] | None,
        idempotent: bool = False,
        scopes: frozenset[str] = frozenset(),
    ) -> None:
        self._name = name
        self._description = description
        self._timeout = timeout
        self._idempotent = idempotent
        self._scopes = scopes
        self._is_concurrency_safe = is_concurrency_safe
        self._finalize = finalize_content
        self._render = render

    # contract §6: options that take any arguments leave the body to decide them ...
    @overload
    def __call__(
        self: ToolDecorator[object], body: Callable[[B, ToolRunContext], Awaitable[R]], /
    ) -> ToolDefinition[B, R]: ...

    @overload
    def __call__(
        self: ToolDecorator[object], body: Callable[[B, ToolRunContext], R], /
    ) -> ToolDefinition[B, R]: ...

    # ... and options written for an arguments type make the body take that type.
    @overload
    def __call__(
        self: ToolDecorator[A], body: Callable[[A, ToolRunContext], Awaitable[R]], /
    ) -> ToolDefinition[A, R]: ...

    @overload
    def __call__(
        self: ToolDecorator[A], body: Callable[[A, ToolRunContext], R], /
    ) -> ToolDefinition[A, R]: ...

    def __call__(self, body: Callable[[Any, ToolRunContext], Any], /) -> ToolDefinition[Any, Any]:
        """Build the definition from ``body``'s annotations.

        Raises:
            TypeError: ``body`` does not take ``(args, exec)``, its first parameter is not
                annotated, or pydantic cannot build a schema for the annotations.
        """
        name = self._name
        if not callable(body):
            raise TypeError(f'tool "{name}": the body must be callable, got {type(body).__name__}')
        try:
            signature = inspect.signature(body)
        except (TypeError, ValueError) as error:
            raise TypeError(f'tool "{name}": cannot read the body\'s signature ({error})') from None
        positional = [
            p
            for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        required = [p for p in positional if p.default is p.empty]
        if len(positional) < 2 or len(required) > 2:
            raise TypeError(
                f'tool "{name}": the body must take two positional parameters '
                "(args, exec: ToolRunContext)"
            )
        # Like pydantic models, resolve string annotations (``from __future__ import
        # annotations``) in the namespace where the decorator is applied too, so a tool
        # defined inside a function can name types local to it.
        caller = sys._getframe(1)  # pyright: ignore[reportPrivateUsage]
        localns = dict(caller.f_locals)
        del caller
        try:
            hints = typing.get_type_hints(
                _annotated_callable(body), localns=localns, include_extras=True
            )
        except Exception as error:
            raise TypeError(
                f'tool "{name}": cannot resolve the body\'s annotations ({safe_str(error)})'
            ) from None
        args_name = positional[0].name
        if args_name not in hints:
            raise TypeError(
                f'tool "{name}": annotate the first parameter `{args_name}` with the '
                "arguments type (a TypedDict, dataclass or pydantic model)"
            )
        from pydantic import TypeAdapter

        args_type = hints[args_name]
        try:
            args_adapter: Any = TypeAdapter(args_type)
            schema = materialize(args_adapter.json_schema())
        except Exception as error:
            raise TypeError(
                f'tool "{name}": cannot build a schema for the arguments type '
                f"{safe_str(args_type)}: {safe_str(error)}"
            ) from None
        assert isinstance(schema, Mapping)
        output_type: Any = hints.get("return")
        is_async = inspect.iscoroutinefunction(_annotated_callable(body))
        awaited = None if is_async else _awaited_type(output_type)
        if awaited is not None:
            # A ``def`` annotated ``-> Awaitable[R]`` is what both checkers take it for: an
            # async body. It is called on the event loop and what it returns is awaited.
            is_async, output_type = True, awaited
        output_adapter: Any = None
        if output_type is not None and output_type is not Any:
            try:
                output_adapter = TypeAdapter(output_type)
            except Exception as error:
                raise TypeError(
                    f'tool "{name}": cannot build a schema for the return type '
                    f"{safe_str(output_type)}: {safe_str(error)}"
                ) from None
        return DefinedTool(
            name=name,
            description=self._description,
            timeout=self._timeout,
            body=body,
            is_async=is_async,
            args_adapter=args_adapter,
            output_adapter=output_adapter,
            output_type=output_type,
            parameters=schema,
            is_concurrency_safe=self._is_concurrency_safe,
            finalize_content=self._finalize,
            render=self._render,
            idempotent=self._idempotent,
            scopes=self._scopes,
        )


@overload
def define_tool(
    *,
    name: str,
    description: str,
    timeout: float | None = None,
    is_concurrency_safe: Callable[[object], bool] | None = None,
    finalize_content: Finalize | None = None,
    render: Callable[[object, JsonValue], Sequence[ContentBlock]] | None = None,
    idempotent: bool = False,
    scopes: Iterable[str] = (),
) -> ToolDecorator: ...


@overload
def define_tool(
    *,
    name: str,
    description: str,
    timeout: float | None = None,
    is_concurrency_safe: Callable[[A], bool] | None = None,
    finalize_content: Finalize | None = None,
    render: Callable[[A, JsonValue], Sequence[ContentBlock]] | None = None,
    idempotent: bool = False,
    scopes: Iterable[str] = (),
) -> ToolDecorator[A]: ...


def define_tool(
    body: object = None,
    /,
    *,
    name: str = "",
    description: str | None = None,
    timeout: float | None = None,
    is_concurrency_safe: Callable[[Any], bool] | None = None,
    finalize_content: Finalize | None = None,
    render: Callable[[Any, JsonValue], Sequence[ContentBlock]] | None = None,
    idempotent: bool = False,
    scopes: Iterable[str] = (),
) -> ToolDecorator[Any]:
    """Define a tool from an annotated ``(args, exec)`` function, sync or async.

    ::

        @define_tool(name="read_file", description="Read a UTF-8 file.", timeout=5.0)
        async def read_file(args: ReadFileArgs, exec: ToolRunContext) -> str: ...

    Args:
        body: Not accepted: only there so that a bare ``@define_tool`` (without its
            options) fails with a message saying so.
        name: The unique tool name the model calls.
        description: What the tool does, for the model.
        timeout: Seconds the timeout policy allows a call (positive and finite). Never part
            of `ToolRegistry.schemas`.
        is_concurrency_safe: ``(args) -> bool``; only an exact ``True`` lets a call overlap
            others in a batch. Raising means exclusive. Typed against the body's arguments
            type: written for another type, it fails to type-check (so does ``render``).
        finalize_content: ``(exec, result) -> content | None``: last word on the content of
            every result of this tool, cancellations included.
        render: ``(args, value) -> content`` for successful calls; default: the value as
            text (a string as is, anything else as JSON).
        idempotent: Whether running a call twice does no more than running it once (a
            read, or a write keyed by the call). The registry does not use it; durable
            execution does (`toolseam.durable`): after a crash, a call whose outcome was
            never recorded runs again only if its tool is idempotent, and otherwise ends
            ``OUTCOME_UNKNOWN``. Default ``False``: never run twice.
        scopes: The scopes a caller's `Principal` must all hold to see this tool
            (``ToolRegistry.schemas(principal=...)``, MCP's ``tools/list``) and to call
            it: a call whose principal lacks one is denied before dispatch (the body never
            runs). A call without a principal (an in-process caller) is not checked
            (contract §14). Default: none.

    Returns:
        A decorator that builds the `ToolDefinition`.

    Raises:
        TypeError: ``name`` is not a non-empty string, ``timeout`` is not a number,
            ``idempotent`` is not a bool, ``scopes`` is a single str or holds a
            non-string, or ``define_tool`` was used bare (``@define_tool`` without its
            options).
        ValueError: ``timeout`` is not positive and finite, or a scope is empty or holds
            whitespace.
    """
    if body is not None:
        # The typed overloads take no positional argument; this is for untyped code.
        function = getattr(body, "__name__", None)
        where = f" above {function}()" if type(function) is str else ""
        raise TypeError(
            f"bare @define_tool{where}: it needs its options, as in "
            '@define_tool(name="...", description="...")'
        )
    # Checked at runtime too: untyped callers reach here, and a bad name must fail now.
    given = cast("object", name)
    if not isinstance(given, str) or not given:
        raise TypeError(f"define_tool(): `name` must be a non-empty string, got {given!r}")
    given = cast("object", description)
    if not isinstance(given, str):
        raise TypeError(f'tool "{name}": `description` must be a string, got {given!r}')
    for option, value in (
        ("is_concurrency_safe", is_concurrency_safe),
        ("finalize_content", finalize_content),
        ("render", render),
    ):
        if value is not None and not callable(value):
            raise TypeError(f'tool "{name}": `{option}` must be callable')
    if type(cast("object", idempotent)) is not bool:
        raise TypeError(f'tool "{name}": `idempotent` must be a bool, got {idempotent!r}')
    return ToolDecorator(
        name=name,
        description=given,
        timeout=check_timeout(name, timeout),
        is_concurrency_safe=is_concurrency_safe,
        finalize_content=finalize_content,
        render=render,
        idempotent=idempotent,
        scopes=check_scopes(scopes, f'tool "{name}"'),
    )
