"""The built-in drivers, by name, and loading a driver from ``NAME`` or ``MODULE:ATTR``.

Each built-in driver lives in a module of its own and imports its framework only there;
the peers' frameworks are optional (``pip install 'toolseam[conformance-peers]'``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Final, cast

from .._driver import Driver

__all__ = ["BUILTIN", "DriverUnavailable", "load_driver"]


BUILTIN: Final[Mapping[str, tuple[str, tuple[str, ...]]]] = {
    "toolseam": ("toolseam.conformance.drivers._toolseam:ToolseamDriver", ()),
    "toolseam-reference": (
        "toolseam.conformance.drivers._toolseam_reference:ReferenceDriver",
        (),
    ),
    "pydantic-ai": (
        "toolseam.conformance.drivers._pydantic_ai:PydanticAIDriver",
        ("pydantic-ai-slim",),
    ),
    "openai-agents": (
        "toolseam.conformance.drivers._openai_agents:OpenAIAgentsDriver",
        ("openai-agents",),
    ),
    "autogen": ("toolseam.conformance.drivers._autogen:AutogenDriver", ("autogen-core",)),
    "langchain": ("toolseam.conformance.drivers._langchain:LangChainDriver", ("langchain-core",)),
    "codemode": (
        "toolseam.conformance.drivers._codemode:CodeModeDriver",
        ("pydantic-ai-harness", "pydantic-monty"),
    ),
    "dbos-steps": ("toolseam.conformance.drivers._dbos_steps:DBOSStepsDriver", ("dbos",)),
    "google-adk": ("toolseam.conformance.drivers._google_adk:GoogleADKDriver", ("google-adk",)),
    "crewai": ("toolseam.conformance.drivers._crewai:CrewAIDriver", ("crewai",)),
    "toolseam-temporal": (
        "toolseam.conformance.drivers._toolseam_temporal:ToolseamTemporalDriver",
        ("temporalio",),
    ),
    "temporal-activities": (
        "toolseam.conformance.drivers._temporal_activities:TemporalActivitiesDriver",
        ("temporalio",),
    ),
    "toolseam-mcp": ("toolseam.conformance.drivers._mcp:ToolseamMcpDriver", ("mcp",)),
    "toolseam-mcp-2026": ("toolseam.conformance.drivers._mcp:ToolseamMcpDriver2026", ("mcp",)),
    "mcp-sdk-mcpserver": ("toolseam.conformance.drivers._mcp:MCPServerDriver", ("mcp",)),
    "mcp-sdk-mcpserver-2026": ("toolseam.conformance.drivers._mcp:MCPServerDriver2026", ("mcp",)),
}
"""Built-in driver names: ``{name: ("module:attr", (distributions it needs, ...))}``."""


class DriverUnavailable(Exception):
    """A driver cannot be loaded: a missing framework, or a bad ``MODULE:ATTR``."""


def load_driver(spec: str) -> Driver:
    """The driver that ``spec`` names: a built-in name or ``MODULE:ATTR``.

    ``ATTR`` may be a driver object or a class (or factory) called with no arguments.

    Raises:
        DriverUnavailable: The name is unknown, the module or attribute does not exist, or
            the framework a built-in driver measures is not installed (the message names
            the package to install).
    """
    needs: tuple[str, ...] = ()
    target = spec
    if spec in BUILTIN:
        target, needs = BUILTIN[spec]
    elif ":" not in spec:
        names = ", ".join(BUILTIN)
        raise DriverUnavailable(f"unknown driver {spec!r}: use one of {names}, or MODULE:ATTR")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if needs:
            packages = " ".join(needs)
            raise DriverUnavailable(
                f"the {spec} driver needs {packages} ({error.name} is not installed): "
                f"pip install {packages}, or pip install 'toolseam[conformance-peers]'"
            ) from error
        raise DriverUnavailable(f"cannot import {module_name!r}: {error}") from error
    try:
        value: object = getattr(module, attr)
    except AttributeError:
        raise DriverUnavailable(f"{module_name!r} has no attribute {attr!r}") from None
    if isinstance(value, type) or (callable(value) and not hasattr(value, "run")):
        value = value()
    for member in ("subject", "capabilities", "backends", "versions", "run"):
        if not hasattr(value, member):
            raise DriverUnavailable(f"{spec} is not a driver: it has no `{member}`")
    return cast("Driver", value)
