"""env.json's ``requirements``: exact pins only, and the image tag of a requirement set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envscaler.format import FormatError, load_env
from envscaler.format.requirements import import_names, requirement_set
from envscaler.sandbox.requirements_image import image_tag
from tests.conftest import REPO_ROOT

BASE_ID = "sha256:" + "ab" * 32


@pytest.fixture()
def env_dir(tmp_path: Path) -> Path:
    target = tmp_path / "library_loans"
    source = REPO_ROOT / "generated_envs" / "library_loans"
    target.mkdir()
    for name in ("env.py", "env.json", "scenarios.jsonl"):
        (target / name).write_bytes((source / name).read_bytes())
    return target


def with_requirements(env_dir: Path, requirements: object) -> Path:
    manifest = json.loads((env_dir / "env.json").read_text())
    manifest["requirements"] = requirements
    (env_dir / "env.json").write_text(json.dumps(manifest))
    return env_dir


def test_pins_load_and_an_environment_without_them_has_none(env_dir: Path) -> None:
    assert load_env(env_dir).manifest.requirements == []
    loaded = load_env(with_requirements(env_dir, ["mpmath==1.3.0", "Foo.Bar==2.0rc1"]))
    assert loaded.manifest.requirements == ["mpmath==1.3.0", "Foo.Bar==2.0rc1"]


def test_a_manifest_without_requirements_is_written_without_the_key(env_dir: Path) -> None:
    assert "requirements" not in load_env(env_dir).manifest.model_dump(mode="json")


@pytest.mark.parametrize(("requirements", "reason"), [
    (["mpmath"], "'mpmath' is not an exact pin"),
    (["mpmath>=1.3"], "'mpmath>=1.3' is not an exact pin"),
    (["mpmath==1.*"], "'mpmath==1.*' is not an exact pin"),
    (["mpmath==1.3.0+local"], "'mpmath==1.3.0+local' is not an exact pin"),
    (["mpmath[extra]==1.3.0"], "'mpmath[extra]==1.3.0' is not an exact pin"),
    (["mpmath==1.3.0; python_version>'3'"], "is not an exact pin"),
    (["-e git+https://example.invalid/x"], "is not an exact pin"),
    (["mpmath==1.3.0", "MPMath==1.2.1"], "MPMath is pinned twice"),
    ("mpmath==1.3.0", "Input should be a valid list"),
])
def test_anything_but_a_set_of_exact_pins_is_refused(env_dir: Path, requirements: object,
                                                     reason: str) -> None:
    with pytest.raises(FormatError) as caught:
        load_env(with_requirements(env_dir, requirements))
    assert caught.value.field is not None and caught.value.field.startswith("requirements")
    assert reason in caught.value.message


def test_the_set_is_normalized_and_sorted() -> None:
    assert requirement_set(["Zed_Pkg==1.0", "mpmath==1.3.0"]) == ("mpmath==1.3.0",
                                                                  "zed-pkg==1.0")
    with pytest.raises(ValueError, match="not an exact pin"):
        requirement_set(["mpmath"])


def test_the_tag_depends_on_the_set_and_the_base_image_only() -> None:
    tag = image_tag(BASE_ID, ["mpmath==1.3.0", "sympy==1.12"])
    assert tag.startswith("envscaler-sandbox-reqs:")
    assert image_tag(BASE_ID, ["SymPy==1.12", "mpmath==1.3.0"]) == tag  # order, spelling
    assert image_tag(BASE_ID, ["mpmath==1.3.0", "sympy==1.13"]) != tag
    assert image_tag(BASE_ID, ["mpmath==1.3.0"]) != tag
    assert image_tag("sha256:" + "cd" * 32, ["mpmath==1.3.0", "sympy==1.12"]) != tag


def test_a_requirement_allows_importing_the_module_of_its_name() -> None:
    assert import_names(["mpmath==1.3.0", "Typing.Extensions==4.12.2"]) == {
        "mpmath", "typing_extensions"}
