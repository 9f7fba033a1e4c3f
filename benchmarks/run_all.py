"""Run every benchmark in one process and check the figures against their targets.

``nox -s bench`` runs this; ``python benchmarks/run_all.py`` does the same in the current
environment (it needs the ``bench`` dependency group: autogen-core and the other peers,
trio, opentelemetry-sdk, dbos, nox; ``durable`` also measures on Postgres when its binaries
are found). Options: ``--quick`` for a smoke run (figures meaningless),
``--skip-static`` to leave out the static suite's wall time (about 80 s), ``--only
targets,churn`` to run some of them (``overhead``, ``cancel`` and ``batch`` are parts of
``targets`` on their own; ``ptc`` is docs/ptc.md's, ``capabilities`` what progress and the
host cost, ``shapes`` large arguments of five shapes against autogen, ``mcp`` toolseam's MCP
server and gateway against the SDK's server over stdio and HTTP, ``mcp-auth`` what
authentication costs a call, ``mcp-gc`` the cyclic garbage a call leaves). Every figure is a median
over interleaved rounds; every ratio is taken within a round (see ``_harness``). Exits 0
even when a target is missed: these are measurements, not tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import _harness
import bench_batch
import bench_cancel_latency
import bench_capabilities
import bench_churn
import bench_durable
import bench_mcp
import bench_mcp_auth
import bench_mcp_gc
import bench_overhead
import bench_peers
import bench_ptc
import bench_shapes
import bench_static_suite
import bench_targets
import bench_temporal
import bench_tracing
from _harness import Check

BENCHMARKS: dict[str, Callable[..., list[Check]]] = {
    "targets": bench_targets.run,
    "peers": bench_peers.run,
    "shapes": bench_shapes.run,
    "churn": bench_churn.run,
    "static": bench_static_suite.run,
    "tracing": bench_tracing.run,
    "ptc": bench_ptc.run,
    "capabilities": bench_capabilities.run,
    "durable": bench_durable.run,
    "temporal": bench_temporal.run,
    "mcp": bench_mcp.run,
    "mcp-auth": bench_mcp_auth.run,
    "mcp-gc": bench_mcp_gc.run,
    # Parts of the above on their own (not run by default: "targets" covers them).
    "overhead": bench_overhead.run,
    "cancel": bench_cancel_latency.run,
    "batch": bench_batch.run,
}
DEFAULT = (
    "targets",
    "shapes",
    "peers",
    "churn",
    "tracing",
    "ptc",
    "capabilities",
    "durable",
    "temporal",
    "mcp",
    "mcp-auth",
    "mcp-gc",
    "static",
)


def main() -> None:
    options = _harness.parser(__doc__.splitlines()[0])
    options.add_argument("--skip-static", action="store_true", help="leave out nox -s typetests")
    options.add_argument(
        "--only", default="", help=f"comma-separated subset of {','.join(BENCHMARKS)}"
    )
    args = options.parse_args()
    chosen = [name.strip() for name in args.only.split(",") if name.strip()] or list(DEFAULT)
    unknown = sorted(set(chosen) - set(BENCHMARKS))
    if unknown:
        options.error(f"unknown benchmark(s): {', '.join(unknown)}")
    if args.skip_static and "static" in chosen:
        chosen.remove("static")
    print(_harness.machine_summary())
    started = time.perf_counter()
    checks: list[Check] = []
    for name in chosen:
        checks.extend(BENCHMARKS[name](quick=args.quick))
    print(f"\nTargets ({time.perf_counter() - started:.0f} s in all; load now {_harness._load()}):")
    _harness.print_checks(checks)
    missed = sum(check.status == "MISS" for check in checks)
    print(f"\n{len(checks) - missed} of {len(checks)} targets met" + (" (quick run)" * args.quick))


if __name__ == "__main__":
    main()
