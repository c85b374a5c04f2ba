"""Reading an ACEBench checkout (tests/fixtures/acebench, a note-taking phone of our own in
ACEBench's layout), writing its environment code, and ACEBench's end-to-end rule: pure logic,
nothing of the checkout runs here (the integration test runs it in sandboxes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envscaler.format.toolschema import derive_tools
from envscaler.importers.acebench.checkout import CheckoutError, read_category, saved_attributes
from envscaler.importers.acebench.envcode import CLASS_NAME, build
from envscaler.importers.acebench.importer import QuestionError, milestone_calls
from envscaler.importers.acebench.reward import check_source, end_to_end, saved_result

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "acebench"
CLASSES = ("BaseApi", "NoteApi")


def test_the_checkout_is_read_without_running_it() -> None:
    category = read_category(CHECKOUT, "multi_step")
    assert [q["id"] for q in category.questions] == ["agent_multi_step_0", "agent_multi_step_1"]
    assert category.questions[0]["mile_stone"] == ["[turn_on_wifi()]", "[add_note(text='milk')]"]
    assert sorted(category.classes) == ["BaseApi", "NoteApi"]
    assert saved_attributes(CHECKOUT) == {"BaseApi": ["wifi"], "NoteApi": ["notes"]}
    with pytest.raises(ValueError, match="unknown category"):
        read_category(CHECKOUT, "normal")
    with pytest.raises(CheckoutError, match="cannot read"):
        read_category(CHECKOUT / "data_all", "multi_step")


def test_every_documented_function_is_a_tool_typed_from_its_doc() -> None:
    category = read_category(CHECKOUT, "multi_step")
    code = build(category, CLASSES, category.questions[0]["function"])
    tools = {tool["function"]["name"]: tool["function"]
             for tool in derive_tools(code.source, CLASS_NAME)}
    assert list(tools) == ["turn_on_wifi", "add_note", "delete_note", "search_web"]
    assert tools["add_note"]["parameters"]["properties"]["pinned"] == {
        "type": "boolean", "description": "Pin it.", "default": False}
    assert tools["add_note"]["parameters"]["required"] == ["text"]
    assert code.source.count("class BaseApi") == 1  # NoteApi's import of it is inlined once
    assert "('BaseApi', 'NoteApi')" in code.source  # turn_on_wifi runs on both, as in ACEBench


def test_milestones_become_calls() -> None:
    assert [(c.name, c.arguments) for c in milestone_calls(
        [["[turn_on_wifi()]", " [add_note(text='x', pinned=True), delete_note(note_id=1)] "],
         ["[other()]"]])] == [("turn_on_wifi", {}), ("add_note", {"text": "x", "pinned": True}),
                              ("delete_note", {"note_id": 1})]
    for bad in (["[add_note(text='Dad's keys')]"], ["[add_note('x')]"], None):
        with pytest.raises(QuestionError):
            milestone_calls(bad)


STATE = {"BaseApi": {"wifi": True}, "NoteApi": {"notes": {"1": {"text": "a", "pinned": False}},
                                                "next_id": 2}, "calls_succeeded": 1}
SAVED = {"BaseApi": ["wifi"], "NoteApi": ["notes"]}


def test_acebench_saves_nothing_before_a_call_succeeds() -> None:
    assert saved_result(STATE, list(CLASSES), SAVED, "calls_succeeded") == [
        {"BaseApi": {"wifi": True}}, {"NoteApi": {"notes": {"1": {"text": "a", "pinned": False}}}}]
    assert saved_result({**STATE, "calls_succeeded": 0}, list(CLASSES), SAVED,
                        "calls_succeeded") == []


def test_the_end_to_end_rule_is_acebenchs() -> None:
    result = saved_result(STATE, list(CLASSES), SAVED, "calls_succeeded")
    notes = {"notes": {"1": {"text": "a", "pinned": False}}}
    assert end_to_end(result, [{"BaseApi": {"wifi": True}}, {"NoteApi": notes}])
    assert not end_to_end(result, [{"BaseApi": {"wifi": False}}, {"NoteApi": notes}])
    assert not end_to_end(result, [{"BaseApi": {"wifi": True}}])  # a class too many
    assert not end_to_end([], [{"BaseApi": {"wifi": True}}])
    # an expected object is compared key by key: the saved one may hold more keys
    assert end_to_end(result, [{"BaseApi": {"wifi": True}}, {"NoteApi": {"notes": {}}}])
    # an expected class no saved class matches is not judged (ACEBench's ReminderAPI typo)
    assert end_to_end(result, [{"BaseApi": {"wifi": True}}, {"NoteAPI": {"notes": {"9": 1}}}])


def test_the_check_carries_the_rule() -> None:
    source = check_source(list(CLASSES), SAVED, "calls_succeeded",
                          [{"BaseApi": {"wifi": True}}, {"NoteApi": {"notes": {}}}])
    namespace: dict = {}
    exec(compile(source, "check", "exec", dont_inherit=True), namespace)  # noqa: S102
    assert namespace["check_func"](STATE) is True
    assert namespace["check_func"]({**STATE, "calls_succeeded": 0}) is False
