"""The socket root: the directory under which every sandbox's socket lives, and what proves that
something under it is this service's.

Everything the gateway sends a sandbox (environment source, calls, check sources) goes through a
socket under the root, so whoever may change the root may put a counterfeit runtime in a
sandbox's place. The root must therefore be owned by the service's user and writable by no one
else (``claim``): the service refuses to start otherwise. Layout:

    <root>/key                              the service key (0600); sandbox secrets derive from it
    <root>/instances/<instance>             heartbeats (``envscaler.sandbox.heartbeat``)
    <root>/<instance>/.envscaler-instance   marker: this directory is an instance's
    <root>/<instance>/<sandbox>/            one sandbox's sockets

Names are checked against their patterns before they become paths, so a name read back from
Redis or from a container's labels cannot leave the root. A reaper removes only what it can prove
is the service's (``owned_instance_dirs``): a name of the instance pattern, a real directory
(never a link) owned by the service's user, holding the marker with its own name in it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from envscaler.sandbox.errors import SandboxUnavailable
from envscaler.sandbox.secretfile import private_secret

HEARTBEATS = "instances"
KEY_NAME = "key"
MARKER_NAME = ".envscaler-instance"
KEY_BYTES = 32
INSTANCE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
SANDBOX_PATTERN = re.compile(r"[0-9a-f]{16}")


class UnsafeSocketRoot(SandboxUnavailable):
    """The socket root could be changed by someone other than the service."""


def new_sandbox_name() -> str:
    return secrets.token_hex(8)


def valid_instance(name: object) -> bool:
    return (isinstance(name, str) and INSTANCE_PATTERN.fullmatch(name) is not None
            and name not in {HEARTBEATS, KEY_NAME})


def valid_sandbox(name: object) -> bool:
    return isinstance(name, str) and SANDBOX_PATTERN.fullmatch(name) is not None


def sandbox_dir(root: Path, instance: str, name: str) -> Path:
    """A sandbox's directory, refused (``ValueError``) unless both names have their pattern: a
    name that could leave the root never becomes a path."""
    if not (valid_instance(instance) and valid_sandbox(name)):
        raise ValueError(f"not a sandbox of this service: instance {instance!r}, sandbox {name!r}")
    return root / instance / name


def claim(root: Path) -> None:
    """Create the root (0700) if it is missing, then refuse it unless it is a directory (not a
    link) owned by this process's user and writable by no one else."""
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = root.lstat()
    except OSError as exc:
        raise UnsafeSocketRoot(f"cannot create the socket root {root}: {exc.strerror or exc}; "
                               "choose another ENVSCALER_SOCKET_ROOT") from exc
    problem = _unsafe(info)
    if problem:
        raise UnsafeSocketRoot(f"refusing the socket root {root}: it {problem}, so another user "
                               "could put a counterfeit runtime in a sandbox's place; choose a "
                               "directory of this user's (ENVSCALER_SOCKET_ROOT), or fix it with "
                               f"`chown {os.geteuid()} {root} && chmod go-w {root}`")


def _unsafe(info: os.stat_result) -> str:
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    if info.st_uid != os.geteuid():
        return f"is owned by uid {info.st_uid}, not by this service's uid {os.geteuid()}"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by its group or by everyone (mode {stat.S_IMODE(info.st_mode):o})"
    return ""


def service_key(root: Path) -> bytes:
    """The key every gateway on this root derives sandbox secrets from, created once (an
    exclusive link, so that concurrent instances agree on one)."""
    path = root / KEY_NAME
    try:
        key = private_secret(path, lambda: secrets.token_bytes(KEY_BYTES), KEY_BYTES + 1)
    except PermissionError:
        key = b""
    if len(key) != KEY_BYTES:
        raise UnsafeSocketRoot(f"refusing the service key {path}: it must be {KEY_BYTES} bytes, "
                               "owned by this service's user and readable by no one else")
    return key


def sandbox_secret(key: bytes, instance: str, name: str) -> bytes:
    """A sandbox's own secret: derived, so that any gateway on the root knows it without reading
    it from Redis, and so that one sandbox's secret tells nothing about another's."""
    digest = hmac.new(key, f"{instance}/{name}".encode(), hashlib.sha256).hexdigest()
    return digest.encode()


def make_instance_dir(root: Path, instance: str) -> Path:
    """This instance's directory, with the marker that lets reapers prove it is the service's."""
    if not valid_instance(instance):
        raise ValueError(f"not an instance name: {instance!r}")
    directory = root / instance
    directory.mkdir(mode=0o700, exist_ok=True)
    marker = directory / MARKER_NAME
    if not marker.exists():
        marker.write_text(instance)
    return directory


def owned_instance_dirs(root: Path) -> Iterator[Path]:
    """Instance directories under the root that provably are the service's (see the module's
    docstring); anything else is left alone, whatever it is."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        if valid_instance(entry.name) and _owned_dir(entry) and _marked(Path(entry.path)):
            yield Path(entry.path)


def owned_sandbox_dirs(instance_dir: Path) -> Iterator[Path]:
    """The sandbox directories of an instance's directory (by name, type and owner)."""
    try:
        entries = list(os.scandir(instance_dir))
    except OSError:  # another instance is reaping it right now
        return
    for entry in entries:
        if valid_sandbox(entry.name) and _owned_dir(entry):
            yield Path(entry.path)


def _owned_dir(entry: os.DirEntry[str]) -> bool:
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()


def _marked(directory: Path) -> bool:
    try:
        descriptor = os.open(directory / MARKER_NAME, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        info = os.fstat(descriptor)
        content = os.read(descriptor, 256)
    finally:
        os.close(descriptor)
    return (stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid()
            and content.decode(errors="replace") == directory.name)
