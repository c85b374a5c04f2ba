"""The one interface every sandbox backend implements (one file per backend beside this one)."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.errors import SandboxUnavailable

SOCKET_NAME = "runtime.sock"
CONTROL_NAME = "control.sock"  # the keeper's, beside the runtime's (containers only)
RUNTIME, CHECKER = "runtime", "checker"  # what a sandbox runs (``python3 -m sandbox.runtime``)
SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL


def make_socket_dir(directory: Path) -> Path:
    """Create a sandbox's private socket directory (world-writable: the runtime runs as another
    user) and return the socket path in it; refuse paths the kernel could not bind."""
    socket_path = directory / SOCKET_NAME
    if len(os.fsencode(socket_path)) > SOCKET_PATH_MAX:
        raise SandboxUnavailable(f"socket path {socket_path} is longer than {SOCKET_PATH_MAX} "
                                 "bytes; choose a shorter ENVSCALER_SOCKET_ROOT")
    try:
        directory.mkdir(parents=True)
        directory.chmod(0o777)  # mkdir's mode is masked by the umask
    except OSError as exc:  # a socket root that is full, read-only or not a directory
        raise SandboxUnavailable(f"cannot create the sandbox's socket directory {directory}: "
                                 f"{exc.strerror or exc}") from exc
    return socket_path


@dataclass(frozen=True)
class SandboxHandle:
    """Everything needed to reach and to kill a sandbox; safe to store in Redis as a dict.

    ``generation`` counts the recycles of the container (``runtime/keeper.py``): a handle of an
    older generation names a container that has since served, or serves, another session, so a
    recycle asked for with it is refused."""

    id: str
    socket_path: str
    backend: str
    instance: str
    generation: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "socket_path": self.socket_path, "backend": self.backend,
                "instance": self.instance, "generation": self.generation}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SandboxHandle:
        generation = data.get("generation", 0)
        if type(generation) is not int:
            raise TypeError(f"generation must be an integer, not {generation!r}")
        return cls(id=data["id"], socket_path=data["socket_path"], backend=data["backend"],
                   instance=data["instance"], generation=generation)


class SandboxBackend(ABC):
    """Creates and kills sandboxes that run `sandbox.runtime` behind a Unix socket.

    ``create`` returns only once the runtime answers ``ping``. ``destroy`` kills at once and
    never waits for a grace period. Every sandbox carries this backend's instance id, so that
    ``reap_orphans`` can remove what dead instances of the service left behind.
    """

    name: str
    isolation: str  # shown in /readyz and logs: "container", "gvisor" or "process"
    recyclable: bool = False  # its runtimes run under a keeper that restarts them in place

    def __init__(self, instance: str) -> None:
        self.instance = instance

    async def start(self) -> None:
        """Called once when the service starts, before the first ``create``: start this instance's
        heartbeat (``sandbox.heartbeat.Heartbeat``) and reap what dead instances left behind.
        The default does nothing, for backends that need neither."""

    @abstractmethod
    async def create(self, labels: dict[str, str], role: str = RUNTIME) -> SandboxHandle:
        """A started sandbox running ``role`` (``RUNTIME``: an environment; ``CHECKER``: check
        functions on states, never an environment)."""

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
