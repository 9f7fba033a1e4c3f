from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from hypothesis import settings

# Hypothesis profiles: "ci" runs in every `nox` session; "thorough" is run by hand
# (TOOLSEAM_HYPOTHESIS_PROFILE=thorough) and its figures go to docs/reliability.md.
settings.register_profile("ci", max_examples=300, deadline=None, print_blob=True)
settings.register_profile("thorough", max_examples=10_000, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("TOOLSEAM_HYPOTHESIS_PROFILE", "ci"))


# The Postgres tests belong to `nox -s postgres`, which starts a server (and says why it
# skips without Postgres's binaries): the other sessions do not collect them at all.
collect_ignore = [] if os.environ.get("TOOLSEAM_POSTGRES") == "1" else ["test_durable_postgres.py"]
# The TypeScript SDK's client belongs to `nox -s mcp_typescript`, which installs it (npm).
if not os.environ.get("TOOLSEAM_MCP_TS_SDK"):
    collect_ignore.append("test_mcp_typescript.py")


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every async test runs on asyncio and on trio."""
    return str(request.param)


@pytest.fixture(scope="module", autouse=True)
def _shutdown_the_kits_dbos() -> Iterator[None]:
    """Stop the conformance kit's DBOS after each module that started it.

    The kit's durable clauses launch a DBOS of their own (one per process, DBOS being a
    singleton), kept for later clauses; the durable tests launch theirs, which must not
    find the kit's.
    """
    yield
    kit = sys.modules.get("toolseam.conformance.drivers._dbos")
    if kit is not None:
        kit.shutdown()
