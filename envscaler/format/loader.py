"""Loading and validating environment folders (``env.py``, ``env.json``, ``scenarios.jsonl``).

Everything is checked statically, without running generated code: env.py must parse and define the
class, env.json must match env.py (content hash and derived tools), and every scenario must be
well-formed, with check functions that parse and solutions that call real tools with arguments
that fit their schemas. Whether a solution actually passes its checks needs a sandbox, not this.

A scenario line that breaks these rules is skipped and kept as a ``FormatError``
(``file:line: field: reason``) in ``EnvPackage.skipped``: the environment loads with the others,
as long as one is left.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from pydantic import BaseModel, ValidationError

from envscaler.format.models import EnvManifest, Scenario, ToolCall
from envscaler.format.ownfiles import read_own_file
from envscaler.format.toolschema import ToolSchemaError, derive_tools, public_tool_names
from envscaler.sandbox.runtime import mergepatch

ENV_SOURCE = "env.py"
ENV_MANIFEST = "env.json"
ENV_SCENARIOS = "scenarios.jsonl"
ENV_DATA = "data"  # shared data files that scenarios name in ``init_data``
CHECK_FUNC = "check_func"

M = TypeVar("M", bound=BaseModel)


class FormatError(Exception):
    """A file of an environment folder breaks the format; says which file, line and field."""

    def __init__(self, file: Path, message: str, *, line: int | None = None,
                 field: str | None = None) -> None:
        super().__init__(message)
        self.file = file
        self.line = line
        self.field = field
        self.message = message

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else str(self.file)
        field = f"{self.field}: " if self.field else ""
        return f"{where}: {field}{self.message}"


@dataclass(frozen=True)
class EnvPackage:
    """One validated environment folder."""

    path: Path
    manifest: EnvManifest
    source: str
    scenarios: tuple[Scenario, ...]
    skipped: tuple[FormatError, ...] = ()  # the scenario lines left out, each with its reason
    # The ``data/`` files the scenarios name, as JSON texts: each read once, whatever the number
    # of scenarios that share it.
    data: dict[str, str] = field(default_factory=dict)

    @property
    def tool_names(self) -> list[str]:
        return public_tool_names(self.manifest.tools)

    def tool(self, name: str) -> dict[str, Any] | None:
        """The OpenAI function schema of tool ``name``, or None."""
        tools = self.manifest.tools
        return next((tool for tool in tools if tool["function"]["name"] == name), None)

    def scenario(self, scenario_id: str) -> Scenario | None:
        return next((scenario for scenario in self.scenarios if scenario.id == scenario_id), None)

    def initial_config(self, scenario: Scenario) -> dict[str, Any]:
        """The whole initial configuration of ``scenario``: its ``init_config``, or its patch on
        top of its data file. For tooling; the gateway sends the two parts to the sandbox."""
        if scenario.init_data is None:
            return copy.deepcopy(scenario.init_config)
        return mergepatch.apply(json.loads(self.data[scenario.init_data]), scenario.init_config)


@dataclass(frozen=True)
class Catalogue:
    """The environments under a root folder, by id, and the folders that failed to load."""

    root: Path
    envs: dict[str, EnvPackage]
    errors: list[FormatError] = field(default_factory=list)


def content_hash(source_bytes: bytes) -> str:
    """The ``provenance.content_hash`` of an env.py: ``sha256:<hex>`` of its exact bytes."""
    return "sha256:" + hashlib.sha256(source_bytes).hexdigest()


def load_catalogue(root: Path, *, strict: bool = False) -> Catalogue:
    """Load every environment folder under ``root`` (names starting with ``.`` or ``_`` skipped).

    A broken folder is recorded in ``errors`` and the others still load, so one bad environment
    does not take a whole catalogue down; ``strict=True`` raises the first error instead, a
    skipped scenario line's included.
    """
    if not root.is_dir():
        raise FormatError(root, "the catalogue folder does not exist")
    envs: dict[str, EnvPackage] = {}
    errors: list[FormatError] = []
    for folder in sorted(root.iterdir()):
        if not folder.is_dir() or folder.name.startswith((".", "_")):
            continue
        try:
            if folder.is_symlink():
                raise FormatError(folder, "is a symbolic link; an environment's folder must be "
                                  "its own, not a link")
            envs[folder.name] = load_env(folder, strict=strict)
        except FormatError as exc:
            if strict:
                raise
            errors.append(exc)
    return Catalogue(root=root, envs=envs, errors=errors)


def load_env(path: Path, *, strict: bool = False) -> EnvPackage:
    """Load and validate one environment folder; raises FormatError on the first problem of its
    files, except a bad scenario line, which is skipped (``EnvPackage.skipped``) unless
    ``strict``."""
    manifest, source = load_code(path)
    data = _DataFiles(path)
    scenarios, skipped = _load_scenarios(path, manifest, data)
    if strict and skipped:
        raise skipped[0]
    return EnvPackage(path=path, manifest=manifest, source=source, scenarios=scenarios,
                      skipped=skipped, data=data.texts)


def load_code(path: Path) -> tuple[EnvManifest, str]:
    """env.json and the text of env.py, checked against each other and the folder (id, content
    hash, tools derived from the source); FormatError on the first problem.

    Apart from `load_env` so that a folder whose scenarios do not exist yet (synthesis's
    skeletons) is checked by the same rules as one the gateway serves.
    """
    source_path, manifest_path = path / ENV_SOURCE, path / ENV_MANIFEST
    source_bytes = _read_bytes(path, ENV_SOURCE)
    manifest = _validate(EnvManifest, _parse_json(manifest_path, _read_text(path, ENV_MANIFEST)),
                         manifest_path, None)
    if manifest.id != path.name:
        raise FormatError(manifest_path, f"{manifest.id!r} does not match the folder name "
                          f"{path.name!r}", field="id")
    source = _decode(source_path, source_bytes)
    tools = _derive(source_path, source, manifest.class_name)
    sync_hint = (f"to write {ENV_MANIFEST}'s tools and content hash again from {ENV_SOURCE}, run: "
                 f"{sync_command(path)}")
    if manifest.provenance.content_hash != content_hash(source_bytes):
        raise FormatError(manifest_path, f"does not match the sha256 of {ENV_SOURCE}; {sync_hint}",
                          field="provenance.content_hash")
    if manifest.tools != tools:
        raise FormatError(manifest_path, f"differ from the schemas derived from {ENV_SOURCE}; "
                          f"{sync_hint}", field=_first_difference("tools", manifest.tools, tools))
    return manifest, source


def sync_command(env_dir: Path) -> str:
    """The shell command that runs `sync_manifest` on ``env_dir``, for a stale env.json's error
    (the project's interpreter: the ``python`` of its venv)."""
    program = ("import sys, pathlib, envscaler.format as f; "
               "f.sync_manifest(pathlib.Path(sys.argv[1]))")
    return f"python -c {shlex.quote(program)} {shlex.quote(str(env_dir))}"


def synced_manifest(env_dir: Path) -> EnvManifest:
    """env.json as env.py says it should be: its ``tools`` derived from env.py and its
    ``provenance.content_hash`` env.py's, the rest as the file has it; FormatError when the file
    or env.py cannot give one. What ``envscaler.format.folders.sync_manifest`` writes."""
    manifest_path = env_dir / ENV_MANIFEST
    source_bytes = _read_bytes(env_dir, ENV_SOURCE)
    data = _parse_json(manifest_path, _read_text(env_dir, ENV_MANIFEST))
    if isinstance(data, dict):  # otherwise validation below reports it
        data["tools"] = []
        if isinstance(data.get("provenance"), dict):
            data["provenance"]["content_hash"] = content_hash(source_bytes)
    manifest = _validate(EnvManifest, data, manifest_path, None)
    source = _decode(env_dir / ENV_SOURCE, source_bytes)
    tools = _derive(env_dir / ENV_SOURCE, source, manifest.class_name)
    return manifest.model_copy(update={"tools": tools})


# --- scenarios ----------------------------------------------------------------------------------

class _DataFiles:
    """The data files of one environment folder, each read and checked on its first mention
    only."""

    def __init__(self, env_dir: Path) -> None:
        self.env_dir = env_dir
        self.texts: dict[str, str] = {}
        self.problems: dict[str, str] = {}

    def require(self, name: str) -> None:
        """Raise ValueError saying why ``name`` cannot be a scenario's initial data."""
        if name not in self.texts and name not in self.problems:
            self._read(name)
        if name in self.problems:
            raise ValueError(self.problems[name])

    def _read(self, name: str) -> None:
        try:
            text = read_own_file(self.env_dir, f"{ENV_DATA}/{name}").decode("utf-8")
            parsed = json.loads(text)
        except OSError as exc:
            self.problems[name] = f"cannot read {ENV_DATA}/{name}: {exc.strerror or exc}"
        except UnicodeDecodeError as exc:
            self.problems[name] = f"cannot read {ENV_DATA}/{name}: {exc}"
        except ValueError as exc:
            self.problems[name] = f"{ENV_DATA}/{name} is not JSON: {exc}"
        else:
            if isinstance(parsed, dict):
                self.texts[name] = text
            else:
                self.problems[name] = (f"{ENV_DATA}/{name} holds a {type(parsed).__name__}, "
                                       "not an object")


def _load_scenarios(env_dir: Path, manifest: EnvManifest, data: _DataFiles
                    ) -> tuple[tuple[Scenario, ...], tuple[FormatError, ...]]:
    """The good scenarios of the folder's scenario file, and why each other line was skipped."""
    path, text = env_dir / ENV_SCENARIOS, _read_text(env_dir, ENV_SCENARIOS)
    validators = {tool["function"]["name"]: Draft202012Validator(tool["function"]["parameters"])
                  for tool in manifest.tools}
    scenarios: list[Scenario] = []
    skipped: list[FormatError] = []
    first_line: dict[str, int] = {}
    # split on "\n" only: str.splitlines would also split on U+2028 inside JSON strings
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            scenario = _scenario(raw, path, number, validators, manifest.id, first_line, data)
        except FormatError as exc:
            skipped.append(exc)
            continue
        first_line[scenario.id] = number
        scenarios.append(scenario)
    if skipped and not scenarios:
        first = skipped[0]
        field = f"{first.field}: " if first.field else ""
        raise FormatError(path, f"has no usable scenario; every line was skipped, the first "
                          f"(line {first.line}) because {field}{first.message}")
    if not scenarios:
        raise FormatError(path, "has no scenarios; every environment needs at least one")
    return tuple(scenarios), tuple(skipped)


def _scenario(raw: str, path: Path, number: int, validators: dict[str, Draft202012Validator],
              env_id: str, first_line: dict[str, int], data_files: _DataFiles) -> Scenario:
    """Line ``number`` as a checked scenario; FormatError says why it cannot be one."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise FormatError(path, f"invalid JSON: {exc.msg} (column {exc.colno})",
                          line=number) from None
    scenario = _validate(Scenario, data, path, number)
    if scenario.id in first_line:
        raise FormatError(path, f"duplicate scenario id {scenario.id!r} (first on line "
                          f"{first_line[scenario.id]})", line=number, field="id")
    _check_scenario(scenario, validators, path, number, env_id)
    if scenario.init_data is not None:
        try:
            data_files.require(scenario.init_data)
        except ValueError as exc:
            raise FormatError(path, str(exc), line=number, field="init_data") from None
    return scenario


def _check_scenario(scenario: Scenario, validators: dict[str, Draft202012Validator], path: Path,
                    line: int, env_id: str) -> None:
    for index, item in enumerate(scenario.checklist):
        problem = check_func_problem(item.check_func)
        if problem:
            raise FormatError(path, problem, line=line, field=f"checklist.{index}.check_func")
    for prefix, index, call in _solution_calls(scenario):
        validator = validators.get(call.name)
        if validator is None:
            raise FormatError(path, f"{call.name!r} is not a tool of {env_id}", line=line,
                              field=f"{prefix}.{index}.name")
        error = best_match(validator.iter_errors(call.arguments))
        if error is not None:
            where = ".".join(str(part) for part in (index, "arguments", *error.absolute_path))
            raise FormatError(path, f"{error.message} (tool {call.name})", line=line,
                              field=f"{prefix}.{where}")


def _solution_calls(scenario: Scenario) -> list[tuple[str, int, ToolCall]]:
    """Each reference call with the field it is written in (``solution`` or a turn's)."""
    if scenario.turns is None:
        return [("solution", index, call) for index, call in enumerate(scenario.solution or [])]
    return [(f"turns.{number}.solution", index, call)
            for number, turn in enumerate(scenario.turns)
            for index, call in enumerate(turn.solution or [])]


def check_func_problem(source: str) -> str | None:
    """Why a check function's source is unusable, or None when it is fine."""
    try:
        module = ast.parse(source)
    except SyntaxError as exc:
        return f"does not parse: {exc.msg} (line {exc.lineno} of the function)"
    func = next((node for node in module.body
                 if isinstance(node, ast.FunctionDef) and node.name == CHECK_FUNC), None)
    if func is None:
        return f"does not define {CHECK_FUNC}(final_state)"
    args = func.args
    positional = len(args.posonlyargs) + len(args.args)
    required_keywords = sum(default is None for default in args.kw_defaults)
    if positional != 1 or args.vararg is not None or required_keywords:
        return f"{CHECK_FUNC} must take exactly one positional parameter (final_state)"
    return None


# --- shared helpers -----------------------------------------------------------------------------

def _read_bytes(env_dir: Path, name: str) -> bytes:
    """A file of the environment's folder (links refused: ``envscaler.format.ownfiles``)."""
    path = env_dir / name
    try:
        return read_own_file(env_dir, name)
    except FileNotFoundError:
        raise FormatError(path, "is missing") from None
    except OSError as exc:
        raise FormatError(path, f"cannot be read: {exc.strerror}") from None


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(path, f"is not UTF-8 (byte {exc.start})") from None


def _read_text(env_dir: Path, name: str) -> str:
    return _decode(env_dir / name, _read_bytes(env_dir, name))


def _parse_json(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(path, f"invalid JSON: {exc.msg} (column {exc.colno})",
                          line=exc.lineno) from None


def _validate(model: type[M], data: Any, path: Path, line: int | None) -> M:
    """``model`` validated from ``data``; the first pydantic error becomes a FormatError."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        field_path = ".".join(str(part) for part in first["loc"]) or None
        raise FormatError(path, first["msg"] + more, line=line, field=field_path) from None


def _derive(path: Path, source: str, class_name: str) -> list[dict[str, Any]]:
    try:
        return derive_tools(source, class_name)
    except ToolSchemaError as exc:
        raise FormatError(path, str(exc), line=exc.line) from None


def _first_difference(prefix: str, found: list[Any], expected: list[Any]) -> str:
    """``tools.3`` for the first differing entry, ``tools`` when only the lengths differ."""
    index = next((i for i, (a, b) in enumerate(zip(found, expected, strict=False)) if a != b), None)
    return prefix if index is None else f"{prefix}.{index}"
