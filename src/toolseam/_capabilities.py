"""What a tool body reaches beyond its signal: progress, logs, elicitation, sampling, roots.

The data that crosses the seam between a body and the caller's `ToolHost` (contract §5,
"Capabilities"): the events a body reports (`ProgressEvent`, `LogEvent`), the requests it
makes (`ElicitationRequest`, `SamplingRequest`, `RootsRequest`) and the answers it gets back
(`Elicited`, `Sampled`, a tuple of `Root`). Every field is frozen JSON or a plain immutable
value, so a host may keep them. This module builds and checks them; `_delivery` delivers them.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Literal, TypeAlias, TypeVar, cast, final

from ._errors import ToolError, safe_str, type_name
from ._json import FrozenDict, JsonValue, MaterializationError, materialize
from ._results import ContentBlock, _freeze_content

__all__ = [
    "CAPABILITY_FAILED",
    "CAPABILITY_UNAVAILABLE",
    "LOG_LEVELS",
    "ElicitationRequest",
    "Elicited",
    "LogEvent",
    "LogLevel",
    "ProgressEvent",
    "Root",
    "RootsRequest",
    "Sampled",
    "SamplingRequest",
    "ToolEvent",
    "check_key",
    "elicitation_request",
    "log_event",
    "progress_event",
    "roots_answer",
    "roots_request",
    "sampling_request",
    "unavailable",
]

T = TypeVar("T")

CAPABILITY_UNAVAILABLE: Final = "CAPABILITY_UNAVAILABLE"
"""The caller of this call offers no such capability (no `ToolHost`, or no such member)."""

CAPABILITY_FAILED: Final = "CAPABILITY_FAILED"
"""The caller's capability failed, or answered something that does not fit the request."""

LogLevel: TypeAlias = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]
"""The RFC 5424 severities, as MCP's ``notifications/message`` names them."""

LOG_LEVELS: Final[tuple[LogLevel, ...]] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
"""Every `LogLevel`, from the least severe to the most."""


@final
@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """A body's report of how far it has come (``exec.progress``)."""

    progress: float
    """Work done so far, in whatever unit the tool chose."""
    total: float | None = None
    """The whole of the work in that unit, when known."""
    message: str | None = None
    """What it is doing now, for a human."""


@final
@dataclass(frozen=True, slots=True)
class LogEvent:
    """A log message a body sends to its caller (``exec.log``)."""

    level: LogLevel
    """Its severity."""
    data: JsonValue
    """What to log: any JSON value, frozen."""
    logger: str | None = None
    """The name of the logger it comes from, if the body gave one."""


ToolEvent: TypeAlias = ProgressEvent | LogEvent
"""What result observers' cousins, event listeners, receive while a body runs."""


@final
@dataclass(frozen=True, slots=True)
class ElicitationRequest:
    """A body's question to the user, as the caller's `ToolHost.elicit` receives it."""

    message: str
    """The question, for a human."""
    requested_schema: FrozenDict
    """The JSON Schema of the answer (an object schema), frozen."""
    key: str | None = None
    """The body's name for the question (``exec.elicit(..., key=...)``), if it gave one.

    Unique within the call by the body's choice; MCP 2026-07-28 uses it as the question's
    key in an ``InputRequiredResult``, so a client can answer it by name.
    """


@final
@dataclass(frozen=True, slots=True)
class Elicited(Generic[T]):
    """The user's answer to ``exec.elicit``.

    A host builds ``Elicited(action, content)`` with the answer's JSON content; the body
    receives it with ``content`` validated against the schema it asked with (a `TypedDict`
    or a dataclass or pydantic model instance, or the frozen JSON object for a JSON Schema
    dict). ``str()`` of it is readable text: ``accepted {"name": "Ada"}``, ``declined`` or
    ``cancelled``.
    """

    action: Literal["accept", "decline", "cancel"]
    """``"accept"`` (``content`` holds the answer), ``"decline"`` or ``"cancel"``."""
    content: T | None = None
    """The answer; ``None`` unless the user accepted."""
    _json: JsonValue = field(default=None, repr=False, compare=False)

    @property
    def accepted(self) -> bool:
        """Whether the user accepted (and so ``content`` holds the answer)."""
        return self.action == "accept"

    def __str__(self) -> str:
        if self.action == "accept":
            shown = self._json if self._json is not None else self.content
            return f"accepted {_text(shown)}"
        return "declined" if self.action == "decline" else "cancelled"


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class SamplingRequest:
    """A body's request for a completion from the caller's model (``exec.sample``).

    The fields follow MCP's ``sampling/createMessage``; ``messages`` are frozen mappings
    with a ``role`` (``"user"`` or ``"assistant"``) and a ``content`` block (or a list of
    blocks) such as ``{"type": "text", "text": "..."}``.
    """

    messages: tuple[FrozenDict, ...]
    """The conversation so far."""
    max_tokens: int
    """The most tokens the completion may have."""
    system_prompt: str | None = None
    """A system prompt the host may use."""
    temperature: float | None = None
    """Sampling temperature, if the body has a preference."""
    stop_sequences: tuple[str, ...] = ()
    """Where to stop."""
    model_preferences: JsonValue = None
    """MCP's ``modelPreferences`` (hints and priorities), frozen."""
    metadata: JsonValue = None
    """Provider-specific metadata, frozen."""
    key: str | None = None
    """The body's name for the request (``exec.sample(..., key=...)``), if it gave one."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class RootsRequest:
    """A body's request for the caller's roots (``exec.roots()``), as `ToolHost.roots` gets it."""

    key: str | None = None
    """The body's name for the request (``exec.roots(key=...)``), if it gave one."""


@final
@dataclass(frozen=True, slots=True)
class Root:
    """One root the caller lets the tool work in: a directory or file, as MCP's ``roots/list``.

    A host builds them; ``exec.roots()`` returns a tuple of them, in the host's order.
    """

    uri: str
    """Where it is: a ``file://`` URI, as MCP requires for now."""
    name: str | None = None
    """A name for humans, if the caller gave one."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Sampled:
    """The caller's model's completion, as ``exec.sample`` returns it.

    A host builds it from its model's answer; ``content`` is frozen on construction (MCP's
    older revisions answer with one block: pass ``[block]``). ``str()`` of it is its text.
    """

    content: Sequence[ContentBlock]
    """The content blocks of the completion (``{"type": "text", "text": ...}`` and others)."""
    model: str = ""
    """The model that answered, as the host names it."""
    role: Literal["assistant", "user"] = "assistant"
    """Who speaks in ``content``: the model, as a rule."""
    stop_reason: str | None = None
    """Why the completion stopped (``"endTurn"``, ``"maxTokens"``, ...), if the host said."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "content", _freeze_content(self.content))

    @property
    def text(self) -> str:
        """The text of every text block, joined."""
        return "".join(
            cast("str", block["text"])
            for block in self.content
            if block.get("type") == "text" and type(block.get("text")) is str
        )

    def __str__(self) -> str:
        return self.text


def _text(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return safe_str(value)


def unavailable(capability: str, member: str, exec_name: str) -> ToolError:
    """The error a body gets when its caller offers no such capability."""
    return ToolError(
        f'tool "{exec_name}": {capability} is not available: the caller of this call '
        f"offers none (ToolHost.{member} is not set)",
        code=CAPABILITY_UNAVAILABLE,
    )


def _number(name: str, value: object) -> float:
    if type(value) is float:
        if math.isfinite(value):
            return value
    elif type(value) is int:
        return value
    raise ValueError(f"progress(): `{name}` must be a finite number, got {safe_str(value)}")


def progress_event(progress: object, total: object, message: object) -> ProgressEvent:
    """A checked `ProgressEvent`; `ValueError`/`TypeError` for an untyped caller's garbage."""
    checked = _number("progress", progress)
    if total is not None:
        total = _number("total", total)
    if message is not None and type(message) is not str:
        raise TypeError(
            f"progress(): `message` must be a str or None, got {type_name(type(message))}"
        )
    return ProgressEvent(checked, total, message)


def log_event(level: object, data: object, logger: object) -> LogEvent:
    """A checked `LogEvent` whose data is frozen JSON."""
    if type(level) is not str or level not in LOG_LEVELS:
        raise ValueError(
            f"log(): `level` must be one of {', '.join(LOG_LEVELS)}, got {safe_str(level)!r}"
        )
    if logger is not None and type(logger) is not str:
        raise TypeError(f"log(): `logger` must be a str or None, got {type_name(type(logger))}")
    try:
        frozen = materialize(data)
    except MaterializationError as error:
        raise ValueError(f"log(): `data` must be losslessly JSON-serializable ({error})") from None
    return LogEvent(level, frozen, logger)


# -- elicitation -------------------------------------------------------------------------

Validator: TypeAlias = Callable[[JsonValue], Any]


@functools.lru_cache(maxsize=256)
def _adapter(schema: type) -> Any:
    from pydantic import TypeAdapter  # imported only where used (contract §1)

    return TypeAdapter(schema)


def check_key(method: str, key: object) -> str | None:
    """A body's ``key=`` for a request: ``None`` or a non-empty str."""
    if key is None:
        return None
    if type(key) is str and key:
        return key
    raise TypeError(f"{method}(): `key` must be a non-empty str or None, got {safe_str(key)!r}")


def elicitation_request(
    message: object, schema: object, key: object = None
) -> tuple[ElicitationRequest, Validator]:
    """The request for ``exec.elicit(message, schema)``, and how to check the answer.

    ``schema`` is a type pydantic can validate (a `TypedDict`, a dataclass, a pydantic
    model) or a JSON Schema mapping; the answer's content is validated against the type, or
    checked to be a JSON object for a mapping.
    """
    if type(message) is not str:
        raise TypeError(f"elicit(): `message` must be a str, got {type_name(type(message))}")
    if isinstance(schema, type):
        try:
            adapter = _adapter(schema)
            json_schema = adapter.json_schema()
        except Exception as error:
            raise TypeError(
                f"elicit(): cannot build a JSON Schema for {type_name(schema)} "
                f"({safe_str(error)}); pass a TypedDict, a dataclass, a pydantic model or a "
                "JSON Schema dict"
            ) from None
        validate: Validator = adapter.validate_python
    elif isinstance(schema, Mapping):
        json_schema = cast("Mapping[str, object]", schema)
        validate = functools.partial(_check_flat_object_answer, json_schema)
    else:
        raise TypeError(
            "elicit(): `schema` must be a type (TypedDict, dataclass, pydantic model) or a "
            f"JSON Schema dict, got {type_name(type(schema))}"
        )
    try:
        frozen = materialize(json_schema)
    except MaterializationError as error:
        raise ValueError(f"elicit(): the schema is not lossless JSON ({error})") from None
    if type(frozen) is not FrozenDict:
        raise TypeError("elicit(): the schema must be a JSON object")
    return ElicitationRequest(message, frozen, check_key("elicit", key)), validate


_JSON_TYPES: Mapping[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
}


def _check_flat_object_answer(schema: Mapping[str, object], content: JsonValue) -> JsonValue:
    """Check an answer against a JSON Schema of the shape MCP elicitation allows.

    MCP asks for flat objects of primitive properties (``string``, ``number``,
    ``integer``, ``boolean``, optionally an ``enum``); those are checked, with the
    object's ``required`` names. Anything the schema says beyond that is the caller's
    business, and other properties pass as they are.
    """
    if type(content) is not FrozenDict:
        raise ValueError(f"expected a JSON object, got {type_name(type(content))}")
    required: object = schema.get("required", ())
    if isinstance(required, Sequence) and not isinstance(required, str):
        missing = [name for name in cast("Sequence[object]", required) if name not in content]
        if missing:
            raise ValueError(f"missing required {', '.join(map(safe_str, missing))}")
    properties: object = schema.get("properties")
    if not isinstance(properties, Mapping):
        return content
    for name, spec in cast("Mapping[str, object]", properties).items():
        if name not in content or not isinstance(spec, Mapping):
            continue
        rules = cast("Mapping[str, object]", spec)
        value = content[name]
        declared = safe_str(rules.get("type"))
        kinds = _JSON_TYPES.get(declared)
        # bool is an int in Python and not a number in JSON Schema.
        if kinds is not None and (
            type(value) not in kinds or (type(value) is bool and bool not in kinds)
        ):
            raise ValueError(f"{name}: expected {declared}, got {_text(value)}")
        enum: object = rules.get("enum")
        if isinstance(enum, Sequence) and not isinstance(enum, str):
            choices = cast("Sequence[object]", enum)
            if value not in choices:
                raise ValueError(f"{name}: {_text(value)} is not one of {_text(choices)}")
    return content


def elicited(answer: object, validate: Validator, exec_name: str) -> Elicited[Any]:
    """The body's `Elicited`: the host's answer, checked and validated."""
    if type(answer) is not Elicited:
        raise _failed(
            exec_name, f"the host's elicit() returned {type_name(type(answer))}, not Elicited"
        )
    raw = cast("Elicited[object]", answer)
    if raw.action not in ("accept", "decline", "cancel"):
        raise _failed(exec_name, f"the elicitation answer's action is {safe_str(raw.action)!r}")
    if raw.action != "accept":
        return Elicited(raw.action)
    try:
        content = materialize(raw.content)
        value = validate(content)
    except MaterializationError as error:
        raise _failed(exec_name, f"the elicitation answer is not lossless JSON ({error})") from None
    except Exception as error:
        raise _failed(
            exec_name, f"the elicitation answer does not match its schema: {safe_str(error)}"
        ) from None
    return Elicited("accept", value, content)


# -- sampling ----------------------------------------------------------------------------


def sampling_request(
    messages: object,
    max_tokens: object,
    system_prompt: object,
    temperature: object,
    stop_sequences: object,
    model_preferences: object,
    metadata: object,
    key: object = None,
) -> SamplingRequest:
    """The request for ``exec.sample(...)``: a string is one user message."""
    given: object = messages
    if type(given) is str:
        given = [{"role": "user", "content": {"type": "text", "text": given}}]
    if isinstance(given, (Mapping, str)) or not isinstance(given, Sequence):
        raise TypeError(
            "sample(): `messages` must be a str or a sequence of message mappings, got "
            f"{type_name(type(messages))}"
        )
    frozen: list[FrozenDict] = []
    for index, message in enumerate(cast("Sequence[object]", given)):
        try:
            item = materialize(message)
        except MaterializationError as error:
            raise ValueError(
                f"sample(): messages[{index}] is not lossless JSON ({error})"
            ) from None
        if type(item) is not FrozenDict or item.get("role") not in _ROLES or "content" not in item:
            raise ValueError(
                f"sample(): messages[{index}] must be a mapping with a `role` (user or "
                "assistant) and a `content` block"
            )
        frozen.append(item)
    if not frozen:
        raise ValueError("sample(): `messages` is empty")
    if type(max_tokens) is not int or max_tokens < 1:
        raise ValueError(
            f"sample(): `max_tokens` must be a positive int, got {safe_str(max_tokens)}"
        )
    if system_prompt is not None and type(system_prompt) is not str:
        raise TypeError("sample(): `system_prompt` must be a str or None")
    if temperature is not None:
        temperature = _number("temperature", temperature)
    stops: object = stop_sequences
    if isinstance(stops, str) or not isinstance(stops, Sequence):
        raise TypeError("sample(): `stop_sequences` must be a sequence of str")
    stops = tuple(cast("Sequence[object]", stops))
    if not all(type(stop) is str for stop in stops):
        raise TypeError("sample(): `stop_sequences` must be a sequence of str")
    try:
        preferences = materialize(model_preferences)
        extra = materialize(metadata)
    except MaterializationError as error:
        raise ValueError(f"sample(): not lossless JSON ({error})") from None
    return SamplingRequest(
        messages=tuple(frozen),
        max_tokens=max_tokens,
        system_prompt=system_prompt,
        temperature=temperature,
        stop_sequences=cast("tuple[str, ...]", stops),
        model_preferences=preferences,
        metadata=extra,
        key=check_key("sample", key),
    )


def sampled(answer: object, exec_name: str) -> Sampled:
    """The host's completion, checked."""
    if type(answer) is not Sampled:
        raise _failed(
            exec_name, f"the host's sample() returned {type_name(type(answer))}, not Sampled"
        )
    return answer


_ROLES = ("user", "assistant")


# -- roots -------------------------------------------------------------------------------


def roots_request(key: object) -> RootsRequest:
    """The request for ``exec.roots(key=...)``."""
    return RootsRequest(key=check_key("roots", key))


def roots_answer(answer: object, exec_name: str) -> tuple[Root, ...]:
    """The host's roots, checked: a sequence of `Root` (not a str), as a tuple."""
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Sequence):
        raise _failed(
            exec_name,
            f"the host's roots() returned {type_name(type(answer))}, not a sequence of Root",
        )
    roots = tuple(cast("Sequence[object]", answer))
    for index, root in enumerate(roots):
        if type(root) is not Root:
            raise _failed(
                exec_name, f"the host's roots()[{index}] is {type_name(type(root))}, not Root"
            )
        checked: Root = root
        if type(checked.uri) is not str or (
            checked.name is not None and type(checked.name) is not str
        ):
            raise _failed(exec_name, f"the host's roots()[{index}] has a non-str uri or name")
    return cast("tuple[Root, ...]", roots)


def _failed(exec_name: str, detail: str) -> ToolError:
    return ToolError(f'tool "{exec_name}": {detail}', code=CAPABILITY_FAILED)


def host_failed(capability: str, exec_name: str, error: BaseException) -> ToolError:
    """A host's exception, as the body sees it: coded, with the host's message.

    A host that turns out not to offer the capability for this call raises a `ToolError`
    coded ``CAPABILITY_UNAVAILABLE`` saying why (an MCP client that did not declare
    elicitation): the body gets ``CAPABILITY_UNAVAILABLE`` with that reason. Anything else
    is ``CAPABILITY_FAILED``.
    """
    if issubclass(type(error), ToolError):
        refusal = cast("ToolError", error)
        try:  # a hostile subclass may make its attributes raise
            code: object = refusal.code
            why: object = refusal.message
        except Exception:
            code = why = None
        if type(code) is str and code == CAPABILITY_UNAVAILABLE:
            return ToolError(
                f'tool "{exec_name}": {capability} is not available: {safe_str(why)}',
                code=CAPABILITY_UNAVAILABLE,
            )
    return _failed(exec_name, f"{capability} failed: {safe_str(error)}")
