"""Synthesis runs kept in the repository: hand-written or recorded replies, replayed offline.

A run directory holds::

    settings.json     the run's SynthSettings values (model, temperature, counts, thresholds)
    tasks.jsonl       the task descriptions the run starts from
    replies/          the model's replies, one file per stage, item and attempt
                      (``replies/<stage>/<item with / as __>.<attempt>.md``)
    transcript.jsonl  every exchange keyed by request hash, written by ``record``

``record`` runs ``synth all`` in record mode against a local server that answers with the reply
files, through the real ``openai`` SDK; ``replay`` runs it again from the transcript alone, with
no network, and gives the same files byte for byte. Both start from an empty work directory
(``OUT/.synth``, kept afterwards for its report), so nothing is skipped as already done.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from rich.console import Console

from envscaler.synth import workdir as workdir_module
from envscaler.synth.pipeline import RunResult, run_all
from envscaler.synth.replay_server import ScriptedServer
from envscaler.synth.sandboxes import SandboxHub
from envscaler.synth.settings import SynthSettings
from envscaler.synth.transcript import Transcript

SETTINGS, TASKS, REPLIES, TRANSCRIPT = "settings.json", "tasks.jsonl", "replies", "transcript.jsonl"


class RecordError(RuntimeError):
    """A run could not be recorded: replies are missing or the run did not complete."""


def run_settings(run_dir: Path, **overrides: Any) -> SynthSettings:
    values = json.loads((run_dir / SETTINGS).read_text(encoding="utf-8"))
    return SynthSettings(**{**values, **overrides})


async def record_run(run_dir: Path, out: Path, *, hub: SandboxHub | None = None,
                     console: Console | None = None) -> RunResult:
    """Answer the pipeline from ``replies/`` and write ``transcript.jsonl`` (sorted, diffable)."""
    transcript = run_dir / TRANSCRIPT
    transcript.unlink(missing_ok=True)
    with ScriptedServer(run_dir / REPLIES) as server:
        settings = run_settings(run_dir, mode="record", transcript=transcript,
                                base_url=server.base_url, api_key="scripted")
        result = await _run(settings, run_dir, out, hub, console)
    if server.missing or not result.complete:
        raise RecordError(f"{run_dir}: {result.report.outcome}; missing replies: "
                          f"{', '.join(server.missing) or 'none'}")
    Transcript(transcript).compact()
    return result


async def replay_run(run_dir: Path, out: Path, *, hub: SandboxHub | None = None,
                     console: Console | None = None) -> RunResult:
    """Run the pipeline again from ``transcript.jsonl`` alone."""
    settings = run_settings(run_dir, mode="replay", transcript=run_dir / TRANSCRIPT)
    return await _run(settings, run_dir, out, hub, console)


async def _run(settings: SynthSettings, run_dir: Path, out: Path, hub: SandboxHub | None,
               console: Console | None) -> RunResult:
    workdir = out / workdir_module.DEFAULT_NAME
    shutil.rmtree(workdir, ignore_errors=True)
    return await run_all(settings, tasks=run_dir / TASKS, out=out, workdir=workdir, hub=hub,
                         overwrite=True, console=console)
