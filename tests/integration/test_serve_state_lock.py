"""A second gateway on a state directory that another one holds is refused before the slow
work, with what to do: ``scripts/serve`` before its bootstrap (minutes on a fresh machine),
``envscaler serve`` before it checks or builds any image."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from envscaler.server.embedded_redis import EmbeddedRedis, free_port
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import REPO_ROOT
from tests.integration.serve_helpers import serve_env

pytestmark = pytest.mark.redis

REFUSED_WITHIN = 60.0  # seconds: a refusal is a file lock and a message, no bootstrap


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def held(home: Path) -> Iterator[Path]:
    """The default state directory of a user whose home is ``home``, held by a running Redis
    (this process's, as a first gateway's would be)."""
    directory = home / ".local" / "state" / "envscaler" / "redis"
    with EmbeddedRedis(directory):
        yield directory


def _without_state_settings(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items()
            if k not in ("ENVSCALER_REDIS_URL", "ENVSCALER_STATE_DIR")}


def test_scripts_serve_refuses_a_held_state_directory_before_the_bootstrap(
    home: Path, held: Path
) -> None:
    env = _without_state_settings({**os.environ, "HOME": str(home)})
    done = subprocess.run([str(REPO_ROOT / "scripts" / "serve"), "--port", str(free_port())],
                          env=env, capture_output=True, text=True, timeout=scaled(REFUSED_WITHIN))
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "[bootstrap]" not in output  # refused first, not after minutes of set-up
    assert f"{held} is in use by the Redis of another gateway (pid {os.getpid()})" in output
    assert f"ENVSCALER_STATE_DIR={held.parent}-2" in output  # what to do instead


def test_envscaler_serve_refuses_a_held_state_directory_before_the_images(
    home: Path, held: Path, socket_root: Path
) -> None:
    """No engine answers here: a gateway that looked for its image first would fail on that."""
    env = _without_state_settings(serve_env(socket_root, sandbox_backend="docker"))
    env.pop("ENVSCALER_SANDBOX_IMAGE", None)
    env.update(HOME=str(home), DOCKER_HOST=f"unix://{home}/no-engine.sock", COLUMNS="1000")
    done = subprocess.run([sys.executable, "-m", "envscaler.cli", "serve", "--port", str(free_port())],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=scaled(REFUSED_WITHIN))
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1, output
    assert f"{held} is in use by the Redis of another gateway (pid {os.getpid()})" in output
    assert "sandbox image" not in output and "Docker" not in output
