"""The gates on their labelled corpus (tests/fixtures/gate_corpus), in real `process` sandboxes:
every good environment passes, every broken one is rejected for its labelled reason."""

from __future__ import annotations

import dataclasses

from envscaler.sandbox.config import SandboxConfig
from envscaler.server.settings import Settings
from envscaler.synth.gates.corpus import run_corpus
from envscaler.synth.sandboxes import Limits, SandboxHub
from tests.conftest import REPO_ROOT, new_instance

CORPUS = REPO_ROOT / "tests" / "fixtures" / "gate_corpus"
LIMITS = Limits.from_settings(Settings(call_timeout=2.0))  # the endless loop's deadline


async def test_the_gates_judge_every_corpus_environment_rightly(
        process_config: SandboxConfig) -> None:
    config = dataclasses.replace(process_config, sandbox_memory="1g")  # see test_synth_pipeline
    async with SandboxHub(config, LIMITS, limit=2, instance=new_instance()) as hub:
        report = await run_corpus(CORPUS, hub)
    summary = report.to_dict()
    assert summary["misjudged"] == []
    assert (summary["good"], summary["broken"]) == (6, 19)
    assert (report.precision, report.recall, report.right_reason) == (1.0, 1.0, 1.0)
    by_env = {verdict.env_id: verdict.rules for verdict in report.verdicts}
    assert by_env["broken_returns_count"] == ("result",)  # a variable: the executable gate's
    assert by_env["broken_returns_string"] == ("return",)  # a literal: the static gate's
