"""Running the clauses against a driver, and the report they make (contract §11)."""

from __future__ import annotations

import asyncio
import importlib.metadata
import platform
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias, cast, final

import anyio

from ._clauses import CLAUSES, Clause
from ._driver import Driver
from ._kit import Failed, Kit, Skipped

__all__ = ["ClauseResult", "Report", "Verdict", "clause_ids", "run_clauses"]

Verdict: TypeAlias = Literal["pass", "fail", "skip"]
"""A clause's status in a report."""


@final
@dataclass(frozen=True, slots=True)
class ClauseResult:
    """One clause's verdict."""

    id: str
    """The clause's stable id."""
    title: str
    """What the clause requires, in one sentence."""
    status: Verdict
    """``"pass"``, ``"fail"`` or ``"skip"``."""
    detail: str
    """What was measured, why it failed, or which capability was missing."""
    section: str = ""
    """The section of docs/contract.md the clause checks."""

    def to_json(self) -> dict[str, str]:
        """``{"id", "title", "status", "detail"}``."""
        return {"id": self.id, "title": self.title, "status": self.status, "detail": self.detail}


@final
@dataclass(frozen=True, slots=True)
class Report:
    """The verdicts of every clause for one registry."""

    subject: str
    """The registry measured (the driver's `Driver.subject`)."""
    versions: Mapping[str, str]
    """The versions measured, ``{distribution: version}``."""
    clauses: Sequence[ClauseResult]
    """One verdict per clause, in the kit's order."""

    @property
    def failed(self) -> list[ClauseResult]:
        """The clauses that failed."""
        return [c for c in self.clauses if c.status == "fail"]

    def to_json(self) -> dict[str, object]:
        """``{"subject": str, "versions": {pkg: version}, "clauses": [...]}``."""
        return {
            "subject": self.subject,
            "versions": dict(self.versions),
            "clauses": [c.to_json() for c in self.clauses],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Report:
        """Read a report back from its JSON form."""
        versions = data["versions"]
        clauses = data["clauses"]
        if not isinstance(versions, dict) or not isinstance(clauses, list):
            raise ValueError("not a conformance report: versions or clauses missing")
        results: list[ClauseResult] = []
        for entry in cast("list[dict[str, object]]", clauses):
            status = entry["status"]
            if status not in ("pass", "fail", "skip"):
                raise ValueError(f"not a clause status: {status!r}")
            results.append(
                ClauseResult(str(entry["id"]), str(entry["title"]), status, str(entry["detail"]))
            )
        pairs = cast("dict[object, object]", versions).items()
        return cls(str(data["subject"]), {str(k): str(v) for k, v in pairs}, results)


def clause_ids() -> list[str]:
    """The id of every clause, in report order."""
    return [c.id for c in CLAUSES]


async def run_clause(driver: Driver, clause: Clause) -> ClauseResult:
    """Run one clause against ``driver`` (inside a running event loop)."""
    # Optional: a driver may measure only some families of clauses (``{"mcp"}``).
    families: Collection[str] | None = getattr(driver, "families", None)
    if families is not None and clause.id.split(".")[0] not in families:
        only = ", ".join(f"{f}.*" for f in sorted(families))
        return _result(clause, "skip", f"the driver measures only {only}")  # scoreboard._OUTSIDE
    missing = [c for c in clause.requires if c not in driver.capabilities]
    if missing:
        needs = ", ".join(f"`{c}`" for c in missing)
        # Optional: a driver may say why its registry lacks a capability.
        lacking: Mapping[str, str] = getattr(driver, "lacking", None) or {}
        why = "; ".join(dict.fromkeys(lacking[c] for c in missing if c in lacking))
        why = f": {why}" if why else ""
        return _result(clause, "skip", f"needs {needs}, which the driver does not offer{why}")
    status: Verdict = "pass"
    detail = ""
    stuck: list[str] = []
    async with anyio.create_task_group() as group:
        kit = Kit(driver, group)
        try:
            detail = await clause.check(kit)
        except Failed as failure:
            status, detail = "fail", str(failure)
        except Skipped as reason:
            status, detail = "skip", str(reason)
        except Exception as error:
            status, detail = "fail", f"the kit could not run the clause: {error!r}"
        stuck = await kit.settle()
    if stuck:
        status = "fail"
        detail = f"{detail}; and the kit was left with " + ", ".join(stuck)
    return _result(clause, status, detail)


def _result(clause: Clause, status: Verdict, detail: str) -> ClauseResult:
    return ClauseResult(clause.id, clause.title, status, detail, clause.section)


async def run_clauses(driver: Driver, *, only: Iterable[str] | None = None) -> Report:
    """Run every clause (or the ``only`` ids) against ``driver``; call inside its event loop.

    Args:
        driver: The registry's driver.
        only: Clause ids to run; the others are left out of the report.

    Raises:
        ValueError: ``only`` names a clause that does not exist.
    """
    selected = list(CLAUSES)
    if only is not None:
        wanted = list(only)
        unknown = sorted(set(wanted) - set(clause_ids()))
        if unknown:
            raise ValueError(f"no such clause: {', '.join(unknown)}")
        selected = [c for c in CLAUSES if c.id in wanted]
    results = [await run_clause(driver, clause) for clause in selected]
    return Report(driver.subject, {**driver.versions(), **_runtime()}, results)


def _runtime() -> dict[str, str]:
    """The interpreter, and trio when the clauses ran on it."""
    versions = {"python": platform.python_version()}
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        versions["trio"] = importlib.metadata.version("trio")
    return versions
