"""ACEBench's end-to-end rule for its agent category, as a check function.

ACEBench saves, once a call of the conversation has run without raising, each involved class's
attributes listed in its ``SAVED_CLASS`` (as JSON, so integer keys become text) and judges the
saved list against the possible answer's ``ground_truth`` (``eval_main.agent_eval`` with
``model_eval.checker.agent_checker``): the lists must be as long; each expected class is matched
with the saved class of the same name, and every saved attribute must be expected and equal to
it, an expected object attribute key by key (the saved one may hold more keys). An expected class
that no saved class matches is not judged (ACEBench keeps the previous verdict; a wrongly spelled
class name in the answers, ``ReminderAPI``, therefore passes), as here. These functions are
written here once and their source is the check's, so the importer's verification and the served
check judge alike.
"""

from __future__ import annotations

import inspect
import json
from typing import Any


def saved_result(state: dict[str, Any], classes: list[str], saved: dict[str, list[str]],
                 succeeded: str) -> list[dict[str, Any]]:
    """What ACEBench saves of the final state: nothing before a call has succeeded."""
    if not state.get(succeeded):
        return []
    return [{name: {key: value for key, value in (state.get(name) or {}).items()
                    if key in saved.get(name, [])}} for name in classes]


def attributes_valid(model_output: dict[str, Any], possible_answer: dict[str, Any]) -> bool:
    """ACEBench's ``agent_checker`` verdict for one class."""
    expected = list(possible_answer.values())[0]
    for param, value in list(model_output.values())[0].items():
        if param not in expected:
            return False
        wanted = expected[param]
        if isinstance(wanted, dict):
            for key, item in wanted.items():
                if key not in value or item != value[key]:
                    return False
        elif wanted != value:
            return False
    return True


def end_to_end(result: list[dict[str, Any]], ground_truth: list[dict[str, Any]]) -> bool:
    """ACEBench's end-to-end verdict of one question."""
    if len(ground_truth) != len(result):
        return False
    for expected in ground_truth:
        matched = next((item for item in result if set(item) == set(expected)), None)
        if matched is not None and not attributes_valid(matched, expected):
            return False
    return True


def check_source(classes: list[str], saved: dict[str, list[str]], succeeded: str,
                 ground_truth: list[dict[str, Any]]) -> str:
    """A ``check_func(final_state)`` giving ACEBench's end-to-end verdict."""
    helpers = "\n".join(inspect.getsource(function)
                        for function in (saved_result, attributes_valid, end_to_end))
    data = json.dumps({"classes": classes, "saved": saved, "truth": ground_truth},
                      ensure_ascii=False)
    return (f"import json\nfrom typing import Any\n\n{helpers}\n"
            "def check_func(final_state):\n"
            f"    data = json.loads({data!r})\n"
            "    result = saved_result(final_state, data['classes'], data['saved'], "
            f"{succeeded!r})\n"
            "    return end_to_end(result, data['truth'])\n")


__all__ = ["attributes_valid", "check_source", "end_to_end", "saved_result"]
