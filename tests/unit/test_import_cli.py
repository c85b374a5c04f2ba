"""`envscaler import envscaler-release`: options, the summary table, --json, and exit statuses
(0 when anything was imported, 1 when nothing was); `envscaler import bfcl-compare`'s refusals of
a checkout or catalogue it cannot compare (before any gateway or container starts)."""

from __future__ import annotations

import json
from pathlib import Path

from envscaler.cli.main import app
from typer.testing import CliRunner

from envscaler.format.loader import load_catalogue

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "envscaler_release"
BFCL_CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "bfcl"


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["import", "envscaler-release", *args])


def test_json_report_names_every_record_not_imported(tmp_path: Path) -> None:
    result = invoke("--from", str(FIXTURE / "hf"), "--out", str(tmp_path), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [env["env_id"] for env in report["imported"]] == ["envscaler_env_1_rl",
                                                             "envscaler_env_2_rl"]
    assert {(p["kind"], p["record"]) for p in report["errors"]} == {
        ("scenario", "env_1_rl-task_3"), ("scenario", "env_2_rl-task_3"),
        ("scenario", "env_2_rl-task_4"), ("env", "env_4_rl"), ("scenario", "env_4_rl-task_1"),
        ("env", "env_5_rl"), ("scenario", "env_5_rl-task_1"), ("scenario", "env_99_rl-task_1")}
    assert report["skipped"] == [{"kind": "env", "record": "env_3_sft", "env": None,
                                  "reason": "no RL scenario in the scenarios file (an SFT-only "
                                            "environment)"}]
    assert report["counts"]["scenarios_imported"] == 4
    assert report["envs_file"]["shape"] == "list"
    assert sorted(load_catalogue(tmp_path, strict=True).envs) == ["envscaler_env_1_rl",
                                                                  "envscaler_env_2_rl"]


def test_tables_and_summary_for_people(tmp_path: Path) -> None:
    result = invoke("--envs", str(FIXTURE / "github" / "191_env_metadata.json"),
                    "--scenarios", str(FIXTURE / "github" / "rl_scenario_metadata.json"),
                    "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    for text in ("envscaler_env_1_rl", "_next_delivery", "env_99_rl-task_1",
                 "init_config is a JSON list", "skipped"):
        assert text in result.stdout
    assert ("2 of 5 environments imported (1 skipped, 2 failed); 4 of 10 RL scenarios "
            "imported, all unverified") in result.stderr
    assert "envscaler-release@local (not the pinned files)" in result.stderr
    assert "3 private helper method(s)" in result.stderr


def test_limit_and_provenance_options(tmp_path: Path) -> None:
    result = invoke("--from", str(FIXTURE / "github"), "--out", str(tmp_path), "--limit", "1",
                    "--revision", "87e6673", "--created", "2026-01-11", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [env["release_env_id"] for env in report["imported"]] == ["env_1_rl"]
    assert report["counts"]["envs_not_examined"] == 4
    manifest = json.loads((tmp_path / "envscaler_env_1_rl" / "env.json").read_text())
    assert manifest["provenance"]["pipeline_version"] == "envscaler-release@87e6673"
    assert manifest["provenance"]["created"] == "2026-01-11"


def test_nothing_imported_is_exit_status_1(tmp_path: Path) -> None:
    rows = json.loads((FIXTURE / "hf" / "envscaler_rl_scenario_metadata.json").read_text())
    bad_only = tmp_path / "rl.json"
    bad_only.write_text(json.dumps([row for row in rows if row["env_id"] == "env_4_rl"]))
    result = invoke("--envs", str(FIXTURE / "hf" / "191_env_metadata_processed.json"),
                    "--scenarios", str(bad_only), "--out", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert "0 of 5 environments imported" in result.stderr
    assert "env_class_code does not parse" in result.stdout


def test_unusable_input_is_exit_status_1_with_the_reason(tmp_path: Path) -> None:
    result = invoke("--out", str(tmp_path))
    assert result.exit_code == 1 and "--from DIR, or --envs FILE --scenarios FILE" in \
        result.stderr
    result = invoke("--from", str(tmp_path), "--out", str(tmp_path / "out"))
    assert result.exit_code == 1 and "no environments file" in result.stderr
    result = invoke("--from", str(FIXTURE / "hf"), "--out", str(tmp_path / "out"),
                    "--created", "soon")
    assert result.exit_code == 1 and "ISO date" in result.stderr
    result = invoke("--download", "--envs", "x.json", "--out", str(tmp_path / "out"))
    assert result.exit_code == 1 and "does not combine" in result.stderr
    assert not (tmp_path / "out").exists()


def test_one_explicit_file_and_the_other_found_in_from(tmp_path: Path) -> None:
    result = invoke("--from", str(FIXTURE / "hf"), "--envs",
                    str(FIXTURE / "github" / "191_env_metadata.json"), "--out", str(tmp_path),
                    "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["envs_file"]["shape"] == "dict"
    assert report["scenarios_file"]["path"].endswith("hf/envscaler_rl_scenario_metadata.json")


def compare(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["import", "bfcl-compare", *args])


def test_a_bad_checkout_or_catalogue_is_exit_status_1_with_the_reason(tmp_path: Path) -> None:
    result = compare("--from", str(tmp_path), "--catalogue", str(tmp_path))
    assert result.exit_code == 1 and "is it a gorilla checkout?" in result.stderr
    result = compare("--from", str(BFCL_CHECKOUT), "--catalogue", str(tmp_path))
    assert result.exit_code == 1
    assert "holds none of the 3 base questions" in result.stderr
    assert "envscaler import bfcl --from" in result.stderr
    result = compare("--from", str(BFCL_CHECKOUT), "--catalogue", str(tmp_path), "--category", "x")
    assert result.exit_code == 1 and "unknown category 'x'" in result.stderr
    result = compare("--from", str(BFCL_CHECKOUT), "--catalogue", str(tmp_path / "missing"))
    assert result.exit_code == 1 and "missing" in result.stderr
