"""The scoreboard: several registries' reports side by side, clause by clause (contract §11).

``python -m toolseam.conformance.scoreboard REPORT.json ... [--write-docs FILE]`` prints
the Markdown scoreboard of the JSON reports ``python -m toolseam.conformance --json`` wrote,
or rewrites the section of ``FILE`` between `BEGIN_MARK` and `END_MARK` with it (what
``nox -s conformance`` does to docs/conformance.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from ._runner import Report

__all__ = ["BEGIN_MARK", "END_MARK", "column", "main", "render", "write_docs"]

BEGIN_MARK: Final = "<!-- BEGIN GENERATED: behavioural scoreboard -->"
"""Where the generated scoreboard starts in a document."""
END_MARK: Final = "<!-- END GENERATED: behavioural scoreboard -->"
"""Where it ends."""

_OUTSIDE: Final = "the driver measures only "
"""How a clause outside the families a driver measures is skipped (`_runner.run_clause`)."""

_CELL: Final = {"pass": "✅", "fail": "❌", "skip": "⚪"}


def column(report: Report) -> str:
    """A report's column heading: its subject, and the backend when it is trio."""
    return f"{report.subject} (trio)" if "trio" in report.versions else report.subject


def render(reports: Sequence[Report]) -> str:
    """The scoreboard in Markdown: versions, the clause-by-registry table, every failure."""
    lines = ["Measured with:", ""]
    for report in reports:
        versions = ", ".join(f"{k} {v}" for k, v in report.versions.items())
        lines.append(f"- **{column(report)}**: {versions}")
    lines += [
        "",
        "✅ pass · ❌ fail (the reasons are listed below the table) · ⚪ skipped: the driver "
        "does not offer a capability the clause needs (the reasons are listed too).",
        "",
        "| clause | " + " | ".join(column(r) for r in reports) + " |",
        "|---|" + "---|" * len(reports),
    ]
    first = reports[0] if reports else None
    for index, clause in enumerate(first.clauses if first else ()):
        cells = [_CELL[r.clauses[index].status] for r in reports]
        lines.append(f"| `{clause.id}` {clause.title} | " + " | ".join(cells) + " |")
    totals = [f"{sum(c.status == 'pass' for c in r.clauses)}/{len(r.clauses)}" for r in reports]
    lines.append("| **passed** | " + " | ".join(totals) + " |")
    for report in reports:
        failed = [c for c in report.clauses if c.status == "fail"]
        skipped = [c for c in report.clauses if c.status == "skip"]
        if not failed and not skipped:
            continue
        lines += ["", f"**{column(report)}**", ""]
        lines += [f"- ❌ `{c.id}`: {c.detail}" for c in failed]
        # A driver that measures one family only: its other clauses in one line.
        outside = [c for c in skipped if c.detail.startswith(_OUTSIDE)]
        lines += [f"- ⚪ `{c.id}`: {c.detail}" for c in skipped if c not in outside]
        if outside:
            lines.append(f"- ⚪ the {len(outside)} other clauses: {outside[0].detail}")
    return "\n".join(lines) + "\n"


def write_docs(document: Path, reports: Sequence[Report]) -> None:
    """Replace the scoreboard section of ``document`` (between the marks)."""
    text = document.read_text("utf8")
    start, end = text.find(BEGIN_MARK), text.find(END_MARK)
    if start < 0 or end < start:
        raise ValueError(f"{document} has no scoreboard section ({BEGIN_MARK} ... {END_MARK})")
    section = f"{BEGIN_MARK}\n\n{render(reports)}\n{END_MARK}"
    document.write_text(text[:start] + section + text[end + len(END_MARK) :], "utf8")


def main(argv: Sequence[str] | None = None) -> int:
    """Print the scoreboard of the given reports, or write it into a document."""
    parser = argparse.ArgumentParser(prog="python -m toolseam.conformance.scoreboard")
    parser.add_argument("reports", nargs="+", type=Path, help="JSON reports, in column order")
    parser.add_argument("--write-docs", type=Path, metavar="FILE", help="rewrite FILE's section")
    args = parser.parse_args(argv)
    reports = [Report.from_json(json.loads(p.read_text("utf8"))) for p in args.reports]
    if args.write_docs:
        write_docs(args.write_docs, reports)
    else:
        sys.stdout.write(render(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
