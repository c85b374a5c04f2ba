"""Sandboxes as plain child processes, for hosts without Docker (development, CI).

Isolation is much weaker than a container's: the runtime runs as the gateway's user, sees its
files and network, and is bounded only by resource limits (address space, open files, file size,
no core dumps). Use it for trusted catalogues only; ``isolation = "process"`` says so in /readyz.

Layout: ``<socket_root>/<instance>/<sandbox id>/`` holds ``runtime.sock``, ``runtime.pid`` and
``runtime.log`` (the runtime's stderr). A runtime gets ``PR_SET_PDEATHSIG`` = SIGKILL, so it dies
with the gateway; ``reap_orphans`` then removes the directories that dead instances left.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sandbox.backends.base import (
    RUNTIME,
    SOCKET_NAME,
    SandboxBackend,
    SandboxHandle,
    make_socket_dir,
)
from sandbox.client import wait_for_runtime
from sandbox.config import SandboxConfig, parse_size
from sandbox.errors import SandboxGone, SandboxUnavailable
from sandbox.heartbeat import Heartbeat
from sandbox.runtime.contain import die_with_parent

log = logging.getLogger(__name__)

PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the directory that contains `sandbox/`
PID_NAME, LOG_NAME = "runtime.pid", "runtime.log"
MAX_OPEN_FILES = 256
MAX_FILE_BYTES = 64 * 1024 * 1024  # bounds runtime.log against env code printing forever
_STDERR_TAIL_BYTES = 2000
_READY_POLL_SECONDS = 0.02
_REAP_POLL_SECONDS = 0.002


def _limit_child(parent_pid: int, memory_bytes: int) -> None:
    """Runs in the child between fork and exec, so it only makes system calls."""
    for limit, value in ((resource.RLIMIT_AS, memory_bytes),
                         (resource.RLIMIT_NOFILE, MAX_OPEN_FILES),
                         (resource.RLIMIT_FSIZE, MAX_FILE_BYTES), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(limit, (value, value))
    die_with_parent(parent_pid)


@dataclass
class _Child:
    handle: SandboxHandle
    process: subprocess.Popen[bytes]


class ProcessBackend(SandboxBackend):
    """One ``python -m sandbox.runtime`` child process per sandbox.

    ``PR_SET_PDEATHSIG`` fires when the *thread* that started the child ends, so ``create`` must
    run on the event loop's thread, which lives as long as the service (never in a worker thread).
    Labels are accepted for interface parity and not stored.
    """

    name = "process"
    isolation = "process"

    def __init__(self, config: SandboxConfig, instance: str) -> None:
        super().__init__(instance)
        self.config = config
        self.directory = config.socket_root / instance
        self._memory_bytes = parse_size(config.memory)
        self._heartbeat = Heartbeat(config.socket_root, instance, config.heartbeat_interval)
        self._children: dict[str, _Child] = {}
        self._started = False

    async def start(self) -> None:
        """Heartbeat and orphan reaping; ``create`` calls it too, so it is never skipped."""
        if self._started:
            return
        self._started = True
        log.warning("sandbox backend 'process': environments run as plain processes of this "
                    "user, with resource limits but without container isolation; use the "
                    "docker backend for untrusted environments")
        self._heartbeat.start()
        removed = await self.reap_orphans()
        if removed:
            log.info("removed %d sandbox directories of dead instances", removed)

    async def create(self, labels: dict[str, str], role: str = RUNTIME) -> SandboxHandle:
        await self.start()
        self._reap_exited()
        sandbox_id = secrets.token_hex(8)
        directory = self.directory / sandbox_id
        socket_path = make_socket_dir(directory)
        handle = SandboxHandle(sandbox_id, str(socket_path), self.name, self.instance)
        try:  # on the loop's thread, on purpose: see the class docstring (PR_SET_PDEATHSIG)
            with open(directory / LOG_NAME, "wb") as log_file:  # noqa: ASYNC230 - local, instant
                process = subprocess.Popen(  # noqa: ASYNC220
                    [sys.executable, "-s", "-m", "sandbox.runtime", "--role", role,
                     "--socket", str(socket_path)],
                    cwd=PACKAGE_PARENT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=log_file, start_new_session=True,
                    # glibc reserves 64 MiB of address space per thread's malloc arena: under
                    # RLIMIT_AS that starves the runtime's threads, so arenas are capped.
                    env={"PYTHONHASHSEED": "0", "TZ": "UTC", "MALLOC_ARENA_MAX": "2",
                         "PATH": os.environ.get("PATH", os.defpath)},
                    preexec_fn=functools.partial(  # noqa: PLW1509 - only system calls in it
                        _limit_child, os.getpid(), self._memory_bytes))
        except (OSError, subprocess.SubprocessError) as exc:  # exec or preexec_fn failed
            shutil.rmtree(directory, ignore_errors=True)
            raise SandboxUnavailable(f"could not start the sandbox runtime: {exc}") from exc
        self._children[sandbox_id] = _Child(handle, process)
        (directory / PID_NAME).write_text(str(process.pid))
        try:
            await self._wait_ready(handle, process)
        except BaseException:  # start-up failure or cancellation: never leak the process
            await self.destroy(handle)
            raise
        return handle

    async def _wait_ready(self, handle: SandboxHandle, process: subprocess.Popen[bytes]) -> None:
        def exited() -> str | None:
            if process.poll() is None:
                return None
            return f"status {process.returncode}: {self._stderr_tail(handle)}"

        try:
            await wait_for_runtime(handle.socket_path, self.config.start_timeout, exited,
                                   poll=_READY_POLL_SECONDS)
        except (SandboxGone, TimeoutError) as exc:
            raise SandboxUnavailable(f"{exc}: {self._stderr_tail(handle)}") from exc

    def _stderr_tail(self, handle: SandboxHandle) -> str:
        try:
            with open(self._directory(handle) / LOG_NAME, "rb") as log_file:
                log_file.seek(0, os.SEEK_END)
                log_file.seek(max(0, log_file.tell() - _STDERR_TAIL_BYTES))
                return log_file.read().decode("utf-8", "replace").strip() or "(no output)"
        except OSError as exc:
            return f"(no log: {exc})"

    async def destroy(self, handle: SandboxHandle) -> None:
        """SIGKILL the runtime's process group at once, reap it, remove its directory."""
        child = self._children.get(handle.id)
        if child is not None:
            if child.process.returncode is None:  # unreaped, so its pid cannot have been reused
                _kill_group(child.process.pid)
            while child.process.poll() is None:
                await asyncio.sleep(_REAP_POLL_SECONDS)
            self._children.pop(handle.id, None)
        else:  # another gateway process's sandbox, or one known only from a stored handle
            pid = _verified_pid(self._directory(handle))
            if pid is not None:
                _kill_group(pid)
        shutil.rmtree(self._directory(handle), ignore_errors=True)

    async def is_running(self, handle: SandboxHandle) -> bool:
        child = self._children.get(handle.id)
        if child is not None:
            return child.process.poll() is None
        return _verified_pid(self._directory(handle)) is not None

    async def list_own(self) -> list[SandboxHandle]:
        self._reap_exited()
        return [child.handle for child in self._children.values()]

    async def reap_orphans(self) -> int:
        """Kill and remove process sandboxes whose instance has no fresh heartbeat."""
        root = self.config.socket_root
        if not root.is_dir():
            return 0
        removed = 0
        for instance_dir in root.iterdir():
            name = instance_dir.name
            if (not instance_dir.is_dir() or name in {self._heartbeat.directory.name, self.instance}
                    or self._heartbeat.is_alive(name)):
                continue
            try:
                sandbox_dirs = list(instance_dir.iterdir())
            except OSError:  # another instance is reaping it right now
                continue
            for sandbox_dir in sandbox_dirs:
                if not (sandbox_dir / PID_NAME).is_file():
                    continue  # not a process sandbox: another backend's business
                pid = _verified_pid(sandbox_dir)
                if pid is not None:
                    _kill_group(pid)
                shutil.rmtree(sandbox_dir, ignore_errors=True)
                removed += 1
            _remove_if_empty(instance_dir)
        return removed

    async def health(self) -> dict[str, object]:
        self._reap_exited()
        self._heartbeat.check()
        root = self.config.socket_root
        root.mkdir(parents=True, exist_ok=True)
        if not os.access(root, os.W_OK | os.X_OK):
            raise SandboxUnavailable(f"socket root {root} is not writable")
        return {"backend": self.name, "isolation": self.isolation, "live": len(self._children)}

    async def close(self) -> None:
        await super().close()
        await self._heartbeat.stop()
        _remove_if_empty(self.directory)

    def _reap_exited(self) -> None:
        """Forget runtimes that died on their own (memory limit, os._exit in env code)."""
        for sandbox_id, child in list(self._children.items()):
            if child.process.poll() is not None:
                del self._children[sandbox_id]
                shutil.rmtree(self._directory(child.handle), ignore_errors=True)

    def _directory(self, handle: SandboxHandle) -> Path:
        """Built from the id and instance, never from the stored socket path, and refused when
        either could leave the socket root: a handle read back from Redis is data, not a path."""
        for part in (handle.instance, handle.id):
            if not part or part in {".", ".."} or "/" in part:
                raise ValueError(f"invalid sandbox handle {handle.to_dict()}")
        return self.config.socket_root / handle.instance / handle.id


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _verified_pid(directory: Path) -> int | None:
    """The runtime's pid from ``runtime.pid``, only if that process is alive and really serves
    this directory's socket (a recycled pid must never be killed)."""
    try:
        pid = int((directory / PID_NAME).read_text())
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if os.fsencode(directory / SOCKET_NAME) in arguments else None


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass
