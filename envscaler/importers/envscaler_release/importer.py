"""The import itself: both release files in, one catalogue folder per environment out, a report.

What is imported: every environment record that converts and has at least one RL scenario that
converts. An environment with no RL scenario at all (the release's 141 SFT environments) is
*skipped*, not an error: the catalogue format needs at least one scenario per environment and the
SFT scenarios have no checks. A bad record (environment or scenario) is reported with its id and
the reason, and the others still import. A scenario of an environment that could not be imported
is reported too, naming that environment.

Writing: each environment folder is put in place by ``envscaler.format.publish_env``: assembled
in a staging folder under ``out`` (``.import-*``, which catalogues skip), loaded strictly (so what
lands in the catalogue is exactly what the gateway will serve), then swapped in; its scenarios
keep the release's order and init_config key order. An existing folder of the same id is replaced
only when it was itself imported from the release (its ``provenance.pipeline_version`` starts
with ``envscaler-release@``); anything else is left alone and reported. Folders of earlier imports
that this run does not produce are left as they are.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Literal

from envscaler.format import FormatError, env_files, publish_env
from envscaler.format.loader import ENV_MANIFEST
from envscaler.format.models import Scenario
from envscaler.importers.envscaler_release.convert import (
    RecordError,
    convert_env,
    convert_scenario,
    release_env_id,
    scenario_env_id,
    task_id_of,
)
from envscaler.importers.envscaler_release.pins import PIPELINE_PREFIX, RELEASE_DATE
from envscaler.importers.envscaler_release.source import ReleaseFile, read_file

Kind = Literal["file", "env", "scenario"]
Progress = Callable[[int, int, str], None]
"""Called after each environment: (done, total, release env_id)."""


@dataclass(frozen=True)
class Problem:
    """A record that was not imported, and why. ``record`` is the release's id (env_id or
    task_id), or ``#N`` (its position in the file) when the record has no usable id."""

    kind: Kind
    record: str
    reason: str
    env: str | None = None  # the release env_id a scenario belongs to, when known


@dataclass(frozen=True)
class ImportedEnv:
    env_id: str
    release_env_id: str
    class_name: str
    tools: int
    scenarios: int
    release_only_tools: tuple[str, ...]
    warnings: tuple[str, ...]
    path: str


@dataclass
class ImportReport:
    envs_file: dict[str, Any]
    scenarios_file: dict[str, Any]
    out: str
    pipeline_version: str
    created: str
    imported: list[ImportedEnv] = field(default_factory=list)
    skipped: list[Problem] = field(default_factory=list)
    errors: list[Problem] = field(default_factory=list)
    env_records: int = 0
    scenario_records: int = 0
    not_examined: int = 0  # environments left out by --limit

    @property
    def scenarios_imported(self) -> int:
        return sum(env.scenarios for env in self.imported)

    def counts(self) -> dict[str, int]:
        bad = self.errors
        return {
            "env_records": self.env_records,
            "envs_imported": len(self.imported),
            "envs_skipped": sum(1 for problem in self.skipped if problem.kind == "env"),
            "envs_failed": sum(1 for problem in bad if problem.kind == "env"),
            "envs_not_examined": self.not_examined,
            "scenario_records": self.scenario_records,
            "scenarios_imported": self.scenarios_imported,
            "scenarios_skipped": sum(1 for problem in self.skipped if problem.kind == "scenario"),
            "scenarios_failed": sum(1 for problem in bad if problem.kind == "scenario"),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "envs_file": self.envs_file,
            "scenarios_file": self.scenarios_file,
            "out": self.out,
            "pipeline_version": self.pipeline_version,
            "created": self.created,
            "counts": self.counts(),
            "imported": [asdict(env) for env in self.imported],
            "skipped": [asdict(problem) for problem in self.skipped],
            "errors": [asdict(problem) for problem in self.errors],
        }


def import_release(envs_path: Path, scenarios_path: Path, out: Path, *, limit: int | None = None,
                   created: str | None = None, revision: str | None = None,
                   progress: Progress | None = None) -> ImportReport:
    """Convert the release files into environment folders under ``out``.

    ``created`` defaults to the release's upload date and ``revision`` to the pinned revision of
    the environments file when its bytes are the pinned ones (else ``local``), so that the same
    files always give the same folders. ``limit`` stops after that many imported environments.
    Raises ``SourceError`` when a file cannot be read at all and ValueError for an unusable
    ``created``; every record-level problem goes into the report instead.
    """
    if created is not None:
        try:
            date.fromisoformat(created)
        except ValueError:
            raise ValueError(f"created must be an ISO date (YYYY-MM-DD), not {created!r}") from None
    envs_file = read_file(envs_path, "environments")
    scenarios_file = read_file(scenarios_path, "RL scenarios")
    label = revision or envs_file.revision or "local"
    report = ImportReport(envs_file=envs_file.describe(),
                          scenarios_file=scenarios_file.describe(), out=str(out),
                          pipeline_version=PIPELINE_PREFIX + label,
                          created=created or RELEASE_DATE,
                          env_records=len(envs_file.records),
                          scenario_records=len(scenarios_file.records))
    envs = _env_records(envs_file, report)
    unknown: list[Problem] = []
    rows = _scenario_rows(scenarios_file, set(envs), unknown)
    out.mkdir(parents=True, exist_ok=True)
    total = len(envs)
    for done, (release_id, data) in enumerate(envs.items(), start=1):
        env_rows = rows.get(release_id, [])
        if limit is not None and len(report.imported) >= limit:
            report.not_examined += 1
            report.skipped.extend(Problem("scenario", _row_id(row, index),
                                          "its environment was not examined (--limit)",
                                          release_id) for index, row in env_rows)
        elif not env_rows:
            report.skipped.append(Problem("env", release_id, "no RL scenario in the "
                                          "scenarios file (an SFT-only environment)"))
        else:
            _import_env(release_id, data, env_rows, out, report)
        if progress is not None:
            progress(done, total, release_id)
    report.errors.extend(unknown)  # after the environments' own problems, in file order
    return report


def _env_records(file: ReleaseFile, report: ImportReport) -> dict[str, Any]:
    """Environment records by release env_id, in file order; bad and duplicate ones reported."""
    envs: dict[str, Any] = {}
    for record in file.records:
        try:
            release_id = release_env_id(record.data, record.key)
        except RecordError as exc:
            report.errors.append(Problem("env", record.key or f"#{record.index}", str(exc)))
            continue
        if release_id in envs:
            report.errors.append(Problem("env", release_id, "duplicate env_id: a record with "
                                         "this env_id comes earlier in the file"))
            continue
        envs[release_id] = record.data
    return envs


def _scenario_rows(file: ReleaseFile, known: set[str],
                   problems: list[Problem]) -> dict[str, list[tuple[int, Any]]]:
    """Scenario rows grouped by release env_id, in file order; rows of no known env go to
    ``problems``."""
    rows: dict[str, list[tuple[int, Any]]] = {}
    for record in file.records:
        row_id = _row_id(record.data, record.index, record.key)
        try:
            release_id = scenario_env_id(record.data)
        except RecordError as exc:
            problems.append(Problem("scenario", row_id, str(exc)))
            continue
        if release_id not in known:
            problems.append(Problem("scenario", row_id, f"refers to environment "
                                         f"{release_id!r}, which the environments file does not "
                                         "have (or whose record is unusable)", release_id))
            continue
        rows.setdefault(release_id, []).append((record.index, record.data))
    return rows


def _row_id(data: Any, index: int, key: str | None = None) -> str:
    return task_id_of(data) or key or f"#{index}"


def _import_env(release_id: str, data: Any, rows: list[tuple[int, Any]], out: Path,
                report: ImportReport) -> None:
    try:
        env = convert_env(data, release_id, created=report.created,
                          pipeline_version=report.pipeline_version)
    except RecordError as exc:
        report.errors.append(Problem("env", release_id, str(exc)))
        _orphan(rows, release_id, report)
        return
    clash = next((other.release_env_id for other in report.imported
                  if other.env_id == env.env_id), None)
    if clash is not None:
        report.errors.append(Problem("env", release_id, f"its id {env.env_id!r} is also the id "
                                     f"of environment {clash!r}, imported before it"))
        _orphan(rows, release_id, report)
        return
    scenarios: list[Scenario] = []
    good_rows: list[tuple[int, Any]] = []
    seen: dict[str, str] = {}
    for index, row in rows:
        row_id = _row_id(row, index)
        try:
            scenario = convert_scenario(row, env)
        except RecordError as exc:
            report.errors.append(Problem("scenario", row_id, str(exc), release_id))
            continue
        if scenario.id in seen:
            report.errors.append(Problem("scenario", row_id, f"duplicate scenario id "
                                         f"{scenario.id!r} (from task_id {seen[scenario.id]!r})",
                                         release_id))
            continue
        seen[scenario.id] = row_id
        scenarios.append(scenario)
        good_rows.append((index, row))
    if not scenarios:
        report.errors.append(Problem("env", release_id, f"none of its {len(rows)} RL scenarios "
                                     "could be imported (see their errors)"))
        return
    target = out / env.env_id
    blocker = _blocker(target)
    if blocker:
        report.errors.append(Problem("env", release_id, blocker))
        _orphan(good_rows, release_id, report)
        return
    try:
        # loaded as the gateway will load it; a failure here is a bug of the converter
        publish_env(target, env_files(env.source_bytes, env.manifest, scenarios, canonical=False))
    except FormatError as exc:
        report.errors.append(Problem("env", release_id, f"the converted folder does not load: "
                                     f"{exc}"))
        _orphan(good_rows, release_id, report)
        return
    report.imported.append(ImportedEnv(
        env_id=env.env_id, release_env_id=release_id, class_name=env.class_name,
        tools=len(env.manifest.tools), scenarios=len(scenarios),
        release_only_tools=env.release_only_tools, warnings=env.warnings, path=str(target)))


def _orphan(rows: list[tuple[int, Any]], release_id: str, report: ImportReport) -> None:
    for index, row in rows:
        report.errors.append(Problem("scenario", _row_id(row, index), f"its environment "
                                     f"{release_id!r} was not imported (see its error)",
                                     release_id))


def _blocker(target: Path) -> str | None:
    """Why ``target`` may not be replaced, or None (absent, or an earlier import)."""
    if not target.exists() and not target.is_symlink():
        return None
    if not target.is_dir() or target.is_symlink():
        return f"{target} exists and is not a folder; remove it or choose another --out"
    try:
        manifest = json.loads((target / ENV_MANIFEST).read_text(encoding="utf-8"))
        version = manifest["provenance"]["pipeline_version"]
    except (OSError, ValueError, KeyError, TypeError):
        version = None
    if isinstance(version, str) and version.startswith(PIPELINE_PREFIX):
        return None
    return (f"{target} exists and was not imported from the EnvScaler release; remove it or "
            "choose another --out")
