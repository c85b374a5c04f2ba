"""Importing whole release files into catalogue folders: what is imported, what is reported (with
record ids and reasons), both published shapes giving the same bytes, folders that load, re-runs,
--limit, and files that cannot be read at all. Nothing here runs generated code."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from envscaler.format import content_hash, load_catalogue, load_env, sync_manifest
from envscaler.importers.envscaler_release import (
    ImportReport,
    SourceError,
    import_release,
    locate,
    read_file,
)
from envscaler.importers.envscaler_release import pins as pins_module
from envscaler.importers.envscaler_release.pins import PinnedFile

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "envscaler_release"
HF = FIXTURE / "hf"
GITHUB = FIXTURE / "github"
IMPORTED = {"envscaler_env_1_rl": ("env_1_rl", ["env_1_rl-task_1", "env_1_rl-task_2"]),
            "envscaler_env_2_rl": ("env_2_rl", ["env_2_rl-task_1", "env_2_rl-task_2"])}
EXPECTED_ERRORS = [  # (kind, record, start of the reason), in report order
    ("scenario", "env_1_rl-task_3",
     "checklist_with_func[0].check_func does not parse: '(' was never closed"),
    ("scenario", "env_2_rl-task_3",
     "init_config is not valid JSON: Expecting property name enclosed in double quotes"),
    ("scenario", "env_2_rl-task_4", "init_config is a JSON list, not an object"),
    ("env", "env_4_rl", "env_class_code does not parse: expected ':' (line 29)"),
    ("scenario", "env_4_rl-task_1", "its environment 'env_4_rl' was not imported"),
    ("env", "env_5_rl", ("env_class_code does not define class 'LibraryCatalogSystem' at top "
                         "level (classes found: BookInfo, LibraryCatalog)")),
    ("scenario", "env_5_rl-task_1", "its environment 'env_5_rl' was not imported"),
    ("scenario", "env_99_rl-task_1",
     "refers to environment 'env_99_rl', which the environments file does not have"),
]


def run(folder: Path, out: Path, **options) -> ImportReport:  # type: ignore[no-untyped-def]
    envs, scenarios = locate(folder)
    return import_release(envs, scenarios, out, **options)


def tree(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes()
            for path in sorted(root.rglob("*")) if path.is_file()}


def test_fixture_files_are_what_make_fixture_writes() -> None:
    spec = importlib.util.spec_from_file_location("make_fixture", FIXTURE / "make_fixture.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, data in module.build().items():
        assert (FIXTURE / name).read_bytes() == data, f"{name}: run make_fixture.py"


def test_both_files_are_found_and_their_shapes_told_apart() -> None:
    assert locate(HF) == (HF / "191_env_metadata_processed.json",
                          HF / "envscaler_rl_scenario_metadata.json")
    assert locate(GITHUB) == (GITHUB / "191_env_metadata.json",
                              GITHUB / "rl_scenario_metadata.json")
    hf, github = read_file(locate(HF)[0], "environments"), read_file(locate(GITHUB)[0], "envs")
    assert (hf.shape, github.shape) == ("list", "dict")
    assert [record.key for record in github.records] == [
        "env_1_rl", "env_2_rl", "env_3_sft", "env_4_rl", "env_5_rl"]
    assert "env_func_details" in hf.records[0].data
    assert "env_func_details" not in github.records[0].data
    assert isinstance(hf.records[0].data["tools"], str)  # a JSON string, as published


def test_good_records_import_and_bad_ones_are_reported_with_id_and_reason(tmp_path: Path) -> None:
    report = run(HF, tmp_path)
    assert [(env.env_id, env.release_env_id) for env in report.imported] == [
        (env_id, release_id) for env_id, (release_id, _) in IMPORTED.items()]
    assert [(problem.kind, problem.record) for problem in report.errors] == [
        (kind, record) for kind, record, _ in EXPECTED_ERRORS]
    for problem, (_, _, reason) in zip(report.errors, EXPECTED_ERRORS, strict=True):
        assert problem.reason.startswith(reason), problem
    assert [(problem.kind, problem.record, problem.reason) for problem in report.skipped] == [
        ("env", "env_3_sft", "no RL scenario in the scenarios file (an SFT-only environment)")]
    assert report.counts() == {
        "env_records": 5, "envs_imported": 2, "envs_skipped": 1, "envs_failed": 2,
        "envs_not_examined": 0, "scenario_records": 10, "scenarios_imported": 4,
        "scenarios_skipped": 0, "scenarios_failed": 6}
    assert report.imported[0].release_only_tools == ("_generate_message_id", "_find_conversation")
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(IMPORTED)  # no leftovers
    json.dumps(report.to_dict())  # the --json output


def test_every_imported_folder_loads_as_the_gateway_loads_it(tmp_path: Path) -> None:
    run(HF, tmp_path)
    catalogue = load_catalogue(tmp_path, strict=True)
    assert sorted(catalogue.envs) == sorted(IMPORTED)
    records = {record["env_id"]: record for record in json.loads(
        (HF / "191_env_metadata_processed.json").read_text())}
    for env_id, (release_id, scenario_ids) in IMPORTED.items():
        package = load_env(tmp_path / env_id)
        source = records[release_id]["env_class_code"]
        assert (tmp_path / env_id / "env.py").read_bytes() == source.encode("utf-8")
        assert package.manifest.provenance.content_hash == content_hash(source.encode("utf-8"))
        assert [scenario.id for scenario in package.scenarios] == scenario_ids
        assert all(scenario.split == "rl" and scenario.solution is None
                   and not scenario.verified for scenario in package.scenarios)
        assert not any(name.startswith("_") for name in package.tool_names)
        assert sync_manifest(tmp_path / env_id) is False  # env.json is already canonical


def test_both_published_shapes_give_identical_folders(tmp_path: Path) -> None:
    hf, github = run(HF, tmp_path / "hf"), run(GITHUB, tmp_path / "github")
    assert tree(tmp_path / "hf") == tree(tmp_path / "github")
    assert tree(tmp_path / "hf")  # not vacuous
    assert hf.errors == github.errors and hf.skipped == github.skipped


def test_explicit_files_may_mix_the_shapes(tmp_path: Path) -> None:
    report = import_release(GITHUB / "191_env_metadata.json",
                            HF / "envscaler_rl_scenario_metadata.json", tmp_path / "mixed")
    run(HF, tmp_path / "hf")
    assert len(report.imported) == 2
    assert tree(tmp_path / "mixed") == tree(tmp_path / "hf")


def test_importing_again_replaces_an_earlier_import_with_the_same_bytes(tmp_path: Path) -> None:
    run(HF, tmp_path)
    before = tree(tmp_path)
    (tmp_path / "envscaler_env_1_rl" / "scenarios.jsonl").write_text("stale\n")
    again = run(HF, tmp_path)
    assert len(again.imported) == 2 and tree(tmp_path) == before


def test_a_folder_not_made_by_the_importer_is_never_replaced(tmp_path: Path) -> None:
    mine = tmp_path / "envscaler_env_2_rl"
    mine.mkdir()
    (mine / "notes.txt").write_text("hand-made")
    report = run(HF, tmp_path)
    assert [env.env_id for env in report.imported] == ["envscaler_env_1_rl"]
    blocked = [problem for problem in report.errors if problem.record == "env_2_rl"]
    assert len(blocked) == 1 and "was not imported from the EnvScaler release" in \
        blocked[0].reason
    orphans = [problem.record for problem in report.errors
               if problem.kind == "scenario" and "'env_2_rl' was not imported" in problem.reason]
    assert orphans == ["env_2_rl-task_1", "env_2_rl-task_2"]
    assert (mine / "notes.txt").read_text() == "hand-made"


def test_limit_stops_after_n_imported_environments(tmp_path: Path) -> None:
    report = run(HF, tmp_path, limit=1)
    assert [env.env_id for env in report.imported] == ["envscaler_env_1_rl"]
    counts = report.counts()
    assert counts["envs_not_examined"] == 4 and counts["scenarios_skipped"] == 6
    assert sorted(path.name for path in tmp_path.iterdir()) == ["envscaler_env_1_rl"]


def test_provenance_names_the_pinned_revision_when_the_bytes_are_the_pinned_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    envs, scenarios = locate(HF)
    sha = read_file(envs, "environments").sha256
    pinned = PinnedFile("envs", "XXHStudyHard/EnvScaler-191-Env", envs.name, "ab" * 20, sha)
    monkeypatch.setattr(pins_module, "PINNED", (pinned,))
    report = import_release(envs, scenarios, tmp_path / "pinned")
    manifest = load_env(tmp_path / "pinned" / "envscaler_env_1_rl").manifest
    assert manifest.provenance.pipeline_version == "envscaler-release@" + "ab" * 20
    assert report.envs_file["pinned_revision"] == "ab" * 20
    assert report.scenarios_file["pinned_revision"] is None
    labelled = import_release(envs, scenarios, tmp_path / "labelled", revision="87e6673",
                              created="2026-01-11")
    manifest = load_env(tmp_path / "labelled" / "envscaler_env_2_rl").manifest
    assert manifest.provenance.pipeline_version == "envscaler-release@87e6673"
    assert manifest.provenance.created == "2026-01-11" == labelled.created
    with pytest.raises(ValueError, match="ISO date"):
        import_release(envs, scenarios, tmp_path / "bad", created="yesterday")


def write(path: Path, value: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
    return path


def test_unusable_records_in_either_file_are_reported_and_the_rest_imports(
        tmp_path: Path) -> None:
    envs = json.loads((GITHUB / "191_env_metadata.json").read_text())
    envs["env_6_rl"] = "not a record"
    envs["env_7_rl"] = {**envs["env_1_rl"], "env_id": "env_1_rl"}  # key and field disagree
    rows = json.loads((HF / "envscaler_rl_scenario_metadata.json").read_text())
    rows += [42, {"task_id": "orphan"}, {**rows[0]}]  # a number, no env_id, a duplicate task
    report = import_release(write(tmp_path / "in" / "envs.json", envs),
                            write(tmp_path / "in" / "rl.json", rows), tmp_path / "out")
    assert len(report.imported) == 2
    problems = {(problem.kind, problem.record): problem.reason for problem in report.errors}
    assert problems[("env", "env_6_rl")] == "the record is a JSON string, not an object"
    assert problems[("env", "env_7_rl")].startswith("env_id 'env_1_rl' differs from its key")
    assert problems[("scenario", "#10")] == "the row is a JSON number, not an object"
    assert problems[("scenario", "orphan")] == "env_id is missing or not a string"
    duplicate = [problem for problem in report.errors if problem.record == rows[0]["task_id"]]
    assert len(duplicate) == 1 and duplicate[0].reason.startswith("duplicate scenario id")
    assert load_env(tmp_path / "out" / "envscaler_env_1_rl").scenarios[0].id == rows[0]["task_id"]


def test_duplicate_env_ids_in_a_list_keep_the_first(tmp_path: Path) -> None:
    envs = json.loads((HF / "191_env_metadata_processed.json").read_text())
    envs.append({**envs[0], "environment_summary": "a second copy"})
    report = import_release(write(tmp_path / "envs.json", envs),
                            HF / "envscaler_rl_scenario_metadata.json", tmp_path / "out")
    assert ("env", "env_1_rl") in {(p.kind, p.record) for p in report.errors}
    assert load_env(tmp_path / "out" / "envscaler_env_1_rl").manifest.summary == \
        "Mobile messaging application"


def test_an_environment_whose_scenarios_all_fail_is_not_written(tmp_path: Path) -> None:
    rows = [row for row in json.loads((HF / "envscaler_rl_scenario_metadata.json").read_text())
            if row["env_id"] == "env_2_rl"]
    for row in rows:
        row["init_config"] = "not json"
    report = import_release(HF / "191_env_metadata_processed.json",
                            write(tmp_path / "rl.json", rows), tmp_path / "out")
    assert report.imported == []
    assert ("env", "env_2_rl") in {(p.kind, p.record) for p in report.errors}
    assert [path.name for path in (tmp_path / "out").iterdir()] == []


@pytest.mark.parametrize(("files", "message"), [
    ({}, ("no environments file; expected one of 191_env_metadata_processed.json, "
          "191_env_metadata.json")),
    ({"191_env_metadata.json": {}}, "no RL scenarios file"),
    ({"191_env_metadata.json": {}, "191_env_metadata_processed.json": [],
      "rl_scenario_metadata.json": []},
     "both 191_env_metadata_processed.json and 191_env_metadata.json are there"),
])
def test_a_folder_without_exactly_one_file_of_each_kind_is_refused(
        tmp_path: Path, files: dict[str, object], message: str) -> None:
    for name, value in files.items():
        write(tmp_path / name, value)
    with pytest.raises(SourceError, match=message):
        locate(tmp_path)


def test_files_that_are_not_the_release_json_are_refused(tmp_path: Path) -> None:
    (tmp_path / "envs.json").write_text('[{"env_id": ')
    with pytest.raises(SourceError, match=r"not JSON: Expecting value \(line 1, column 13\)"):
        read_file(tmp_path / "envs.json", "environments")
    write(tmp_path / "n.json", 3)
    with pytest.raises(SourceError, match="holds a JSON int"):
        read_file(tmp_path / "n.json", "environments")
    with pytest.raises(SourceError, match="does not exist"):
        import_release(tmp_path / "missing.json", tmp_path / "n.json", tmp_path / "out")
    (tmp_path / "latin.json").write_bytes(b'["\xe9"]')
    with pytest.raises(SourceError, match="not UTF-8"):
        read_file(tmp_path / "latin.json", "environments")


def test_the_importer_never_runs_generated_code(tmp_path: Path) -> None:
    envs = json.loads((HF / "191_env_metadata_processed.json").read_text())
    marker = tmp_path / "ran"
    envs[0]["env_class_code"] = (f"open({str(marker)!r}, 'w').write('x')\n"
                                 + envs[0]["env_class_code"])
    rows = json.loads((HF / "envscaler_rl_scenario_metadata.json").read_text())
    rows[0]["checklist_with_func"][0]["check_func"] = (
        f"open({str(marker)!r}, 'w').write('x')\ndef check_func(final_state):\n    return True\n")
    report = import_release(write(tmp_path / "e.json", envs), write(tmp_path / "r.json", rows),
                            tmp_path / "out")
    assert len(report.imported) == 2 and not marker.exists()
    shutil.rmtree(tmp_path / "out")
