"""The rollout's files without a gateway: the JSONL writer and reader (append-only, resumable,
robust to a cut line), the reference solutions read from a catalogue, and the SFT export in both
formats on hand-written episodes (`tests/fixtures/rollout/episodes.jsonl`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from envscaler_client.rollout import (
    CatalogueError,
    Episode,
    EpisodeWriter,
    ReferencePolicy,
    done_keys,
    export_sft,
    load_solutions,
    read_episodes,
    to_openai,
    to_sharegpt,
)
from tests.deadlines import scaled

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "rollout" / "episodes.jsonl"
REPO_ROOT = Path(__file__).resolve().parents[2]


def records() -> list[dict]:
    return list(read_episodes(FIXTURE))


def by_seed(seed: int) -> dict:
    return [r for r in records() if r["seed"] == seed][-1]


def test_the_writer_appends_flushed_lines_and_survives_a_cut_line(tmp_path: Path) -> None:
    path = tmp_path / "out" / "episodes.jsonl"
    with EpisodeWriter(path) as writer:
        writer.write(Episode(key="e/s/non-conversation/seed=0", env="e", termination="completed",
                             reward=1.0))
    with open(path, "a") as handle:
        handle.write('{"key": "e/s/non-conversation/seed=1", "env"')  # killed mid-line
    with EpisodeWriter(path) as writer:
        writer.write(Episode(key="e/s/non-conversation/seed=2", env="e",
                             termination="model_error"))
    text = path.read_text()
    assert text.count("\n") == 3 and text.endswith("\n")
    assert [r["key"][-6:] for r in read_episodes(path)] == ["seed=0", "seed=2"]
    assert done_keys(path) == {"e/s/non-conversation/seed=0", "e/s/non-conversation/seed=2"}
    assert done_keys(path, retry_errors=True) == {"e/s/non-conversation/seed=0"}
    assert list(read_episodes(tmp_path / "missing.jsonl")) == []


def test_a_retried_episode_supersedes_its_failed_record() -> None:
    assert len(records()) == 8
    assert by_seed(3)["termination"] == "completed"
    assert "counter_lab/counter-1/non-conversation/seed=3" in done_keys(FIXTURE,
                                                                       retry_errors=True)
    assert "counter_lab/counter-1/non-conversation/seed=6" not in done_keys(FIXTURE,
                                                                           retry_errors=True)


def test_export_filters_by_termination_and_reward() -> None:
    samples, stats = export_sft(records(), "openai", metadata=True)
    assert [s["metadata"]["seed"] for s in samples] == [0, 4, 3]
    assert stats.as_dict() == {"read": 7, "written": 3, "superseded": 1, "unfinished": 2,
                               "unscored": 1, "below_reward": 1, "malformed": 0}
    half, _ = export_sft(records(), "openai", min_reward=0.5)
    assert len(half) == 4
    unscored, _ = export_sft(records(), "openai", min_reward=0.5, include_unscored=True)
    assert len(unscored) == 5
    truncated, stats = export_sft(records(), "sharegpt", terminations=["max_steps"])
    assert len(truncated) == 1 and stats.unfinished == 6
    with pytest.raises(ValueError):
        export_sft(records(), "alpaca")


def test_openai_format() -> None:
    sample = to_openai(by_seed(0))
    assert sample is not None and set(sample) == {"messages", "tools"}
    assert [m["role"] for m in sample["messages"]] == ["system", "user", "assistant", "tool",
                                                       "tool", "assistant"]
    assert "reasoning_content" not in sample["messages"][2]
    assert to_openai(by_seed(0), keep_reasoning=True)["messages"][2]["reasoning_content"]
    assert sample["tools"][0]["function"]["name"] == "increment"
    cut = to_openai(by_seed(2))  # truncated: ends on its last assistant turn
    assert cut is not None and cut["messages"][-1]["role"] == "assistant"
    assert to_openai(by_seed(6)) is None  # no assistant turn at all


def test_sharegpt_format_for_llamafactory() -> None:
    sample = to_sharegpt(by_seed(0))
    assert sample is not None
    turns = sample["conversations"]
    assert [t["from"] for t in turns] == ["human", "function_call", "observation", "gpt"]
    assert json.loads(turns[1]["value"]) == [
        {"name": "increment", "arguments": {"name": "a", "by": 2}},
        {"name": "increment", "arguments": {"name": "b"}}]
    first, second = turns[2]["value"].split("\n</tool_response>\n<tool_response>\n")
    assert json.loads(first)["data"]["value"] == 3 and json.loads(second)["data"]["value"] == 1
    assert sample["system"].startswith("You are an agent")
    assert [t["name"] for t in json.loads(sample["tools"])] == ["increment", "token"]
    thinking = to_sharegpt(by_seed(0), keep_reasoning=True)
    assert thinking["conversations"][1]["value"].startswith("<think>\nTwo increments")

    conversation = to_sharegpt(by_seed(4))
    assert [t["from"] for t in conversation["conversations"]] == [
        "human", "function_call", "observation", "gpt", "human", "function_call",
        "observation", "gpt"]
    assert json.loads(conversation["conversations"][1]["value"]) == {
        "name": "increment", "arguments": {"name": "a", "by": 2}}  # one call: an object

    cut = to_sharegpt(by_seed(2))
    assert [t["from"] for t in cut["conversations"]][-1] == "function_call"
    # LlamaFactory's rule: human/observation at even positions, gpt/function_call at odd ones
    for sample in (sample, conversation, cut):
        for index, turn in enumerate(sample["conversations"]):
            assert turn["from"] in (("human", "observation"), ("gpt", "function_call"))[index % 2]


def write_catalogue(root: Path) -> Path:
    env = root / "shop"
    env.mkdir(parents=True)
    scenarios = [
        {"id": "s-1", "split": "rl", "task": "t", "solution": [
            {"name": "buy", "arguments": {"item": "tea"}}, {"name": "pay"}]},
        {"id": "s-2", "split": "rl", "task": "t", "verified": False, "solution": None},
    ]
    (env / "scenarios.jsonl").write_text("".join(json.dumps(s) + "\n" for s in scenarios) + "\n")
    return root


async def test_the_reference_policy_replays_the_solution(tmp_path: Path) -> None:
    solutions = load_solutions(write_catalogue(tmp_path), "shop")
    assert solutions == {"s-1": [{"name": "buy", "arguments": {"item": "tea"}},
                                 {"name": "pay", "arguments": {}}], "s-2": None}
    policy = ReferencePolicy(solutions["s-1"] or [])
    messages: list[dict] = [{"role": "system", "content": "s"}, {"role": "user", "content": "t"}]
    first = await policy(messages, [])
    assert first["tool_calls"][0]["function"] == {"name": "buy", "arguments": '{"item": "tea"}'}
    messages += [first, {"role": "tool", "tool_call_id": "ref_1", "content": "{}"}]
    second = await policy(messages, [])
    assert second["tool_calls"][0]["function"]["name"] == "pay"
    messages += [second, {"role": "tool", "tool_call_id": "ref_2", "content": "{}"}]
    assert await policy(messages, []) == {"role": "assistant", "content": "Task Completed."}
    with pytest.raises(CatalogueError, match="cannot read"):
        load_solutions(tmp_path, "nowhere")


BLOCKED = ("fastapi", "starlette", "uvicorn", "redis", "docker", "typer", "rich", "click",
           "jsonschema", "openai", "server", "sandbox", "envformat", "synth", "cli")

REFUSING_IMPORT = """
import sys
BLOCKED = set(sys.argv[1].split(","))

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not installed with the client")
        return None

sys.meta_path.insert(0, Refuse())
import envscaler_client.rollout as rollout
for name in rollout.__all__:
    getattr(rollout, name)
loaded = sorted(name for name in sys.modules if name.partition(".")[0] in BLOCKED)
assert not loaded, loaded
"""


def test_the_rollout_package_needs_httpx_and_pydantic_only(tmp_path: Path) -> None:
    """The client's dependency rule holds for the rollout: no openai SDK, no CLI, no service."""
    result = subprocess.run([sys.executable, "-I", "-c", REFUSING_IMPORT, ",".join(BLOCKED)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=scaled(60), check=False)
    assert result.returncode == 0, result.stderr
