"""BFCL's multi-turn verdict as pure logic: the executions are a stand-in that computes a counter
class's state and results from the call texts (the real ones run in sandboxes; see
tests/integration/test_eval_bfcl.py)."""

from __future__ import annotations

from typing import Any

from envscaler.importers.bfcl.checker import (
    EMPTY_TURN,
    FORCE_TERMINATED,
    INFERENCE_ERROR,
    RESPONSE_MISMATCH,
    STATE_MISMATCH,
    check,
)
from envscaler.importers.bfcl.decode import decode_function_calling

TRUTH = [["add(n=2)"], ["get()"], []]


class Counter:
    """``add(n=...)`` adds to a total and answers what it added; ``get()`` answers the total."""

    def __init__(self) -> None:
        self.total = 0
        self.calls: list[str] = []

    def run(self, calls: list[str]) -> list[str]:
        self.calls += calls
        results = []
        for text in calls:
            if text.startswith("add(n="):
                added = int(text[len("add(n="):-1])
                self.total += added
                results.append(f"added {added}")
            else:
                results.append(f"total={self.total}")
        return results

    def state(self) -> dict[str, Any]:
        return {"Counter": {"total": self.total}}


def verdict(result: Any) -> tuple[bool, str | None, list[str]]:
    model = Counter()
    found = check(result, TRUTH, decode_function_calling, model, Counter())
    return found.valid, found.error_type, model.calls


def test_the_ground_truths_calls_are_valid() -> None:
    assert verdict([[[{"add": {"n": 2}}]], [[{"get": {}}]], []]) == (
        True, None, ["add(n=2)", "get()"])


def test_a_result_earlier_or_in_another_step_counts_and_calls_in_a_turn_without_truth_run() -> None:
    # turn 1's `get` answer is already among turn 0's results; turn 2's extra call still runs
    assert verdict([[["chat"], [{"get": {}}], [{"add": {"n": 2}}, {"get": {}}]],
                    [[{"get": {}}]], [[{"get": {}}]]]) == (
        True, None, ["get()", "add(n=2)", "get()", "get()", "get()"])


def test_bfcls_error_types_in_bfcls_order() -> None:
    assert verdict("not a list")[1] == INFERENCE_ERROR
    assert verdict([[[{"add": {"n": 2}}]]])[1] == FORCE_TERMINATED
    assert verdict([["I will not."], [[{"get": {}}]], []])[1] == EMPTY_TURN  # text only
    assert verdict([[[{"add": "{bad json"}]], [[{"get": {}}]], []])[1] == EMPTY_TURN
    assert verdict([[[{"add": {"n": 3}}]], [[{"get": {}}]], []])[1] == STATE_MISMATCH
    # state equal (2 added in two calls) but "added 2" never returned in turn 0
    assert verdict([[[{"add": {"n": 1}}, {"add": {"n": 1}}]], [[{"get": {}}]], []])[1] \
        == RESPONSE_MISMATCH


def test_the_first_failing_turn_decides_and_later_turns_do_not_run() -> None:
    valid, error, calls = verdict([[], [[{"add": {"n": 5}}]], []])
    assert (valid, error, calls) == (False, EMPTY_TURN, [])
