"""Tool calls as activities of a Temporal workflow (extra ``toolseam[temporal]``).

`TemporalTools` runs a registry's calls inside a Temporal workflow, each call one activity
whose result is the call's outcome (the form `toolseam.durable` records on every engine):
a replay returns it without running the body; a cancellation of the workflow or the
activity aborts the body's signal (the body is told and awaited) and the outcome is still
recorded; the activity's timeouts and the workflow's deadline end calls `TOOL_TIMEOUT`;
after a worker died, a call cut short runs again only if its tool is idempotent, and
otherwise ends `OUTCOME_UNKNOWN`. `recorded_outcomes` reads the outcomes back from a
workflow's history. Temporal runs on asyncio only, so does this module. See
docs/durable.md.
"""

import importlib.util as _importlib_util

if _importlib_util.find_spec("temporalio") is None:  # pragma: no cover - only without the extra
    raise ImportError('toolseam.durable.temporal needs Temporal: pip install "toolseam[temporal]"')

from .._util import fixup_module_metadata as _fixup_module_metadata
from ._errors import OUTCOME_UNKNOWN as OUTCOME_UNKNOWN
from ._errors import OutcomeUnknownError as OutcomeUnknownError
from ._temporal_tools import TemporalTools as TemporalTools
from ._temporal_tools import recorded_outcomes as recorded_outcomes

__all__ = (
    "OUTCOME_UNKNOWN",
    "OutcomeUnknownError",
    "TemporalTools",
    "recorded_outcomes",
)

# OUTCOME_UNKNOWN and its error keep their home, toolseam.durable.
_fixup_module_metadata(
    __name__, {"TemporalTools": TemporalTools, "recorded_outcomes": recorded_outcomes}
)
del _fixup_module_metadata
