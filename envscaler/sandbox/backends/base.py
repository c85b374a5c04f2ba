"""The one interface every sandbox backend implements (one file per backend beside this one)."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envscaler.sandbox import socketroot
from envscaler.sandbox.client import RuntimeClient
from envscaler.sandbox.errors import SandboxUnavailable
from envscaler.sandbox.runtime.protocol import runtime_socket_name

SOCKET_NAME = runtime_socket_name(0)
CONTROL_NAME = "control.sock"  # the keeper's, beside the runtime's (containers only)
SECRET_NAME = "secret"  # the sandbox's secret, until its keeper or checker has read it
SOURCES_NAME = "sources"  # environment sources for the keeper to compile, until it has read them
# The sources compiled (marshal): written by a keeper that compiled them, for the gateway to hand
# to the next containers of its image, whose keepers read it instead of compiling
COMPILED_NAME = "compiled"
RUNTIME, CHECKER = "runtime", "checker"  # what a sandbox runs (``python3 -m envscaler.sandbox.runtime``)
SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL
MAX_SLOTS = 256  # runtimes of one container (``ENVSCALER_SANDBOX_SLOTS``)


class InvalidHandle(ValueError):
    """A stored handle that does not name a sandbox of this service (forged, or of another
    backend or socket root): it is never used to reach, name or remove anything."""


def make_socket_dir(directory: Path, mode: int) -> Path:
    """Create a sandbox's socket directory with ``mode`` and return the socket path in it; refuse
    paths the kernel could not bind."""
    socket_path = directory / SOCKET_NAME
    if len(os.fsencode(socket_path)) > SOCKET_PATH_MAX:
        raise SandboxUnavailable(f"socket path {socket_path} is longer than {SOCKET_PATH_MAX} "
                                 "bytes; choose a shorter ENVSCALER_SOCKET_ROOT")
    try:
        socketroot.make_instance_dir(directory.parent.parent, directory.parent.name)
        directory.mkdir()
        directory.chmod(mode)  # mkdir's mode is masked by the umask
    except OSError as exc:  # a socket root that is full, read-only or not a directory
        raise SandboxUnavailable(f"cannot create the sandbox's socket directory {directory}: "
                                 f"{exc.strerror or exc}") from exc
    return socket_path


def write_for_keeper(path: Path, data: bytes) -> None:
    """A file for the sandbox's keeper or checker (its secret, the sources to compile), which
    removes it once read, before any untrusted code runs. Readable by all: the container's root
    may be another user than the gateway's, and no one else can reach the directory
    (``socketroot``)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
    try:
        os.write(descriptor, data)
    finally:
        os.close(descriptor)


@dataclass(frozen=True)
class SandboxHandle:
    """Everything needed to reach and to kill a sandbox; safe to store in Redis as a dict.

    It is data, never a path: the socket is found from ``instance`` and ``name`` under the
    backend's own socket root (``SandboxBackend.socket_path``), and the backend checks ``id``
    against what it created before it touches anything with it (``from_dict`` checks shapes).

    ``slot``: which of the container's runtimes (``runtime/keeper.py``) serves the session.
    ``generation`` counts the recycles of that slot: a handle of an older generation names a
    runtime that has since served, or serves, another session, so a recycle asked for with it
    is refused."""

    id: str
    name: str  # the sandbox's directory under its instance's (the id too, for processes)
    backend: str
    instance: str
    generation: int = 0
    slot: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "backend": self.backend,
                "instance": self.instance, "generation": self.generation, "slot": self.slot}

    @property
    def key(self) -> tuple[str, int]:
        """What tells one sandbox from another: its container and slot (not its generation)."""
        return self.id, self.slot

    def names_same_sandbox(self, data: object) -> bool:
        """Whether a stored handle (a dict) names this handle's sandbox."""
        return isinstance(data, dict) and (data.get("id"), data.get("slot", 0)) == self.key

    @classmethod
    def from_dict(cls, data: object) -> SandboxHandle:
        """Raises ``InvalidHandle`` unless every field has the shape this service gives it."""
        if not isinstance(data, dict):
            raise InvalidHandle(f"a sandbox handle is an object, not {type(data).__name__}")
        generation, slot = data.get("generation", 0), data.get("slot", 0)
        fields = (data.get("id"), data.get("name"), data.get("backend"), data.get("instance"))
        if not (all(isinstance(value, str) for value in fields) and type(generation) is int
                and type(slot) is int and 0 <= slot < MAX_SLOTS
                and socketroot.valid_sandbox(data.get("name"))
                and socketroot.valid_instance(data.get("instance"))):
            raise InvalidHandle(f"not a sandbox handle of this service: {data!r:.300}")
        return cls(id=data["id"], name=data["name"], backend=data["backend"],
                   instance=data["instance"], generation=generation, slot=slot)


class SandboxBackend(ABC):
    """Creates and kills sandboxes that run `envscaler.sandbox.runtime` behind a Unix socket.

    ``create`` returns only once the runtime answers ``ping``. ``destroy`` kills at once and
    never waits for a grace period. Every sandbox carries this backend's instance id, so that
    ``reap_orphans`` can remove what dead instances of the service left behind.
    """

    name: str
    isolation: str  # shown in /readyz and logs: "container", "gvisor" or "process"
    recyclable: bool = False  # its runtimes run under a keeper that restarts them in place
    slots_per_creation: int = 1  # runtimes one ``create_runtimes`` makes

    def __init__(self, instance: str, socket_root: Path) -> None:
        self.instance = instance
        self.socket_root = socket_root
        self._key: bytes | None = None

    def claim_root(self) -> None:
        """Refuse a socket root that someone else could change (``socketroot.claim``), and load
        the service key; called by ``start``, before anything is created under the root."""
        socketroot.claim(self.socket_root)
        self._key = socketroot.service_key(self.socket_root)

    @property
    def claimed(self) -> bool:
        """Whether the root was accepted: nothing under a refused root is ever touched."""
        return self._key is not None

    def directory(self, handle: SandboxHandle) -> Path:
        """The sandbox's directory, from its names, under this backend's root."""
        return socketroot.sandbox_dir(self.socket_root, handle.instance, handle.name)

    def socket_path(self, handle: SandboxHandle) -> str:
        return str(self.directory(handle) / runtime_socket_name(handle.slot))

    def secret(self, handle: SandboxHandle) -> bytes:
        """What the sandbox's runtime must prove it holds on every connection."""
        if self._key is None:
            self.claim_root()
        assert self._key is not None
        return socketroot.sandbox_secret(self._key, handle.instance, handle.name)

    def runtime_client(self, handle: SandboxHandle) -> RuntimeClient:
        """A connection to the sandbox's runtime: its socket and secret from the handle's names,
        under this backend's own root (a handle is data, never a path)."""
        return RuntimeClient(self.socket_path(handle), self.secret(handle))

    def handle_from(self, data: object) -> SandboxHandle:
        """A stored handle, checked for shape and for this backend (``InvalidHandle``); the
        backend checks its id against what it created before using it."""
        handle = SandboxHandle.from_dict(data)
        if handle.backend != self.name:
            raise InvalidHandle(f"a handle of backend {handle.backend!r}, not {self.name!r}")
        return handle

    async def start(self) -> None:
        """Called once when the service starts, before the first ``create``: start this instance's
        heartbeat (``envscaler.sandbox.heartbeat.Heartbeat``) and reap what dead instances left behind.
        The default does nothing, for backends that need neither."""

    @abstractmethod
    async def create(self, labels: dict[str, str], role: str = RUNTIME,
                     image: str | None = None) -> SandboxHandle:
        """A started sandbox running ``role`` (``RUNTIME``: an environment; ``CHECKER``: check
        functions on states, never an environment). ``image``: another image than the
        configured one (an environment's requirements'); a backend without images refuses it
        (``SandboxUnavailable``)."""

    async def create_runtimes(self, labels: dict[str, str], image: str | None = None,
                              count: int = 1) -> list[SandboxHandle]:
        """Started runtime sandboxes from one creation: a backend whose containers serve several
        sessions at once gives a handle per slot, ``count`` of them (at most
        ``slots_per_creation``); the default, one."""
        return [await self.create(labels, RUNTIME, image)]

    def orphaned(self, handle: SandboxHandle) -> bool:
        """Whether the sandbox belongs to an instance of the service taken for dead, whose
        sandboxes are about to be reaped (``reap_orphans``): it is not to be handed out. The
        default: never (backends that reap nothing)."""
        return False

    async def verify(self, handle: SandboxHandle) -> bool:
        """Whether a stored handle's id is the sandbox this service created under the handle's
        names (the socket and secret derive from the names alone). The default: the names are
        the id (``handle_from`` checked it). Raises ``SandboxUnavailable`` when it cannot tell."""
        return True

    @abstractmethod
    async def destroy(self, handle: SandboxHandle) -> None: ...

    @abstractmethod
    async def is_running(self, handle: SandboxHandle) -> bool: ...

    @abstractmethod
    async def list_own(self) -> list[SandboxHandle]:
        """Sandboxes that this instance created and that still exist."""

    @abstractmethod
    async def reap_orphans(self) -> int:
        """Remove sandboxes of dead instances; return how many were removed."""

    @abstractmethod
    async def health(self) -> dict[str, object]:
        """Raise when the backend cannot create sandboxes; otherwise describe it."""

    async def name_session(self, handle: SandboxHandle, session_id: str | None) -> None:
        """Make a pooled sandbox findable by the session that claimed it, or (``None``) show it
        is back in the pool (labels are fixed when a sandbox is created, before any session
        exists). The default does nothing."""

    async def diagnose(self, handle: SandboxHandle) -> str:
        """Why a sandbox stopped answering (e.g. "killed: out of memory"); empty when unknown."""
        return ""

    async def close(self) -> None:
        """Kill every sandbox of this instance."""
        for handle in await self.list_own():
            await self.destroy(handle)
