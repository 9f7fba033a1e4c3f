"""What a toolseam result looks like on the MCP wire: `call_tool_result`, the ``_meta`` keys.

Both sides of the bridge import these, so a toolseam client reading a toolseam server's
results agrees with it on every key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from mcp import types
from pydantic import TypeAdapter, ValidationError

from .._json import JsonValue
from .._results import ContentBlock, ToolResult

__all__ = [
    "CALL_META_KEY",
    "CODE_META_KEY",
    "CONTEXTS_META_KEY",
    "MESSAGE_META_KEY",
    "VALUE_META_KEY",
    "call_tool_result",
    "plain_json",
]

CALL_META_KEY: Final = "toolseam/call"
"""``_meta`` key of a toolseam client's tag for one ``tools/call`` request.

A toolseam client sends one on each call; a toolseam server copies it onto every log
message, elicitation and sampling request it sends for that call, so the client can tell
which of its calls they belong to whatever the transport (see ``_relay``).
"""

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


def plain_json(value: JsonValue) -> Any:
    """A plain ``dict``/``list`` copy of a frozen JSON snapshot, for the SDK's models.

    The frozen snapshots are ``dict``/``list`` subclasses that reject mutation; pydantic
    may copy or coerce what it is given, so the SDK gets plain containers instead.
    """
    return json.loads(json.dumps(value))


_CONTENT_BLOCK: TypeAdapter[types.ContentBlock] = TypeAdapter(types.ContentBlock)


def _content(block: ContentBlock) -> types.ContentBlock:
    """One toolseam content block as an MCP content block.

    A block that is not one of MCP's content types (text, image, audio, resource link,
    embedded resource) travels as a text block holding its JSON, so nothing is dropped.
    """
    raw = plain_json(dict(block))
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

    Args:
        result: What ``registry.execute`` returned.

    Returns:
        The MCP result.
    """
    content = [_content(block) for block in result.content]
    meta: dict[str, Any] = {}
    if result.additional_contexts:
        meta[CONTEXTS_META_KEY] = plain_json(list(result.additional_contexts))
    if result.is_error is True:
        info = result.error.info
        if info is not None:
            meta[CODE_META_KEY] = info.code
        meta[MESSAGE_META_KEY] = result.error.message
        return types.CallToolResult(content=content, is_error=True, _meta=meta or None)
    value = result.value
    structured = None
    if isinstance(value, Mapping):
        structured = plain_json(value)
    else:
        meta[VALUE_META_KEY] = plain_json(value)
    return types.CallToolResult(content=content, structured_content=structured, _meta=meta or None)
