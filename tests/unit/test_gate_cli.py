"""`envscaler gate` without sandboxes (--no-exec --no-scenarios): what the files alone show."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from tests.conftest import REPO_ROOT

CORPUS = REPO_ROOT / "tests" / "fixtures" / "gate_corpus"


def gate(*paths: Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    from envscaler.cli.main import app

    result = CliRunner().invoke(app, ["gate", *map(str, paths), "--json", "--no-exec",
                                      "--no-scenarios"])
    return result.exit_code, json.loads(result.stdout)


def test_a_skipped_scenario_line_fails_the_format_with_its_line(tmp_path: Path) -> None:
    folder = shutil.copytree(CORPUS / "broken_scenario_line", tmp_path / "broken_scenario_line")
    code, report = gate(folder)
    assert code == 1
    (env,) = report["envs"]
    assert env["format"] == {"passed": False, "skipped_scenarios": [
        f"{folder}/scenarios.jsonl:2: solution.0.name: 'buy_book' is not a tool of "
        "broken_scenario_line"]}
    assert env["static"]["passed"] is True


def test_static_problems_and_missing_tools_are_reported_without_running_code() -> None:
    code, report = gate(CORPUS / "good_helpers_and_conditionals", CORPUS / "broken_missing_tool")
    assert code == 1
    good, missing = sorted(report["envs"], key=lambda env: env["env"], reverse=True)
    assert good["passed"] is True and good["executable"] is None
    assert [problem["rule"] for problem in missing["static"]["problems"]] == ["missing-tool"]
