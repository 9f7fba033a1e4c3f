"""The kit's command line and its pytest plugin (both run the clauses on real drivers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolseam.conformance import clause_ids
from toolseam.conformance.__main__ import main

pytest_plugins = ("pytester",)

BROKEN = "kit_mutants.core:DropsSkipped"  # fails exactly batch.balanced-after-stop


def test_json_report_has_exactly_the_documented_shape(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    assert main(["--driver", "toolseam", "--json", str(out)]) == 0
    report = json.loads(out.read_text("utf8"))
    assert set(report) == {"subject", "versions", "clauses"}
    assert report["subject"] == "toolseam"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in report["versions"].items())
    assert [c["id"] for c in report["clauses"]] == clause_ids()
    for clause in report["clauses"]:
        assert set(clause) == {"id", "title", "status", "detail"}
        # Its MCP server is measured over the wire by the toolseam-mcp drivers.
        wire = clause["id"].startswith("mcp.")
        assert clause["status"] == ("skip" if wire else "pass")


def test_trio_backend_is_measured_and_named(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    assert main(["--driver", "toolseam", "--backend", "trio", "--json", str(out)]) == 0
    assert "trio" in json.loads(out.read_text("utf8"))["versions"]


def test_exit_status_is_one_when_a_clause_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.json"
    assert main(["--driver", BROKEN, "--json", str(out)]) == 1
    statuses = {c["id"]: c["status"] for c in json.loads(out.read_text("utf8"))["clauses"]}
    assert [id for id, s in statuses.items() if s == "fail"] == ["batch.balanced-after-stop"]
    table = capsys.readouterr().out
    assert "FAIL   batch.balanced-after-stop" in table


def test_markdown_table_lists_every_clause(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    assert main(["--driver", "toolseam", "--markdown", str(out)]) == 0
    text = out.read_text("utf8")
    assert "| clause | title | status | detail |" in text
    for id in clause_ids():
        assert f"| `{id}` |" in text


def test_expected_failures_become_xfails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expect = tmp_path / "expected.txt"
    expect.write_text("# known\nbatch.balanced-after-stop  drops skipped calls\n", "utf8")
    assert main(["--driver", BROKEN, "--expect", str(expect)]) == 0
    out = capsys.readouterr().out
    assert "XFAIL  batch.balanced-after-stop" in out
    assert "drops skipped calls" in out


def test_a_stale_expected_failure_is_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expect = tmp_path / "expected.txt"
    expect.write_text("batch.balanced-after-stop\nresult.success  fixed long ago\n", "utf8")
    assert main(["--driver", BROKEN, "--expect", str(expect)]) == 1
    out = capsys.readouterr().out
    assert "STALE  result.success" in out
    assert "XFAIL  batch.balanced-after-stop" in out


def test_an_unknown_expected_clause_is_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expect = tmp_path / "expected.txt"
    expect.write_text("no.such-clause\n", "utf8")
    assert main(["--driver", "toolseam", "--expect", str(expect)]) == 1
    assert "STALE  no.such-clause" in capsys.readouterr().out


def test_an_unknown_driver_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--driver", "nope"]) == 2
    assert "unknown driver 'nope'" in capsys.readouterr().err


def test_a_missing_peer_names_the_package(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "autogen_core", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "toolseam.conformance.drivers._autogen", raising=False)
    assert main(["--driver", "autogen"]) == 2
    err = capsys.readouterr().err
    assert "autogen-core" in err
    assert "pip install" in err


def test_list_prints_every_clause(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == clause_ids()


# -- the pytest plugin ---------------------------------------------------------------------


def test_plugin_runs_every_clause_as_an_item(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_own():\n    pass\n")
    result = pytester.runpytest_inprocess(
        "-p", "toolseam.conformance.pytest_plugin", "--conformance-driver", "toolseam"
    )
    wire = [id for id in clause_ids() if id.startswith("mcp.")]  # the toolseam-mcp drivers'
    result.assert_outcomes(passed=len(clause_ids()) - len(wire) + 1, skipped=len(wire))


def test_plugin_selects_with_k_and_reports_failures(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess(
        "-p",
        "toolseam.conformance.pytest_plugin",
        "--conformance-driver",
        BROKEN,
        "-k",
        "batch",
    )
    batch = [id for id in clause_ids() if "batch" in id]  # what -k selects
    result.assert_outcomes(passed=len(batch) - 1, failed=1)
    result.stdout.fnmatch_lines(["*batch.balanced-after-stop*"])


def test_plugin_expected_failures_xfail_and_go_stale(pytester: pytest.Pytester) -> None:
    expect = pytester.path / "expected.txt"
    expect.write_text("batch.balanced-after-stop\nbatch.model-order\n", "utf8")
    result = pytester.runpytest_inprocess(
        "-p",
        "toolseam.conformance.pytest_plugin",
        "--conformance-driver",
        BROKEN,
        "--conformance-expect",
        str(expect),
        "-k",
        "batch",
    )
    batch = [id for id in clause_ids() if "batch" in id]  # what -k selects
    result.assert_outcomes(passed=len(batch) - 2, xfailed=1, failed=1)
    result.stdout.fnmatch_lines(["*batch.model-order is listed as an expected failure*"])


def test_plugin_changes_nothing_without_a_driver(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_own():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "toolseam.conformance.pytest_plugin")
    result.assert_outcomes(passed=1)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=1)
