"""A Docker engine that hangs (accepts connections and never answers) must neither hold requests
for the SDK's 30 s nor starve other work of threads. The engine here is a fake one, a Unix socket
that accepts and never answers: the Docker engine of this machine is shared with other test runs
and must not be paused. What is under test is the backend's own bounds on engine calls."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from envscaler.sandbox.backends.base import SandboxHandle
from envscaler.sandbox.backends.docker import DockerBackend
from envscaler.sandbox.config import SandboxConfig
from envscaler.sandbox.errors import SandboxUnavailable
from tests.conftest import TEST_LABELS, new_instance
from tests.deadlines import scaled

CALLS = 8  # more than the default executor's threads on this machine (CPUs + 4)


@pytest.fixture
def hung_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """DOCKER_HOST pointing at a socket whose connections are accepted and never answered."""
    path = tmp_path / "docker.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(128)  # the kernel accepts (completes) connections up to the backlog
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    try:
        yield path
    finally:
        listener.close()


async def test_a_hung_engine_fails_requests_within_the_engine_timeout_and_starves_nothing(
        hung_engine: Path, socket_root: Path) -> None:
    config = SandboxConfig(sandbox_backend="docker", sandbox_image="envscaler-sandbox:absent",
                           socket_root=socket_root, pool_size=0, labels=TEST_LABELS,
                           docker_timeout=0.5, docker_threads=2)
    backend = DockerBackend(config, new_instance())
    try:
        async with asyncio.timeout(scaled(20)):  # the SDK's default would hold each for 30 s
            creates = [asyncio.ensure_future(backend.create({})) for _ in range(CALLS)]
            health = asyncio.ensure_future(backend.health())
            # Meanwhile the default executor (what asyncio.to_thread uses) is free.
            assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), scaled(5)) == "free"
            results = await asyncio.gather(*creates, health, return_exceptions=True)
            for result in results:
                assert isinstance(result, SandboxUnavailable), result
                assert "Docker engine" in str(result) or "did not answer" in str(result), result
            # What a request's clean-up asks of the engine: answered, and left for later.
            handle = SandboxHandle(id="c0ffee" * 10 + "c0ff", name="0123456789abcdef",
                                   backend="docker", instance=backend.instance)
            backend._known[handle.id] = (handle.instance, handle.name)  # as if it had made it
            await backend.destroy(handle)
            assert handle.id in backend._unremoved
            assert await backend.diagnose(handle) == "the Docker engine does not answer"
            with pytest.raises(SandboxUnavailable):
                await backend.is_running(handle)
        assert not list((socket_root / backend.instance).glob("*/")), "socket dirs left behind"
    finally:
        backend._threads.shutdown(wait=False, cancel_futures=True)


async def test_a_sandbox_the_engine_could_not_vouch_for_is_removed_once_it_answers(
        hung_engine: Path, docker_config: SandboxConfig, docker_client,  # type: ignore[no-untyped-def]
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker destroys a session's sandbox that another worker created while the engine is
    away: it cannot tell whether the container is this service's, so it removes nothing then,
    and removes it once the engine answers (a container left behind by every outage else)."""
    config = dataclasses.replace(docker_config, docker_timeout=0.5, sandbox_slots=1)
    instance = new_instance()
    maker, destroyer = DockerBackend(config, instance), DockerBackend(config, instance)
    monkeypatch.delenv("DOCKER_HOST")  # the maker reaches the real engine
    handle = await maker.create(TEST_LABELS)
    try:
        monkeypatch.setenv("DOCKER_HOST", f"unix://{hung_engine}")
        await destroyer.destroy(handle)
        assert docker_client.containers.get(handle.id).status == "running"
        monkeypatch.delenv("DOCKER_HOST")  # the engine answers again
        destroyer._client = None
        await destroyer._retry_removals()
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(handle.id)
    finally:
        await maker.destroy_container(handle)
        for backend in (maker, destroyer):
            backend._threads.shutdown(wait=False, cancel_futures=True)
