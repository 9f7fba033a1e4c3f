"""What a toolseam result looks like on the MCP wire: `call_tool_result`, the ``_meta`` keys.

Both sides of the bridge import these, so a toolseam client reading a toolseam server's
results agrees with it on every key.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Final, cast

from mcp import types
from pydantic import TypeAdapter, ValidationError

from .._json import JsonValue, dumps
from .._results import ContentBlock, ToolResult

__all__ = [
    "CALL_META_KEY",
    "CODE_META_KEY",
    "CONTEXTS_META_KEY",
    "MESSAGE_META_KEY",
    "VALUE_META_KEY",
    "WIRE_DEPTH",
    "call_tool_result",
    "plain_json",
]

CALL_META_KEY: Final = "toolseam/call"
"""``_meta`` key of a toolseam client's tag for one ``tools/call`` request.

A toolseam client sends one on each call; a toolseam server copies it onto every log
message, elicitation and sampling request it sends for that call, so the client can tell
which of its calls they belong to whatever the transport (see ``_relay``).
"""

logger = logging.getLogger("toolseam")

CODE_META_KEY: Final = "toolseam/code"
"""``CallToolResult._meta`` key of a failure's code (``"ABORTED"``, ``"INVALID_ARGS"``, …)."""

MESSAGE_META_KEY: Final = "toolseam/message"
"""``CallToolResult._meta`` key of a failure's message (``error.message``)."""

CONTEXTS_META_KEY: Final = "toolseam/additional_contexts"
"""``CallToolResult._meta`` key of the result's ``additional_contexts`` (when non-empty)."""

VALUE_META_KEY: Final = "toolseam/value"
"""``CallToolResult._meta`` key of a success value that is not a JSON object.

MCP's ``structuredContent`` holds objects only; any other value (a string, a number, an
array, ``null``) travels here, so a toolseam client reads back exactly what the tool
returned rather than the text of its content.
"""


WIRE_DEPTH: Final = 150
"""How deep a value may be nested to travel as JSON structure in an answer.

The SDK encodes an answer with pydantic's serializer, which gives up about 250 levels down,
and an SDK client parses it with jiter, which gives up at about 200; the answer's own
envelope takes a few. A deeper value travels as its content text only (see
`call_tool_result`).
"""


class _TooDeep(ValueError):
    """A value nested deeper than `WIRE_DEPTH`."""


def _text(text: str) -> str:
    """``text`` as UTF-8 can encode it: each lone surrogate becomes U+FFFD.

    A snapshot's strings may hold lone surrogates (contract §5.2 accepts any ``str``), and
    the wire is UTF-8: one such character made the answer unencodable, and a stdio server
    then stopped answering altogether.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= char <= "\udfff" else char for char in text)
    return text


def plain_json(value: JsonValue) -> Any:
    """A plain ``dict``/``list`` copy of a frozen JSON snapshot that the wire carries.

    The frozen snapshots are ``dict``/``list`` subclasses that reject mutation; pydantic
    may copy or coerce what it is given, so the SDK gets plain containers instead. Every
    string, keys included, is one UTF-8 can encode (`_text`). The copy is iterative.

    Raises:
        ValueError: ``value`` is nested deeper than `WIRE_DEPTH`.
    """
    if isinstance(value, str):
        return _text(value)
    if not isinstance(value, (Mapping, list, tuple)):
        return value  # None, bool, int, float
    root: Any = {} if isinstance(value, Mapping) else []
    stack: list[tuple[Any, Any, int]] = [(value, root, 1)]
    while stack:
        source, target, level = stack.pop()
        if level > WIRE_DEPTH:
            raise _TooDeep(f"nested deeper than {WIRE_DEPTH} levels")
        is_object = isinstance(source, Mapping)
        items = cast("Any", source.items() if is_object else enumerate(source))
        for key, item in items:
            kind = type(cast("object", item))
            child: Any
            if issubclass(kind, str):
                child = _text(item)
            elif issubclass(kind, Mapping):
                child = {}
                stack.append((item, child, level + 1))
            elif issubclass(kind, (list, tuple)):
                child = []
                stack.append((item, child, level + 1))
            else:
                child = item
            if is_object:
                target[_text(key)] = child
            else:
                target.append(child)
    return root


def _travelling(value: JsonValue, what: str) -> Any:
    """`plain_json` of ``value``, or ``None`` (logged) when it is too deep to travel."""
    try:
        return plain_json(value)
    except _TooDeep:
        logger.warning(
            "%s is nested deeper than the MCP wire carries (%d levels): not sent as JSON",
            what,
            WIRE_DEPTH,
        )
        return None


_CONTENT_BLOCK: TypeAdapter[types.ContentBlock] = TypeAdapter(types.ContentBlock)


def _content(block: ContentBlock) -> types.ContentBlock:
    """One toolseam content block as an MCP content block.

    A block that is not one of MCP's content types (text, image, audio, resource link,
    embedded resource) travels as a text block holding its JSON, so nothing is dropped; so
    does a block nested deeper than `WIRE_DEPTH`.
    """
    if len(block) == 2 and block.get("type") == "text":
        text = block.get("text")
        if type(text) is str:  # the common block, built without the union's validation
            return types.TextContent(type="text", text=_text(text))
    try:
        raw = plain_json(dict(block))
    except _TooDeep:
        return types.TextContent(type="text", text=_text(dumps(dict(block))))
    try:
        return _CONTENT_BLOCK.validate_python(raw)
    except ValidationError:
        return types.TextContent(type="text", text=json.dumps(raw, ensure_ascii=False))


def call_tool_result(result: ToolResult) -> types.CallToolResult:
    """Map a toolseam result to the MCP ``CallToolResult`` the server answers with.

    - ``content`` becomes MCP content blocks.
    - A failure sets ``isError`` and puts its code (when it has one) under
      ``_meta["toolseam/code"]`` and its message under ``_meta["toolseam/message"]``, so a
      client can tell ``ABORTED`` from ``TOOL_TIMEOUT`` from ``INVALID_ARGS``.
    - A success whose value is a JSON object also carries it as ``structuredContent`` (MCP
      2025-06-18 and later allow only objects there). Any other value (a string, a number,
      an array, ``null``) travels under ``_meta["toolseam/value"]``, so a toolseam client
      gets it back exactly; other clients see the content.
    - Non-empty ``additional_contexts`` go under ``_meta["toolseam/additional_contexts"]``.

    Whatever the result holds, the answer can be sent and parsed back: a value or the
    contexts nested deeper than `WIRE_DEPTH` are left out (the content still carries the
    value's text; a block that deep travels as its JSON text), and a lone surrogate in any
    text arrives as U+FFFD.

    Args:
        result: What ``registry.execute`` returned.

    Returns:
        The MCP result.
    """
    content = [_content(block) for block in result.content]
    meta: dict[str, Any] = {}
    if result.additional_contexts:
        contexts = _travelling(list(result.additional_contexts), "an additional context")
        if contexts is not None:
            meta[CONTEXTS_META_KEY] = contexts
    if result.is_error is True:
        info = result.error.info
        if info is not None:
            meta[CODE_META_KEY] = _text(info.code)
        meta[MESSAGE_META_KEY] = _text(result.error.message)
        return types.CallToolResult(content=content, is_error=True, _meta=meta or None)
    value = result.value
    structured = None
    if isinstance(value, Mapping):
        structured = _travelling(value, "the value")
    elif value is None:
        meta[VALUE_META_KEY] = None
    else:
        travelling = _travelling(value, "the value")
        if travelling is not None:
            meta[VALUE_META_KEY] = travelling
    return types.CallToolResult(content=content, structured_content=structured, _meta=meta or None)
