"""``python -m toolseam.conformance --driver NAME_OR_MODULE:ATTR``: measure a registry.

Runs every clause, prints a table, and exits 0 only when no clause failed (an expected
failure from ``--expect`` does not count; a stale expectation does).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio

from ._clauses import CLAUSES
from ._report import Expectations, judge, render_markdown, render_table
from ._runner import run_clauses
from .drivers import BUILTIN, DriverUnavailable, load_driver

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m toolseam.conformance",
        description="Measure a tool registry against toolseam's behavioural contract.",
    )
    parser.add_argument(
        "--driver",
        help=f"a built-in driver ({', '.join(BUILTIN)}) or MODULE:ATTR of your own",
    )
    parser.add_argument("--backend", help="anyio backend (default: the driver's first)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the JSON report")
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="write a Markdown table")
    parser.add_argument(
        "--expect", type=Path, metavar="FILE", help="expected failures: clause id [reason]"
    )
    parser.add_argument(
        "--only", action="append", metavar="ID", help="run only this clause (repeatable)"
    )
    parser.add_argument("--list", action="store_true", help="list the clauses and exit")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list:
        for clause in CLAUSES:
            needs = f" [needs {', '.join(clause.requires)}]" if clause.requires else ""
            print(f"{clause.id}  {clause.title} ({clause.section}){needs}")
        return 0
    if not args.driver:
        parser.error("--driver is required")
    try:
        driver = load_driver(args.driver)
    except DriverUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    backend = args.backend or driver.backends[0]
    if backend not in driver.backends:
        print(f"error: {driver.subject} runs on {', '.join(driver.backends)}", file=sys.stderr)
        return 2
    expectations = Expectations.load(args.expect) if args.expect else None
    try:
        report = anyio.run(lambda: run_clauses(driver, only=args.only), backend=backend)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    judged = judge(report, expectations)
    sys.stdout.write(render_table(report, judged))
    if args.json:
        args.json.write_text(json.dumps(report.to_json(), indent=2) + "\n", "utf8")
    if args.markdown:
        args.markdown.write_text(render_markdown(report, judged), "utf8")
    return 0 if judged.ok else 1


if __name__ == "__main__":
    sys.exit(main())
