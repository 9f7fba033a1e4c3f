"""Find what a ``MODULE:ATTR`` on the ``python -m toolseam.mcp`` command line names."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from .._registry import ToolRegistry

__all__ = ["TargetError", "load_object", "load_registry"]


class TargetError(Exception):
    """``MODULE:ATTR`` does not name what it must; the message says why."""


def _import_path(path: Path) -> object:
    """Import a ``.py`` file as a module, the way ``python path.py`` would see its siblings."""
    if not path.is_file():
        raise TargetError(f"no such file: {str(path)!r}")
    name = f"_toolseam_mcp_target_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetError(f"cannot import {str(path)!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    # Registered before running it, as an import would: dataclasses and pydantic look the
    # module up by name while the tools are being defined.
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(module)
    return module


def load_object(target: str) -> object:
    """Import ``MODULE:ATTR`` and return the object it names.

    ``MODULE`` is a dotted module name (imported like ``python -m`` would, with the current
    directory on ``sys.path``) or a path to a ``.py`` file; ``ATTR`` may be dotted.

    Raises:
        TargetError: The target is malformed or cannot be imported.
    """
    module_part, sep, attr_part = target.rpartition(":")
    if not sep or not module_part or not attr_part:
        raise TargetError(f"expected MODULE:ATTR, got {target!r}")
    if module_part.endswith(".py") or "/" in module_part or "\\" in module_part:
        module = _import_path(Path(module_part).resolve())
    else:
        if "" not in sys.path:
            sys.path.insert(0, "")
        try:
            module = importlib.import_module(module_part)
        except ImportError as error:
            raise TargetError(f"cannot import {module_part!r}: {error}") from error
    value: object = module
    for attr in attr_part.split("."):
        try:
            value = getattr(value, attr)
        except AttributeError:
            raise TargetError(f"{module_part!r} has no attribute {attr_part!r}") from None
    return value


def load_registry(target: str) -> ToolRegistry:
    """Import ``MODULE:ATTR`` and return the `ToolRegistry` it names (see `load_object`).

    Raises:
        TargetError: The target is malformed, cannot be imported, or is not a registry.
    """
    value = load_object(target)
    if not isinstance(value, ToolRegistry):
        raise TargetError(f"{target!r} is a {type(value).__name__}, not a toolseam.ToolRegistry")
    return value
