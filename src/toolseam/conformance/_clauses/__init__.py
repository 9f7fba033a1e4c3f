"""Every clause of the kit, registered in report order by importing its module."""

from __future__ import annotations

from . import batch, host, single, stages, timeouts
from ._base import CLAUSES, Clause

__all__ = ["CLAUSES", "Clause"]

del batch, host, single, stages, timeouts
