"""The folder writer (envscaler.format.folders): the bytes of env.json and scenarios.jsonl as the
committed catalogue has them, the overwrite rule, and the swap that never shows a reader half of
an old folder and half of a new one."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from envscaler.format import (
    EnvFolderError,
    EnvPackage,
    FormatError,
    env_files,
    load_catalogue,
    load_code,
    load_env,
    manifest_bytes,
    publish_env,
    scenarios_bytes,
    sync_manifest,
    write_files,
)
from envscaler.format.folders import replace_folder
from envscaler.synth.catalogue import read_env

CATALOGUE = Path(__file__).parents[2] / "generated_envs"
HAND_WRITTEN = "library_loans"  # its scenarios are in the order their author wrote them
SYNTHESIZED = "subscription_billing"  # its scenarios are in synthesis's canonical order


def tree(root: Path) -> dict[str, bytes] | None:
    """Every file under ``root`` by relative path; None when there is no ``root``."""
    if not root.exists():
        return None
    return {str(path.relative_to(root)): path.read_bytes()
            for path in sorted(root.rglob("*")) if path.is_file()}


def package_files(package: EnvPackage, *, canonical: bool, keep: int | None = None
                  ) -> dict[str, bytes]:
    scenarios = list(package.scenarios)[:keep]
    return env_files(package.source.encode("utf-8"), package.manifest, scenarios,
                     canonical=canonical)


# --- bytes ----------------------------------------------------------------------------------

def test_the_committed_catalogue_is_what_the_writer_writes() -> None:
    """Synthesized environments in the canonical order, whatever order their scenarios come in;
    the hand-written one in its own order; env.json everywhere in one form."""
    catalogue = load_catalogue(CATALOGUE, strict=True)
    for name, package in catalogue.envs.items():
        hand_written = name == HAND_WRITTEN
        scenarios = list(package.scenarios) if hand_written else list(reversed(package.scenarios))
        assert scenarios_bytes(scenarios, canonical=not hand_written) == \
            (package.path / "scenarios.jsonl").read_bytes(), name
        assert manifest_bytes(package.manifest) == (package.path / "env.json").read_bytes(), name


def test_the_given_order_keeps_scenario_and_key_order_and_canonical_sorts_both() -> None:
    package = load_env(CATALOGUE / SYNTHESIZED)
    first, second = package.scenarios[:2]
    reordered = first.model_copy(update={"init_config": dict(reversed(first.init_config.items()))})
    given = scenarios_bytes([second, reordered], canonical=False).decode().splitlines()
    assert [line.split('"id": "')[1].split('"')[0] for line in given] == [second.id, first.id]
    keys = list(reordered.init_config)
    assert given[1].index(f'"{keys[0]}"') < given[1].index(f'"{keys[-1]}"')
    assert scenarios_bytes([second, reordered], canonical=True) == \
        scenarios_bytes([first, second], canonical=True)


def test_a_folder_written_from_its_files_needs_no_sync_and_loads(tmp_path: Path) -> None:
    package = load_env(CATALOGUE / HAND_WRITTEN)
    folder = tmp_path / HAND_WRITTEN
    write_files(folder, package_files(package, canonical=False), overwrite=False)
    assert tree(folder) == tree(CATALOGUE / HAND_WRITTEN)
    assert sync_manifest(folder) is False
    assert load_code(folder) == (package.manifest, package.source)


def test_data_files_go_under_data(tmp_path: Path) -> None:
    package = load_env(CATALOGUE / HAND_WRITTEN)
    files = env_files(b"", package.manifest, canonical=False, data={"shop.json": '{"a": "\u00e9"}'})
    assert sorted(files) == ["data/shop.json", "env.json", "env.py"]  # no scenarios: no file
    assert files["data/shop.json"] == '{"a": "\u00e9"}'.encode()
    write_files(tmp_path, files, overwrite=False)
    assert (tmp_path / "data" / "shop.json").read_bytes() == files["data/shop.json"]


# --- write_files: the overwrite rule ----------------------------------------------------------

def test_changed_files_are_refused_without_overwrite_and_nothing_is_written(
        tmp_path: Path) -> None:
    write_files(tmp_path, {"env.py": b"one", "env.json": b"{}"}, overwrite=False)
    with pytest.raises(EnvFolderError) as info:
        write_files(tmp_path, {"env.py": b"two", "env.json": b"{}", "scenarios.jsonl": b"x"},
                    overwrite=False)
    assert str(info.value) == (f"{tmp_path}: env.py already exist(s) with other content; "
                               "pass --overwrite to replace")
    assert tree(tmp_path) == {"env.json": b"{}", "env.py": b"one"}


def test_identical_bytes_are_fine_and_overwrite_replaces(tmp_path: Path) -> None:
    write_files(tmp_path, {"env.py": b"one"}, overwrite=False)
    write_files(tmp_path, {"env.py": b"one", "scenarios.jsonl": b"x"}, overwrite=False)
    write_files(tmp_path, {"env.py": b"two"}, overwrite=True)
    assert tree(tmp_path) == {"env.py": b"two", "scenarios.jsonl": b"x"}


# --- publish_env: staged, loaded strictly, swapped in -----------------------------------------

def watch_target(monkeypatch: pytest.MonkeyPatch, target: Path,
                 seen: list[dict[str, bytes] | None]) -> None:
    """Record ``target``'s files after every unlink, rmdir and rename anywhere (what a reader
    could see between two steps of the replace)."""
    def watched(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            result = real(*args, **kwargs)
            seen.append(tree(target))
            return result
        return call
    for name in ("unlink", "rmdir", "rename"):
        monkeypatch.setattr(os, name, watched(getattr(os, name)))


def test_a_reader_sees_the_old_folder_or_the_new_one_never_a_mix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = load_env(CATALOGUE / HAND_WRITTEN)
    target = tmp_path / HAND_WRITTEN
    publish_env(target, package_files(package, canonical=False, keep=2))
    (target / "data").mkdir()
    (target / "data" / "stale.json").write_text("{}")  # a file the new folder does not have
    old = tree(target)
    new_files = package_files(package, canonical=False)
    seen: list[dict[str, bytes] | None] = []
    watch_target(monkeypatch, target, seen)
    publish_env(target, new_files)
    monkeypatch.undo()
    assert tree(target) == new_files
    assert seen and all(state in (old, new_files, None) for state in seen), \
        [sorted(state) if state else state for state in seen]
    assert sorted(path.name for path in tmp_path.iterdir()) == [HAND_WRITTEN]  # no leftovers


def test_a_folder_that_does_not_load_strictly_leaves_the_target_as_it_was(tmp_path: Path) -> None:
    package = load_env(CATALOGUE / HAND_WRITTEN)
    target = tmp_path / HAND_WRITTEN
    publish_env(target, package_files(package, canonical=False))
    before = tree(target)
    broken = package_files(package, canonical=False)
    broken["scenarios.jsonl"] += b"{not json\n"  # one bad line: load_env alone would skip it
    with pytest.raises(FormatError, match="invalid JSON"):
        publish_env(target, broken)
    assert tree(target) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == [HAND_WRITTEN]


def test_replacing_into_a_new_place_needs_no_old_folder(tmp_path: Path) -> None:
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "f").write_text("x")
    replace_folder(tmp_path / "new", tmp_path / "target")
    assert tree(tmp_path) == {"target/f": b"x"}


# --- synthesis reads with the loader's checks ---------------------------------------------------

def test_synthesis_reads_a_folder_without_scenarios_by_the_loaders_rules(tmp_path: Path) -> None:
    folder = tmp_path / SYNTHESIZED
    shutil.copytree(CATALOGUE / SYNTHESIZED, folder)
    (folder / "scenarios.jsonl").unlink()
    code, manifest = read_env(folder)
    assert (code.env_id, code.tools) == (SYNTHESIZED, manifest.tools)
    with (folder / "env.py").open("a") as file:
        file.write("\n# edited by hand\n")
    with pytest.raises(EnvFolderError) as info:
        read_env(folder)
    assert "env.json: provenance.content_hash: does not match the sha256 of env.py" in \
        str(info.value)
