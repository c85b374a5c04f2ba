"""BFCL's multi-turn verdict on one question (``eval_runner._evaluate_single_multi_turn_entry``
and ``multi_turn_checker``), over executions that run elsewhere. Pure: the two executions (the
model's calls and the ground truth's, each in its own instance of the classes, kept across turns)
are behind `Execution`, so that this module only decides.

In BFCL's order: a result that is not a list is ``multi_turn:inference_error``; another number of
turns than the ground truth's is ``multi_turn:force_terminated``; each step is decoded (one that
does not decode, or decodes to no call, is left out). Then per turn: the model's steps run, then
the ground truth's calls; a turn whose ground truth has calls but whose model has no decoded step
is ``multi_turn:empty_turn_model_response``; a turn whose ground truth has no calls is not checked
(its calls still run); otherwise every class's state must equal the ground truth's
(``multi_turn:instance_state_mismatch``) and the ground truth's results of this turn must all be
among the model's results of every turn so far, as a multiset, in any order
(``multi_turn:execution_response_mismatch``). The first failure is the verdict.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from envscaler.importers.bfcl.decode import decode_turn

INFERENCE_ERROR = "multi_turn:inference_error"
FORCE_TERMINATED = "multi_turn:force_terminated"
EMPTY_TURN = "multi_turn:empty_turn_model_response"
STATE_MISMATCH = "multi_turn:instance_state_mismatch"
RESPONSE_MISMATCH = "multi_turn:execution_response_mismatch"


class Execution(Protocol):
    """One side's instances of the question's classes, kept across its calls."""

    def run(self, calls: list[str]) -> list[str]:
        """Each call text's result, rendered as BFCL renders it (a failure as its error text)."""

    def state(self) -> dict[str, Any]:
        """Each class's state now, by class name, as BFCL's ``==`` compares it."""


@dataclass(frozen=True)
class Verdict:
    valid: bool
    error_type: str | None = None
    error_message: str | None = None


VALID = Verdict(True)


def precheck(result: Any, ground_truth: list[list[str]]) -> Verdict | None:
    """BFCL's verdict on ``result`` when its shape decides it, before anything runs."""
    if not isinstance(result, list):
        return Verdict(False, INFERENCE_ERROR, "the model did not output a list of responses")
    if len(result) != len(ground_truth):
        return Verdict(False, FORCE_TERMINATED,
                       f"the model result has {len(result)} turns; the ground truth "
                       f"{len(ground_truth)}")
    return None


def check(result: Any, ground_truth: list[list[str]], decoder: Callable[[Any], list[str]],
          model: Execution, truth: Execution) -> Verdict:
    """BFCL's verdict on ``result`` (a result file's ``result``: per turn, a list of steps)."""
    early = precheck(result, ground_truth)
    if early is not None:
        return early
    decoded = [decode_turn(steps if isinstance(steps, list) else [], decoder)
               for steps in result]
    returned: list[str] = []
    for turn, (steps, calls) in enumerate(zip(decoded, ground_truth, strict=True)):
        for step in steps:
            returned += model.run(step)
        expected = truth.run(calls)
        if not calls:
            continue
        if not steps:
            return Verdict(False, EMPTY_TURN, f"the model's response is empty in turn {turn}")
        verdict = _state_check(model.state(), truth.state(), turn) or _response_check(
            returned, expected, turn)
        if verdict is not None:
            return verdict
    return VALID


def _state_check(model: dict[str, Any], truth: dict[str, Any], turn: int) -> Verdict | None:
    for name, expected in truth.items():
        if model.get(name) != expected:
            return Verdict(False, STATE_MISMATCH, f"the state of {name} differs from the ground "
                           f"truth's after turn {turn}")
    return None


def _response_check(returned: list[str], expected: list[str], turn: int) -> Verdict | None:
    missing = Counter(expected) - Counter(returned)
    if missing:
        return Verdict(False, RESPONSE_MISMATCH, f"the model's results so far lack "
                       f"{sorted(missing.elements())!r} of the ground truth's in turn {turn}")
    return None
