"""Tool calls as durable steps of a DBOS workflow (extra ``toolseam[dbos]``).

`DurableTools` runs a registry's calls inside a DBOS workflow, each call's one result the
recorded outcome of one DBOS step: replay returns it without running the body;
``DBOS.cancel_workflow`` from any process aborts the signal of every call in flight (the
body is told and awaited) and still records one outcome per call; the workflow's timeout
ends calls with `TOOL_TIMEOUT`; after a crash, a call cut short runs again only if its tool
is idempotent, and otherwise ends `OUTCOME_UNKNOWN`. Whenever a cancel lands, the journal
decides each call (a recorded outcome stands; a dispatch marker without one is
`OUTCOME_UNKNOWN`); `settle_cancelled` records the dispatched calls of a workflow cancelled
while its worker was dead. DBOS is the engine: the journal is its step table, and nothing
else is stored. DBOS runs on asyncio only, so does this module.
See docs/durable.md.
"""

import importlib.util as _importlib_util
from typing import TYPE_CHECKING as _TYPE_CHECKING

# The Temporal engine (toolseam.durable.temporal) shares the codes and records without DBOS.
if (  # pragma: no cover - only without either extra
    _importlib_util.find_spec("dbos") is None and _importlib_util.find_spec("temporalio") is None
):
    raise ImportError('toolseam.durable needs DBOS: pip install "toolseam[dbos]"')

from .._util import fixup_module_metadata as _fixup_module_metadata
from ._errors import OUTCOME_UNKNOWN as OUTCOME_UNKNOWN
from ._errors import RESULT_NOT_RECORDABLE as RESULT_NOT_RECORDABLE
from ._errors import OutcomeUnknownError as OutcomeUnknownError
from ._errors import UnrecordableResultError as UnrecordableResultError
from ._records import outcomes_from_steps as outcomes_from_steps
from ._records import recorded_outcomes as recorded_outcomes
from ._records import settle_cancelled as settle_cancelled

if _TYPE_CHECKING:
    from ._tools import DurableTools as DurableTools
else:

    def __getattr__(name: str) -> object:
        # DBOS (seconds to import) loads with DurableTools, not with the Temporal engine.
        if name == "DurableTools":
            if _importlib_util.find_spec("dbos") is None:
                raise ImportError('DurableTools needs DBOS: pip install "toolseam[dbos]"')
            from ._tools import DurableTools

            _fixup_module_metadata(__name__, {"DurableTools": DurableTools})
            globals()["DurableTools"] = DurableTools
            return DurableTools
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = (
    "OUTCOME_UNKNOWN",
    "RESULT_NOT_RECORDABLE",
    "DurableTools",
    "OutcomeUnknownError",
    "UnrecordableResultError",
    "outcomes_from_steps",
    "recorded_outcomes",
    "settle_cancelled",
)

_fixup_module_metadata(__name__, globals())
