"""Command line: ``toolseam demo`` (or ``python -m toolseam demo``) and ``--version``."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Sequence

from . import __version__

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the toolseam command line and return its exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m toolseam",
        description="toolseam: cooperative cancellation at the tool registry boundary.",
        epilog="More commands live with their extras: python -m toolseam.mcp (serve, "
        "gateway; extra: mcp) and python -m toolseam.conformance (the behavioural "
        "conformance kit). Each has its own --help.",
    )
    parser.add_argument("--version", action="version", version=f"toolseam {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo = commands.add_parser(
        "demo",
        help="run a scripted scenario of tool calls and print each call's timeline",
        description="Run nine scripted tool calls against one registry and print, per call, "
        "the stages it entered, where the abort landed, its progress, and the final result "
        "code.",
    )
    demo.add_argument(
        "--backend",
        choices=("asyncio", "trio"),
        default="asyncio",
        help="event loop to run on (default: asyncio)",
    )
    args = parser.parse_args(argv)
    # "demo" is the only command; argparse has already rejected anything else.
    if args.backend == "trio" and importlib.util.find_spec("trio") is None:
        print('the trio backend needs trio: pip install "toolseam[trio]"', file=sys.stderr)
        return 2
    from ._demo import run_demo

    try:
        return run_demo(backend=args.backend, out=sys.stdout)
    except BrokenPipeError:
        # The reader (``| head``) went away: not an error of ours. Silence the flush at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
