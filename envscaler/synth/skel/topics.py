"""SkelBuilder step 1, topic mining: stateful tasks -> environment topics -> selected, distinct ones."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from envscaler.synth.llm import ItemDropped
from envscaler.synth.parsing import json_reply
from envscaler.synth.prompts import messages
from envscaler.synth.prompts import topics as prompts
from envscaler.synth.run import Run
from envscaler.synth.skel.dedup import TopicText, deduplicate
from envscaler.synth.skel.models import TaskJudgement, Topic

MAX_ENV_ID = 48


class TaskFileError(ValueError):
    """The task file cannot be read."""


def read_tasks(path: Path) -> list[tuple[str, str]]:
    """``(item id, task text)`` from a JSON list or JSONL file of strings or ``{"task": ...}``.

    Ids are ``task-0001``... by position, so they are stable for a given file.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskFileError(f"{path}: cannot be read: {exc.strerror}") from None
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            records = json.loads(text)
        else:
            records = [json.loads(line) for line in text.split("\n") if line.strip()]
    except ValueError as exc:
        raise TaskFileError(f"{path}: not JSON or JSONL: {exc}") from None
    tasks: list[tuple[str, str]] = []
    for position, record in enumerate(records, start=1):
        task = record if isinstance(record, str) else \
            record.get("task") if isinstance(record, dict) else None
        if not isinstance(task, str) or not task.strip():
            raise TaskFileError(f"{path}: entry {position} has no task text (a string or an "
                                "object with a \"task\" string)")
        tasks.append((f"task-{position:04d}", task.strip()))
    return tasks


async def mine_topics(run: Run, tasks: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Topics kept after judging, inference, thresholds and de-duplication, each with its
    ``env_id``; in task order."""
    assert run.model is not None
    model = run.model

    async def judge(item: str, task: str) -> dict[str, Any]:
        answer = await model.ask("topics.judge", item,
                                 messages(prompts.JUDGE_SYSTEM, prompts.JUDGE_USER, task=task),
                                 lambda text: json_reply(text, TaskJudgement))
        if not answer.value.needs_environment:
            raise ItemDropped(f"not a stateful task: {answer.value.reason}")
        return {"task": task, "reason": answer.value.reason}

    judged = await run.stage("topics.judge", tasks, judge)

    async def infer(item: str, task: str) -> dict[str, Any]:
        answer = await model.ask("topics.infer", item,
                                 messages(prompts.INFER_SYSTEM, prompts.INFER_USER, task=task),
                                 lambda text: json_reply(text, Topic))
        return {"task": task, **answer.value.model_dump(), "created": answer.created}

    inferred = await run.stage("topics.infer", [(item, data["task"])
                                                for item, data in judged.items()], infer)
    return select_topics(run, inferred)


def select_topics(run: Run, inferred: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    settings = run.settings
    drops: list[tuple[str, str]] = []
    candidates: list[TopicText] = []
    for item, topic in inferred.items():
        low = [f"{name} {topic[name]} < {minimum}" for name, minimum in
               (("usefulness", settings.min_usefulness),
                ("modelability", settings.min_modelability)) if topic[name] < minimum]
        if low:
            drops.append((item, f"below threshold: {', '.join(low)}"))
            continue
        candidates.append(TopicText(item, topic["summary"], topic["introduction"],
                                    topic["usefulness"], topic["modelability"]))
    kept, duplicates = deduplicate(candidates, method=settings.dedup_method,
                                   threshold=settings.dedup_threshold)
    drops += duplicates
    selected = []
    taken: set[str] = set()
    for topic in kept:
        env_id = unique_env_id(topic.summary, taken)
        taken.add(env_id)
        selected.append({"item": topic.item, "env_id": env_id, **inferred[topic.item]})
    run.select("topics.select", len(inferred), len(selected), drops)
    return selected


def env_id_for(summary: str) -> str:
    """``clinic_appointment_scheduling`` for "Clinic appointment scheduling system"."""
    words = re.findall(r"[a-z0-9]+", summary.lower())
    if len(words) > 1 and words[-1] in ("system", "platform", "environment", "application",
                                        "app", "service", "tool", "manager"):
        words = words[:-1]
    slug = ""
    for word in words:
        candidate = f"{slug}_{word}" if slug else word
        if len(candidate) > MAX_ENV_ID:
            break
        slug = candidate
    return slug or "env"


def unique_env_id(summary: str, taken: set[str]) -> str:
    base = env_id_for(summary)
    env_id, counter = base, 2
    while env_id in taken:
        env_id = f"{base[: MAX_ENV_ID - 4]}_{counter}"
        counter += 1
    return env_id
