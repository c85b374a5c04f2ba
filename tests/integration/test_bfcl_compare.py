"""`envscaler import bfcl-compare` on the miniature BFCL checkout (tests/fixtures/bfcl): the
imported questions replayed through a live gateway against the fixture's classes run by BFCL's
way of executing them in a Docker container. The import reproduces them exactly; a checkout whose
class was changed after the import is caught, at the call and the state it changes."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from envscaler.cli.main import app
from typer.testing import CliRunner

from tests.conftest import RUN_ID
from tests.integration.live_gateway import LiveGateway
from tests.integration.test_import_bfcl import CHECKOUT, imported, served

__all__ = ["imported", "served"]  # the fixtures this module uses

HALVED = "int(cups * GRAMS_PER_CUP) // 2"  # `use` takes half of what it did at the import
MPMATH = "mpmath==1.3.0"


def compare(served: LiveGateway, checkout: Path, sandbox_image: str, *options: str,
            env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, [
        "import", "bfcl-compare", "--from", str(checkout), "--catalogue", str(served.catalogue),
        "--url", served.url, "--api-key", served.api_key, *options],
        env={"ENVSCALER_SANDBOX_IMAGE": sandbox_image, **(env or {})})


def changed_checkout(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the fixture checkout whose PantryAPI module has ``old`` replaced by ``new``."""
    checkout = tmp_path / "gorilla"
    shutil.copytree(CHECKOUT, checkout)
    pantry = next(checkout.rglob("pantry_api.py"))
    source = pantry.read_text()
    assert source.count(old) == 1
    pantry.write_text(source.replace(old, new))
    return checkout


def test_every_imported_question_reproduces_bfcl_exactly(
        served: LiveGateway, sandbox_image: str, tmp_path: Path) -> None:
    result = compare(served, CHECKOUT, sandbox_image, "--json", "--report",
                     str(tmp_path / "report.json"))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["counts"] == {"questions": 3, "imported": 2, "compared": 2, "calls_equal": 2,
                                "state_equal": 2, "exact": 2}
    assert [(row["id"], row["calls"], row["exact"]) for row in report["questions"]] == [
        ("multi_turn_base_0", 3, True), ("multi_turn_base_1", 3, True)]
    assert json.loads((tmp_path / "report.json").read_text()) == report


def test_a_class_changed_after_the_import_is_a_reported_difference(
        served: LiveGateway, sandbox_image: str, tmp_path: Path) -> None:
    checkout = changed_checkout(tmp_path, "int(cups * GRAMS_PER_CUP)", HALVED)
    result = compare(served, checkout, sandbox_image, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["counts"] == {"questions": 3, "imported": 2, "compared": 2, "calls_equal": 1,
                                "state_equal": 1, "exact": 1}
    differing = [row for row in report["questions"] if not row["exact"]]
    assert [row["id"] for row in differing] == ["multi_turn_base_0"]
    assert differing[0]["call_differences"] == [{
        "index": 1, "call": "use('sugar', cups=1.0)", "gateway": '{"grams_left": 0}',
        "bfcl": '{"grams_left": 60}'}]
    assert differing[0]["state_differences"] == [
        {"path": "PantryAPI.shelves.top[0].grams", "gateway": 0, "bfcl": 60},
        {"path": "PantryAPI.shopping_list", "gateway": ["eggs", "sugar"], "bfcl": ["eggs"]}]

    table = compare(served, checkout, sandbox_image)
    assert table.exit_code == 0, table.output
    assert "use('sugar', cups=1.0)" in table.stdout and "multi_turn_base_0" in table.stdout
    assert "1 of 2 compared questions exact (2 of 3 imported)" in table.stderr


def test_bfcl_code_that_never_returns_is_killed_and_its_questions_are_not_compared(
        served: LiveGateway, sandbox_image: str, tmp_path: Path) -> None:
    """The container lives as long as the gateway's deadlines for its loads and calls (1 s each
    here), then it is killed, and removed."""
    checkout = changed_checkout(tmp_path, "jar.grams = max(0, jar.grams - int(cups * "
                                "GRAMS_PER_CUP))", "while True: pass")
    result = compare(served, checkout, sandbox_image, "--json",
                     env={"ENVSCALER_CALL_TIMEOUT": "1", "ENVSCALER_LOAD_TIMEOUT": "1"})
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["counts"]["compared"] == 0
    assert [row["error"] for row in report["questions"]] == [
        "BFCL's execution failed: its container did not finish: killed after 8 s"] * 2


@pytest.fixture
def embedded_socket_root(docker_client) -> Iterator[Path]:  # type: ignore[no-untyped-def]
    """The embedded gateway's own socket root: its sandboxes carry it as a label, by which
    leftovers are found."""
    root = Path(f"/tmp/esx-{RUN_ID}-bfcl")
    root.mkdir(mode=0o700, exist_ok=True)
    yield root
    leftovers = docker_client.containers.list(
        all=True, filters={"label": f"envscaler.socket-root={root}"})
    for container in leftovers:
        container.remove(force=True)
    shutil.rmtree(root, ignore_errors=True)
    assert not leftovers, f"the embedded gateway left {len(leftovers)} sandboxes behind"


def test_classes_with_a_requirement_run_in_its_image_beside_an_embedded_gateway(
        sandbox_image: str, embedded_socket_root: Path, tmp_path: Path) -> None:
    """BFCL's MathAPI imports mpmath: BFCL's execution runs in the image of the environments'
    pinned requirements (without it, importing the classes fails and nothing is compared)."""
    checkout = tmp_path / "gorilla"
    shutil.copytree(CHECKOUT, checkout)
    units = next(checkout.rglob("kitchen_units.py"))  # imported by PantryAPI's module
    units.write_text("import mpmath\n" + units.read_text())
    env = {"ENVSCALER_URL": None, "ENVSCALER_SANDBOX_IMAGE": sandbox_image,
           "ENVSCALER_SOCKET_ROOT": str(embedded_socket_root), "ENVSCALER_POOL_SIZE": "0"}
    out = tmp_path / "envs"
    imported = CliRunner().invoke(app, ["import", "bfcl", "--from", str(checkout), "--out",
                                        str(out), "--requirement", MPMATH], env=env)
    assert imported.exit_code == 0, imported.output

    result = CliRunner().invoke(app, ["import", "bfcl-compare", "--from", str(checkout),
                                      "--catalogue", str(out), "--json"], env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["gateway"] == "embedded"
    assert report["counts"] == {"questions": 3, "imported": 2, "compared": 2, "calls_equal": 2,
                                "state_equal": 2, "exact": 2}
