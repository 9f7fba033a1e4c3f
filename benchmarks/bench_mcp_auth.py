"""What authentication costs an MCP call over HTTP: static bearer token and JWT vs none.

Three ``python -m toolseam.mcp serve --http`` processes serve the same no-op ``echo`` tool
(benchmarks/mcp_servers.py): without authentication, with ``--auth-tokens`` (a static
token, kept as its SHA-256), and with ``--auth-jwks`` (an ES256 JWT against a JWKS file;
the verified token cached). The SDK's client calls each, in both protocol revisions, all
connected for the whole run; every round runs every contender in an order rotating from
round to round, a batch of sequential calls each. Printed: per-call latency (median over
rounds); the ratios are taken within a round.

Targets (issue 37): an authenticated call <= 1.1x an unauthenticated one with a static
token, <= 1.2x with a JWT.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _harness
import anyio
import httpx2
import jwt
from _harness import Check
from bench_mcp import REVISIONS, TARGET, _serve_http
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

ROUNDS = 7
SEQUENTIAL = 150
ISSUER = "https://as.example"
AUDIENCE = "https://mcp.example/mcp"
KINDS = ("none", "static", "jwt")


@dataclass
class Contender:
    """One client connection to one server, with its per-round per-call latencies."""

    kind: str
    revision: str
    client: Client
    per_call_ms: list[float] = field(default_factory=list)

    async def batch(self, calls: int) -> float:
        """Run ``calls`` sequential calls; return the mean milliseconds per call."""
        start = time.perf_counter_ns()
        for _ in range(calls):
            result = await self.client.call_tool("echo", {"text": "hi"})
            assert not result.is_error, result
        return (time.perf_counter_ns() - start) / 1e6 / calls


def _credentials(tmp: Path) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Each kind's extra command-line arguments, and the token its client presents."""
    static = "bench-static-token-" + "x" * 24
    tokens = tmp / "tokens"
    digest = hashlib.sha256(static.encode()).hexdigest()
    tokens.write_text(f"# the bench's principal\nsha256:{digest} bench tools\n")
    key = ec.generate_private_key(ec.SECP256R1())
    jwk: dict[str, Any] = json.loads(ECAlgorithm.to_jwk(key.public_key()))
    jwks = tmp / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "alg": "ES256"}]}))
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "bench", "scope": "tools"}
    token = jwt.encode(
        {**claims, "exp": int(time.time()) + 3600}, key, algorithm="ES256", headers={"kid": "k1"}
    )
    argv = {
        "none": [],
        "static": ["--auth-tokens", str(tokens)],
        "jwt": [
            "--auth-jwks", str(jwks), "--auth-issuer", ISSUER, "--auth-audience", AUDIENCE,
        ],
    }  # fmt: skip
    return argv, {"static": static, "jwt": token}


@asynccontextmanager
async def _contenders(tmp: Path) -> AsyncIterator[list[Contender]]:
    argv, tokens = _credentials(tmp)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        urls: dict[str, str] = {}
        for kind in KINDS:
            command = [sys.executable, "-m", "toolseam.mcp", "serve", TARGET]
            command += ["--http", "127.0.0.1:0", *argv[kind]]
            process, urls[kind] = _serve_http(command, tmp / f"{kind}.log")
            processes.append(process)
        async with AsyncExitStack() as stack:
            contenders: list[Contender] = []
            for kind in KINDS:
                for revision, mode in REVISIONS.items():
                    headers = {"authorization": f"Bearer {tokens[kind]}"} if kind in tokens else {}
                    http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers))
                    transport = streamable_http_client(urls[kind], http_client=http)
                    client = await stack.enter_async_context(
                        Client(transport, mode=mode, cache=None)
                    )
                    contenders.append(Contender(kind, revision, client))
            yield contenders
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


async def _measure(rounds: int, sequential: int) -> list[Contender]:
    with tempfile.TemporaryDirectory() as tmp:
        async with _contenders(Path(tmp)) as contenders:
            for contender in contenders:  # warm-up, not recorded
                await contender.batch(max(sequential // 5, 5))
            for round_index in range(rounds):
                for index in _harness._rotation(contenders, round_index):
                    contender = contenders[index]
                    contender.per_call_ms.append(await contender.batch(sequential))
        return contenders


def _report(contenders: list[Contender], note: str) -> list[Check]:
    print("\n[mcp-auth] one echo call over HTTP, by authentication (SDK client)")
    print(f"  {note}")
    for contender in contenders:
        median = statistics.median(contender.per_call_ms)
        print(f"  {contender.kind:<8}{contender.revision:>12}{median:>10.3f} ms/call")
    by = {(c.kind, c.revision): c for c in contenders}
    checks: list[Check] = []
    for revision in REVISIONS:
        plain = by["none", revision].per_call_ms
        for kind, limit in (("static", 1.1), ("jwt", 1.2)):
            mine = by[kind, revision].per_call_ms
            ratio = statistics.median(a / b for a, b in zip(mine, plain, strict=True))
            checks.append(
                Check(
                    f"[mcp-auth] {kind} token vs none, per-call latency, http {revision}",
                    ratio,
                    limit,
                    "x",
                    f"{statistics.median(mine):.3f} vs {statistics.median(plain):.3f} ms",
                )
            )
    return checks


def run(*, quick: bool = False) -> list[Check]:
    """Measure, print, and return the checks."""
    rounds, sequential = (2, 30) if quick else (ROUNDS, SEQUENTIAL)
    note = (
        f"{rounds} rounds; per round and contender {sequential} sequential calls; "
        "order rotating each round"
    )
    return _report(anyio.run(_measure, rounds, sequential), note)


def main() -> None:
    args = _harness.parser(__doc__.splitlines()[0]).parse_args()
    print(_harness.machine_summary())
    _harness.print_checks(run(quick=args.quick))


if __name__ == "__main__":
    main()
