"""The env.py made from BFCL classes (the miniature checkout of tests/fixtures/bfcl), read only:
tools from BFCL's function docs with the classes' defaults, sibling modules inlined once, nested
classes serving what their __eq__ compares."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import cast

import pytest

from envscaler.format.toolschema import derive_tools
from envscaler.importers.bfcl.checkout import CheckoutError, locate
from envscaler.importers.bfcl import import_bfcl
from envscaler.importers.bfcl.envcode import CLASS_NAME, EnvCodeError, build
from envscaler.synth.sandboxes import SandboxHub

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "bfcl"


def test_the_wrapper_exposes_the_documented_functions_of_every_class() -> None:
    code = build(locate(CHECKOUT), ["NoteAPI", "PantryAPI"])
    assert code.tools == {"login": ["owner"], "write_note": ["title", "text", "tag"],
                          "list_jars": ["shelf"], "use": ["label", "cups"],
                          "move_jar": ["label", "to_shelf"], "shopping": ["add"]}
    schemas = {tool["function"]["name"]: tool["function"]
               for tool in derive_tools(code.source, CLASS_NAME)}
    assert schemas["use"]["description"] == "Take some cups out of a jar."
    assert schemas["use"]["parameters"]["properties"]["cups"] == {
        "type": "number", "description": "How many cups to take.", "default": 1.0}
    assert schemas["use"]["parameters"]["required"] == ["label"]
    assert schemas["shopping"]["parameters"]["properties"]["add"]["type"] == ["array", "null"]
    assert code.source.count("GRAMS_PER_CUP = 120") == 1
    assert "from .kitchen_units" not in code.source
    assert "Jar.__getstate__ = _bfcl_compared('label', 'grams')" in code.source
    assert "PantryAPI.__getstate__" not in code.source  # the top level keeps every attribute


def test_unknown_classes_and_missing_checkouts_are_errors() -> None:
    with pytest.raises(EnvCodeError, match="no class TravelAPI"):
        build(locate(CHECKOUT), ["TravelAPI"])
    with pytest.raises(CheckoutError, match="is it a gorilla checkout"):
        locate(CHECKOUT / "berkeley-function-call-leaderboard" / "bfcl")


def test_a_checkout_of_a_newer_release_is_read_by_its_file_names(tmp_path: Path) -> None:
    """BFCL names its data files per release (BFCL_v3_..., then BFCL_v4_...)."""
    checkout = tmp_path / "gorilla"
    shutil.copytree(CHECKOUT, checkout)
    for path in checkout.rglob("BFCL_v3_*.json"):
        path.rename(path.with_name(path.name.replace("BFCL_v3_", "BFCL_v4_")))
    found = locate(checkout)
    questions, answers = found.questions("base")
    assert found.version == "v4"
    assert [q["id"] for q in questions] == list(answers)
    assert locate(CHECKOUT).version == "v3"


def test_a_sibling_imported_by_its_package_path_is_inlined(tmp_path: Path) -> None:
    """Current BFCL imports siblings absolutely (gorilla_file_system imports long_context so)."""
    checkout = tmp_path / "gorilla"
    shutil.copytree(CHECKOUT, checkout)
    pantry = next(checkout.rglob("pantry_api.py"))
    pantry.write_text(pantry.read_text().replace(
        "from .kitchen_units import",
        "from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.kitchen_units import"))
    code = build(locate(checkout), ["PantryAPI"])
    assert code.source.count("GRAMS_PER_CUP = 120") == 1
    assert "kitchen_units import" not in code.source


def test_globals_two_modules_define_are_renamed_after_their_module() -> None:
    """Every BFCL module has its own DEFAULT_STATE; in one env.py the last one would win."""
    source = build(locate(CHECKOUT), ["NoteAPI", "PantryAPI"]).source
    assert 'DEFAULT_STATE_note_api = {"owner": "", "logged_in": False}' in source
    assert 'scenario.get("owner", DEFAULT_STATE_note_api["owner"])' in source
    assert 'DEFAULT_STATE_pantry_api["shopping_list"]' in source
    assert "GRAMS_PER_CUP = 120" in source  # defined once: kept as it is
    assert "DEFAULT_STATE =" not in source and "DEFAULT_STATE[" not in source


def _with_third_party_import(tmp_path: Path) -> Path:
    checkout = tmp_path / "gorilla"
    shutil.copytree(CHECKOUT, checkout)
    for module in ("note_api.py", "kitchen_units.py"):  # every class, one through its sibling
        path = next(checkout.rglob(module))
        path.write_text("import mpmath\nimport json\n" + path.read_text())
    return checkout


def test_third_party_imports_are_found_and_need_a_pin(tmp_path: Path) -> None:
    """BFCL's MathAPI imports mpmath, which the standard sandbox image lacks."""
    checkout = _with_third_party_import(tmp_path)
    assert build(locate(checkout), ["PantryAPI"]).imports == ("mpmath",)
    assert build(locate(CHECKOUT), ["NoteAPI", "PantryAPI"]).imports == ()
    hub = cast(SandboxHub, None)  # never reached: the missing pin is found first
    report = asyncio.run(import_bfcl(checkout, tmp_path / "out", hub))
    assert not report.imported and len(report.errors) == 3
    for problem in report.errors:
        assert problem.reason == ("its classes import mpmath, which the standard sandbox lacks: "
                                  "pin it with --requirement NAME==VERSION")
    with pytest.raises(ValueError, match="not an exact pin"):
        asyncio.run(import_bfcl(checkout, tmp_path / "out", hub, requirements=("mpmath",)))


def test_the_import_root_never_climbs_above_the_checkout(tmp_path: Path) -> None:
    """BFCL's container mounts the import root: with packages (``__init__.py``) above the
    checkout, it stops at the checkout's root, never mounting a folder beside it."""
    above = tmp_path / "above"
    checkout = above / "checkout"
    shutil.copytree(CHECKOUT / "berkeley-function-call-leaderboard", checkout)
    for folder in (above, checkout):
        (folder / "__init__.py").write_text("")
    assert locate(checkout).import_root() == checkout.resolve()
    assert locate(CHECKOUT).import_root() == (
        CHECKOUT / "berkeley-function-call-leaderboard").resolve()


def test_a_source_folder_linking_out_of_the_checkout_is_refused(tmp_path: Path) -> None:
    checkout, outside = tmp_path / "gorilla", tmp_path / "outside"
    shutil.copytree(CHECKOUT, checkout)
    sources = next(checkout.rglob("func_source_code"))
    shutil.move(sources, outside)
    sources.symlink_to(outside)
    with pytest.raises(CheckoutError, match="leads out of the checkout"):
        locate(checkout)
