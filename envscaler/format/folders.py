"""Writing environment folders: the one place where their bytes are made and put on disk.

Synthesis, the importers and ``sync_manifest`` all write through here, so an environment's files
have one form whoever made them: env.json in the model's key order with a 2-space indent, UTF-8
and a trailing newline; scenarios one JSON object a line. Synthesis asks for the canonical order
(by id, with the keys of ``init_config`` and ``solution`` sorted) so that a run regenerates its
folders byte for byte; an importer keeps its source's order, so its folders read like the source.

Two ways to put a folder in place, for two kinds of writer: `write_files` fills a folder a run is
making, refusing to change what is there unless told to; `publish_env` builds a whole folder
aside, loads it as the gateway would and swaps it in, so a reader never sees half of one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from envscaler.format.loader import (
    ENV_DATA,
    ENV_MANIFEST,
    ENV_SCENARIOS,
    ENV_SOURCE,
    load_env,
    synced_manifest,
)
from envscaler.format.models import EnvManifest, Scenario
from envscaler.format.ownfiles import read_own_file

STAGING_PREFIX = ".import-"  # catalogues skip names starting with "."
_SORTED_SCENARIO_FIELDS = ("init_config", "solution")


class EnvFolderError(Exception):
    """A folder that cannot be written or read as asked (another run's files, no environment);
    the message says which folder and why."""


# --- bytes ----------------------------------------------------------------------------------

def sorted_json(value: Any) -> Any:
    """``value`` with the keys of every object sorted (order carries no meaning there)."""
    if isinstance(value, dict):
        return {key: sorted_json(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_json(item) for item in value]
    return value


def manifest_bytes(manifest: EnvManifest) -> bytes:
    """env.json's bytes: the model's key order, 2-space indent, UTF-8, a trailing newline; the form
    `sync_manifest` keeps, so a synced file diffs cleanly and a second sync is a no-op."""
    text = json.dumps(manifest.model_dump(mode="json"), indent=2, ensure_ascii=False)
    return (text + "\n").encode("utf-8")


def scenarios_bytes(scenarios: Iterable[Scenario], *, canonical: bool) -> bytes:
    """scenarios.jsonl's bytes, one scenario a line. ``canonical``: by id, with the keys of
    ``init_config`` and ``solution`` sorted, so that the same scenarios give the same bytes
    whatever order a run made them in; otherwise as given (an importer's source order)."""
    if canonical:
        scenarios = sorted(scenarios, key=lambda scenario: scenario.id)
    lines = [json.dumps(_scenario_json(scenario, canonical), ensure_ascii=False)
             for scenario in scenarios]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _scenario_json(scenario: Scenario, canonical: bool) -> dict[str, Any]:
    data: dict[str, Any] = scenario.model_dump(mode="json")
    if not canonical:
        return data
    return {key: sorted_json(value) if key in _SORTED_SCENARIO_FIELDS else value
            for key, value in data.items()}


def env_files(source: bytes, manifest: EnvManifest, scenarios: Iterable[Scenario] = (), *,
              canonical: bool, data: Mapping[str, str] | None = None) -> dict[str, bytes]:
    """An environment folder's files by relative path: env.py as given, env.json, and, when there
    are any, scenarios.jsonl (``canonical``: see `scenarios_bytes`) and the ``data/`` files
    (name -> JSON text). A synthesis skeleton has no scenarios yet, so no scenarios.jsonl."""
    files = {ENV_SOURCE: source, ENV_MANIFEST: manifest_bytes(manifest)}
    scenarios = list(scenarios)
    if scenarios:
        files[ENV_SCENARIOS] = scenarios_bytes(scenarios, canonical=canonical)
    for name, text in (data or {}).items():
        files[f"{ENV_DATA}/{name}"] = text.encode("utf-8")
    return files


# --- putting folders in place ---------------------------------------------------------------

def write_files(folder: Path, files: Mapping[str, bytes], *, overwrite: bool) -> None:
    """Write ``files`` into ``folder``. An existing file with other content is an error unless
    ``overwrite``: a run must not silently replace an environment or scenarios it did not make
    (rewriting identical bytes, as a resumed run does, is fine). Nothing is written when refused."""
    if not overwrite:
        changed = sorted(name for name, data in files.items()
                         if (folder / name).exists() and (folder / name).read_bytes() != data)
        if changed:
            raise EnvFolderError(f"{folder}: {', '.join(changed)} already exist(s) with other "
                                 "content; pass --overwrite to replace")
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)


def publish_env(target: Path, files: Mapping[str, bytes]) -> None:
    """Make ``target`` an environment folder of exactly ``files``, replacing what is there.

    The folder is assembled in a staging folder beside ``target`` and loaded strictly first, so
    that what lands is what the gateway will serve; FormatError (``target`` untouched) when it
    does not load. Then `replace_folder` swaps it in.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=target.parent))
    try:
        folder = staging / target.name
        write_files(folder, files, overwrite=True)
        load_env(folder, strict=True)
        replace_folder(folder, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def replace_folder(folder: Path, target: Path) -> None:
    """Move ``folder`` to ``target`` (same file system). An existing ``target`` is renamed away
    first and deleted after, so a reader sees the old folder or the new one, never a mix (deleting
    it in place would show a half-deleted folder)."""
    old = None
    if target.exists():
        old = target.with_name(f".old-{target.name}-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        target.rename(old)
    folder.rename(target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def sync_manifest(env_dir: Path) -> bool:
    """Rewrite env.json's ``tools`` and ``provenance.content_hash`` from env.py (after a hand edit
    of env.py); True when the file changed. FormatError when env.json or env.py cannot be read."""
    data = manifest_bytes(synced_manifest(env_dir))
    if read_own_file(env_dir, ENV_MANIFEST) == data:
        return False
    (env_dir / ENV_MANIFEST).write_bytes(data)
    return True


# --- finding folders ------------------------------------------------------------------------

def env_folders(root: Path, *, required: bool = False) -> list[Path]:
    """Environment folders under ``root`` (or ``root`` itself when it is one), by name; with
    ``required``, none is an error too (a path given to work on). Names starting with ``.`` or
    ``_`` are skipped, as catalogues skip them (staging folders among them)."""
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
