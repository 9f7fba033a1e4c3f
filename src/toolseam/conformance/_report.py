"""Reports as text: the terminal table, Markdown, and the expected-failures file."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeAlias, final

from ._runner import ClauseResult, Report, clause_ids

__all__ = ["Expectations", "Judged", "judge", "render_markdown", "render_table"]

Mark: TypeAlias = Literal["pass", "fail", "skip", "xfail", "stale"]


@final
@dataclass(frozen=True, slots=True)
class Expectations:
    """An expected-failures file: the clauses a registry knows it fails, with reasons.

    One clause id per line, optionally followed by the reason; ``#`` starts a comment.
    """

    reasons: Mapping[str, str] = field(default_factory=dict[str, str])

    @classmethod
    def parse(cls, text: str) -> Expectations:
        """Read the file's text."""
        reasons: dict[str, str] = {}
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                id, _, reason = line.partition(" ")
                reasons[id] = reason.strip()
        return cls(reasons)

    @classmethod
    def load(cls, path: Path) -> Expectations:
        """Read the file at ``path``."""
        return cls.parse(path.read_text("utf8"))


@final
@dataclass(frozen=True, slots=True)
class Judged:
    """A report judged against expectations: what each clause's mark is, and the verdict."""

    rows: list[tuple[ClauseResult, Mark, str]]
    unknown: list[str]

    @property
    def ok(self) -> bool:
        """No unexpected failure, no stale expectation."""
        return not self.unknown and all(mark not in ("fail", "stale") for _, mark, _ in self.rows)


def judge(report: Report, expectations: Expectations | None = None) -> Judged:
    """Mark each clause: an expected failure is ``xfail``; one that passes is ``stale``."""
    reasons: Mapping[str, str] = expectations.reasons if expectations is not None else {}
    rows: list[tuple[ClauseResult, Mark, str]] = []
    for result in report.clauses:
        mark: Mark = result.status
        note = result.detail
        if result.id in reasons:
            if result.status == "fail":
                mark = "xfail"
                note = f"expected failure ({reasons[result.id] or 'no reason given'}): {note}"
            elif result.status == "pass":
                mark = "stale"
                note = "expected to fail, but it passes: remove it from the expected failures"
        rows.append((result, mark, note))
    known = set(clause_ids())
    unknown = sorted(id for id in reasons if id not in known)
    return Judged(rows, unknown)


_SYMBOL: Mapping[Mark, str] = {
    "pass": "PASS",
    "fail": "FAIL",
    "skip": "SKIP",
    "xfail": "XFAIL",
    "stale": "STALE",
}


def render_table(report: Report, judged: Judged) -> str:
    """The terminal table: one line per clause, then a summary."""
    width = max((len(r.id) for r in report.clauses), default=10)
    versions = ", ".join(f"{k} {v}" for k, v in report.versions.items())
    lines = [f"{report.subject} ({versions})", ""]
    for result, mark, note in judged.rows:
        lines.append(f"{_SYMBOL[mark]:<5}  {result.id:<{width}}  {note}")
    lines += [f"STALE  {id:<{width}}  no such clause" for id in judged.unknown]
    counts = _count(mark for _, mark, _ in judged.rows)
    lines += ["", ", ".join(f"{n} {m}" for m, n in counts.items() if n)]
    return "\n".join(lines) + "\n"


def render_markdown(report: Report, judged: Judged | None = None) -> str:
    """The report as a Markdown table (marks from ``judged`` when given)."""
    marks = {r.id: (m, n) for r, m, n in judged.rows} if judged else {}
    versions = ", ".join(f"{k} {v}" for k, v in report.versions.items())
    lines = [
        f"## Conformance of {report.subject}",
        "",
        f"Measured with {versions}.",
        "",
        "| clause | title | status | detail |",
        "|---|---|---|---|",
    ]
    for result in report.clauses:
        mark, note = marks.get(result.id, (result.status, result.detail))
        lines.append(f"| `{result.id}` | {result.title} | {mark} | {_cell(note)} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _count(marks: Iterable[Mark]) -> dict[Mark, int]:
    counts: dict[Mark, int] = dict.fromkeys(_SYMBOL, 0)
    for mark in marks:
        counts[mark] += 1
    return counts
