"""The pure parts of `envscaler import bfcl-compare`: results rendered as BFCL renders them (the
runner's code on both sides), what BFCL's ``==`` compares of a state, the differences of two
executions."""

from __future__ import annotations

import datetime
from collections import OrderedDict

import pytest
from envscaler_client import CallResult, ToolError

from envscaler.importers.bfcl.compare import (
    CallDifference,
    Execution,
    QuestionComparison,
    StateDifference,
    call_differences,
    compare,
    state_differences,
)
from envscaler.importers.bfcl.replay import rendered
from envscaler.importers.bfcl.runner import compared, execute_call, render_result

@pytest.mark.parametrize(("value", "text"), [
    ("as is", "as is"),
    ({"b": 1, "a": [True, None], "é": 1.5}, '{"b": 1, "a": [true, null], "\\u00e9": 1.5}'),
    ({"when": datetime.date(2024, 1, 2)}, "{'when': datetime.date(2024, 1, 2)}"),
    (OrderedDict(a=1), "OrderedDict([('a', 1)])"),
    ([1, "x"], "[1, 'x']"),
    (None, "None"),
    (False, "False"),
])
def test_results_are_rendered_as_bfcl_renders_them(value: object, text: str) -> None:
    assert render_result(value) == text


def test_a_gateway_result_is_rendered_like_bfcls() -> None:
    assert rendered(CallResult(ok=True, result={"n": 2}, index=0)) == '{"n": 2}'
    failed = CallResult(ok=False, error=ToolError(type="ToolException", message="KeyError: 'x'"),
                        index=1)
    assert rendered(failed) == "Error during execution: KeyError: 'x'"


class Account:
    def __init__(self) -> None:
        self.balance = 3

    def deposit(self, amount: int) -> dict[str, int]:
        return {"balance": self.balance + amount}


def test_calls_run_on_their_instance_and_failures_become_results() -> None:
    namespace, owners = {"instance_Account": Account()}, {"deposit": "Account"}
    assert execute_call("deposit(amount=2)", owners, namespace) == '{"balance": 5}'
    assert execute_call("deposit()", owners, namespace) == (
        "Error during execution: Account.deposit() missing 1 required positional argument: "
        "'amount'")
    assert execute_call("remove(x=1)", {"remove": "Account"}, namespace) == (
        "Error during execution: Function call remove is not allowed.")


class File:
    """Compared by its name alone, as a BFCL ``File`` is (not by its link up nor its time)."""

    def __init__(self, name: str, folder: object) -> None:
        self.name, self.folder = name, folder
        self.made = datetime.datetime(2024, 1, 2, 3, 4)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, File) and self.name == other.name


class Note:
    """Compared by identity: its public attributes stand for it."""

    def __init__(self, text: str, folder: object) -> None:
        self.text, self.folder = text, folder


class Folder:
    def __init__(self) -> None:
        self.files = {"b": File("b", self)}
        self.notes = [Note("hi", self)]
        self.tags = {"z", "a"}
        self.created = datetime.date(2024, 1, 2)
        self._cache = object()


def test_a_state_is_what_bfcls_equality_compares() -> None:
    """Links back to the folder are left out; a date stays a date (the runner converts the whole
    state as the gateway converts its own)."""
    assert compared(Folder()) == {"files": {"b": {"name": "b"}}, "notes": [{"text": "hi"}],
                                  "tags": ["a", "z"], "created": datetime.date(2024, 1, 2)}


def test_states_differ_where_they_part() -> None:
    gateway = {"shelves": {"top": [{"grams": 0}]}, "list": ["eggs", "sugar"], "n": 1, "x": {}}
    bfcl = {"shelves": {"top": [{"grams": 60}]}, "list": ["eggs"], "n": 1.0, "x": {"k": 1}}
    assert state_differences(gateway, bfcl, "Pantry") == [
        StateDifference("Pantry.shelves.top[0].grams", 0, 60),
        StateDifference("Pantry.list", ["eggs", "sugar"], ["eggs"]),
        StateDifference("Pantry.x", {}, {"k": 1})]
    assert state_differences(bfcl, bfcl, "Pantry") == []
    assert state_differences(None, {"n": 1}, "Notes") == [StateDifference("Notes", None, {"n": 1})]


def test_calls_differ_by_their_text_and_a_missing_call_differs() -> None:
    calls = ["a()", "b()", "c()"]
    assert call_differences(calls, ["1", "2", "3"], ["1", "2", "3"]) == []
    assert call_differences(calls, ["1", "x", "3"], ["1", "2"]) == [
        CallDifference(1, "b()", "x", "2"), CallDifference(2, "c()", "3", None)]


def test_a_question_is_exact_when_calls_and_every_reported_class_agree() -> None:
    bfcl = Execution(["1"], {"A": {"n": 1}})
    exact = compare(QuestionComparison("q", "env"), ["a()"], Execution(["1"], {"A": {"n": 1},
                                                                              "B": {}}), bfcl)
    assert exact.exact and exact.calls == 1
    off = compare(QuestionComparison("q", "env"), ["a()"], Execution(["1"], {}), bfcl)
    assert off.calls_equal and not off.state_equal and not off.exact
    failed = QuestionComparison("q", "env", error="BFCL's execution failed: ImportError")
    assert not (failed.compared or failed.calls_equal or failed.exact)
