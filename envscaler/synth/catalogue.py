"""What synthesis writes and reads of environment folders, through ``envscaler.format``.

Outputs are deterministic: the folders' bytes are the format's canonical ones
(``envscaler.format.folders``: scenarios by id with nested keys sorted), and nothing is taken
from the wall clock (the provenance date comes from configuration or from the replies' own
timestamps).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from envscaler.format import (
    EnvFolderError,
    EnvManifest,
    FormatError,
    Operation,
    Provenance,
    StateEntity,
    content_hash,
    env_files,
    load_code,
    sync_manifest,
    write_files,
)
from envscaler.synth import PIPELINE_VERSION
from envscaler.synth.envcode import EnvCode

SPLITS = ("train", "rl", "eval")


def provenance_date(configured: date | None, created: int) -> str:
    """The configured date, else the UTC date of the replies' ``created`` timestamp."""
    if configured is not None:
        return configured.isoformat()
    return datetime.fromtimestamp(created, tz=UTC).date().isoformat()


def split_for(scenario_id: str, shares: dict[str, float]) -> str:
    """A split drawn from the sha256 of the id: stable, and independent of the other scenarios."""
    point = int.from_bytes(hashlib.sha256(scenario_id.encode()).digest()[:8], "big") / 2 ** 64
    total = sum(shares.get(name, 0.0) for name in SPLITS)
    edge = 0.0
    for name in SPLITS:
        edge += shares.get(name, 0.0) / total
        if point < edge:
            return name
    return next(name for name in reversed(SPLITS) if shares.get(name, 0.0) > 0)


def _manifest(env: dict[str, Any], source: bytes, *, created: str) -> EnvManifest:
    """The env.json of a synthesized environment (``env`` as the SkelBuilder's stages left it,
    ``source`` its env.py)."""
    return EnvManifest(
        id=env["env_id"], class_name=env["class_name"], summary=env["summary"],
        introduction=env["introduction"],
        state_space=[StateEntity(entity=entity["entity"], attributes=entity["attributes"],
                                 description=entity["description"])
                     for entity in env["state"]["entities"]],
        constraint_rules=list(env["state"]["rules"]),
        operations=[Operation(name=op["name"], description=op["description"], type=op["type"])
                    for op in env["operations"]],
        tools=env["tools"],
        provenance=Provenance(model=env["model"], created=created,
                              pipeline_version=PIPELINE_VERSION,
                              content_hash=content_hash(source)))


def write_env(folder: Path, env: dict[str, Any], *, created: str, overwrite: bool) -> None:
    """``env.py`` and ``env.json`` of a synthesized environment into ``folder``
    (``scenarios.jsonl`` is the ScenGenerator's); EnvFolderError when ``folder`` holds other
    files and not ``overwrite``."""
    source = env["source"].encode("utf-8")
    files = env_files(source, _manifest(env, source, created=created), canonical=True)
    write_files(folder, files, overwrite=overwrite)
    sync_manifest(folder)  # a no-op: the manifest was written in canonical form


def read_env(folder: Path) -> tuple[EnvCode, EnvManifest]:
    """An environment folder's code and manifest, checked by the loader's rules for env.py and
    env.json, without needing ``scenarios.jsonl``; EnvFolderError, which synthesis reports per
    environment, when they break them."""
    try:
        manifest, source = load_code(folder)
    except FormatError as exc:
        raise EnvFolderError(str(exc)) from None
    code = EnvCode(env_id=manifest.id, class_name=manifest.class_name, summary=manifest.summary,
                   introduction=manifest.introduction, rules=list(manifest.constraint_rules),
                   source=source, tools=manifest.tools)
    return code, manifest
