"""Fixtures of the reliability suite: the gateway fixtures of tests/integration, on the Docker
backend only, with a catalogue that adds the hostile test environments (tests/fixtures/hostile_envs)
to library_loans and counter_lab. Hostile code only ever runs inside sandboxes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.integration.gateway_fixtures import *
from tests.integration.gateway_fixtures import build_catalogue

HOSTILE_ENVS = Path(__file__).resolve().parents[1] / "fixtures" / "hostile_envs"


@pytest.fixture(scope="session")
def catalogue_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """library_loans, counter_lab and every hostile environment."""
    root = build_catalogue(tmp_path_factory.mktemp("reliability-catalogue") / "envs")
    for folder in sorted(HOSTILE_ENVS.iterdir()):
        if folder.is_dir() and (folder / "env.py").is_file():
            shutil.copytree(folder, root / folder.name)
    return root


@pytest.fixture
def backend_kwargs(sandbox_image: str, socket_root: Path) -> dict[str, Any]:
    """The reliability suite runs on the Docker backend, the one production uses."""
    return {"sandbox_backend": "docker", "sandbox_image": sandbox_image, "socket_root": socket_root}
