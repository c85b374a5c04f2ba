"""Finding and reading the release's two files, in either published shape.

- Hugging Face: ``191_env_metadata_processed.json`` (a list of environment records) and
  ``envscaler_rl_scenario_metadata.json`` (a list of scenario rows).
- GitHub repository: ``191_env_metadata.json`` (a dict keyed by env_id) and
  ``rl_scenario_metadata.json`` (or its RL copy ``envscaler_rl_scenario_metadata.json``).

The shape is told by the JSON itself (list or dict), not trusted from the file name. Nothing here
judges a record: a record that is not an object is passed on and reported by the converter with
its id, so that one bad record never stops the others.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from envscaler.importers.envscaler_release import pins
from envscaler.importers.envscaler_release.pins import ENVS_NAMES, SCENARIOS_NAMES

Shape = Literal["list", "dict"]


class SourceError(Exception):
    """A release file is missing, unreadable, or not the JSON the release publishes."""


@dataclass(frozen=True)
class Record:
    """One record of a release file: its position, its dict key (GitHub shape) and its data."""

    index: int
    key: str | None
    data: Any


@dataclass(frozen=True)
class ReleaseFile:
    path: Path
    sha256: str
    shape: Shape
    records: tuple[Record, ...]
    revision: str | None
    """The pinned Hugging Face revision whose file has exactly these bytes, if any."""

    def describe(self) -> dict[str, Any]:
        return {"path": str(self.path), "shape": self.shape, "records": len(self.records),
                "sha256": self.sha256, "pinned_revision": self.revision}


def locate(folder: Path) -> tuple[Path, Path]:
    """The environments file and the scenarios file in ``folder`` (either published shape)."""
    return find_file(folder, "envs"), find_file(folder, "scenarios")


def find_file(folder: Path, kind: Literal["envs", "scenarios"]) -> Path:
    """The one environments (``envs``) or RL scenarios file in ``folder``, by its release name."""
    if not folder.is_dir():
        raise SourceError(f"{folder}: not a folder (pass the folder holding the release files, "
                          "or --envs FILE --scenarios FILE)")
    if kind == "envs":
        return _one_of(folder, ENVS_NAMES, "environments")
    return _one_of(folder, SCENARIOS_NAMES, "RL scenarios")


def _one_of(folder: Path, names: tuple[str, ...], what: str) -> Path:
    found = [folder / name for name in names if (folder / name).is_file()]
    if not found:
        raise SourceError(f"{folder}: no {what} file; expected one of {', '.join(names)}")
    if len(found) > 1:
        raise SourceError(f"{folder}: both {found[0].name} and {found[1].name} are there; say "
                          f"which {what} file to import with --envs / --scenarios")
    return found[0]


def read_file(path: Path, what: str) -> ReleaseFile:
    """Read and parse one release file; a list or a dict of records."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SourceError(f"{path}: the {what} file does not exist") from None
    except OSError as exc:
        raise SourceError(f"{path}: cannot be read: {exc.strerror}") from None
    digest = hashlib.sha256(data).hexdigest()
    try:
        parsed = json.loads(data)
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path}: not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise SourceError(f"{path}: not JSON: {exc.msg} (line {exc.lineno}, column "
                          f"{exc.colno})") from None
    if isinstance(parsed, list):
        shape: Shape = "list"
        records = tuple(Record(index, None, item) for index, item in enumerate(parsed))
    elif isinstance(parsed, dict):
        shape = "dict"
        records = tuple(Record(index, str(key), item)
                        for index, (key, item) in enumerate(parsed.items()))
    else:
        raise SourceError(f"{path}: the {what} file holds a JSON {type(parsed).__name__}; the "
                          "release has a list of records (Hugging Face) or a dict keyed by id "
                          "(GitHub)")
    revision = next((pin.revision for pin in pins.PINNED if pin.sha256 == digest), None)
    return ReleaseFile(path=path, sha256=digest, shape=shape, records=records, revision=revision)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
