"""What every framework adapter hands its framework: the one text and the code key.

Each framework has its own message types; what they carry of a toolseam result is the same
(contract §10): the model-facing text, and the failure's code under one metadata key.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from .._json import JsonValue, dumps
from .._results import ToolFailure, ToolResult

__all__ = ["CODE_METADATA_KEY", "plain", "result_text"]

CODE_METADATA_KEY: Final = "toolseam/code"
"""The metadata key under which a framework's tool message carries a failure's code."""


def result_text(result: ToolResult) -> str:
    """What the model reads: the text of the content's text blocks, any other block as JSON.

    A failure without content reads ``Error: <message>``, as `ToolFailure.from_message`
    would have written it.
    """
    parts = [
        text
        if block.get("type") == "text" and isinstance(text := block.get("text"), str)
        else dumps(block)
        for block in result.content
    ]
    if not parts and isinstance(result, ToolFailure):
        return f"Error: {result.error.message}"
    return "\n".join(parts)


def plain(value: Mapping[str, JsonValue]) -> dict[str, Any]:
    """A plain, mutable copy of a frozen JSON object, for a framework that may edit it.

    ``copy.deepcopy`` thaws a snapshot without recursing, however deep it is.
    """
    return copy.deepcopy(dict(value))
