"""Trajectories -> SFT data, filtered by reward.

The paper kept SFT trajectories on the agent's own word ("Task Completed") with no check of the
final state (EnvScaler §3, §7.10). Here an episode is kept only when it ended naturally (the
agent answered, or the simulated user stopped) and validation gave it at least ``min_reward``
(1.0 by default: every check of the scenario holds).

Two formats, one record a line:

- ``openai``: ``{"messages": [...], "tools": [...]}``, the chat-completions form (system, user,
  assistant with ``tool_calls``, tool), as OpenAI fine-tuning and LlamaFactory's ``openai``
  formatting take it;
- ``sharegpt``: LlamaFactory's ShareGPT with tools: ``{"conversations": [{"from": "human" |
  "gpt" | "function_call" | "observation", "value"}], "system", "tools"}`` where ``tools`` is
  a JSON text of the function schemas, a ``function_call`` value is ``{"name", "arguments"}``
  (a JSON list of them for parallel calls), and the results of one turn's calls are one
  ``observation`` joined by ``</tool_response><tool_response>`` as LlamaFactory's own converter
  joins them.

A trajectory cut by the step limit or an error would end on tool results; it is cut back to its
last assistant message (when such episodes are exported at all).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from envscaler_client.rollout.episode import NATURAL_ENDS
from envscaler_client.rollout.runner import latest_episodes

Format = Literal["openai", "sharegpt"]
FORMATS: tuple[str, ...] = ("openai", "sharegpt")
TOOL_RESPONSE_JOIN = "\n</tool_response>\n<tool_response>\n"
_MESSAGE_FIELDS = ("role", "content", "tool_calls", "tool_call_id", "name")


@dataclass
class ExportStats:
    read: int = 0
    """Episodes in the input (the last record of each key)."""
    written: int = 0
    superseded: int = 0
    """Earlier records of an episode that was run again (``--retry-errors``)."""
    unfinished: int = 0
    """Ended by the step limit or an error (a termination not selected)."""
    unscored: int = 0
    """No reward (validation failed, or the scenario has no checks)."""
    below_reward: int = 0
    malformed: int = 0
    """Nothing to train on, or turns that do not alternate."""

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def _trimmed(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    end = len(messages)
    while end and messages[end - 1].get("role") != "assistant":
        end -= 1
    return messages[:end]


def _think(reasoning: Any, text: str) -> str:
    if isinstance(reasoning, str) and reasoning.strip():
        return f"<think>\n{reasoning.strip()}\n</think>\n\n{text}"
    return text


def _arguments(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def to_openai(record: Mapping[str, Any], keep_reasoning: bool = False) -> dict[str, Any] | None:
    """The episode as ``{"messages", "tools"}``; None when it has no assistant turn."""
    messages = []
    for message in _trimmed(list(record.get("messages") or [])):
        out = {key: message[key] for key in _MESSAGE_FIELDS if key in message}
        if keep_reasoning and message.get("reasoning_content"):
            out["reasoning_content"] = message["reasoning_content"]
        messages.append(out)
    if not any(message.get("role") == "assistant" for message in messages):
        return None
    return {"messages": messages, "tools": list(record.get("tools") or [])}


def to_sharegpt(record: Mapping[str, Any], keep_reasoning: bool = False) -> dict[str, Any] | None:
    """The episode in LlamaFactory's ShareGPT form; None when the turns do not alternate
    (human/observation, then gpt/function_call) or there is nothing to train on."""
    messages = _trimmed(list(record.get("messages") or []))
    system = ""
    if messages and messages[0].get("role") == "system":
        system = messages[0].get("content") or ""
        messages = messages[1:]
    turns: list[dict[str, str]] = []
    results: list[str] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            results.append(str(message.get("content") or ""))
            continue
        if results:
            turns.append({"from": "observation", "value": TOOL_RESPONSE_JOIN.join(results)})
            results = []
        reasoning = message.get("reasoning_content") if keep_reasoning else None
        if role == "user":
            turns.append({"from": "human", "value": str(message.get("content") or "")})
        elif role == "assistant" and message.get("tool_calls"):
            calls = [{"name": call["function"]["name"],
                      "arguments": _arguments(call["function"].get("arguments"))}
                     for call in message["tool_calls"]]
            value = json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)
            turns.append({"from": "function_call", "value": _think(reasoning, value)})
        elif role == "assistant":
            turns.append({"from": "gpt",
                          "value": _think(reasoning, str(message.get("content") or ""))})
        else:
            return None
    if results:  # cannot happen after trimming; kept for safety
        turns.append({"from": "observation", "value": TOOL_RESPONSE_JOIN.join(results)})
    expected = (("human", "observation"), ("gpt", "function_call"))
    if not turns or len(turns) % 2 or any(turn["from"] not in expected[index % 2]
                                          for index, turn in enumerate(turns)):
        return None
    functions = [tool.get("function", tool) for tool in record.get("tools") or []]
    return {"conversations": turns, "system": system,
            "tools": json.dumps(functions, ensure_ascii=False)}


def export_sft(records: Iterable[Mapping[str, Any]], fmt: str = "openai", *,
               min_reward: float = 1.0, terminations: Iterable[str] = NATURAL_ENDS,
               include_unscored: bool = False, keep_reasoning: bool = False,
               metadata: bool = False) -> tuple[list[dict[str, Any]], ExportStats]:
    """The training records of ``records`` (episodes as dicts, e.g. from `read_episodes`).

    Keeps the last record of each episode key, whose termination is in ``terminations`` and
    whose reward is at least ``min_reward`` (episodes with no reward only with
    ``include_unscored``). ``metadata`` adds ``{"metadata": {key, env, scenario, mode, seed,
    reward, termination}}`` to each record.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    convert = to_openai if fmt == "openai" else to_sharegpt
    allowed = set(terminations)
    stats = ExportStats()
    records = list(records)
    latest = latest_episodes(dict(record) for record in records)
    stats.superseded = len(records) - len(latest)
    out: list[dict[str, Any]] = []
    for record in latest.values():
        stats.read += 1
        if record.get("termination") not in allowed:
            stats.unfinished += 1
            continue
        reward = record.get("reward")
        if reward is None:
            if not include_unscored:
                stats.unscored += 1
                continue
        elif reward < min_reward:
            stats.below_reward += 1
            continue
        sample = convert(record, keep_reasoning)
        if sample is None:
            stats.malformed += 1
            continue
        if metadata:
            sample["metadata"] = {name: record.get(name) for name in (
                "key", "env", "scenario", "mode", "seed", "reward", "termination")}
        out.append(sample)
        stats.written += 1
    return out, stats
