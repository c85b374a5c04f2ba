"""The whole pipeline, end to end, on recorded responses.

No model endpoint is reachable here: every model reply comes from the hand-written fixture
transcript (``tests/fixtures/synth/``), served over HTTP by the replay server on 127.0.0.1 and read
through the real ``openai`` SDK. Generated code runs in real `process` sandboxes here; the Docker
run is in ``test_synth_docker.py``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envscaler.format import derive_tools, load_env, sync_manifest
from envscaler.sandbox.config import SandboxConfig
from envscaler.synth import PIPELINE_VERSION
from envscaler.server.settings import Settings
from envscaler.synth.pipeline import RunResult, run_all, run_scen, run_skel
from envscaler.synth.record import record_run, replay_run
from envscaler.synth.replay_server import ReplayServer
from envscaler.synth.sandboxes import Limits, SandboxHub
from envscaler.synth.settings import SynthSettings
from envscaler.synth.transcript import Transcript
from tests.conftest import REPO_ROOT, TEST_LABELS, new_instance

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "synth"
TRANSCRIPT = FIXTURES / "transcript.jsonl"
TASKS = FIXTURES / "tasks.jsonl"
ENV_ID = "clinic_appointment_scheduling"
EXPECTED_DROPS = [
    ("topics.judge", "task-0004", "not a stateful task: Open-domain factual question"),
    ("topics.judge", "task-0007", ("no usable reply after 3 attempts: invalid reply: "
                                  "needs_environment: Input should be a valid boolean")),
    ("topics.select", "task-0002", "near-duplicate of task-0001 (tfidf similarity 0.70 >= 0.5)"),
    ("topics.select", "task-0005", "below threshold: usefulness 5 < 7, modelability 3 < 7"),
    ("quality.static", "warehouse_inventory_management",
     ("static gate: line 1: imports csv, which is not an allowed module; line 2: imports os, "
     "which is not an allowed module; line 134: uses open")),
    ("quality.executable", "residential_property_lease_management",
     ('executable gate: record_payment raised on valid input {"amount": 3.5, "lease_id": '
     "\"gate-lease_id-2\"}: KeyError: 'gate-lease_id-2' (env.py line 97: lease = "
     "self.leases[lease_id])")),
    ("scen.gate", f"{ENV_ID}/003", ("scenario gate: after the reference solution, check 1 fails: "
                                   "Has the appointment APT-3002 been cancelled")),
    ("scen.gate", f"{ENV_ID}/004", "scenario gate: every check already holds on the initial state"),
]


def fixture_settings(**overrides: Any) -> SynthSettings:
    values = json.loads((FIXTURES / "settings.json").read_text())
    return SynthSettings(**{"api_key": "fixture", **values, **overrides})


def tree(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes()
            for path in sorted(root.rglob("*")) if path.is_file()}


# 1 GiB: the process backend caps address space (RLIMIT_AS), and under load the runtime's check
# threads can fail to start at 256 MiB ("can't start new thread"; reported to the sandbox layer).
PROCESS_MEMORY = "1g"


def sandbox_config(socket_root: Path) -> SandboxConfig:
    return SandboxConfig(sandbox_backend="process", socket_root=socket_root, pool_size=0,
                         labels=TEST_LABELS, sandbox_memory=PROCESS_MEMORY)


def new_hub(socket_root: Path) -> SandboxHub:
    return SandboxHub(sandbox_config(socket_root), Limits.from_settings(Settings()), limit=2,
                      instance=new_instance())


class FlakyReplay(ReplayServer):
    """Answers ``budget`` requests, then 503 for every other one (an endpoint going down)."""

    def __init__(self, transcript: Transcript, budget: int) -> None:
        super().__init__(transcript)
        self.budget = budget
        self._answer = self._flaky

    def _flaky(self, body: dict[str, Any], headers: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        if self.budget <= 0:
            return 503, {"error": {"message": "the endpoint went down", "type": "server_error"}}
        self.budget -= 1
        return self._replay(body, headers)


@pytest.fixture(scope="module")
def transcript() -> Transcript:
    return Transcript(TRANSCRIPT)


@pytest.fixture
def replay(transcript: Transcript) -> Iterator[ReplayServer]:
    with ReplayServer(transcript) as server:
        yield server


@pytest.fixture
async def hub(socket_root: Path) -> AsyncIterator[SandboxHub]:
    async with new_hub(socket_root) as hub:
        yield hub


@pytest.fixture(scope="module")
async def full_run(tmp_path_factory: pytest.TempPathFactory, socket_root: Path,
                   transcript: Transcript) -> AsyncIterator[tuple[RunResult, Path, ReplayServer]]:
    """One complete run through the replay server, shared by the tests that only read it."""
    root = tmp_path_factory.mktemp("full")
    with ReplayServer(transcript) as server:
        async with new_hub(socket_root) as hub:
            result = await run_all(fixture_settings(base_url=server.base_url), tasks=TASKS,
                                   out=root / "out", workdir=root / "work", hub=hub)
        yield result, root, server


def drops(result: RunResult) -> list[tuple[str, str, str]]:
    return [(stage["stage"], drop["item"], drop["reason"])
            for stage in result.report.to_dict()["stages"] for drop in stage["dropped"]]


async def test_every_failure_is_caught_with_its_reason(full_run) -> None:  # type: ignore[no-untyped-def]
    result, _root, _server = full_run
    assert result.complete, result.report.outcome
    found = drops(result)
    assert len(found) == len(EXPECTED_DROPS)
    for (stage, item, reason), (want_stage, want_item, want_reason) in zip(found, EXPECTED_DROPS,
                                                                         strict=True):
        assert (stage, item) == (want_stage, want_item)
        assert reason.startswith(want_reason), reason
    counts = {stage["stage"]: (stage["in"], stage["out"])
              for stage in result.report.to_dict()["stages"]}
    assert counts["topics.judge"] == (7, 5)
    assert counts["topics.select"] == (5, 3)
    assert counts["logic.methods"] == (15, 15)
    assert counts["quality.dual"] == (1, 1)
    assert counts["scen.checks"] == (12, 12)
    assert counts["scen.gate"] == (4, 2)
    assert counts["scen.write"] == (1, 1)


async def test_malformed_replies_were_retried_a_bounded_number_of_times(full_run) -> None:  # type: ignore[no-untyped-def]
    result, _root, server = full_run
    attempts: dict[tuple[str, str], list[int]] = {}
    for stage, item, attempt, status in server.log:
        assert status == 200
        attempts.setdefault((stage, item), []).append(attempt)
    assert attempts[("topics.infer", "task-0001")] == [1, 2]  # cut-off JSON, then a good reply
    assert attempts[("topics.judge", "task-0007")] == [1, 2, 3]  # never parses: dropped
    assert attempts[("scen.configs", f"{ENV_ID}/001")] == [1, 2]  # unknown attribute, then fixed
    assert sum(len(tries) for tries in attempts.values()) == server.requests == 76
    usage = result.usage
    assert usage["calls"] == 76 and usage["unusable_replies"] == 5
    report = json.loads(result.report_path.read_text())
    assert report["outcome"] == "complete"
    assert report["model_stages"]["quality.dual.tester"]["calls"] == 3


async def test_the_output_is_a_valid_catalogue_entry_with_provenance(full_run) -> None:  # type: ignore[no-untyped-def]
    _result, root, _server = full_run
    out = root / "out"
    assert sorted(path.name for path in out.iterdir()) == [ENV_ID]
    package = load_env(out / ENV_ID, strict=True)  # hash, tools and scenarios all checked
    manifest = package.manifest
    assert manifest.class_name == "ClinicScheduler"
    assert manifest.provenance.model == "fixture-model"
    assert manifest.provenance.created == "2026-01-01"  # from the recorded replies, not the clock
    assert manifest.provenance.pipeline_version == PIPELINE_VERSION
    assert manifest.tools == derive_tools(package.source, "ClinicScheduler")
    assert [op.name for op in manifest.operations] == package.tool_names
    assert len(manifest.tools) == 8
    assert [scenario.id for scenario in package.scenarios] == [f"{ENV_ID}-001", f"{ENV_ID}-002"]
    for scenario in package.scenarios:
        assert scenario.verified and scenario.solution
        assert all(item.item.startswith("Has ") for item in scenario.checklist)
        assert scenario.split in ("train", "rl", "eval")
    assert sync_manifest(out / ENV_ID) is False  # already canonical
    skeleton = root / "work" / "skeletons" / ENV_ID
    assert (skeleton / "env.py").read_bytes() == (out / ENV_ID / "env.py").read_bytes()


async def test_replays_are_byte_identical(full_run, tmp_path: Path, hub: SandboxHub) -> None:  # type: ignore[no-untyped-def]
    """Client-side replay (no HTTP at all) gives the same bytes as the run over the server."""
    _result, root, _server = full_run
    result = await run_all(fixture_settings(mode="replay", transcript=TRANSCRIPT), tasks=TASKS,
                           out=tmp_path / "out", workdir=tmp_path / "work", hub=hub)
    assert result.complete
    assert tree(tmp_path / "out") == tree(root / "out")
    assert tree(tmp_path / "work" / "skeletons") == tree(root / "work" / "skeletons")


async def test_resume_after_a_stop_redoes_no_finished_item(full_run, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                           replay: ReplayServer,
                                                           hub: SandboxHub) -> None:
    _result, root, _server = full_run
    settings = fixture_settings(base_url=replay.base_url)
    first = await run_all(settings, tasks=TASKS, out=tmp_path / "out", workdir=tmp_path / "work",
                          stop_after="logic.methods", hub=hub)
    assert first.report.outcome == "stopped after logic.methods"
    assert not (tmp_path / "out").exists()
    before = list(replay.log)
    assert replay.requests == 9 + 6 + 3 + 3 + 3 + 15
    second = await run_all(settings, tasks=TASKS, out=tmp_path / "out",
                           workdir=tmp_path / "work", hub=hub)
    assert second.complete
    after = replay.log[len(before):]
    assert len(before) + len(after) == 76  # every reply requested exactly once over both runs
    assert not {(s, i, a) for s, i, a, _ in before} & {(s, i, a) for s, i, a, _ in after}
    assert second.report.stage("logic.methods").resumed == 15
    assert tree(tmp_path / "out") == tree(root / "out")


async def test_resume_after_the_endpoint_goes_down(full_run, tmp_path: Path, hub: SandboxHub,  # type: ignore[no-untyped-def]
                                                   transcript: Transcript) -> None:
    _result, root, _server = full_run
    with FlakyReplay(transcript, budget=30) as flaky:
        first = await run_all(fixture_settings(base_url=flaky.base_url), tasks=TASKS,
                              out=tmp_path / "out", workdir=tmp_path / "work", hub=hub)
        answered = [(s, i, a) for s, i, a, status in flaky.log if status == 200]
    assert first.report.outcome.startswith("incomplete: ")
    assert "could not reach the model; run again to resume" in first.report.outcome
    pending = [entry for stage in first.report.to_dict()["stages"] for entry in stage["pending"]]
    assert pending and all("InternalServerError 503" in entry["reason"] for entry in pending)
    finished = {(path.parent.name, path.stem)
                for path in (tmp_path / "work" / "stages").rglob("*.json")}
    with ReplayServer(transcript) as healthy:
        second = await run_all(fixture_settings(base_url=healthy.base_url), tasks=TASKS,
                               out=tmp_path / "out", workdir=tmp_path / "work", hub=hub)
        again = [(s, i, a) for s, i, a, _ in healthy.log]
    assert second.complete
    redone = {(stage, item.replace("/", "__")) for stage, item, _ in again} & finished
    assert not redone, f"finished items were asked again: {sorted(redone)}"
    assert len(set(answered) | set(again)) == 76
    assert tree(tmp_path / "out") == tree(root / "out")


async def test_skel_then_scen_give_the_same_catalogue_as_all(full_run, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                             replay: ReplayServer,
                                                             hub: SandboxHub) -> None:
    _result, root, _server = full_run
    settings = fixture_settings(base_url=replay.base_url)
    skel = await run_skel(settings, tasks=TASKS, out=tmp_path / "envs", workdir=tmp_path / "w1",
                          hub=hub)
    assert skel.complete and sorted(p.name for p in (tmp_path / "envs").iterdir()) == [ENV_ID]
    scen = await run_scen(settings, envs=tmp_path / "envs", out=None, workdir=tmp_path / "w2",
                          hub=hub)
    assert scen.complete
    assert tree(tmp_path / "envs") == tree(root / "out")


async def test_the_fixture_transcript_is_current(tmp_path: Path, hub: SandboxHub) -> None:
    """Recording again from the hand-written replies gives the same transcript: the prompts and
    the code have not drifted from what was recorded (else run tests/fixtures/synth/record.py);
    replaying that run gives the same environments as recording it."""
    run = tmp_path / "run"
    run.mkdir()
    for name in ("settings.json", "tasks.jsonl"):
        shutil.copyfile(FIXTURES / name, run / name)
    shutil.copytree(FIXTURES / "replies", run / "replies")
    recorded = await record_run(run, tmp_path / "recorded", hub=hub)
    assert recorded.complete
    assert (run / "transcript.jsonl").read_bytes() == TRANSCRIPT.read_bytes()
    replayed = await replay_run(run, tmp_path / "replayed", hub=hub)
    assert replayed.complete
    assert envs_tree(tmp_path / "replayed") == envs_tree(tmp_path / "recorded") != {}


def envs_tree(root: Path) -> dict[str, bytes]:
    """The environment files of an output folder, without the work directory."""
    return {name: data for name, data in tree(root).items() if not name.startswith(".synth")}


async def test_a_replay_miss_aborts_naming_the_stage_and_item(tmp_path: Path,
                                                              hub: SandboxHub) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task": "A task that was never recorded."}\n')
    result = await run_skel(fixture_settings(mode="replay", transcript=TRANSCRIPT), tasks=tasks,
                            out=tmp_path / "out", workdir=tmp_path / "work", hub=hub)
    assert result.report.outcome.startswith(
        "aborted: no recorded reply for stage 'topics.judge', item 'task-0001', attempt 1")


# --- the command line ---------------------------------------------------------------------------

def cli_env(socket_root: Path, **extra: str) -> dict[str, str]:
    values = json.loads((FIXTURES / "settings.json").read_text())
    env = {f"ENVSCALER_SYNTH_{key.upper()}": str(value) for key, value in values.items()}
    env.update({"ENVSCALER_SANDBOX_BACKEND": "process", "ENVSCALER_SOCKET_ROOT": str(socket_root),
                "ENVSCALER_POOL_SIZE": "0", "ENVSCALER_SYNTH_API_KEY": "fixture",
                "ENVSCALER_SANDBOX_MEMORY": PROCESS_MEMORY})
    env.update(extra)
    return env


def invoke(args: list[str], env: dict[str, str]) -> Any:
    from envscaler.cli.main import app

    return CliRunner().invoke(app, args, env=env, catch_exceptions=False)


def test_the_synth_and_gate_commands(tmp_path: Path, socket_root: Path) -> None:
    out = tmp_path / "catalogue"
    env = cli_env(socket_root)
    run = invoke(["synth", "all", "--tasks", str(TASKS), "--out", str(out), "--mode", "replay",
                  "--transcript", str(TRANSCRIPT)], env)
    assert run.exit_code == 0, run.output
    assert "synthesis run: complete" in run.output
    assert "near-duplicate of task-0001" in run.output and "model calls: 76" in run.output
    report = json.loads((out / ".synth" / "report.json").read_text())
    assert report["outcome"] == "complete"
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [ENV_ID]

    rerun = invoke(["synth", "all", "--tasks", str(TASKS), "--out", str(out), "--mode", "replay",
                    "--transcript", str(TRANSCRIPT)], env)
    assert rerun.exit_code == 0 and "model calls: 0 " in rerun.output  # everything resumed

    passed = invoke(["gate", str(out), "--json"], env)
    assert passed.exit_code == 0, passed.output
    verdict = json.loads(passed.stdout)
    assert verdict["passed"] is True
    assert verdict["envs"][0]["env"] == ENV_ID
    assert set(verdict["envs"][0]["scenarios"]) == {f"{ENV_ID}-001", f"{ENV_ID}-002"}

    broken = tmp_path / "broken"
    static = broken / "static_env"
    shutil.copytree(out / ENV_ID, static)
    (static / "env.py").write_text("import os\n" + (static / "env.py").read_text())
    manifest = json.loads((static / "env.json").read_text())
    manifest["id"] = "static_env"
    (static / "env.json").write_text(json.dumps(manifest))
    sync_manifest(static)
    wrong = broken / "wrong_check"
    shutil.copytree(out / ENV_ID, wrong)
    manifest["id"] = "wrong_check"
    (wrong / "env.json").write_text(json.dumps(manifest))
    sync_manifest(wrong)
    lines = (wrong / "scenarios.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["checklist"][1]["check_func"] = first["checklist"][1]["check_func"].replace(
        "555-0198", "555-0000")
    (wrong / "scenarios.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")

    failed = invoke(["gate", str(broken), "--json"], env)
    assert failed.exit_code == 1
    envs = {report["env"]: report for report in json.loads(failed.stdout)["envs"]}
    assert envs["static_env"]["passed"] is False
    assert envs["static_env"]["static"]["problems"][0] == {
        "rule": "import", "message": "imports os, which is not an allowed module", "line": 1}
    assert envs["static_env"]["executable"]["skipped"].startswith("the static gate failed")
    scenarios = envs["wrong_check"]["scenarios"]
    assert scenarios[f"{ENV_ID}-002"]["passed"] is True
    assert scenarios[f"{ENV_ID}-001"]["problems"] == [{
        "rule": "check-fails", "message": "after the reference solution, check 2 fails: Has the "
        "phone number of patient P-201 changed to 555-0198"}]
    assert envs["wrong_check"]["static"]["passed"] is True

    table = invoke(["gate", str(broken)], env)
    assert table.exit_code == 1
    assert "imports os, which is not an allowed module" in table.output
    assert "check 2 fails" in table.output
    assert invoke(["gate", str(tmp_path / "nothing-here")], env).exit_code == 2


def test_bad_options_are_usage_errors(tmp_path: Path, socket_root: Path) -> None:
    env = cli_env(socket_root)
    unknown = invoke(["synth", "all", "--tasks", str(TASKS), "--out", str(tmp_path),
                      "--stop-after", "nope"], env)
    assert unknown.exit_code == 2 and "unknown stage 'nope'" in unknown.output
    replay = invoke(["synth", "skel", "--tasks", str(TASKS), "--out", str(tmp_path),
                     "--mode", "replay"], env)
    assert replay.exit_code == 2 and "needs ENVSCALER_SYNTH_TRANSCRIPT" in replay.output


async def test_existing_files_are_not_replaced_without_overwrite(full_run, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                 replay: ReplayServer,
                                                                 hub: SandboxHub) -> None:
    _result, root, _server = full_run
    envs = tmp_path / "envs"
    shutil.copytree(root / "out" / ENV_ID, envs / ENV_ID)
    curated = envs / ENV_ID / "scenarios.jsonl"
    curated.write_text(curated.read_text().splitlines()[0] + "\n")  # a hand-kept subset
    settings = fixture_settings(base_url=replay.base_url)
    refused = await run_scen(settings, envs=envs, out=None, workdir=tmp_path / "work", hub=hub)
    assert refused.complete
    [(stage, item, reason)] = [drop for drop in drops(refused) if drop[0] == "scen.write"]
    assert item == ENV_ID and "scenarios.jsonl already exist(s) with other content" in reason
    assert len(curated.read_text().splitlines()) == 1
    replaced = await run_scen(settings, envs=envs, out=None, workdir=tmp_path / "work",
                              overwrite=True, hub=hub)
    assert replaced.complete and replaced.report.stage("scen.gate").resumed == 4
    assert curated.read_bytes() == (root / "out" / ENV_ID / "scenarios.jsonl").read_bytes()
