"""De-duplication of topics, thresholds, environment ids and the task file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envscaler.synth.skel.dedup import TopicText, cosine, deduplicate, jaccard, tfidf_vectors, tokens
from envscaler.synth.skel.topics import TaskFileError, env_id_for, read_tasks, unique_env_id


def topic(item: str, summary: str, introduction: str, usefulness: int = 8,
          modelability: int = 8) -> TopicText:
    return TopicText(item, summary, introduction, usefulness, modelability)


def test_tokens_drop_stop_words_and_plurals() -> None:
    assert tokens("The Patients' appointments and entries, managed by a system!") == \
        ["patient", "appointment", "entry", "managed"]


def test_similarity_measures() -> None:
    assert jaccard(["a", "b"], ["b", "c"]) == pytest.approx(1 / 3)
    assert jaccard([], []) == 1.0
    vectors = tfidf_vectors([["clinic", "slot"], ["clinic", "slot"], ["warehouse", "stock"]])
    assert cosine(vectors[0], vectors[1]) == pytest.approx(1.0)
    assert cosine(vectors[0], vectors[2]) == 0.0


def test_exact_summaries_keep_the_most_modelable_then_most_useful() -> None:
    topics = [topic("t1", "Library system", "Books and loans.", usefulness=9, modelability=7),
              topic("t2", "library  SYSTEM", "Loans of books.", usefulness=6, modelability=9),
              topic("t3", "Library system", "Members.", usefulness=8, modelability=9)]
    kept, drops = deduplicate(topics)
    assert [t.item for t in kept] == ["t3"]
    assert drops == [("t2", "same summary as t3 ('library  SYSTEM')"),
                     ("t1", "same summary as t3 ('Library system')")]


@pytest.mark.parametrize("method", ["tfidf", "jaccard"])
def test_near_duplicates_are_removed_above_the_threshold(method: str) -> None:
    topics = [
        topic("t1", "Clinic appointment scheduling", "Patients book doctor slots; reschedule "
              "and cancel appointments."),
        topic("t2", "Dental clinic appointment booking", "Patients book dentist slots; "
              "reschedule and cancel appointments.", modelability=7),
        topic("t3", "Warehouse inventory", "Stock levels per warehouse and transfers."),
    ]
    kept, drops = deduplicate(topics, method=method, threshold=0.4)
    assert [t.item for t in kept] == ["t1", "t3"]
    assert len(drops) == 1 and drops[0][0] == "t2"
    assert drops[0][1].startswith(f"near-duplicate of t1 ({method} similarity ")
    kept, drops = deduplicate(topics, method=method, threshold=0.99)
    assert [t.item for t in kept] == ["t1", "t2", "t3"] and drops == []


def test_environment_ids() -> None:
    assert env_id_for("Clinic appointment scheduling system") == "clinic_appointment_scheduling"
    assert env_id_for("E-Commerce Platform") == "e_commerce"
    assert env_id_for("!!!") == "env"
    assert len(env_id_for("word " * 40)) <= 48
    taken = {"clinic_appointment_scheduling"}
    assert unique_env_id("Clinic appointment scheduling system", taken) == \
        "clinic_appointment_scheduling_2"


def test_task_files(tmp_path: Path) -> None:
    listed = tmp_path / "tasks.json"
    listed.write_text(json.dumps(["  first task ", {"task": "second", "source": "x"}]))
    assert read_tasks(listed) == [("task-0001", "first task"), ("task-0002", "second")]
    lines = tmp_path / "tasks.jsonl"
    lines.write_text('{"task": "a"}\n\n"b"\n')
    assert read_tasks(lines) == [("task-0001", "a"), ("task-0002", "b")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "no task key"}\n')
    with pytest.raises(TaskFileError, match="entry 1 has no task text"):
        read_tasks(bad)
    broken = tmp_path / "broken.json"
    broken.write_text("[1,")
    with pytest.raises(TaskFileError, match="not JSON or JSONL"):
        read_tasks(broken)
