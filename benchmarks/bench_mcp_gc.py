"""What one MCP ``tools/call`` leaves to the garbage collector: toolseam's server vs the SDK's.

bench_mcp.py times the servers over the wire, where the collector's share drowns in the
transport's noise; this counts it, without a clock that matters. toolseam's server
(``create_server``) and the SDK's ``MCPServer``, each with the no-op ``echo`` tool of
benchmarks/mcp_servers.py, are called by the SDK's ``Client(server)`` over its in-memory
transport, in both revisions (2025-11-25, 2026-07-28), 20 calls at a time, client and
server in this process:

- **cyclic garbage per call**: objects only the collector frees (reference cycles), counted
  with the collector off during the calls and ``gc.DEBUG_SAVEALL`` after them. A cycle that
  holds a call's context keeps everything the call touched alive until a collection; with
  20 calls in flight that turned into full collections, each a pause for every call.
- **collections per 1000 calls**, each generation, with the collector on.

Target: toolseam's server leaves no more cyclic garbage per call than the SDK's, on both
revisions (the count is exact: it repeats from run to run).
"""

from __future__ import annotations

import gc

import _harness
import anyio
import mcp_servers
from _harness import Check
from mcp.client import Client

from toolseam.mcp import create_server

REVISIONS = {"2025-11-25": "legacy", "2026-07-28": "auto"}
CALLS, WIDTH, WARMUP = 1000, 20, 200


async def _batch(client: Client, calls: int) -> None:
    left = calls

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            result = await client.call_tool("echo", {"text": "hi"})
            assert not result.is_error, result

    async with anyio.create_task_group() as tg:
        for _ in range(WIDTH):
            tg.start_soon(worker)


async def _measure(server: object, mode: str, calls: int) -> tuple[float, list[float]]:
    """(cyclic garbage objects per call, collections per 1000 calls by generation)."""
    async with Client(server, mode=mode, cache=None) as client:  # type: ignore[arg-type]
        await _batch(client, WARMUP)
        gc.collect()
        gc.disable()
        try:
            await _batch(client, calls)
            gc.set_debug(gc.DEBUG_SAVEALL)
            found = gc.collect()
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        before = [entry["collections"] for entry in gc.get_stats()]
        await _batch(client, calls)
        after = [entry["collections"] for entry in gc.get_stats()]
    per_thousand = [(b - a) * 1000 / calls for a, b in zip(before, after, strict=True)]
    return found / calls, per_thousand


async def _run(calls: int) -> list[Check]:
    print(f"\n[mcp gc] per tools/call, {calls} calls {WIDTH} at a time, in-memory transport")
    head = f"  {'server':<10}{'revision':>12}{'cyclic garbage':>16}"
    print(head + f"{'collections/1000 (gen 0, 1, 2)':>34}")
    checks: list[Check] = []
    for revision, mode in REVISIONS.items():
        figures: dict[str, float] = {}
        for name, server in (
            ("toolseam", create_server(mcp_servers.registry)),
            ("sdk", mcp_servers._sdk_server()),  # pyright: ignore[reportPrivateUsage]
        ):
            garbage, collections = await _measure(server, mode, calls)
            figures[name] = garbage
            shown = ", ".join(f"{count:.1f}" for count in collections)
            print(f"  {name:<10}{revision:>12}{garbage:>16.1f}{shown:>34}")
        checks.append(
            Check(
                f"[mcp gc] toolseam vs SDK server, cyclic garbage per call, {revision}",
                figures["toolseam"] - figures["sdk"],
                0.0,
                "objects",
                f"{figures['toolseam']:.1f} vs {figures['sdk']:.1f}",
            )
        )
    return checks


def run(*, quick: bool = False) -> list[Check]:
    return anyio.run(_run, 200 if quick else CALLS)


def main() -> None:
    args = _harness.parser(__doc__.splitlines()[0]).parse_args()
    print(_harness.machine_summary())
    _harness.print_checks(run(quick=args.quick))


if __name__ == "__main__":
    main()
