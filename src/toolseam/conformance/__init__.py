"""The behavioural conformance kit: measure a tool registry against the contract (§11).

A *driver* adapts a registry to the kit (`Driver`); the kit runs every clause — one
behaviour of contract §2 to §8 each, with a stable id — against it, with scripted tools whose
bodies report each step, and reports pass, fail or skip per clause (`run_clauses`,
`Report`). ``python -m toolseam.conformance --driver NAME_OR_MODULE:ATTR`` is the command
line; ``-p toolseam.conformance.pytest_plugin`` runs the clauses as pytest items.
Built-in drivers: ``toolseam`` and the peers ``pydantic-ai``, ``openai-agents``,
``autogen``, ``langchain``, ``google-adk``, ``codemode`` (pydantic-ai-harness's ``CodeMode``) and
``dbos-steps`` (plain DBOS steps, measured by the ``durable`` clauses too); each needing its
framework installed.
"""

from ._body_reach import ElicitationScript as ElicitationScript
from ._body_reach import ProgressSink as ProgressSink
from ._body_reach import Reach as Reach
from ._body_reach import Reaching as Reaching
from ._clauses import CLAUSES as CLAUSES
from ._clauses import Clause as Clause
from ._driver import CAPABILITIES as CAPABILITIES
from ._driver import ApprovalScript as ApprovalScript
from ._driver import Call as Call
from ._driver import Capability as Capability
from ._driver import CodeReturnScript as CodeReturnScript
from ._driver import Driver as Driver
from ._driver import Durable as Durable
from ._driver import Listen as Listen
from ._driver import ListenerScript as ListenerScript
from ._driver import McpStop as McpStop
from ._driver import ObserverScript as ObserverScript
from ._driver import Outcome as Outcome
from ._driver import Program as Program
from ._driver import Scenario as Scenario
from ._driver import Status as Status
from ._driver import Stop as Stop
from ._driver import WrapperScript as WrapperScript
from ._runner import ClauseResult as ClauseResult
from ._runner import Report as Report
from ._runner import Verdict as Verdict
from ._runner import clause_ids as clause_ids
from ._runner import run_clauses as run_clauses
from ._scripts import ScriptedTool as ScriptedTool
from .drivers import BUILTIN as BUILTIN
from .drivers import DriverUnavailable as DriverUnavailable
from .drivers import load_driver as load_driver

__all__ = (
    "BUILTIN",
    "CAPABILITIES",
    "CLAUSES",
    "ApprovalScript",
    "Call",
    "Capability",
    "Clause",
    "ClauseResult",
    "CodeReturnScript",
    "Driver",
    "DriverUnavailable",
    "Durable",
    "ElicitationScript",
    "Listen",
    "ListenerScript",
    "McpStop",
    "ObserverScript",
    "Outcome",
    "Program",
    "ProgressSink",
    "Reach",
    "Reaching",
    "Report",
    "Scenario",
    "ScriptedTool",
    "Status",
    "Stop",
    "Verdict",
    "clause_ids",
    "load_driver",
    "run_clauses",
)
