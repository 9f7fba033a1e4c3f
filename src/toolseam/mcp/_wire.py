"""What a toolseam result looks like on the MCP wire: the ``_meta`` keys and JSON helpers.

Both sides of the bridge import these, so a toolseam client reading a toolseam server's
results agrees with it on every key.
"""

from __future__ import annotations

import json
from typing import Any, Final

from .._json import JsonValue

__all__ = [
    "CODE_META_KEY",
    "CONTEXTS_META_KEY",
    "MESSAGE_META_KEY",
    "VALUE_META_KEY",
    "plain_json",
]

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
