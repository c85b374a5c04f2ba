"""One question's two executions side by side: the call results the gateway returned and those
BFCL's own execution gave (both rendered as BFCL renders them), and the final states, for each
class BFCL reports. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any


@dataclass(frozen=True)
class Execution:
    """The rendered result of each ground-truth call, in order, and the final state by class."""

    results: list[str]
    state: dict[str, Any]


@dataclass(frozen=True)
class CallDifference:
    """Call ``index`` (from 0, over all turns) of ``call``; None: that side has no such call."""

    index: int
    call: str
    gateway: str | None
    bfcl: str | None


@dataclass(frozen=True)
class StateDifference:
    """Where the final states part (``PantryAPI.shelves.top[0].grams``) and what each holds
    there; None on the gateway's side when its state lacks the class."""

    path: str
    gateway: Any
    bfcl: Any


@dataclass
class QuestionComparison:
    """One question: compared when both executions ran, else ``error`` says which did not."""

    id: str
    env: str
    calls: int = 0
    call_differences: list[CallDifference] = field(default_factory=list)
    state_differences: list[StateDifference] = field(default_factory=list)
    error: str | None = None

    @property
    def compared(self) -> bool:
        return self.error is None

    @property
    def calls_equal(self) -> bool:
        return self.compared and not self.call_differences

    @property
    def state_equal(self) -> bool:
        return self.compared and not self.state_differences

    @property
    def exact(self) -> bool:
        return self.calls_equal and self.state_equal


def compare(question: QuestionComparison, calls: list[str], gateway: Execution,
            bfcl: Execution) -> QuestionComparison:
    """``question`` with the differences of the two executions of ``calls`` (BFCL's call texts)."""
    question.calls = len(calls)
    question.call_differences = call_differences(calls, gateway.results, bfcl.results)
    question.state_differences = [difference for name in bfcl.state
                                  for difference in state_differences(
                                      gateway.state.get(name), bfcl.state[name], name)]
    return question


def call_differences(calls: list[str], gateway: list[str],
                     bfcl: list[str]) -> list[CallDifference]:
    """The calls whose results are not the same text (one side lacking a call is a difference)."""
    return [CallDifference(index, calls[index] if index < len(calls) else "?", ours, theirs)
            for index, (ours, theirs) in enumerate(zip_longest(gateway, bfcl)) if ours != theirs]


def state_differences(gateway: Any, bfcl: Any, path: str) -> list[StateDifference]:
    """The places where two states part. Mappings with the same keys and lists of the same length
    are compared item by item; where the shapes part (other keys, another length, another kind
    of value) the two values there are the difference. Leaves compare with ``==``, as BFCL's
    state checker does."""
    if isinstance(gateway, dict) and isinstance(bfcl, dict) and gateway.keys() == bfcl.keys():
        return [difference for key in bfcl
                for difference in state_differences(gateway[key], bfcl[key], f"{path}.{key}")]
    if isinstance(gateway, list) and isinstance(bfcl, list) and len(gateway) == len(bfcl):
        return [difference for index, (ours, theirs) in enumerate(zip(gateway, bfcl))
                for difference in state_differences(ours, theirs, f"{path}[{index}]")]
    return [] if gateway == bfcl else [StateDifference(path, gateway, bfcl)]
