"""toolseam._speedups: the checked copy of a JSON argument, in one C pass (_speedups.c)."""

from typing import Any

def copy_json(
    value: object, dict_type: type[dict[Any, Any]], list_type: type[list[Any]], /
) -> tuple[Any, bool] | None:
    """The checked copy of ``value`` and whether all its text is UTF-8.

    Containers are copied into ``dict_type`` and ``list_type``. ``None`` when the Python
    walk must decide (see _speedups.c).
    """
