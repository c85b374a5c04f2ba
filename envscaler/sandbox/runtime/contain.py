"""What the trusted processes of a sandbox (the keeper, the checker) do to stay in charge of it:
run untrusted code under another user, kill everything else, wipe scratch space, read how a
process was scheduled.

In a container the trusted process is root with only ``CAP_SETUID``, ``CAP_SETGID`` and
``CAP_KILL`` (the Docker backend grants nothing else); what it forks drops to ``UNTRUSTED_UID``
before running environment or check code, so that code can neither signal nor trace the process
that judges or recycles it, while that process can kill every process of the container.
``kill_all_others``, ``kill_user`` and ``wipe`` are only for a container, where every process but
PID 1 and the caller belongs to the sandbox; they refuse to run anywhere else.

A container's keeper serves several sessions at once, each in a slot of its own: slot ``i`` runs as
the user ``uid_base + i`` (``slot_uid``), a range the gateway draws per container, so that a slot
cannot signal, trace or read its siblings and ``RLIMIT_NPROC`` (counted per user across the whole
machine) bounds each slot's processes alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import resource
import signal
import socket
import stat
import time
from pathlib import Path

CONTAINER_INITS = {b"docker-init", b"tini", b"/sbin/docker-init", b"/dev/init"}
UNTRUSTED_UID = UNTRUSTED_GID = 65534  # nobody
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: a forked child must not load libraries
_SWEEP_SECONDS = 5.0
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_OOM_COUNTS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")


class NotContained(RuntimeError):
    """A sweep was asked for outside a container: it would kill the host user's processes."""


class Survivors(RuntimeError):
    """Processes outlived ``kill_all_others`` (the caller may not signal them)."""


def drop_privileges(uid: int = UNTRUSTED_UID, processes: int | None = None) -> None:
    """Become ``uid`` (its own group too), with no capabilities, before running untrusted code,
    with at most ``processes`` processes and threads of that user (a no-op unless this is root
    in a container: the process backend runs everything as its own user)."""
    if os.getuid() != 0 or not in_container():
        return
    if processes is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    os.setgroups([])
    os.setgid(UNTRUSTED_GID if uid == UNTRUSTED_UID else uid)
    os.setuid(uid)  # from root to another user: every capability is gone too


def slot_uid(uid_base: int, slot: int) -> int:
    return uid_base + slot


@functools.cache
def in_container() -> bool:
    """Whether PID 1 is a container's init (so this is a PID namespace of our own). Cached: it
    cannot change, and forked checks would each read it again."""
    try:
        argv0 = Path("/proc/1/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False
    return argv0 in CONTAINER_INITS or os.path.basename(argv0) in CONTAINER_INITS


def kill_all_others() -> None:
    """SIGKILL every process but PID 1 and this one, until none is left (a fork bomb races)."""
    if not in_container():
        raise NotContained("refusing to kill every process outside a container")
    me = os.getpid()
    deadline = time.monotonic() + _SWEEP_SECONDS
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # every process we may signal, except PID 1 and ourselves
        except ProcessLookupError:
            pass
        _reap_children()
        survivors = [pid for pid in _pids() if pid not in (1, me)]
        if not survivors:
            return
        if time.monotonic() > deadline:
            raise Survivors(f"processes {survivors[:10]} survived SIGKILL")
        time.sleep(0.001)  # PID 1 reaps the orphans


def kill_user(uid: int) -> None:
    """SIGKILL every process of ``uid`` (a slot's), until none is left (a fork bomb races).
    Reaps nothing: the caller's children that die stay for the caller to learn how they ended."""
    if not in_container():
        raise NotContained("refusing to kill a user's processes outside a container")
    deadline = time.monotonic() + _SWEEP_SECONDS
    while survivors := [pid for pid in _pids() if _owner(pid) == uid]:
        for pid in survivors:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise Survivors(f"processes {survivors[:10]} of user {uid} survived SIGKILL")
        time.sleep(0.001)  # PID 1 reaps the orphans


def _owner(pid: int) -> int | None:
    """The real user of ``pid``; None once it is gone (a zombie too: it runs nothing)."""
    try:
        fields = dict(line.split(":", 1)
                      for line in Path(f"/proc/{pid}/status").read_text().splitlines())
        if fields["State"].split()[0] in ("Z", "X"):
            return None
        return int(fields["Uid"].split()[0])
    except (OSError, ValueError, KeyError, IndexError):
        return None


def wipe(directory: Path, uid: int = UNTRUSTED_UID) -> None:
    """Remove what ``uid`` owns in ``directory`` (a tmpfs), whatever modes environment code set
    and however deep it nested. Done by a child as ``uid``, the owner of those files (root here
    has no right to override their modes)."""
    if not in_container():
        raise NotContained(f"refusing to wipe {directory} outside a container")
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            drop_privileges(uid)
            _remove_all([entry for entry in directory.iterdir() if entry.lstat().st_uid == uid])
            status = 0
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise OSError(f"wiping {directory} failed (status {status})")


def _remove_all(entries: list[Path]) -> None:
    """Iteratively, post-order: no recursion limit for environment code to hit."""
    pending = [(entry, False) for entry in entries]
    while pending:
        path, emptied = pending.pop()
        if path.is_symlink() or not path.is_dir():
            path.unlink(missing_ok=True)
        elif emptied:
            path.rmdir()
        else:
            os.chmod(path, stat.S_IRWXU)  # ours (same user), so ours to open again
            pending.append((path, True))
            pending.extend((child, False) for child in path.iterdir())


def die_with_parent(parent_pid: int, signum: int = signal.SIGKILL) -> None:
    """Arm ``signum`` for when this process's parent dies, however it ends (even SIGKILL), then
    close the race: a parent that died before it was armed has left this process re-parented,
    and it dies at once. The signal fires when the *thread* that forked this process ends, so
    fork from a thread that lives as long as the parent.

    Only system calls, so it may run in a ``preexec_fn`` between fork and exec."""
    if _LIBC.prctl(_PR_SET_PDEATHSIG, int(signum)) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signum)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def schedstat(pid: int) -> tuple[float, float] | None:
    """(seconds on a CPU, seconds waiting for one) of ``pid``; None where the kernel (or gVisor)
    keeps no scheduler statistics."""
    try:
        running, waiting, _ = Path(f"/proc/{pid}/schedstat").read_text().split()
    except (OSError, ValueError):
        return None
    return int(running) / 1e9, int(waiting) / 1e9


def runnable(pid: int) -> bool:
    """Whether ``pid`` is running or waiting for a CPU (state R), not asleep or stopped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "R"
    except (OSError, IndexError):
        return False


def oom_kills() -> int | None:
    """How many processes the kernel's OOM killer ended in this container's memory cgroup (v2
    ``memory.events``, v1 ``memory.oom_control``); None where no such count can be read (outside
    a container, gVisor)."""
    if not in_container():
        return None
    for path in _OOM_COUNTS:
        try:
            lines = Path(path).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            name, _, value = line.partition(" ")
            if name == "oom_kill" and value.strip().isdigit():
                return int(value)
    return None


def address_space_bytes() -> int:
    """This process's current virtual size (what an address-space limit must exceed)."""
    return int(Path("/proc/self/statm").read_text().split()[0]) * _PAGE_SIZE


def resident_bytes(pid: int) -> int:
    """How much memory ``pid`` holds (its resident set); 0 once it is gone. Read with bare
    system calls: a keeper reads this four times a second for each of its slots, and
    ``Path.read_text`` took three times as long."""
    try:
        fd = os.open(f"/proc/{pid}/statm", os.O_RDONLY)
    except OSError:
        return 0
    try:
        return int(os.read(fd, 256).split()[1]) * _PAGE_SIZE
    except (OSError, IndexError, ValueError):
        return 0
    finally:
        os.close(fd)


def bind_listening(path: Path) -> socket.socket:
    """A listening Unix socket at ``path``, mode 0o777 (the gateway connects as another user).
    Created so under umask 0 rather than chmod-ed after: gVisor refuses chmod on a host socket."""
    path.unlink(missing_ok=True)  # left by a process that died before cleaning up
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0)
    try:
        sock.bind(str(path))
    finally:
        os.umask(previous)
    sock.listen(64)
    return sock


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
