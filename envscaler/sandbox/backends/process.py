"""Sandboxes as plain child processes, for hosts without Docker (development, CI).

Isolation is much weaker than a container's: the runtime sees the host's world-readable files
and its network, shares user nobody with every other process sandbox, and is bounded only by
resource limits (address space, open files, file size, no core dumps). Use it for trusted
catalogues only; ``isolation = "process"`` says so in /readyz.

It does not run as the gateway's user: the gateway must be root, and each runtime drops to user
nobody (65534) before it executes, with an environment of only what it needs. So environment code
cannot read the gateway's environment (``/proc/<pid>/environ``: API keys) or files, signal it, or
join the ``SO_REUSEPORT`` group of its port (the kernel admits only sockets of the same user) to
take its connections. The gateway binds the runtime's socket in a directory only it may write and
hands it over already listening, with the sandbox's secret through a pipe.

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
import shutil
import signal
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from envscaler.sandbox import socketroot
from envscaler.sandbox.backends.base import (
    RUNTIME,
    SOCKET_NAME,
    InvalidHandle,
    SandboxBackend,
    SandboxHandle,
    make_socket_dir,
)
from envscaler.sandbox.client import wait_for_runtime
from envscaler.sandbox.config import SandboxConfig, parse_size
from envscaler.sandbox.errors import SandboxGone, SandboxUnavailable
from envscaler.sandbox.heartbeat import Heartbeat
from envscaler.sandbox.runtime.contain import UNTRUSTED_GID, UNTRUSTED_UID, bind_listening, die_with_parent

log = logging.getLogger(__name__)

PACKAGE_PARENT = Path(__file__).resolve().parents[3]  # the directory that contains `envscaler/`
PID_NAME, LOG_NAME = "runtime.pid", "runtime.log"
SYSTEM_PYTHON = "/usr/bin/python3"
MAX_OPEN_FILES = 256
MAX_FILE_BYTES = 64 * 1024 * 1024  # bounds runtime.log against env code printing forever
_STDERR_TAIL_BYTES = 2000
_READY_POLL_SECONDS = 0.02
_REAP_POLL_SECONDS = 0.002


def _limit_child(parent_pid: int, memory_bytes: int) -> None:
    """Runs in the child between fork and exec, so it only makes system calls. The parent-death
    signal is armed after the change of user, which clears it."""
    for limit, value in ((resource.RLIMIT_AS, memory_bytes),
                         (resource.RLIMIT_NOFILE, MAX_OPEN_FILES),
                         (resource.RLIMIT_FSIZE, MAX_FILE_BYTES), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(limit, (value, value))
    os.setgroups([])
    os.setgid(UNTRUSTED_GID)
    os.setuid(UNTRUSTED_UID)  # from root to another user: every capability is gone too
    die_with_parent(parent_pid)


@dataclass
class _Child:
    handle: SandboxHandle
    process: subprocess.Popen[bytes]


class ProcessBackend(SandboxBackend):
    """One ``python -m envscaler.sandbox.runtime`` child process per sandbox.

    ``PR_SET_PDEATHSIG`` fires when the *thread* that started the child ends, so ``create`` must
    run on the event loop's thread, which lives as long as the service (never in a worker thread).
    Labels are accepted for interface parity and not stored.
    """

    name = "process"
    isolation = "process"

    def __init__(self, config: SandboxConfig, instance: str) -> None:
        super().__init__(instance, config.socket_root)
        self.config = config
        self.instance_dir = config.socket_root / instance
        self._memory_bytes = parse_size(config.sandbox_memory)
        self._heartbeat = Heartbeat(config.socket_root, instance, config.heartbeat_interval)
        self._children: dict[str, _Child] = {}
        self._started = False
        self._python = ""

    async def start(self) -> None:
        """Heartbeat and orphan reaping; ``create`` calls it too, so it is never skipped."""
        if self._started:
            return
        if os.geteuid() != 0:
            raise SandboxUnavailable(
                "the process backend runs environments as user nobody (65534), which only root "
                "may do; run the gateway as root, or use the docker backend (as this user, "
                "environment code could read the gateway's environment and take its port)")
        self.claim_root()
        self._python = _interpreter_for_nobody()
        self._started = True
        log.warning("sandbox backend 'process': environments run as plain processes of user "
                    "nobody, with resource limits but without container isolation; use the "
                    "docker backend for untrusted environments")
        self._heartbeat.start()
        removed = await self.reap_orphans()
        if removed:
            log.info("removed %d sandbox directories of dead instances", removed)

    async def create(self, labels: dict[str, str], role: str = RUNTIME,
                     image: str | None = None) -> SandboxHandle:
        if image is not None:
            raise SandboxUnavailable(f"the process backend has no images (asked for {image}); "
                                     "serve environments with requirements with the docker "
                                     "backend")
        await self.start()
        self._reap_exited()
        name = socketroot.new_sandbox_name()
        handle = SandboxHandle(name, name, self.name, self.instance)
        directory = self.directory_of(handle)
        make_socket_dir(directory, 0o700)  # only the gateway writes in it
        try:  # on the loop's thread, on purpose: see the class docstring (PR_SET_PDEATHSIG)
            process = self._spawn(handle, directory, role)
        except (OSError, subprocess.SubprocessError) as exc:  # exec or preexec_fn failed
            shutil.rmtree(directory, ignore_errors=True)
            raise SandboxUnavailable(f"could not start the sandbox runtime: {exc}") from exc
        self._children[name] = _Child(handle, process)
        (directory / PID_NAME).write_text(str(process.pid))
        try:
            await self._wait_ready(handle, process)
        except BaseException:  # start-up failure or cancellation: never leak the process
            await self.destroy(handle)
            raise
        return handle

    def _spawn(self, handle: SandboxHandle, directory: Path, role: str) -> subprocess.Popen[bytes]:
        """The runtime, as user nobody, on a socket bound here, with its secret through a pipe."""
        socket_path = directory / SOCKET_NAME
        secret_read, secret_write = os.pipe()
        try:
            os.write(secret_write, self.secret(handle))  # 64 bytes: far below a pipe's buffer
            os.close(secret_write)
            with bind_listening(socket_path) as listening, \
                    open(directory / LOG_NAME, "wb") as log_file:  # noqa: ASYNC230 - local
                return subprocess.Popen(  # noqa: ASYNC220
                    [self._python, "-s", "-m", "envscaler.sandbox.runtime", "--role", role,
                     "--socket", str(socket_path), "--listening-fd", str(listening.fileno()),
                     "--secret-fd", str(secret_read)],
                    cwd=PACKAGE_PARENT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=log_file, start_new_session=True,
                    pass_fds=(listening.fileno(), secret_read),
                    # Only what the runtime needs. glibc reserves 64 MiB of address space per
                    # thread's malloc arena: under RLIMIT_AS that starves the runtime's threads.
                    env={"PYTHONHASHSEED": "0", "TZ": "UTC", "MALLOC_ARENA_MAX": "2",
                         "PATH": os.defpath},
                    preexec_fn=functools.partial(  # noqa: PLW1509 - only system calls in it
                        _limit_child, os.getpid(), self._memory_bytes))
        finally:
            os.close(secret_read)

    def handle_from(self, data: object) -> SandboxHandle:
        handle = super().handle_from(data)
        if handle.id != handle.name:
            raise InvalidHandle(f"a process sandbox's id is its name: {data!r:.300}")
        return handle

    async def _wait_ready(self, handle: SandboxHandle, process: subprocess.Popen[bytes]) -> None:
        def exited() -> str | None:
            if process.poll() is None:
                return None
            return f"status {process.returncode}: {self._stderr_tail(handle)}"

        try:
            await wait_for_runtime(self.socket_path(handle), self.secret(handle),
                                   self.config.start_timeout, exited, poll=_READY_POLL_SECONDS)
        except (SandboxGone, TimeoutError) as exc:
            raise SandboxUnavailable(f"{exc}: {self._stderr_tail(handle)}") from exc

    def _stderr_tail(self, handle: SandboxHandle) -> str:
        try:
            with open(self.directory_of(handle) / LOG_NAME, "rb") as log_file:
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
            pid = _verified_pid(self.directory_of(handle))
            if pid is not None:
                _kill_group(pid)
        shutil.rmtree(self.directory_of(handle), ignore_errors=True)

    async def is_running(self, handle: SandboxHandle) -> bool:
        child = self._children.get(handle.id)
        if child is not None:
            return child.process.poll() is None
        return _verified_pid(self.directory_of(handle)) is not None

    async def list_own(self) -> list[SandboxHandle]:
        self._reap_exited()
        return [child.handle for child in self._children.values()]

    async def reap_orphans(self) -> int:
        """Kill and remove process sandboxes whose instance has no fresh heartbeat: only in
        directories that provably are the service's (``socketroot``)."""
        removed = 0
        for instance_dir in socketroot.owned_instance_dirs(self.config.socket_root):
            if instance_dir.name == self.instance or self._heartbeat.is_alive(instance_dir.name):
                continue
            sandbox_dirs = list(socketroot.owned_sandbox_dirs(instance_dir))
            for sandbox_dir in sandbox_dirs:
                if not (sandbox_dir / PID_NAME).is_file():
                    continue  # not a process sandbox: another backend's business
                pid = _verified_pid(sandbox_dir)
                if pid is not None:
                    _kill_group(pid)
                shutil.rmtree(sandbox_dir, ignore_errors=True)
                removed += 1
            if not any(socketroot.owned_sandbox_dirs(instance_dir)):
                shutil.rmtree(instance_dir, ignore_errors=True)
        return removed

    async def health(self) -> dict[str, object]:
        self._reap_exited()
        self._heartbeat.check()
        root = self.config.socket_root
        if not os.access(root, os.W_OK | os.X_OK):
            raise SandboxUnavailable(f"socket root {root} is not writable")
        return {"backend": self.name, "isolation": self.isolation, "live": len(self._children)}

    async def close(self) -> None:
        if not self.claimed:
            return  # it never started: nothing of its exists, and the root may be another's
        await super().close()
        await self._heartbeat.stop()
        shutil.rmtree(self.instance_dir, ignore_errors=True)

    def _reap_exited(self) -> None:
        """Forget runtimes that died on their own (memory limit, os._exit in env code)."""
        for sandbox_id, child in list(self._children.items()):
            if child.process.poll() is not None:
                del self._children[sandbox_id]
                shutil.rmtree(self.directory_of(child.handle), ignore_errors=True)

    def directory_of(self, handle: SandboxHandle) -> Path:
        """``directory``, for a handle whose id is its name (as every process sandbox's is)."""
        if handle.id != handle.name:
            raise InvalidHandle(f"a process sandbox's id is its name: {handle.to_dict()}")
        return self.directory(handle)


def _interpreter_for_nobody() -> str:
    """The gateway's own interpreter when user nobody may run it, else the system's (a
    pyenv's under /root is out of nobody's reach; the runtime needs the standard library only)."""
    for candidate in (sys.executable, SYSTEM_PYTHON):
        path = Path(candidate).resolve()
        if path.is_file() and all(_others_may(part, stat.S_IXOTH) for part in path.parents) \
                and _others_may(path, stat.S_IXOTH | stat.S_IROTH):
            return str(path)
    raise SandboxUnavailable(f"no Python interpreter that user nobody may run ({sys.executable} "
                             f"and {SYSTEM_PYTHON} are out of its reach); install python3")


def _others_may(path: Path, bits: int) -> bool:
    try:
        return path.stat().st_mode & bits == bits
    except OSError:
        return False


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
