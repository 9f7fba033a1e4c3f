"""Small helpers shared by the package's modules."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["fixup_module_metadata"]


def fixup_module_metadata(module_name: str, namespace: Mapping[str, object]) -> None:
    """Rewrite ``__module__`` of public objects so reprs and tracebacks show the public path.

    Mirrors trio's helper of the same name: ``toolseam.AbortSignal`` rather than
    ``toolseam._signals.AbortSignal``.
    """
    seen: set[int] = set()

    def fix_one(obj: object) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        mod = getattr(obj, "__module__", None)
        if isinstance(mod, str) and mod.startswith("toolseam."):
            try:
                obj.__module__ = module_name
            except (AttributeError, TypeError):
                return
            if isinstance(obj, type):
                for attr_name, attr_value in obj.__dict__.items():
                    if not attr_name.startswith("_") and callable(attr_value):
                        fix_one(attr_value)

    for objname, obj in namespace.items():
        if not objname.startswith("_"):
            fix_one(obj)
