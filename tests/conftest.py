"""Real components for the test suite: a private redis-server, the Docker engine and the sandbox image.

Nothing is faked: a test that needs Docker fails (it does not skip) when no engine answers, with a
message that says to run scripts/bootstrap. Every sandbox the suite creates carries the label
``envscaler.test-run=<id>``; the suite fails if any is left behind.

No process outlives the test that started it, or the run: a test fails when a process it started
(a descendant of pytest) still runs a few seconds after its teardown, and the run fails at the
end if any process of it is left, found also after its parent died by the run's id in its
environment (``ENVSCALER_TEST_RUN``, inherited by every child that keeps its parent's
environment), or this run's socket root or temporary directory in its command line or working
directory. Either check kills what it names.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from envscaler.sandbox.config import SandboxConfig
from envscaler.server.embedded_redis import EmbeddedRedis
from tests import deadlines, processes

RUN_ENV = "ENVSCALER_TEST_RUN"
# A gateway process that imports this module (gateway_fixtures.LAUNCHER) keeps its run's id.
RUN_ID = os.environ.setdefault(RUN_ENV, secrets.token_hex(4))
TEST_LABELS = {"envscaler.test-run": RUN_ID}
REPO_ROOT = Path(__file__).resolve().parent.parent
BASE_IMAGE = os.environ.get("ENVSCALER_SANDBOX_BASE_IMAGE", "envscaler-base:bookworm")
SOCKET_ROOT = Path(f"/tmp/esx-{RUN_ID}")  # short on purpose: Unix socket paths are <= 107 bytes
LEAK_GRACE = 5.0  # seconds for what a test stopped to finish exiting


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """One deadline factor per test, measured before its fixtures and its timeout start."""
    deadlines.follow_the_machine()
    yield


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> object:
    """pytest-timeout's limit (the ini's or a marker's) follows the machine like every deadline."""
    from pytest_timeout import pytest_timeout_set_timer as set_timer

    return set_timer(item, settings._replace(timeout=deadlines.scaled(settings.timeout)))


def pytest_report_header() -> str:
    return f"deadlines x{deadlines.machine_factor():.2f} now (tests/deadlines.py; load per CPU)"


def _descendants() -> set[processes.Proc]:
    return set(processes.descendants(os.getpid()))


def _left_by_the_run(temp_root: Path) -> list[processes.Proc]:
    procs = processes.running()
    marked = processes.marked(procs, f"{RUN_ENV}={RUN_ID}".encode(),
                              [str(SOCKET_ROOT), f"{temp_root}/"])
    lineage, pid = set(), os.getpid()  # pytest and what started it may carry the id too
    while pid in procs and pid not in lineage:
        lineage.add(pid)
        pid = procs[pid].ppid
    return sorted(_descendants() | {procs[pid] for pid in marked - lineage})


def _fail_and_kill(leaked: list[processes.Proc], what: str) -> None:
    named = "\n".join(map(str, leaked))  # before the kill: a dead process has no command line
    processes.kill(leaked)
    pytest.fail(f"{what} left {len(leaked)} processes running (now killed):\n{named}",
                pytrace=False)


@pytest.fixture(autouse=True)
def no_process_left_by_the_test() -> Iterator[None]:
    before = _descendants()
    yield
    leaked = processes.wait_gone(lambda: sorted(_descendants() - before), LEAK_GRACE)
    if leaked:
        _fail_and_kill(leaked, "the test")


@pytest.fixture(autouse=True)
async def no_task_left_by_the_test() -> AsyncIterator[None]:
    """The suite shares one event loop: a test stopped by its timeout leaves its coroutine
    pending on it, and that coroutine would go on under the tests after it (its gateway's expiry,
    at a TTL of a second, deleting their sessions). What a test leaves is cancelled here."""
    before = asyncio.all_tasks()
    yield
    left = asyncio.all_tasks() - before - {asyncio.current_task()}
    if left:
        logging.getLogger("tests").warning(
            "cancelling %d tasks the test left (where each waited):\n%s", len(left),
            "\n".join(f"{task.get_name()}: {_where(task)}" for task in left))
        for task in left:
            task.cancel()
        await asyncio.wait(left, timeout=deadlines.scaled(LEAK_GRACE * 4))


def _where(task: asyncio.Task[Any]) -> str:
    """The innermost frames of a task's coroutine chain (what a test stopped by its timeout
    was waiting for: pytest-timeout shows the threads, which are idle in an event loop)."""
    frames, coroutine = [], task.get_coro()
    while coroutine is not None:
        frame = getattr(coroutine, "cr_frame", None) or getattr(coroutine, "ag_frame", None)
        if frame is not None:
            frames.append(f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}")
        coroutine = getattr(coroutine, "cr_await", None) or getattr(coroutine, "ag_await", None)
    return " <- ".join(reversed(frames[-6:])) or "(not started)"


@pytest.fixture(scope="session", autouse=True)
def no_process_left_by_the_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Set up before, so torn down after, every other session fixture (the suite's Redis)."""
    temp_root = tmp_path_factory.getbasetemp()
    yield
    leaked = processes.wait_gone(lambda: _left_by_the_run(temp_root), LEAK_GRACE)
    if leaked:
        _fail_and_kill(leaked, "the test run")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis(tmp_path_factory.mktemp("redis"), persistent=False) as server:
        yield server


@pytest.fixture(scope="session")
def redis_url(redis_server: EmbeddedRedis) -> str:
    return redis_server.url


@pytest.fixture(scope="session")
def socket_root() -> Iterator[Path]:
    SOCKET_ROOT.mkdir(mode=0o700, exist_ok=True)  # the service's alone (socketroot.claim)
    yield SOCKET_ROOT
    shutil.rmtree(SOCKET_ROOT, ignore_errors=True)


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
    from envscaler.sandbox.image import ensure_image

    return ensure_image(docker_client, BASE_IMAGE)


@pytest.fixture
def docker_config(sandbox_image: str, socket_root: Path) -> SandboxConfig:
    return SandboxConfig(sandbox_backend="docker", sandbox_image=sandbox_image,
                         socket_root=socket_root, pool_size=0, labels=TEST_LABELS)


@pytest.fixture
def process_config(socket_root: Path) -> SandboxConfig:
    return SandboxConfig(sandbox_backend="process", socket_root=socket_root, pool_size=0,
                         labels=TEST_LABELS)


def new_instance() -> str:
    return f"test-{RUN_ID}-{secrets.token_hex(3)}"
