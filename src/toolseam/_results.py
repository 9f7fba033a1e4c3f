"""Tool results: `ToolSuccess`, `ToolFailure`, and the error detail they carry.

Results are frozen and deeply immutable: every JSON-bearing field is materialized into a
frozen snapshot when the result is built, so what one observer sees no stage can change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, cast, final

from ._errors import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    TOOL_ERROR_WITHOUT_CODE,
    ToolError,
    exact_str,
    safe_str,
    type_name,
)
from ._json import (
    FrozenDict,
    JsonValue,
    MaterializationError,
    _fill_dict,
    _new_frozen_dict,
    dumps,
    materialize,
)

__all__ = [
    "ContentBlock",
    "ErrorInfo",
    "ToolErrorDetail",
    "ToolFailure",
    "ToolResult",
    "ToolSuccess",
    "aborted_result",
    "describe_exception",
    "failure_from_exception",
    "materialized_success",
    "render_value",
    "rendered_success",
    "text_block",
    "text_content",
]

ContentBlock: TypeAlias = Mapping[str, JsonValue]
"""One block of model-facing content, a JSON object such as ``{"type": "text", "text": "…"}``."""


@final
@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """Machine-readable identity of an error: the exception type name and a stable code."""

    name: str
    """The error's type name, such as ``"AbortError"`` or ``"ToolArgsError"``."""
    code: str
    """The stable code, such as ``"ABORTED"`` or ``"INVALID_ARGS"``."""


@final
@dataclass(frozen=True, slots=True)
class ToolErrorDetail:
    """What went wrong: a message for the model and humans, and optional routing info."""

    message: str
    """Human- and model-readable message."""
    info: ErrorInfo | None = None
    """Set for routable errors (`ToolError` subclasses, cancellation); ``None`` otherwise."""


def _freeze(value: object, what: str) -> JsonValue:
    try:
        return materialize(value)
    except MaterializationError as error:
        raise ValueError(f"{what} must be losslessly JSON-serializable ({error})") from None


def _as_sequence(value: object, what: str) -> Sequence[object]:
    # Fast path: the registry itself always passes tuples; skips two ABC checks.
    if type(value) is tuple:
        return cast("tuple[object, ...]", value)
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{what} must be a sequence, got {type(value).__name__}")
    return cast("Sequence[object]", value)


def _frozen_blocks(content: object) -> bool:
    """Whether ``content`` is a tuple of snapshots, as the registry builds: already frozen."""
    if type(content) is not tuple:
        return False
    for block in cast("tuple[object, ...]", content):  # noqa: SIM110 - no generator frame
        if type(block) is not FrozenDict:
            return False
    return True


def _empty_tuple(value: object) -> bool:
    return type(value) is tuple and not value


def _freeze_content(content: object) -> tuple[ContentBlock, ...]:
    # Fast path: a tuple of snapshots (what the registry builds) is already frozen.
    if _frozen_blocks(content):
        return cast("tuple[ContentBlock, ...]", content)
    blocks: list[ContentBlock] = []
    for index, block in enumerate(_as_sequence(content, "result content")):
        frozen = _freeze(block, f"content[{index}]")
        if not isinstance(frozen, FrozenDict):
            raise TypeError(f"content[{index}] must be a JSON object, got {type(block).__name__}")
        blocks.append(frozen)
    return tuple(blocks)


def _freeze_contexts(contexts: object) -> tuple[JsonValue, ...]:
    if _empty_tuple(contexts):
        return ()  # the empty tuple is a singleton: callers see the same object
    return tuple(
        _freeze(context, f"additional_contexts[{index}]")
        for index, context in enumerate(_as_sequence(contexts, "additional_contexts"))
    )


_setattr = object.__setattr__


def _freeze_common(result: ToolSuccess | ToolFailure, kind: str) -> None:
    """Freeze ``content``, ``meta`` and ``additional_contexts`` of a result being built."""
    content = result.content
    frozen_content = _freeze_content(content)
    if frozen_content is not content:
        _setattr(result, "content", frozen_content)
    meta = result.meta
    if meta is not None:
        frozen_meta = _freeze(meta, f"{kind}.meta")
        if frozen_meta is not meta:
            _setattr(result, "meta", frozen_meta)
    contexts = result.additional_contexts
    frozen_contexts = _freeze_contexts(contexts)
    if frozen_contexts is not contexts:
        _setattr(result, "additional_contexts", frozen_contexts)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSuccess:
    """A call that produced a value.

    Built with any JSON-like values; they are frozen on construction.

    Raises:
        ValueError: A field is not losslessly JSON-serializable.
        TypeError: ``content`` is not a sequence of JSON objects.
    """

    value: JsonValue
    """The tool's output (JSON). Never part of `to_json`: durable history keeps content."""
    content: Sequence[ContentBlock] = ()
    """Model-facing content blocks."""
    meta: JsonValue | None = None
    """Free-form JSON metadata for the host application."""
    additional_contexts: Sequence[JsonValue] = ()
    """Extra context gathered during the call (deferred by the body, wrappers, post-execute)."""
    is_error: Literal[False] = field(default=False, init=False)
    """Always ``False``: narrows `ToolResult` to `ToolSuccess`."""

    def __post_init__(self) -> None:
        # Each field is stored again only when freezing changed it: the registry's own
        # results arrive frozen, and a setattr on a frozen dataclass is not free.
        value = self.value
        frozen = _freeze(value, "ToolSuccess.value")
        if frozen is not value:
            _setattr(self, "value", frozen)
        _freeze_common(self, "ToolSuccess")

    def to_json(self) -> dict[str, JsonValue]:
        """The durable, JSON-serializable form (without `value`)."""
        return {
            "is_error": False,
            "content": list(self.content),
            "meta": self.meta,
            "additional_contexts": list(self.additional_contexts),
        }


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFailure:
    """A call that ended in an error, a denial or a cancellation.

    Use `ToolFailure.from_message` to get the standard ``"Error: <message>"`` content.

    Raises:
        ValueError: A field is not losslessly JSON-serializable.
        TypeError: ``content`` is not a sequence of JSON objects.
    """

    error: ToolErrorDetail
    """What went wrong."""
    content: Sequence[ContentBlock] = ()
    """Model-facing content blocks."""
    meta: JsonValue | None = None
    """Free-form JSON metadata for the host application."""
    additional_contexts: Sequence[JsonValue] = ()
    """Extra context gathered during the call."""
    is_error: Literal[True] = field(default=True, init=False)
    """Always ``True``: narrows `ToolResult` to `ToolFailure`."""

    def __post_init__(self) -> None:
        if type(self.error) is not ToolErrorDetail:
            raise TypeError(
                f"ToolFailure.error must be a ToolErrorDetail, got {type(self.error).__name__}"
            )
        _freeze_common(self, "ToolFailure")

    @classmethod
    def from_message(
        cls,
        message: str,
        *,
        info: ErrorInfo | None = None,
        meta: JsonValue | None = None,
        additional_contexts: Sequence[JsonValue] = (),
    ) -> ToolFailure:
        """Build a failure whose content is the standard text block ``"Error: <message>"``."""
        return cls(
            error=ToolErrorDetail(message, info),
            content=text_content(f"Error: {message}"),
            meta=meta,
            additional_contexts=additional_contexts,
        )

    @property
    def code(self) -> str | None:
        """Shortcut for ``error.info.code`` (``None`` for an unrouted error)."""
        info = self.error.info
        return None if info is None else info.code

    def to_json(self) -> dict[str, JsonValue]:
        """The durable, JSON-serializable form."""
        info = self.error.info
        return {
            "is_error": True,
            "error": {
                "message": self.error.message,
                "info": None if info is None else {"name": info.name, "code": info.code},
            },
            "content": list(self.content),
            "meta": self.meta,
            "additional_contexts": list(self.additional_contexts),
        }


ToolResult: TypeAlias = ToolSuccess | ToolFailure
"""The one result every call ends in; narrow it on ``is_error``."""


def materialized_success(value: JsonValue, content: object) -> ToolSuccess:
    """The registry's `ToolSuccess` for a value it has just materialized.

    The same object ``ToolSuccess(value=value, content=content)`` builds, without the
    dataclass ``__init__`` and the checks ``value`` has passed already; ``content`` (a
    definition's ``render``) is still frozen and checked here.
    """
    result = object.__new__(ToolSuccess)
    _setattr(result, "value", value)
    _setattr(result, "content", _freeze_content(content))
    _setattr(result, "meta", None)
    _setattr(result, "additional_contexts", ())
    _setattr(result, "is_error", False)
    return result


def rendered_success(value: JsonValue) -> ToolSuccess:
    """`materialized_success` with the default content, `render_value`, built in one go."""
    block = _new_frozen_dict()
    _fill_dict(block, {"type": "text", "text": value if type(value) is str else dumps(value)})
    result = object.__new__(ToolSuccess)
    _setattr(result, "value", value)
    _setattr(result, "content", (block,))
    _setattr(result, "meta", None)
    _setattr(result, "additional_contexts", ())
    _setattr(result, "is_error", False)
    return result


def text_content(text: str) -> tuple[ContentBlock, ...]:
    """A content sequence of one text block."""
    return (text_block(text),)


def text_block(text: str) -> ContentBlock:
    """One frozen ``{"type": "text", "text": text}`` block."""
    if type(text) is str:
        # Both values are str, so the snapshot needs no checks: fill it directly.
        block = _new_frozen_dict()
        _fill_dict(block, {"type": "text", "text": text})
        return block
    frozen = materialize({"type": "text", "text": text})
    assert isinstance(frozen, FrozenDict)
    return frozen


def render_value(value: JsonValue) -> tuple[ContentBlock, ...]:
    """The default content for a value: the text itself, or its JSON (at any depth)."""
    if type(value) is str:
        return text_content(value)
    return text_content(dumps(value))


def describe_exception(error: BaseException) -> str:
    """The message of an exception as an exact ``str``, never raising and never empty.

    Only ``type(error)`` is trusted: ``isinstance`` would consult ``error.__class__``,
    which a hostile exception can make raise.
    """
    text = ""
    if issubclass(type(error), ToolError):
        try:
            # safe_str even for a ToolError: a hostile subclass may set a non-str message,
            # or make `message` a property that raises.
            text = safe_str(cast("ToolError", error).message)
        except Exception:
            text = ""
    if not text:
        text = safe_str(error)
    return text or type_name(type(error))


def failure_from_exception(
    error: BaseException, *, additional_contexts: Sequence[JsonValue] = ()
) -> ToolFailure:
    """Normalize an exception into a failure; never raises.

    A `ToolError` surfaces ``ErrorInfo(type name, code)``, with `TOOL_ERROR_WITHOUT_CODE`
    where its ``code`` is missing or cannot be read as a string (an untyped subclass's
    ``__init__`` may skip ``ToolError.__init__``); any other exception only its message.
    """
    info: ErrorInfo | None = None
    kind = type(error)
    if issubclass(kind, ToolError):
        try:
            # An untyped subclass may leave `code` unset or set it to anything.
            raw = cast("object", cast("ToolError", error).code)
            code = None if raw is None else (exact_str(raw) or safe_str(raw))
        except Exception:
            code = None
        info = ErrorInfo(type_name(kind), code or TOOL_ERROR_WITHOUT_CODE)
    message = describe_exception(error)
    try:
        return ToolFailure.from_message(message, info=info, additional_contexts=additional_contexts)
    except Exception:  # pragma: no cover - contexts come frozen from the registry
        return ToolFailure.from_message(message, info=info)


_ABORTED_MESSAGES: Mapping[str, str] = {
    TOOL_ABORTED: "tool call aborted",
    TOOL_ABORTED_BEFORE_DISPATCH: "tool call aborted before dispatch",
}
_ABORTED_CONTENT: Mapping[str, tuple[ContentBlock, ...]] = {
    code: text_content(f"Error: {message}") for code, message in _ABORTED_MESSAGES.items()
}
_ABORTED_INFO: Mapping[str, ErrorInfo] = {
    code: ErrorInfo("AbortError", code) for code in _ABORTED_MESSAGES
}


def aborted_result(
    *, body_invoked: bool, additional_contexts: Sequence[JsonValue] = ()
) -> ToolFailure:
    """The cancellation result: `ABORTED` if the body was invoked, else before dispatch."""
    code = TOOL_ABORTED if body_invoked else TOOL_ABORTED_BEFORE_DISPATCH
    return ToolFailure(
        error=ToolErrorDetail(_ABORTED_MESSAGES[code], _ABORTED_INFO[code]),
        content=_ABORTED_CONTENT[code],
        additional_contexts=additional_contexts,
    )
