"""MCP over the wire: toolseam's server vs the SDK's ``MCPServer`` vs toolseam's gateway.

Three servers, each with a no-op ``echo`` tool (benchmarks/mcp_servers.py): toolseam's
(``python -m toolseam.mcp serve``), the SDK's own high-level server (``MCPServer``, the same
transport mode and the same uvicorn), and the gateway (``python -m toolseam.mcp gateway``)
in front of a toolseam server (stdio upstream for the stdio gateway, HTTP upstream for the
HTTP one; the gateway's own connection to it negotiates, so hop 2 is at 2026-07-28 whichever
revision the client speaks at hop 1). Each over stdio and streamable HTTP, each with the
SDK's client in both protocol revisions (``Client(..., mode="legacy")``: 2025-11-25;
``Client(...)``: 2026-07-28, as it negotiates), all connected for the whole run. Every round
runs every contender, in an order rotating from round to round: a sequential batch, then a
batch at 20 concurrent calls. Printed per contender: calls/s (median over rounds), per-call
latency (median and p99 over every call of every round) and the server process's CPU per
call (utime + stime, /proc, Linux only); ratios are taken within a round.

Targets (issue 36): toolseam >= 0.9x the SDK server's throughput; the gateway's per-call
latency <= 1.5x a direct call's and its throughput >= 0.67x; toolseam's server CPU per call
<= the SDK server's. Issue 39: a ``tools/call`` to toolseam's server over HTTP at 2026-07-28
costs no more than at 2025-11-25 (per-call latency <= 1.05x, the ratio of the two
connections' median latencies within a round, sequential and at 20 concurrent; median over
rounds).
"""

from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import _harness
import anyio
from _harness import Check
from mcp import StdioServerParameters
from mcp.client import Client

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ROOT / "benchmarks" / "mcp_servers.py"
TARGET = f"{SERVERS}:registry"
ROUNDS, SEQUENTIAL, CONCURRENT, WIDTH = 5, 150, 300, 20
REVISIONS = {"2025-11-25": "legacy", "2026-07-28": "auto"}
KINDS = ("toolseam", "sdk", "gateway")
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def _children() -> dict[int, str]:
    """This process's child processes: pid -> command line (Linux /proc)."""
    found: dict[int, str] = {}
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent == me:
                found[int(entry.name)] = (entry / "cmdline").read_text().replace("\0", " ")
        except (OSError, ValueError, IndexError):
            continue
    return found


@dataclass
class Contender:
    """One client connection to one server, with what it measured."""

    name: str
    kind: str
    transport: str
    revision: str
    tool: str
    client: Client
    pid: int | None
    rates: dict[str, list[float]] = field(default_factory=lambda: {"seq": [], "conc": []})
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"seq": [], "conc": []})
    medians: dict[str, list[float]] = field(default_factory=lambda: {"seq": [], "conc": []})
    """The median per-call latency (ms) of each round's batch, per mode."""
    cpu: list[float] = field(default_factory=list)  # CPU seconds per call, per round

    async def batch(self, calls: int, width: int, mode: str) -> tuple[int, float]:
        """Run ``calls`` calls ``width`` at a time; return (ns elapsed, CPU s of the server)."""
        latencies = self.latencies[mode]
        mine: list[float] = []
        left = calls

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                start = time.perf_counter_ns()
                result = await self.client.call_tool(self.tool, {"text": "hi"})
                mine.append((time.perf_counter_ns() - start) / 1e6)
                assert not result.is_error, result

        cpu_before = _cpu_seconds(self.pid) if self.pid else None
        start = time.perf_counter_ns()
        async with anyio.create_task_group() as tg:
            for _ in range(width):
                tg.start_soon(worker)
        elapsed = time.perf_counter_ns() - start
        cpu_after = _cpu_seconds(self.pid) if self.pid else None
        latencies.extend(mine)
        self.medians[mode].append(statistics.median(mine))
        cpu = cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else -1
        return elapsed, cpu


def _serve_http(argv: list[str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    out = log.open("wb")
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=out)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("toolseam.mcp: serving "):
                return process, line.split()[-1]
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"{argv} did not start:\n{log.read_text(errors='replace')}")


@asynccontextmanager
async def _contenders(tmp: Path) -> AsyncIterator[list[Contender]]:
    py = sys.executable
    serve = [py, "-m", "toolseam.mcp", "serve", TARGET]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        toolseam_http, toolseam_url = _serve_http([*serve, "--http", "127.0.0.1:0"], tmp / "t.log")
        processes.append(toolseam_http)
        sdk_http, sdk_url = _serve_http([py, str(SERVERS), "sdk-http"], tmp / "s.log")
        processes.append(sdk_http)
        gateway_argv = [py, "-m", "toolseam.mcp", "gateway", "--upstream", f"up={toolseam_url}"]
        gateway_argv += ["--http", "127.0.0.1:0"]
        gateway_http, gateway_url = _serve_http(gateway_argv, tmp / "g.log")
        processes.append(gateway_http)
        upstream = f"up={shlex.join(serve)}"
        stdio = {
            "toolseam": (serve, "echo"),
            "sdk": ([py, str(SERVERS), "sdk-stdio"], "echo"),
            "gateway": ([py, "-m", "toolseam.mcp", "gateway", "--upstream", upstream], "up_echo"),
        }
        http = {
            "toolseam": (toolseam_url, toolseam_http.pid, "echo"),
            "sdk": (sdk_url, sdk_http.pid, "echo"),
            "gateway": (gateway_url, gateway_http.pid, "up_echo"),
        }
        contenders: list[Contender] = []
        async with AsyncExitStack() as stack:
            for revision, mode in REVISIONS.items():
                for kind in KINDS:
                    argv, tool = stdio[kind]
                    before = _children()
                    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=ROOT)
                    client = await stack.enter_async_context(
                        Client(params, mode=mode, cache=None)  # type: ignore[arg-type]
                    )
                    new = sorted(set(_children()) - set(before))
                    contenders.append(
                        Contender(
                            f"{kind} stdio {revision}", kind, "stdio", revision, tool, client,
                            new[0] if new else None,
                        )
                    )  # fmt: skip
                    url, pid, tool = http[kind]
                    client = await stack.enter_async_context(
                        Client(url, mode=mode, cache=None)  # type: ignore[arg-type]
                    )
                    name = f"{kind} http {revision}"
                    contenders.append(Contender(name, kind, "http", revision, tool, client, pid))
            for contender in contenders:
                version = contender.client.session.protocol_version
                assert version == contender.revision, (contender.name, version)
            yield contenders
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


async def _measure(rounds: int, sequential: int, concurrent: int) -> list[Contender]:
    with tempfile.TemporaryDirectory() as tmp:
        async with _contenders(Path(tmp)) as contenders:
            for contender in contenders:  # warm-up, not recorded
                await contender.batch(max(sequential // 5, 5), 1, "seq")
                await contender.batch(max(concurrent // 5, WIDTH), WIDTH, "conc")
                contender.latencies = {"seq": [], "conc": []}
                contender.medians = {"seq": [], "conc": []}
            for round_index in range(rounds):
                for index in _harness._rotation(contenders, round_index):
                    contender = contenders[index]
                    elapsed, cpu_seq = await contender.batch(sequential, 1, "seq")
                    contender.rates["seq"].append(sequential / (elapsed / 1e9))
                    elapsed, cpu_conc = await contender.batch(concurrent, WIDTH, "conc")
                    contender.rates["conc"].append(concurrent / (elapsed / 1e9))
                    total = sequential + concurrent
                    contender.cpu.append((cpu_seq + cpu_conc) / total if cpu_seq >= 0 else -1)
        return contenders


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def _ratio(mine: list[float], theirs: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(mine, theirs, strict=True) if b > 0)


def _cpu_ms(contender: Contender) -> float | None:
    figures = [c for c in contender.cpu if c >= 0]
    return statistics.median(figures) * 1000 if figures else None


def _report(contenders: list[Contender], note: str) -> list[Check]:
    print("\n[mcp] one echo call over the wire (SDK client; calls/s median over rounds)")
    print(f"  {note}")
    head = f"  {'contender':<28}{'mode':>6}{'calls/s':>10}{'median ms':>11}{'p99 ms':>9}"
    print(head + f"{'server CPU ms/call':>20}")
    for c in contenders:
        cpu = _cpu_ms(c)
        for mode in ("seq", "conc"):
            shown = "" if mode == "conc" else ("n/a" if cpu is None else f"{cpu:.2f}")
            print(
                f"  {c.name:<28}{mode:>6}{statistics.median(c.rates[mode]):>10.0f}"
                f"{statistics.median(c.latencies[mode]):>11.2f}{_p99(c.latencies[mode]):>9.2f}"
                f"{shown:>20}"
            )
    checks: list[Check] = []
    by = {(c.kind, c.transport, c.revision): c for c in contenders}
    print("\n  ratios (within rounds, median):")
    for transport in ("stdio", "http"):
        for revision in REVISIONS:
            ts, sdk, gw = (by[kind, transport, revision] for kind in KINDS)
            where = f"{transport} {revision}"
            for mode, label in (("seq", "sequential"), ("conc", f"{WIDTH} concurrent")):
                vs_sdk = _ratio(ts.rates[mode], sdk.rates[mode])
                vs_direct = _ratio(gw.rates[mode], ts.rates[mode])
                p99 = _p99(ts.latencies[mode]) / _p99(sdk.latencies[mode])
                print(
                    f"    {where} {label}: toolseam/SDK throughput {vs_sdk:.2f}x, p99 {p99:.2f}x;"
                    f" gateway/direct throughput {vs_direct:.2f}x"
                )
                checks.append(
                    Check(f"[mcp] toolseam vs SDK server throughput, {where}, {label}",
                          vs_sdk, 0.9, "x", at_least=True)
                )  # fmt: skip
                checks.append(
                    Check(f"[mcp] gateway vs direct throughput, {where}, {label}",
                          vs_direct, 0.67, "x", at_least=True)
                )  # fmt: skip
            latency = statistics.median(gw.latencies["seq"]) / statistics.median(
                ts.latencies["seq"]
            )
            checks.append(
                Check(f"[mcp] gateway vs direct per-call latency, {where}", latency, 1.5, "x",
                      f"{statistics.median(gw.latencies['seq']):.2f} vs "
                      f"{statistics.median(ts.latencies['seq']):.2f} ms")
            )  # fmt: skip
            mine, theirs = _cpu_ms(ts), _cpu_ms(sdk)
            checks.append(
                Check(
                    f"[mcp] toolseam vs SDK server CPU per call, {where}",
                    None if mine is None or theirs is None else mine / theirs,
                    1.0,
                    "x",
                    "" if mine is None or theirs is None else f"{mine:.2f} vs {theirs:.2f} ms",
                )
            )
    print("\n  toolseam's server over HTTP, 2026-07-28 vs 2025-11-25 (latency, within rounds):")
    new, old = by["toolseam", "http", "2026-07-28"], by["toolseam", "http", "2025-11-25"]
    for mode, label in (("seq", "sequential"), ("conc", f"{WIDTH} concurrent")):
        ratio = _ratio(new.medians[mode], old.medians[mode])
        figures = (
            f"{statistics.median(new.medians[mode]):.2f} vs "
            f"{statistics.median(old.medians[mode]):.2f} ms median"
        )
        print(f"    {label}: {ratio:.2f}x ({figures})")
        checks.append(
            Check(f"[mcp] tools/call over HTTP, 2026-07-28 vs 2025-11-25 latency, {label}",
                  ratio, 1.05, "x", figures)
        )  # fmt: skip
    return checks


def run(*, quick: bool = False) -> list[Check]:
    rounds, sequential, concurrent = (2, 20, 40) if quick else (ROUNDS, SEQUENTIAL, CONCURRENT)
    note = (
        f"{rounds} rounds; per round and contender {sequential} sequential calls, then "
        f"{concurrent} at {WIDTH} concurrent; order rotating each round"
    )
    contenders = anyio.run(_measure, rounds, sequential, concurrent)
    return _report(contenders, note)


def main() -> None:
    args = _harness.parser(__doc__.splitlines()[0]).parse_args()
    print(_harness.machine_summary())
    _harness.print_checks(run(quick=args.quick))


if __name__ == "__main__":
    main()
