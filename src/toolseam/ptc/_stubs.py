"""What the model reads about ``run_code``: the exposed tools as typed Python stubs.

Each tool's JSON schema becomes the keyword-only signature of an ``async def`` and of its
``_sync`` twin. The rendering is best-effort typing for a reader (the registry still
validates every nested call's arguments against the schema itself): what the schema does not
say precisely enough becomes ``Any``.
"""

from __future__ import annotations

import keyword
from collections.abc import Mapping, Sequence
from typing import cast

from .._definitions import ToolSchema
from .._json import JsonValue

__all__ = ["SYNC_SUFFIX", "describe", "positional_names", "stub"]

SYNC_SUFFIX = "_sync"
"""The sandbox name of a tool's synchronous twin: ``search`` and ``search_sync``."""

_SCALARS: Mapping[str, str] = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
}
# How deep a schema is rendered before the rest becomes ``Any``: a stub is for reading.
_MAX_DEPTH = 4


def _type_of(schema: object, depth: int = 0) -> str:
    if depth > _MAX_DEPTH or not isinstance(schema, Mapping):
        return "Any"
    node = cast("Mapping[str, JsonValue]", schema)
    if "const" in node:
        return f"Literal[{node['const']!r}]"
    enum = node.get("enum")
    if isinstance(enum, list) and enum:
        return f"Literal[{', '.join(repr(item) for item in enum)}]"
    for key in ("anyOf", "oneOf"):
        options = node.get(key)
        if isinstance(options, list) and options:
            return " | ".join(dict.fromkeys(_type_of(option, depth + 1) for option in options))
    kind = node.get("type")
    if isinstance(kind, list):
        return " | ".join(_type_of({**node, "type": item}, depth + 1) for item in kind)
    if isinstance(kind, str):
        if kind in _SCALARS:
            return _SCALARS[kind]
        if kind == "array":
            return f"list[{_type_of(node.get('items'), depth + 1)}]"
        if kind == "object":
            return "dict[str, Any]"
    return "Any"


def _properties(schema: Mapping[str, JsonValue]) -> tuple[Mapping[str, JsonValue], set[str]]:
    properties = schema.get("properties")
    required = schema.get("required")
    props: Mapping[str, JsonValue] = properties if isinstance(properties, Mapping) else {}
    needed: set[str] = set()
    if isinstance(required, Sequence) and not isinstance(required, str):
        needed.update(name for name in required if isinstance(name, str))
    return props, needed


def positional_names(parameters: Mapping[str, JsonValue]) -> tuple[str, ...]:
    """The order positional arguments of a sandbox call map to: the schema's properties."""
    return tuple(_properties(parameters)[0])


def _signature(parameters: Mapping[str, JsonValue]) -> str:
    props, needed = _properties(parameters)
    # Required parameters first, so the rendered signature is valid Python.
    ordered = sorted(props.items(), key=lambda item: item[0] not in needed)
    rendered = [
        f"{name}: {_type_of(schema)}" + ("" if name in needed else " = ...")
        for name, schema in ordered
        if name.isidentifier() and not keyword.iskeyword(name)
    ]
    return "*, " + ", ".join(rendered) if rendered else ""


def _docstring(text: str, indent: str) -> str:
    cleaned = text.strip().replace('"""', "'''") or "(no description)"
    lines = cleaned.splitlines()
    body = "\n".join(indent + line if line.strip() else "" for line in lines)
    return f'{indent}"""\n{body}\n{indent}"""' if len(lines) > 1 else f'{indent}"""{cleaned}"""'


def stub(schema: ToolSchema) -> str:
    """The ``async def`` stub of one tool and its ``_sync`` twin, as the model reads them."""
    signature = _signature(schema.parameters)
    return (
        f"async def {schema.name}({signature}) -> Any:\n"
        f"{_docstring(schema.description, '    ')}\n\n"
        f"def {schema.name}{SYNC_SUFFIX}({signature}) -> Any:\n"
        f'    """`await {schema.name}(...)` without `await`: waits for the result."""\n'
    )


def describe(
    schemas: Sequence[ToolSchema],
    *,
    nested_calls: int | None,
    wall_clock: float | None,
    output_chars: int,
) -> str:
    """The ``run_code`` description: how to write the program, and the tools' stubs."""
    limits: list[str] = []
    if nested_calls is not None:
        limits.append(f"at most {nested_calls} tool calls")
    if wall_clock is not None:
        limits.append(f"{wall_clock:g} seconds")
    first = schemas[0].name if schemas else "tool"
    text = (
        "Run a Python program in a sandbox and return the value of its last expression, "
        "what it printed, and the outcome of every tool call it made. The sandbox runs a "
        "subset of Python (asyncio, json, re, math, datetime and other pure modules; no "
        "files, network, environment or subprocesses). The program calls the tools below "
        f"as functions, with keyword arguments: `await {first}(...)` inside the program, "
        f"`await asyncio.gather({first}(...), {first}(...))` to run calls at once, or "
        f"`{first}{SYNC_SUFFIX}(...)` to wait without `await`. A call returns the tool's "
        "JSON value; a failed call raises RuntimeError('<CODE>: <message>')."
    )
    if limits:
        text += f" Limits: {', '.join(limits)}."
    text += (
        f" Printed output and the value are cut past {output_chars} characters: print a "
        "summary, not raw data."
    )
    if not schemas:
        return text + "\n\nNo tools are exposed to the program."
    return (
        text
        + "\n\n```python\nfrom typing import Any, Literal\n\n"
        + "\n".join(stub(schema) for schema in schemas)
        + "```"
    )
