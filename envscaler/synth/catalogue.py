"""Reading and writing environment folders in the catalogue format (``envformat``).

Outputs are deterministic: ``env.json`` in ``sync_manifest``'s canonical form, scenarios one a line
in id order with the keys of nested objects sorted, and nothing taken from the wall clock (the
provenance date comes from configuration or from the replies' own timestamps).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from envscaler.format import (
    EnvManifest,
    Operation,
    Provenance,
    Scenario,
    StateEntity,
    ToolSchemaError,
    content_hash,
    derive_tools,
    sync_manifest,
)
from envscaler.format.loader import ENV_MANIFEST, ENV_SOURCE
from envscaler.synth import PIPELINE_VERSION
from envscaler.synth.envcode import EnvCode, sorted_json

SPLITS = ("train", "rl", "eval")


class EnvFolderError(Exception):
    """An environment folder that the pipeline cannot read."""


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


def write_files(folder: Path, files: dict[str, bytes], *, overwrite: bool) -> None:
    """Write ``files`` into ``folder``. An existing file with other content is an error unless
    ``overwrite``: a run must not silently replace an environment or scenarios it did not make
    (rewriting identical bytes, as a resumed run does, is fine)."""
    if not overwrite:
        changed = sorted(name for name, data in files.items()
                         if (folder / name).exists() and (folder / name).read_bytes() != data)
        if changed:
            raise EnvFolderError(f"{folder}: {', '.join(changed)} already exist(s) with other "
                                 "content; pass --overwrite to replace")
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)


def env_files(env: dict[str, Any], *, created: str) -> dict[str, bytes]:
    """``env.py`` and ``env.json`` of a synthesized environment, in ``sync_manifest``'s form
    (``scenarios.jsonl`` is the ScenGenerator's)."""
    source_bytes = env["source"].encode("utf-8")
    manifest = EnvManifest(
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
                              content_hash=content_hash(source_bytes)))
    text = json.dumps(manifest.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
    return {ENV_SOURCE: source_bytes, ENV_MANIFEST: text.encode("utf-8")}


def write_env(folder: Path, env: dict[str, Any], *, created: str, overwrite: bool) -> None:
    write_files(folder, env_files(env, created=created), overwrite=overwrite)
    sync_manifest(folder)  # a no-op: the manifest was written in canonical form


def read_env(folder: Path) -> tuple[EnvCode, EnvManifest]:
    """An environment folder's code and manifest, checked like the loader does (hash, tools),
    without needing ``scenarios.jsonl``."""
    try:
        source_bytes = (folder / ENV_SOURCE).read_bytes()
        manifest = EnvManifest.model_validate_json((folder / ENV_MANIFEST).read_bytes())
    except OSError as exc:
        raise EnvFolderError(f"{folder}: {exc.strerror}: {exc.filename}") from None
    except ValidationError as exc:
        raise EnvFolderError(f"{folder / ENV_MANIFEST}: {exc.errors()[0]['msg']}") from None
    source = source_bytes.decode("utf-8", errors="replace")
    if manifest.provenance.content_hash != content_hash(source_bytes):
        raise EnvFolderError(f"{folder / ENV_MANIFEST}: the content hash does not match env.py")
    try:
        tools = derive_tools(source, manifest.class_name)
    except ToolSchemaError as exc:
        raise EnvFolderError(f"{folder / ENV_SOURCE}: {exc}") from None
    if tools != manifest.tools:
        raise EnvFolderError(f"{folder / ENV_MANIFEST}: the tools differ from those of env.py")
    code = EnvCode(env_id=manifest.id, class_name=manifest.class_name, summary=manifest.summary,
                   introduction=manifest.introduction, rules=list(manifest.constraint_rules),
                   source=source, tools=tools)
    return code, manifest


def env_folders(root: Path, *, required: bool = False) -> list[Path]:
    """Environment folders under ``root`` (or ``root`` itself when it is one), by name; with
    ``required``, none is an error too (a path given to work on)."""
    if (root / ENV_MANIFEST).is_file():
        return [root]
    if not root.is_dir():
        raise EnvFolderError(f"{root}: not a folder")
    folders = [folder for folder in sorted(root.iterdir())
               if folder.is_dir() and not folder.name.startswith((".", "_"))
               and (folder / ENV_MANIFEST).is_file()]
    if required and not folders:
        raise EnvFolderError(f"{root}: no environment folder (with an env.json) found")
    return folders


def scenarios_bytes(scenarios: list[Scenario]) -> bytes:
    lines = []
    for scenario in sorted(scenarios, key=lambda s: s.id):
        data = scenario.model_dump(mode="json")
        data = {key: sorted_json(value) if key in ("init_config", "solution") else value
                for key, value in data.items()}
        lines.append(json.dumps(data, ensure_ascii=False))
    return ("\n".join(lines) + "\n").encode("utf-8")
