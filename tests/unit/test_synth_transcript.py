"""Transcripts, settings, the work directory, splits, state diffs and facts read from source."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from pydantic import ValidationError

from envscaler.synth.catalogue import provenance_date, split_for
from envscaler.synth.codeinfo import class_header, method_source, state_attributes, state_schemas
from envscaler.synth.diff import diff_text, state_diff
from envscaler.synth.envcode import config_validator
from envscaler.synth.llm import ParseError
from envscaler.synth.settings import SynthSettings
from envscaler.synth.transcript import (
    ReplayMiss,
    Transcript,
    TranscriptError,
    canonical_request,
    request_key,
)
from envscaler.synth.workdir import DROPPED, OK, ItemRecord, WorkDir, fingerprint

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "ü"}]


def test_keys_depend_on_model_messages_temperature_and_attempt_only() -> None:
    base = canonical_request("m", MESSAGES, 0.2, 1)
    key = request_key(base)
    assert key == request_key(canonical_request("m", [dict(m) for m in MESSAGES], 0.2, 1))
    assert key == request_key(canonical_request("m", [{**m, "name": "x"} for m in MESSAGES], 0.2, 1))
    for other in (canonical_request("n", MESSAGES, 0.2, 1),
                  canonical_request("m", MESSAGES[:1], 0.2, 1),
                  canonical_request("m", MESSAGES, 0.3, 1),
                  canonical_request("m", MESSAGES, 0.2, 2)):
        assert request_key(other) != key
    assert len(key) == 64


def test_transcripts_append_reload_and_compact(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    transcript = Transcript(path)
    second = canonical_request("m", MESSAGES, 0.2, 2)
    first = canonical_request("m", MESSAGES, 0.2, 1)
    transcript.append(second, {"stage": "s", "item": "i"}, {"choices": [], "n": 2})
    transcript.append(first, {"stage": "s", "item": "i"}, {"choices": [], "n": 1})
    transcript.append(first, {"stage": "s", "item": "i"}, {"choices": [], "n": 99})  # kept: first
    reloaded = Transcript(path)
    assert len(reloaded) == 2
    exchange = reloaded.get(request_key(first))
    assert exchange is not None and exchange.response["n"] == 1
    reloaded.compact()
    lines = path.read_text().splitlines()
    assert [json.loads(line)["request"]["attempt"] for line in lines] == [1, 2]


def test_a_tampered_transcript_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    Transcript(path).append(canonical_request("m", MESSAGES, 0.2, 1), {}, {"choices": []})
    data = json.loads(path.read_text())
    data["request"]["temperature"] = 0.9
    path.write_text(json.dumps(data) + "\n")
    with pytest.raises(TranscriptError, match="key does not match the request"):
        Transcript(path)
    path.write_text("not json\n")
    with pytest.raises(TranscriptError, match="t.jsonl:1: not a transcript line"):
        Transcript(path)


def test_a_replay_miss_names_the_stage_item_and_attempt() -> None:
    message = str(ReplayMiss("logic.methods", "env/get_x", 2, "ab" * 32))
    assert "stage 'logic.methods', item 'env/get_x', attempt 2" in message
    assert "record it again" in message


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVSCALER_SYNTH_MODEL", "base-model")
    monkeypatch.setenv("ENVSCALER_SYNTH_TEMPERATURE", "0.5")
    monkeypatch.setenv("ENVSCALER_SYNTH_STAGES", json.dumps({
        "logic": {"model": "big", "concurrency": 2},
        "logic.methods": {"temperature": 0.2, "max_attempts": 5}}))
    monkeypatch.setenv("ENVSCALER_SYNTH_COSTS", '{"big": {"input": 0.002, "output": 0.008}}')
    monkeypatch.setenv("ENVSCALER_SYNTH_CREATED", "2026-02-03")
    settings = SynthSettings()
    methods = settings.stage_model("logic.methods")
    assert (methods.model, methods.temperature, methods.concurrency, methods.max_attempts) == \
        ("big", 0.2, 2, 5)
    judge = settings.stage_model("topics.judge")
    assert (judge.model, judge.temperature, judge.concurrency, judge.max_attempts) == \
        ("base-model", 0.5, 8, 3)
    assert settings.cost("big", 1000, 500) == pytest.approx(0.006)
    assert settings.cost("base-model", 1000, 500) is None
    assert settings.created == date(2026, 2, 3)


def test_settings_are_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError, match="needs ENVSCALER_SYNTH_TRANSCRIPT"):
        SynthSettings(mode="replay")
    with pytest.raises(ValidationError, match="unknown splits"):
        SynthSettings(splits={"test": 1.0})
    monkeypatch.setenv("ENVSCALER_SYNTH_STAGES", '{"logic": {"modle": "x"}}')
    with pytest.raises(ValidationError):
        SynthSettings()


def test_the_work_directory_keeps_items_until_their_input_changes(tmp_path: Path) -> None:
    work = WorkDir(tmp_path)
    print_ = fingerprint({"input": "a"})
    work.save("logic.methods", ItemRecord("env/get_x", OK, print_, data={"code": "x"}))
    work.save("logic.methods", ItemRecord("env/set_x", DROPPED, print_, reason="no reply"))
    assert work.load("logic.methods", "env/get_x", print_) == \
        ItemRecord("env/get_x", OK, print_, data={"code": "x"})
    assert work.load("logic.methods", "env/set_x", print_).reason == "no reply"  # type: ignore[union-attr]
    assert work.load("logic.methods", "env/get_x", fingerprint({"input": "b"})) is None
    assert work.load("logic.methods", "env/other", print_) is None
    assert work.count("logic.methods") == 2
    assert not list(tmp_path.rglob("*.tmp*"))


def test_splits_and_dates_are_deterministic() -> None:
    shares = {"train": 0.8, "rl": 0.1, "eval": 0.1}
    drawn = [split_for(f"env-{n:03d}", shares) for n in range(300)]
    assert drawn == [split_for(f"env-{n:03d}", shares) for n in range(300)]
    assert 200 < drawn.count("train") < 280 and drawn.count("rl") > 10 and drawn.count("eval") > 10
    assert {split_for(f"x-{n}", {"rl": 1.0}) for n in range(50)} == {"rl"}
    assert provenance_date(None, 1767258000) == "2026-01-01"
    assert provenance_date(date(2025, 5, 6), 1767258000) == "2025-05-06"


def test_state_diffs() -> None:
    before = {"a": {"x": 1, "y": [1, 2]}, "b": {}, "init_config": {"a": 1}}
    after = {"a": {"x": 2, "y": [1, 3], "z": True}, "b": {}, "init_config": {"a": 2}}
    changes = state_diff(before, after)
    assert changes == [{"path": "a.x", "change": "changed", "before": 1, "after": 2},
                       {"path": "a.y[1]", "change": "changed", "before": 2, "after": 3},
                       {"path": "a.z", "change": "added", "after": True}]
    assert diff_text(changes).splitlines() == ["~ a.x: 1 -> 2", "~ a.y[1]: 2 -> 3", "+ a.z = true"]
    assert diff_text([]) == "(no change)"


SOURCE = '''
from typing import Dict, Optional, TypedDict


class ItemInfo(TypedDict):
    item_id: str
    price: float
    note: Optional[str]


class Shop:
    def __init__(self, init_config: dict):
        self.items: Dict[str, ItemInfo] = {}
        self.log = []
        self._private = 1
        self.init_config = init_config

    def get_item(self, item_id: str) -> dict:
        return {"success": True}
'''


def test_facts_read_from_the_source() -> None:
    assert state_attributes(SOURCE, "Shop") == {"items": "Dict[str, ItemInfo]", "log": None}
    schemas = state_schemas(SOURCE, "Shop")
    assert schemas["log"] == {}
    assert schemas["items"]["additionalProperties"]["required"] == ["item_id", "price", "note"]
    assert method_source(SOURCE, "Shop", "get_item").strip().startswith("def get_item(")
    assert class_header(SOURCE, "Shop").rstrip().endswith("self.init_config = init_config")


def test_initial_states_must_fit_the_state_attributes() -> None:
    parse = config_validator(state_schemas(SOURCE, "Shop"))
    good = {"log": [], "items": {"I-1": {"item_id": "I-1", "price": 2.5, "note": None}}}
    assert list(parse(json.dumps(good))) == ["items", "log"]  # keys sorted
    for config, fragment in [
        ({"items": {}, "orders": {}}, "unknown state attributes orders; the class has items, log"),
        ({"items": {"I-1": {"item_id": "I-1", "note": None}}}, "items/I-1: 'price' is a required"),
        ({"items": {"I-1": {"item_id": "I-1", "price": "2", "note": None}}},
         "items/I-1/price: '2' is not of type 'number'"),
        ([], "must be a non-empty JSON object"),
    ]:
        with pytest.raises(ParseError, match=fragment):
            parse(json.dumps(config))
