"""Answer files for the agreement measurement, one per kind of answer (a file scores each case
once): the ground truth of every task (tau-bench) or question whose milestones parse (ACEBench)
and perturbations of it. Run: ``python -m envscaler.bench.agreement.cases tau-bench|acebench CHECKOUT OUT``.
Reads the checkout with the importers' readers (``ast`` and ``json``; nothing of it runs)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envscaler.importers.acebench.checkout import CATEGORIES, read_category
from envscaler.importers.acebench.importer import QuestionError, milestone_calls
from envscaler.importers.tau_bench.checkout import DOMAINS, read_domain

READ_PREFIXES = ("get_", "find_", "list_", "search_", "calculate", "think", "transfer_")
Put = Callable[[str, dict[str, Any]], None]


def tau_cases(checkout: Path, put: Put) -> None:
    """truth; empty; no_outputs; drop_last_write, repeat_last_write (the last action that is
    not a read); reversed (tasks with two writes or more)."""
    for name in DOMAINS:
        for task in read_domain(checkout, name).tasks:
            actions = [{"name": a.name, "kwargs": a.kwargs} for a in task.actions]
            writes = [i for i, a in enumerate(actions) if not a["name"].startswith(READ_PREFIXES)]

            def line(steps: list[dict[str, Any]], outputs: tuple[str, ...] = task.outputs,
                     index: int = task.index, domain: str = name) -> dict[str, Any]:
                return {"task_id": index, "env": domain, "actions": steps,
                        "outputs": list(outputs)}

            put("truth", line(actions))
            put("empty", line([], ()))
            if task.outputs:
                put("no_outputs", line(actions, ()))
            if writes:
                last = writes[-1]
                put("drop_last_write", line(actions[:last] + actions[last + 1:]))
                put("repeat_last_write", line(actions[:last + 1] + actions[last:]))
            if len(writes) > 1:
                put("reversed", line(actions[::-1]))


def acebench_cases(checkout: Path, put: Put) -> None:
    """truth (the first milestone path); empty; drop_last; drop_first; repeat_last."""
    for name in CATEGORIES:
        for question in read_category(checkout, name).questions:
            try:
                calls = [call.model_dump() for call in milestone_calls(question["mile_stone"])]
            except QuestionError as exc:
                print(f"{question['id']}: not measured: {exc}", file=sys.stderr)
                continue
            for kind, sequence in [("truth", calls), ("empty", []), ("drop_last", calls[:-1]),
                                   ("drop_first", calls[1:]),
                                   ("repeat_last", calls + calls[-1:])]:
                if kind in ("truth", "empty") or calls:
                    put(kind, {"id": question["id"], "calls": sequence})


def main(benchmark: str, checkout: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, list[str]] = {}
    make = {"tau-bench": tau_cases, "acebench": acebench_cases}[benchmark]
    make(checkout, lambda kind, line: files.setdefault(kind, []).append(json.dumps(line)))
    for kind, lines in files.items():
        (out / f"{kind}.jsonl").write_text("".join(line + "\n" for line in lines))
        print(f"{kind}: {len(lines)} cases")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
