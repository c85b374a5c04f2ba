"""Real components for the test suite: a private redis-server, the Docker engine and the sandbox image.

Nothing is faked: a test that needs Docker fails (it does not skip) when no engine answers, with a
message that says to run scripts/bootstrap. Every sandbox the suite creates carries the label
``envscaler.test-run=<id>``; the suite fails if any is left behind.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.config import SandboxConfig
from server.embedded_redis import EmbeddedRedis

RUN_ID = secrets.token_hex(4)
TEST_LABELS = {"envscaler.test-run": RUN_ID}
REPO_ROOT = Path(__file__).resolve().parent.parent
BASE_IMAGE = os.environ.get("ENVSCALER_SANDBOX_BASE_IMAGE", "envscaler-base:bookworm")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis(tmp_path_factory.mktemp("redis"), persistent=False) as server:
        yield server


@pytest.fixture(scope="session")
def redis_url(redis_server: EmbeddedRedis) -> str:
    return redis_server.url


@pytest.fixture(scope="session")
def socket_root() -> Iterator[Path]:
    """Short on purpose: Unix socket paths are limited to 107 bytes."""
    root = Path(f"/tmp/esx-{RUN_ID}")
    root.mkdir(mode=0o777, exist_ok=True)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def docker_client():  # type: ignore[no-untyped-def]
    import docker
    from docker.errors import DockerException

    try:
        client = docker.from_env()
        client.ping()
    except DockerException as exc:
        pytest.fail(f"no Docker engine answers ({exc}); run scripts/bootstrap first", pytrace=False)
    yield client
    leftovers = client.containers.list(all=True, filters={"label": f"envscaler.test-run={RUN_ID}"})
    for container in leftovers:
        container.remove(force=True)
    assert not leftovers, f"the suite left {len(leftovers)} sandbox containers behind"


@pytest.fixture(scope="session")
def sandbox_image(docker_client) -> str:  # type: ignore[no-untyped-def]
    from sandbox.image import ensure_image

    return ensure_image(docker_client, BASE_IMAGE)


@pytest.fixture
def docker_config(sandbox_image: str, socket_root: Path) -> SandboxConfig:
    return SandboxConfig(backend="docker", image=sandbox_image, socket_root=socket_root,
                         pool_size=0, labels=TEST_LABELS)


@pytest.fixture
def process_config(socket_root: Path) -> SandboxConfig:
    return SandboxConfig(backend="process", socket_root=socket_root, pool_size=0, labels=TEST_LABELS)


def new_instance() -> str:
    return f"test-{RUN_ID}-{secrets.token_hex(3)}"
