"""What the benchmark importers share of their output: a record that could not be imported, and
an environment's folder written whole or not at all."""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envscaler.format.folders import sync_manifest
from envscaler.format.loader import ENV_MANIFEST, ENV_SCENARIOS, ENV_SOURCE, load_env
from envscaler.format.models import Scenario

DATA_DIR = "data"


@dataclass(frozen=True)
class Problem:
    record: str  # a question or task id, or an environment's id
    reason: str


def write_env(out: Path, env_id: str, source: str, manifest: dict[str, Any],
              scenarios: list[Scenario], data: dict[str, str] | None = None) -> Path:
    """``out/env_id``: ``env.py``, ``env.json`` (synced with the source), ``scenarios.jsonl``
    and ``data/`` files (name -> text), assembled and loaded in a staging folder, then moved in
    place (an earlier import of the same id is replaced)."""
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".import-", dir=out))
    try:
        folder = staging / env_id
        folder.mkdir()
        (folder / ENV_SOURCE).write_text(source, encoding="utf-8")
        for name, text in (data or {}).items():
            (folder / DATA_DIR).mkdir(exist_ok=True)
            (folder / DATA_DIR / name).write_text(text, encoding="utf-8")
        (folder / ENV_MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
        (folder / ENV_SCENARIOS).write_text(
            "".join(s.model_dump_json() + "\n" for s in scenarios), encoding="utf-8")
        sync_manifest(folder)
        load_env(folder)
        target = out / env_id
        if target.exists():
            shutil.rmtree(target)
        folder.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


__all__ = ["DATA_DIR", "Problem", "write_env"]
