"""The socket root is the service's own, or the service does not start; the orphan reaper removes
only what it can prove is the service's.

A root that another user owns, that its group or everyone may write, or that is a link, would let
someone else swap an instance's directory for one of theirs (and receive environment sources,
calls and check sources): the gateway and ``envscaler serve`` refuse it, naming the reason. A
root pointed at a shared directory (``ENVSCALER_SOCKET_ROOT=/tmp``) keeps everything in it that
is not a dead instance's directory of this service's making.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from envscaler.sandbox import socketroot
from envscaler.sandbox.backends import make_backend
from envscaler.sandbox.config import SandboxConfig
from envscaler.sandbox.errors import SandboxUnavailable
from tests.conftest import REPO_ROOT, RUN_ID, TEST_LABELS, new_instance
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import running_gateway
from tests.integration.serve_helpers import serve_env

NOBODY = 65534
LOOKALIKE = "0123456789abcdef"  # a sandbox directory's name


def plant(directory: Path) -> None:
    """Something that looks like a dead process sandbox's directory, with a file to keep."""
    (directory / LOOKALIKE).mkdir(parents=True)
    (directory / LOOKALIKE / "runtime.pid").write_text("4194305")
    (directory / LOOKALIKE / "precious.txt").write_text("keep me")


@pytest.fixture
def root() -> Iterator[Path]:
    """A fresh socket root path (missing), short enough for socket paths."""
    path = Path(f"/tmp/esxr-{RUN_ID}-{secrets.token_hex(2)}")
    try:
        yield path
    finally:
        if path.is_symlink():
            path.unlink()
        shutil.rmtree(path, ignore_errors=True)


def unsafe_roots(root: Path) -> Iterator[tuple[str, str]]:
    """Make ``root`` unsafe in each way in turn; yield what the refusal must say."""
    root.mkdir(mode=0o700)
    os.chown(root, NOBODY, NOBODY)
    yield "owned by uid 65534", "another user's"
    os.chown(root, 0, 0)
    for mode in (0o777, 0o770, 0o1777):
        root.chmod(mode)
        yield "writable by its group or by everyone", f"mode {mode:o}"
    root.chmod(0o700)
    target = root.with_name(root.name + "-target")
    root.rename(target)
    root.symlink_to(target)
    try:
        yield "is a symbolic link", "a link to a directory of ours"
    finally:
        root.unlink()
        shutil.rmtree(target)


async def test_the_gateway_refuses_a_socket_root_that_others_could_change(
        make_settings, root: Path) -> None:
    for reason, case in unsafe_roots(root):
        settings = make_settings(socket_root=root)
        with pytest.raises(SandboxUnavailable, match=reason):
            async with running_gateway(settings):
                raise AssertionError(f"the gateway started on a socket root {case}")
        assert not (root / settings.instance).exists(), case
        assert not (root / "key").exists(), case


def test_serve_refuses_it_before_starting_anything(root: Path, tmp_path: Path) -> None:
    root.mkdir(mode=0o700)
    os.chown(root, NOBODY, NOBODY)
    environment = {**serve_env(root), "ENVSCALER_STATE_DIR": str(tmp_path / "state")}
    environment.pop("ENVSCALER_REDIS_URL", None)
    # this checkout's command, whatever the virtual environment has installed
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT / "clients"), str(REPO_ROOT)])
    served = subprocess.run([sys.executable, "-m", "envscaler.cli", "serve", "--port", "9"],
                            cwd=REPO_ROOT, env=environment, capture_output=True, text=True,
                            timeout=scaled(60))
    said = " ".join((served.stdout + served.stderr).split())  # unwrapped
    assert served.returncode == 2, served
    assert f"refusing the socket root {root}: it is owned by uid 65534" in said, said
    assert not (tmp_path / "state").exists()  # nothing started: not even the embedded Redis


async def test_a_missing_root_is_created_for_this_user_alone(make_settings, root: Path) -> None:
    settings = make_settings(socket_root=root, pool_size=0)
    async with running_gateway(settings):
        info = root.lstat()
        assert (info.st_uid, info.st_mode & 0o777) == (os.geteuid(), 0o700)
        key = (root / "key").lstat()
        assert (key.st_uid, key.st_mode & 0o777) == (os.geteuid(), 0o600)


@pytest.mark.parametrize("backend_name", ["docker", "process"])
async def test_the_reaper_removes_only_dead_instances_directories_of_its_own_making(
        backend_name: str, root: Path, sandbox_image: str, tmp_path: Path) -> None:
    root.mkdir(mode=0o700)
    outside = tmp_path / "outside"
    outside.mkdir()
    dead = new_instance()
    socketroot.make_instance_dir(root, dead)  # a dead instance's: marker, no heartbeat
    sandbox_dir = root / dead / secrets.token_hex(8)  # a sandbox's, its runtime long gone
    sandbox_dir.mkdir()
    (sandbox_dir / "runtime.pid").write_text("4194305")
    bystanders = {
        "an unrelated directory": root / "photos",
        "a directory named like an instance, without the marker": root / new_instance(),
        "a directory with a marker naming another directory": root / new_instance(),
        "a marked directory of another user's": root / new_instance(),
        "a link to a marked directory elsewhere": root / new_instance(),
    }
    for directory in list(bystanders.values())[:4]:
        plant(directory)
    (bystanders["a directory with a marker naming another directory"]
     / socketroot.MARKER_NAME).write_text(dead)
    foreign = bystanders["a marked directory of another user's"]
    (foreign / socketroot.MARKER_NAME).write_text(foreign.name)
    os.chown(foreign, NOBODY, NOBODY)
    linked = bystanders["a link to a marked directory elsewhere"]
    plant(outside / linked.name)
    (outside / linked.name / socketroot.MARKER_NAME).write_text(linked.name)
    linked.symlink_to(outside / linked.name)
    (root / "notes.txt").write_text("keep me")

    config = SandboxConfig(sandbox_backend=backend_name, sandbox_image=sandbox_image,
                           socket_root=root, pool_size=0, labels=TEST_LABELS,
                           heartbeat_interval=0.1)
    backend = make_backend(config, new_instance())
    await backend.start()
    try:
        assert not (root / dead).exists()
        for what, directory in bystanders.items():
            assert (directory / LOOKALIKE / "precious.txt").read_text() == "keep me", what
        assert (root / "notes.txt").read_text() == "keep me"
    finally:
        await backend.close()
