"""Every clause of the kit, registered in report order by importing its module."""

from __future__ import annotations

from . import batch, capabilities, durable, host, listeners, mcp, ptc, single, stages, timeouts
from ._base import CLAUSES, Clause

__all__ = ["CLAUSES", "Clause"]

# Report order: one call, then host cancellation, deadlines, batches, the other stages, the
# listeners, what a body reaches, programs, durable workflows, MCP servers over the wire.
_ORDER = [single, host, timeouts, batch, stages, listeners, capabilities, ptc, durable, mcp]
CLAUSES.sort(key=lambda c: [m.__name__ for m in _ORDER].index(c.check.__module__))

del batch, capabilities, durable, host, listeners, mcp, ptc, single, stages, timeouts
