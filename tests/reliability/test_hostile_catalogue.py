"""The hostile test catalogue is in our format and its committed files are what
tests/fixtures/hostile_envs/make_catalogue.py writes (tool schemas derived from env.py statically;
nothing here imports or runs the hostile code)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from envscaler.format.loader import load_env
from tests.reliability.conftest import HOSTILE_ENVS


def test_committed_files_are_what_the_generator_writes(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_catalogue",
                                                  HOSTILE_ENVS / "make_catalogue.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    for env_id in generator.ENVS:
        (tmp_path / env_id).mkdir()
        shutil.copy(HOSTILE_ENVS / env_id / "env.py", tmp_path / env_id / "env.py")
    generator.write(tmp_path)
    for env_id in generator.ENVS:
        for name in ("env.json", "scenarios.jsonl"):
            assert (tmp_path / env_id / name).read_text() == \
                (HOSTILE_ENVS / env_id / name).read_text(), f"{env_id}/{name} is stale"
        package = load_env(HOSTILE_ENVS / env_id, strict=True)
        assert package.manifest.tools and package.scenarios
