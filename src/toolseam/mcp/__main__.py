"""Command line: ``python -m toolseam.mcp serve MODULE:ATTR``."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``toolseam.mcp`` command line and return its exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m toolseam.mcp",
        description="Bridge toolseam registries and the Model Context Protocol.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    serve = commands.add_parser(
        "serve",
        help="serve a ToolRegistry as an MCP server over stdio",
        description="Serve the ToolRegistry named by MODULE:ATTR as an MCP server on stdin and "
        "stdout. MODULE is a dotted module name or a path to a .py file.",
    )
    serve.add_argument("target", metavar="MODULE:ATTR", help="where the ToolRegistry lives")
    serve.add_argument("--name", default="toolseam", help="server name (default: toolseam)")
    serve.add_argument(
        "--backend",
        choices=("asyncio", "trio"),
        default="asyncio",
        help="event loop to run on (default: asyncio)",
    )
    args = parser.parse_args(argv)
    # "serve" is the only command; argparse has already rejected anything else.
    import anyio

    from . import serve_stdio
    from ._load import TargetError, load_registry

    try:
        registry = load_registry(args.target)
    except TargetError as error:
        print(f"python -m toolseam.mcp serve: error: {error}", file=sys.stderr)
        return 2
    try:
        anyio.run(functools.partial(serve_stdio, registry, name=args.name), backend=args.backend)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
