"""SkelBuilder end to end: task descriptions -> environment folders (``env.py`` + ``env.json``)."""

from __future__ import annotations

from pathlib import Path

from envscaler.format import EnvFolderError
from envscaler.synth.catalogue import provenance_date, write_env
from envscaler.synth.run import Run
from envscaler.synth.skel.logic import model_logic
from envscaler.synth.skel.quality import evaluate
from envscaler.synth.skel.topics import mine_topics


async def build_skeletons(run: Run, tasks: list[tuple[str, str]], out: Path, *,
                          dual: bool, overwrite: bool = False) -> list[str]:
    """Write one folder per environment that passed every gate under ``out``; their ids."""
    topics = await mine_topics(run, tasks)
    envs = await model_logic(run, topics)
    passed = await evaluate(run, envs, dual=dual)
    written, drops = [], []
    for env_id, env in passed.items():
        try:
            write_env(out / env_id, env, overwrite=overwrite,
                      created=provenance_date(run.settings.created, env["created"]))
        except EnvFolderError as exc:
            drops.append((env_id, str(exc)))
            continue
        written.append(env_id)
    run.select("skel.write", len(passed), len(written), drops)
    return written
