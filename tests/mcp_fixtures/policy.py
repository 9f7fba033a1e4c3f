"""The gateway policy the MCP tests load with ``--policy``: one guard, one result recorder.

Imported by path in the gateway process, so it imports nothing from its package (the
fixture registry would record itself into the upstream's file). Every result the
gateway's registry publishes is appended to the file named by
``TOOLSEAM_MCP_GATEWAY_RECORD``, one JSON object per line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from toolseam import ToolExecution, ToolRegistry, ToolResult

GATEWAY_RECORD_ENV = "TOOLSEAM_MCP_GATEWAY_RECORD"


def _published(exec: ToolExecution, result: ToolResult) -> None:
    arguments = exec.arguments
    tag = arguments.get("tag") if isinstance(arguments, Mapping) else None
    info = result.error.info if result.is_error is True else None
    event = {"event": "result", "name": exec.name, "tag": tag, "code": info.code if info else None}
    path = os.environ.get(GATEWAY_RECORD_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps(event) + "\n")


def no_crashing(exec: ToolExecution) -> str | None:
    """Deny every upstream's ``crash`` tool, in one place."""
    return "crashing an upstream is not allowed" if exec.name.endswith("_crash") else None


def policy(registry: ToolRegistry) -> None:
    registry.add_guard(no_crashing)
    registry.on_result(_published)
