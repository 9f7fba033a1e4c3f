"""The behavioural conformance kit on toolseam, and the meta-test that it can fail.

toolseam must pass every clause, on asyncio and trio. Each deliberately broken registry
below — toolseam with one rule broken, in a test-only driver — must fail exactly the
clauses it breaks: evidence that the clauses see what they claim to.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from toolseam import (
    ErrorInfo,
    Next,
    ToolDefinition,
    ToolDispatchExecution,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolRunContext,
    define_tool,
)
from toolseam.conformance import (
    CLAUSES,
    Outcome,
    Report,
    Scenario,
    ScriptedTool,
    clause_ids,
    run_clauses,
)
from toolseam.conformance.drivers._toolseam import (
    KeyArgs,
    Listen,
    ToolseamDriver,
    define,
    registry_for,
    run_on,
)

ROOT = Path(__file__).parent.parent


def failing(report: Report) -> set[str]:
    return {c.id for c in report.clauses if c.status == "fail"}


async def test_toolseam_passes_every_clause() -> None:
    report = await run_clauses(ToolseamDriver())
    assert [c.id for c in report.clauses] == clause_ids()
    assert {c.status for c in report.clauses} == {"pass"}, [
        (c.id, c.detail) for c in report.clauses if c.status != "pass"
    ]
    assert report.subject == "toolseam"
    assert set(report.versions) >= {"toolseam", "anyio", "python"}


def test_clauses_have_stable_unique_ids_traced_to_the_contract() -> None:
    ids = clause_ids()
    assert len(ids) >= 25
    assert len(set(ids)) == len(ids)
    contract = (ROOT / "docs" / "contract.md").read_text("utf8")
    sections = set(re.findall(r"^## (§\d+)", contract, re.M))
    for clause in CLAUSES:
        assert re.fullmatch(r"[a-z]+\.[a-z-]+", clause.id), clause.id
        assert clause.section.split(".")[0].split(",")[0] in sections, clause.id
        assert clause.title[0].isupper() or clause.title[0] == "'", clause.id


# -- deliberately broken registries --------------------------------------------------------


class BrokenDriver:
    """toolseam's driver, with one rule broken by a subclass."""

    subject = "broken"
    capabilities = ToolseamDriver().capabilities
    backends = ("asyncio", "trio")

    def versions(self) -> dict[str, str]:
        return {}

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        return await run_on(registry_for(scenario), scenario)


class RacingDriver(BrokenDriver):
    """Races each body with its deadline (``move_on_after`` around ``next()``)."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        registry = registry_for(scenario, timeouts=False)

        async def racing(exec: ToolDispatchExecution, next: Next[ToolResult]) -> ToolResult:
            definition = registry.get(exec.name)
            seconds = None if definition is None else definition.timeout
            if seconds is None:
                return await next()
            with anyio.move_on_after(seconds):
                return await next()
            return ToolFailure.from_message(
                "timed out", info=ErrorInfo("ToolTimeoutError", "TOOL_TIMEOUT")
            )

        registry.on_execute(racing)
        return await run_on(registry, scenario)


class DroppingDriver(BrokenDriver):
    """Drops the results of the calls a stopped batch never started."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        outcomes = await super().run(scenario)
        if not scenario.batch:
            return outcomes
        return [o for o in outcomes if o.status != "aborted_before_dispatch"]


class AbandoningDriver(BrokenDriver):
    """Runs synchronous bodies with ``to_thread.run_sync(abandon_on_cancel=True)``."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        def abandoning(registry: ToolRegistry, tool: ScriptedTool) -> ToolDefinition[KeyArgs, str]:
            if not tool.sync:
                return define(registry, tool)

            @define_tool(name=tool.name, description=tool.description)
            async def body(args: KeyArgs, exec: ToolRunContext) -> str:
                listen = Listen(registry, exec)
                return await anyio.to_thread.run_sync(
                    tool.run_sync, args, listen, abandon_on_cancel=True
                )

            return body

        return await run_on(registry_for(scenario), scenario, abandoning)


class MergingDriver(BrokenDriver):
    """Reports both cancellation results alike: it cannot tell 'never ran' from 'ran'."""

    async def run(self, scenario: Scenario) -> Sequence[Outcome]:
        outcomes = await super().run(scenario)
        return [
            Outcome(o.call_id, "aborted", o.detail) if o.status == "aborted_before_dispatch" else o
            for o in outcomes
        ]


@pytest.mark.parametrize(
    ("driver", "breaks"),
    [
        pytest.param(RacingDriver(), {"timeout.asks"}, id="racing-deadline"),
        pytest.param(DroppingDriver(), {"batch.balanced-after-stop"}, id="drops-skipped"),
        pytest.param(AbandoningDriver(), {"host.thread-awaited"}, id="abandons-threads"),
        pytest.param(
            MergingDriver(),
            {
                "abort.pre-aborted",
                "abort.ran-vs-never-ran",
                "abort.during-approval",
                "abort.before-delegating",
                "approval.cancelled-vs-rejected",
                "batch.balanced-after-stop",
            },
            id="no-never-ran",
        ),
    ],
)
async def test_a_broken_registry_fails_exactly_the_clauses_it_breaks(
    driver: object, breaks: set[str]
) -> None:
    report = await run_clauses(driver)  # type: ignore[arg-type]
    assert failing(report) == breaks, [
        (c.id, c.detail) for c in report.clauses if c.status != "pass"
    ]
    assert [c.id for c in report.clauses] == clause_ids()


def test_the_guide_lists_every_clause_as_the_code_has_it() -> None:
    guide = (ROOT / "docs" / "behaviour-kit.md").read_text("utf8").split("## The clauses")[1]
    rows = re.findall(r"^\| `([a-z.-]+)` \| (.+?) \| (.+?) \| (.+?) \|$", guide, re.M)
    expected = [
        (c.id, c.title, c.section, ", ".join(f"`{r}`" for r in c.requires) or "—") for c in CLAUSES
    ]
    assert rows == expected


def test_the_scoreboard_has_every_clause() -> None:
    page = (ROOT / "docs" / "conformance.md").read_text("utf8")
    from toolseam.conformance.scoreboard import BEGIN_MARK, END_MARK

    section = page[page.index(BEGIN_MARK) : page.index(END_MARK)]
    assert re.findall(r"^\| `([a-z.-]+)` ", section, re.M) == clause_ids()


def test_the_example_driver_is_a_third_party_driver_under_100_lines() -> None:
    import runpy

    path = ROOT / "docs" / "examples" / "conformance_driver.py"
    source = path.read_text("utf8")
    assert len(source.splitlines()) < 100
    assert "toolseam.conformance.drivers" not in source  # public names only
    namespace = runpy.run_path(str(path), run_name="example")  # runs it, on asyncio
    report = anyio.run(run_clauses, namespace["MyDriver"]())
    assert {c.status for c in report.clauses} == {"pass", "skip"}
