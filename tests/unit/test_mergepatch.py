"""JSON Merge Patch (RFC 7386) as the runtime applies a scenario's changes to its data file, and
a scenario's whole initial configuration as tooling composes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envscaler.format.loader import load_env
from envscaler.sandbox.runtime import mergepatch
from tests.integration.gateway_fixtures import build_catalogue


def test_the_rfc_examples() -> None:
    assert mergepatch.apply({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert mergepatch.apply({"a": "b"}, {"b": "c"}) == {"a": "b", "b": "c"}
    assert mergepatch.apply({"a": "b"}, {"a": None}) == {}
    assert mergepatch.apply({"a": "b", "b": "c"}, {"a": None}) == {"b": "c"}
    assert mergepatch.apply({"a": ["b"]}, {"a": "c"}) == {"a": "c"}
    assert mergepatch.apply({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}) == {"a": {"b": "d"}}
    assert mergepatch.apply({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert mergepatch.apply(["a", "b"], ["c", "d"]) == ["c", "d"]
    assert mergepatch.apply({"e": None}, {"a": 1}) == {"e": None, "a": 1}


def test_the_result_shares_nothing_with_the_patch() -> None:
    patch = {"orders": {"o1": {"items": [{"sku": "p"}]}}}
    merged = mergepatch.apply({}, patch)
    merged["orders"]["o1"]["items"][0]["sku"] = "changed"
    assert patch == {"orders": {"o1": {"items": [{"sku": "p"}]}}}


def _folder(tmp_path: Path, data: str | None, scenario_extra: dict) -> Path:  # type: ignore[type-arg]
    root = build_catalogue(tmp_path / "envs")
    folder = root / "counter_lab"
    if data is not None:
        (folder / "data").mkdir()
        (folder / "data" / "base.json").write_text(data)
    lines = (folder / "scenarios.jsonl").read_text().splitlines()
    extra = {**json.loads(lines[0]), "id": "over-data", **scenario_extra}
    (folder / "scenarios.jsonl").write_text("\n".join([lines[0], json.dumps(extra)]) + "\n")
    return folder


def test_a_scenario_over_a_data_file_is_its_patch_on_top(tmp_path: Path) -> None:
    folder = _folder(tmp_path, json.dumps({"counters": {"a": 1, "b": 2}}),
                     {"init_data": "base.json", "init_config": {"counters": {"b": None, "c": 3}}})
    package = load_env(folder, strict=True)
    scenario = package.scenarios[1]
    assert package.initial_config(scenario) == {"counters": {"a": 1, "c": 3}}
    assert list(package.data) == ["base.json"]


def test_without_a_data_file_the_init_config_is_taken_as_is(tmp_path: Path) -> None:
    folder = _folder(tmp_path, None, {"init_config": {"counters": {"a": None}}})
    package = load_env(folder, strict=True)
    assert package.initial_config(package.scenarios[1]) == {"counters": {"a": None}}


@pytest.mark.parametrize(("data", "reason"), [
    (None, "cannot read data/base.json"),
    ("[1, 2]", "holds a list, not an object"),
    ("{nope", "is not JSON"),
])
def test_a_scenario_whose_data_file_cannot_serve_is_skipped_with_its_reason(
        tmp_path: Path, data: str | None, reason: str) -> None:
    folder = _folder(tmp_path, data, {"init_data": "base.json"})
    package = load_env(folder)
    assert [s.id for s in package.scenarios] == ["counter-1"]
    (skipped,) = package.skipped
    assert skipped.line == 2 and skipped.field == "init_data" and reason in skipped.message
