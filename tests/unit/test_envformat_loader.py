"""The loader: the real catalogue loads, and each broken file is named with its line and field."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from envscaler.format import (
    FormatError,
    content_hash,
    derive_tools,
    load_catalogue,
    load_env,
    sync_manifest,
)

REPO_ROOT = Path(__file__).parents[2]
CATALOGUE = REPO_ROOT / "generated_envs"
ENV_ID = "library_loans"


@pytest.fixture
def env_dir(tmp_path: Path) -> Path:
    """A private copy of the library_loans environment to corrupt."""
    target = tmp_path / "catalogue" / ENV_ID
    shutil.copytree(CATALOGUE / ENV_ID, target)
    return target


def edit_manifest(env_dir: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = env_dir / "env.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def edit_scenario(env_dir: Path, line: int, change: Callable[[dict[str, Any]], None]) -> None:
    path = env_dir / "scenarios.jsonl"
    lines = path.read_text().split("\n")
    data = json.loads(lines[line - 1])
    change(data)
    lines[line - 1] = json.dumps(data, ensure_ascii=False)
    path.write_text("\n".join(lines))


def load_error(env_dir: Path) -> FormatError:
    with pytest.raises(FormatError) as info:
        load_env(env_dir)
    return info.value


def skipped_line(env_dir: Path) -> FormatError:
    """The one bad scenario line's error; the environment still loads with the other three."""
    package = load_env(env_dir)
    assert len(package.scenarios) == 3 and len(package.skipped) == 1
    return package.skipped[0]


# --- the real catalogue -------------------------------------------------------------------------

def test_real_catalogue_loads_without_errors() -> None:
    catalogue = load_catalogue(CATALOGUE, strict=True)
    assert catalogue.errors == []
    assert ENV_ID in catalogue.envs
    assert list(catalogue.envs) == sorted(catalogue.envs)


def test_env_package_helpers() -> None:
    package = load_env(CATALOGUE / ENV_ID)
    assert package.manifest.id == ENV_ID
    assert package.tool_names == [op.name for op in package.manifest.operations]
    assert package.tool("checkout_book")["function"]["parameters"]["required"] == [
        "member_id", "book_id"]
    assert package.tool("nope") is None
    assert [s.id for s in package.scenarios] == [f"{ENV_ID}-00{i}" for i in range(1, 5)]
    assert package.scenario(f"{ENV_ID}-002").split == "rl"
    assert package.scenario("missing") is None
    assert package.manifest.tools == derive_tools(package.source, "LibraryLoanSystem")
    assert package.manifest.provenance.content_hash == content_hash(
        (CATALOGUE / ENV_ID / "env.py").read_bytes())


def test_library_scenarios_follow_the_state_attributes() -> None:
    package = load_env(CATALOGUE / ENV_ID)
    for scenario in package.scenarios:
        assert set(scenario.init_config) == {"members", "books", "loans", "holds", "fines"}
        assert 3 <= len(scenario.checklist) <= 5
        assert all(item.item.startswith("Has ") for item in scenario.checklist)
        assert len(scenario.task.split()) >= 50
        assert scenario.solution and scenario.verified
    assert {s.split for s in package.scenarios} == {"train", "rl", "eval"}


# --- sync_manifest ------------------------------------------------------------------------------

def test_sync_is_a_no_op_on_a_synced_env(env_dir: Path) -> None:
    before = (env_dir / "env.json").read_bytes()
    assert sync_manifest(env_dir) is False
    assert (env_dir / "env.json").read_bytes() == before


def test_sync_round_trip_after_editing_env_py(env_dir: Path) -> None:
    source = env_dir / "env.py"
    source.write_text(source.read_text() + (
        "\n    def ping(self, echo: str = \"pong\") -> dict:\n"
        "        \"\"\"Check the desk is up.\n\n        Args:\n            echo: Text to return.\n"
        "        \"\"\"\n        return {\"success\": True, \"message\": echo}\n"))
    assert load_error(env_dir).field == "provenance.content_hash"
    assert sync_manifest(env_dir) is True
    synced = (env_dir / "env.json").read_bytes()
    package = load_env(env_dir)
    assert package.tool("ping")["function"]["parameters"]["properties"] == {
        "echo": {"type": "string", "description": "Text to return.", "default": "pong"}}
    assert package.manifest.provenance.content_hash == content_hash(source.read_bytes())
    assert sync_manifest(env_dir) is False
    assert (env_dir / "env.json").read_bytes() == synced


def test_sync_rewrites_any_layout_into_the_canonical_bytes(env_dir: Path) -> None:
    path = env_dir / "env.json"
    canonical = path.read_bytes()
    data = json.loads(canonical)
    data["tools"] = []
    data["provenance"]["content_hash"] = "stale"
    path.write_text(json.dumps(dict(reversed(list(data.items())))))  # other key order, one line
    assert sync_manifest(env_dir) is True
    assert path.read_bytes() == canonical


def test_sync_reports_an_invalid_manifest(env_dir: Path) -> None:
    edit_manifest(env_dir, lambda data: data.pop("class_name"))
    with pytest.raises(FormatError) as info:
        sync_manifest(env_dir)
    assert (info.value.file, info.value.field) == (env_dir / "env.json", "class_name")


# --- env.py and env.json ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["env.py", "env.json", "scenarios.jsonl"])
def test_missing_file(env_dir: Path, name: str) -> None:
    (env_dir / name).unlink()
    error = load_error(env_dir)
    assert (error.file, error.line, error.field) == (env_dir / name, None, None)
    assert str(error) == f"{env_dir / name}: is missing"


def test_manifest_id_must_match_folder(env_dir: Path) -> None:
    edit_manifest(env_dir, lambda data: data.update(id="library_other"))
    error = load_error(env_dir)
    assert (error.file, error.field) == (env_dir / "env.json", "id")
    assert "does not match the folder name 'library_loans'" in error.message


def test_manifest_invalid_json_names_the_line(env_dir: Path) -> None:
    path = env_dir / "env.json"
    lines = path.read_text().split("\n")
    lines[2] = lines[2].rstrip(",")  # drop the comma ending line 3
    path.write_text("\n".join(lines))
    error = load_error(env_dir)
    assert (error.file, error.line) == (path, 4)
    assert error.message.startswith("invalid JSON: Expecting ',' delimiter")


@pytest.mark.parametrize(("change", "field", "text"), [
    (lambda d: d["operations"][1].update(type="mutation"), "operations.1.type",
     "Input should be 'query' or 'state_change'"),
    (lambda d: d.update(bogus=1), "bogus", "Extra inputs are not permitted"),
    (lambda d: d["provenance"].update(created="21/11/2026"), "provenance.created", "Value error"),
    (lambda d: d.update(id="Library Loans"), "id", "String should match pattern"),
    (lambda d: d["state_space"][0].pop("attributes"), "state_space.0.attributes", "Field required"),
])
def test_manifest_schema_errors_name_the_field(env_dir: Path, change: Callable[[dict], None],
                                               field: str, text: str) -> None:
    edit_manifest(env_dir, change)
    error = load_error(env_dir)
    assert (error.file, error.line, error.field) == (env_dir / "env.json", None, field)
    assert text in error.message
    assert str(error) == f"{env_dir / 'env.json'}: {field}: {error.message}"


def test_several_schema_errors_are_counted(env_dir: Path) -> None:
    edit_manifest(env_dir, lambda d: d.update(summary=1, introduction=2))
    error = load_error(env_dir)
    assert error.field == "summary"
    assert error.message.endswith("(and 1 more)")


def test_env_py_syntax_error_names_its_line(env_dir: Path) -> None:
    source = env_dir / "env.py"
    source.write_text(source.read_text().replace("class LibraryLoanSystem:",
                                                 "class LibraryLoanSystem(:"))
    error = load_error(env_dir)
    line = source.read_text().split("\n").index("class LibraryLoanSystem(:") + 1
    assert (error.file, error.line) == (source, line)
    assert "does not parse" in error.message


def test_missing_class_is_reported_on_env_py(env_dir: Path) -> None:
    edit_manifest(env_dir, lambda data: data.update(class_name="LendingDesk"))
    error = load_error(env_dir)
    assert error.file == env_dir / "env.py"
    assert "does not define class 'LendingDesk'" in error.message


def test_stale_content_hash_asks_for_a_sync(env_dir: Path) -> None:
    source = env_dir / "env.py"
    source.write_text(source.read_text() + "# a trailing comment\n")
    error = load_error(env_dir)
    assert (error.file, error.field) == (env_dir / "env.json", "provenance.content_hash")
    # The hint is a command that works: run as it is given (with this interpreter), it rewrites
    # env.json, and the folder loads.
    command = shlex.split(error.message.split("run: ", 1)[1])
    assert command[0] == "python" and command[-1] == str(env_dir)
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    subprocess.run([sys.executable, *command[1:]], check=True, env=environment, timeout=60)
    assert load_env(env_dir).manifest.id == ENV_ID


def test_edited_tools_are_reported_at_the_first_difference(env_dir: Path) -> None:
    edit_manifest(env_dir, lambda d: d["tools"][2]["function"].update(description="edited"))
    error = load_error(env_dir)
    assert (error.file, error.field) == (env_dir / "env.json", "tools.2")
    assert "f.sync_manifest(pathlib.Path(sys.argv[1]))" in error.message
    assert "envscaler catalogue sync" not in error.message  # no such command


def test_a_missing_tool_is_reported_on_tools(env_dir: Path) -> None:
    edit_manifest(env_dir, lambda d: d["tools"].pop())
    assert load_error(env_dir).field == "tools"


# --- scenarios.jsonl ----------------------------------------------------------------------------

def test_scenario_invalid_json_names_the_line_counting_blank_lines(env_dir: Path) -> None:
    path = env_dir / "scenarios.jsonl"
    lines = path.read_text().split("\n")
    path.write_text("\n".join([lines[0], "", "   ", lines[1][:-1], *lines[2:]]))
    error = skipped_line(env_dir)
    assert (error.file, error.line, error.field) == (path, 4, None)
    assert error.message.startswith("invalid JSON: ")


def test_blank_lines_are_skipped(env_dir: Path) -> None:
    path = env_dir / "scenarios.jsonl"
    path.write_text("\n\n" + path.read_text().replace("\n", "\n\n"))
    assert len(load_env(env_dir).scenarios) == 4


@pytest.mark.parametrize(("change", "field", "text"), [
    (lambda s: s.update(split="test"), "split", "Input should be 'train', 'rl' or 'eval'"),
    (lambda s: s.update(checklist=[]), "checklist", "at least 1 item"),
    (lambda s: s.update(task="   "), "task", "must not be blank"),
    (lambda s: s.update(id="has space"), "id", "String should match pattern"),
    (lambda s: s["checklist"][1].pop("check_func"), "checklist.1.check_func", "Field required"),
    (lambda s: s["solution"][0].update(args={}), "solution.0.args", "Extra inputs"),
    (lambda s: s.update(verified=False), "verified", "only when there is no solution"),
])
def test_scenario_schema_errors_name_line_and_field(env_dir: Path, change: Callable[[dict], None],
                                                    field: str, text: str) -> None:
    edit_scenario(env_dir, 2, change)
    error = skipped_line(env_dir)
    assert (error.file, error.line, error.field) == (env_dir / "scenarios.jsonl", 2, field)
    assert text in error.message


def test_unverified_scenario_without_solution_loads(env_dir: Path) -> None:
    edit_scenario(env_dir, 1, lambda s: s.update(solution=None, verified=False))
    scenario = load_env(env_dir).scenarios[0]
    assert (scenario.solution, scenario.verified) == (None, False)


def test_duplicate_scenario_id(env_dir: Path) -> None:
    edit_scenario(env_dir, 3, lambda s: s.update(id=f"{ENV_ID}-001"))
    error = skipped_line(env_dir)
    assert (error.line, error.field) == (3, "id")
    assert error.message == f"duplicate scenario id '{ENV_ID}-001' (first on line 1)"


@pytest.mark.parametrize(("source", "message"), [
    ("def check(final_state):\n    return True\n", "does not define check_func(final_state)"),
    ("check_func = lambda final_state: True\n", "does not define check_func(final_state)"),
    ("def check_func(final_state:\n",
     "does not parse: '(' was never closed (line 1 of the function)"),
    ("def check_func(final_state, initial_state):\n    return True\n",
     "check_func must take exactly one positional parameter (final_state)"),
    ("def check_func(*states):\n    return True\n",
     "check_func must take exactly one positional parameter (final_state)"),
    ("def check_func(final_state, *, strict):\n    return True\n",
     "check_func must take exactly one positional parameter (final_state)"),
])
def test_bad_check_funcs(env_dir: Path, source: str, message: str) -> None:
    edit_scenario(env_dir, 3, lambda s: s["checklist"][0].update(check_func=source))
    error = skipped_line(env_dir)
    assert (error.line, error.field, error.message) == (3, "checklist.0.check_func", message)


def test_error_string_format(env_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(env_dir.parents[1])
    relative = Path("catalogue") / ENV_ID
    edit_scenario(env_dir, 3, lambda s: s["checklist"][0].update(check_func="x = 1\n"))
    assert str(skipped_line(relative)) == (
        "catalogue/library_loans/scenarios.jsonl:3: checklist.0.check_func: "
        "does not define check_func(final_state)")


def test_check_func_with_helpers_and_optional_keywords_is_accepted(env_dir: Path) -> None:
    source = ("def helper(x):\n    return x\n\n"
              "def check_func(final_state, *, verbose=False):\n    return helper(True)\n")
    edit_scenario(env_dir, 1, lambda s: s["checklist"][0].update(check_func=source))
    assert load_env(env_dir).scenarios[0].checklist[0].check_func == source


@pytest.mark.parametrize(("call", "field", "message"), [
    ({"name": "borrow_book", "arguments": {}}, "solution.1.name",
     f"'borrow_book' is not a tool of {ENV_ID}"),
    ({"name": "get_member", "arguments": {"member_id": 7}}, "solution.1.arguments.member_id",
     "7 is not of type 'string' (tool get_member)"),
    ({"name": "get_member", "arguments": {}}, "solution.1.arguments",
     "'member_id' is a required property (tool get_member)"),
    ({"name": "get_member", "arguments": {"member_id": "M-1", "verbose": True}},
     "solution.1.arguments",
     "Additional properties are not allowed ('verbose' was unexpected) (tool get_member)"),
    ({"name": "search_books", "arguments": {"query": "x", "field": "isbn"}},
     "solution.1.arguments.field",
     "'isbn' is not one of ['title', 'author', 'any'] (tool search_books)"),
])
def test_bad_solution_calls(env_dir: Path, call: dict[str, Any], field: str, message: str) -> None:
    edit_scenario(env_dir, 4, lambda s: s["solution"].__setitem__(1, call))
    error = skipped_line(env_dir)
    assert (error.file, error.line, error.field, error.message) == (
        env_dir / "scenarios.jsonl", 4, field, message)


def test_solution_arguments_may_use_null_for_optional(env_dir: Path) -> None:
    call = {"name": "pay_fines", "arguments": {"member_id": "M-4001", "amount": None}}
    edit_scenario(env_dir, 4, lambda s: s["solution"].append(call))
    assert load_env(env_dir).scenarios[3].solution[-1].arguments == {"member_id": "M-4001",
                                                                      "amount": None}


def test_a_bad_line_is_skipped_and_the_others_load(env_dir: Path) -> None:
    edit_scenario(env_dir, 2, lambda s: s.update(split="test"))
    package = load_env(env_dir)
    assert [s.id for s in package.scenarios] == [f"{ENV_ID}-00{i}" for i in (1, 3, 4)]
    assert [str(error) for error in package.skipped] == [
        f"{env_dir}/scenarios.jsonl:2: split: Input should be 'train', 'rl' or 'eval'"]
    for strict_load in (lambda: load_catalogue(env_dir.parent, strict=True),
                        lambda: load_env(env_dir, strict=True)):
        with pytest.raises(FormatError) as info:
            strict_load()
        assert (info.value.line, info.value.field) == (2, "split")
    assert list(load_catalogue(env_dir.parent).envs) == [ENV_ID]


def test_an_environment_with_no_usable_scenario_does_not_load(env_dir: Path) -> None:
    for line in range(1, 5):
        edit_scenario(env_dir, line, lambda s: s.update(task=" "))
    error = load_error(env_dir)
    assert (error.file, error.line) == (env_dir / "scenarios.jsonl", None)
    assert error.message == ("has no usable scenario; every line was skipped, the first (line 1) "
                             "because task: Value error, must not be blank")


def test_no_scenarios(env_dir: Path) -> None:
    (env_dir / "scenarios.jsonl").write_text("\n\n")
    error = load_error(env_dir)
    assert (error.file, error.line) == (env_dir / "scenarios.jsonl", None)
    assert error.message == "has no scenarios; every environment needs at least one"


# --- catalogue ----------------------------------------------------------------------------------

def test_catalogue_reports_broken_envs_and_loads_the_rest(env_dir: Path) -> None:
    root = env_dir.parent
    broken = root / "broken_env"
    shutil.copytree(env_dir, broken)  # id in env.json stays library_loans
    shutil.copytree(env_dir, root / "_drafts")
    (root / ".cache").mkdir()
    (root / "README.md").write_text("not an environment\n")
    catalogue = load_catalogue(root)
    assert list(catalogue.envs) == [ENV_ID]
    assert [(error.file, error.field) for error in catalogue.errors] == [
        (broken / "env.json", "id")]
    with pytest.raises(FormatError) as info:
        load_catalogue(root, strict=True)
    assert info.value.file == broken / "env.json"


def test_catalogue_envs_are_sorted_by_id(env_dir: Path) -> None:
    other = env_dir.parent / "a_first"
    shutil.copytree(env_dir, other)
    edit_manifest(other, lambda data: data.update(id="a_first"))
    assert list(load_catalogue(env_dir.parent, strict=True).envs) == ["a_first", ENV_ID]


def test_missing_catalogue_root(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="the catalogue folder does not exist"):
        load_catalogue(tmp_path / "nowhere")


def test_content_hash_format() -> None:
    assert content_hash(b"") == (
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")


def test_clock_start_is_an_optional_iso_date_time_written_only_when_set() -> None:
    from pydantic import ValidationError

    from envscaler.format.models import Scenario

    base = {"id": "s-1", "split": "rl", "task": "t", "init_config": {},
            "checklist": [{"item": "i", "check_func": "def check_func(s):\n    return True\n"}]}
    assert "clock_start" not in Scenario(**base).model_dump(mode="json")
    dated = Scenario(**base, clock_start="2024-02-29T12:00:00+01:00")
    assert dated.model_dump(mode="json")["clock_start"] == "2024-02-29T12:00:00+01:00"
    with pytest.raises(ValidationError, match="clock_start"):
        Scenario(**base, clock_start="next tuesday")


def test_turns_carry_the_solution_per_user_message_and_must_start_with_the_task() -> None:
    from pydantic import ValidationError

    from envscaler.format.models import Scenario

    base = {"id": "s-1", "split": "rl", "task": "first", "init_config": {},
            "checklist": [{"item": "i", "check_func": "def check_func(s):\n    return True\n"}]}
    turns = [{"user": "first", "solution": [{"name": "a"}]},
             {"user": "second", "solution": [{"name": "b", "arguments": {"x": 1}}]}]
    scenario = Scenario(**base, turns=turns)
    assert [(call.name, call.arguments) for call in scenario.solution] == [("a", {}),
                                                                          ("b", {"x": 1})]
    written = scenario.model_dump(mode="json")
    assert "solution" not in written and written["turns"][1]["user"] == "second"
    assert Scenario.model_validate(written) == scenario
    for wrong, reason in [({"turns": [{"user": "other"}]}, "must be the task"),
                          ({"turns": [turns[0], {"user": "second"}]}, "every turn has a solution or none"),
                          ({"turns": turns, "solution": []}, "in its turns")]:
        with pytest.raises(ValidationError, match=reason):
            Scenario(**base, **wrong)


def host_secret(tmp_path: Path) -> Path:
    """A file outside the environment that a link in it could point to."""
    secret = tmp_path / "outside" / "db.json"
    secret.parent.mkdir()
    secret.write_text('{"root_password": "hunter2"}')
    return secret


def scenario_on_data(env_dir: Path) -> None:
    edit_scenario(env_dir, 1, lambda data: data.update(init_data="db.json", init_config={}))


@pytest.mark.parametrize("linked", ["file", "folder"])
def test_a_data_file_behind_a_link_is_refused_and_its_scenario_skipped(
        env_dir: Path, tmp_path: Path, linked: str) -> None:
    """A package's ``data/db.json`` (or its ``data`` folder) linking to a file of the host would
    serve that file as a session's state: the scenario is skipped, saying why."""
    secret = host_secret(tmp_path)
    scenario_on_data(env_dir)
    if linked == "file":
        (env_dir / "data").mkdir()
        (env_dir / "data" / "db.json").symlink_to(secret)
    else:
        (env_dir / "data").symlink_to(secret.parent)
    error = skipped_line(env_dir)
    assert error.line == 1 and error.field == "init_data"
    assert "is a symbolic link" in error.message
    assert "hunter2" not in json.dumps(load_env(env_dir).data)


def test_a_data_file_that_is_not_a_regular_file_is_refused_without_blocking(
        env_dir: Path) -> None:
    scenario_on_data(env_dir)
    (env_dir / "data").mkdir()
    os.mkfifo(env_dir / "data" / "db.json")
    assert "not a regular file" in skipped_line(env_dir).message


def test_a_real_data_file_is_read(env_dir: Path) -> None:
    scenario_on_data(env_dir)
    (env_dir / "data").mkdir()
    (env_dir / "data" / "db.json").write_text('{"books": {}}')
    assert load_env(env_dir).data == {"db.json": '{"books": {}}'}


@pytest.mark.parametrize("name", ["env.py", "env.json", "scenarios.jsonl"])
def test_an_environment_file_behind_a_link_skips_the_environment(
        env_dir: Path, tmp_path: Path, name: str) -> None:
    outside = tmp_path / "outside-file"
    shutil.copyfile(env_dir / name, outside)
    (env_dir / name).unlink()
    (env_dir / name).symlink_to(outside)
    catalogue = load_catalogue(env_dir.parent)
    assert catalogue.envs == {}
    [error] = catalogue.errors
    assert error.file == env_dir / name and "is a symbolic link" in error.message


def test_an_environment_folder_that_is_a_link_is_skipped(env_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(env_dir, elsewhere / "linked")
    (env_dir.parent / "linked").symlink_to(elsewhere / "linked")
    catalogue = load_catalogue(env_dir.parent)
    assert list(catalogue.envs) == [ENV_ID]
    [error] = catalogue.errors
    assert error.file == env_dir.parent / "linked" and "is a symbolic link" in error.message
