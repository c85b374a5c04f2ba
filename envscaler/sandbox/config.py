"""Sandbox settings as the sandbox layer sees them; filled from `envscaler.server.settings.Settings`."""

from __future__ import annotations

import base64
import binascii
import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(text: str) -> int:
    """Bytes in a Docker-style size: ``"256m"``, ``"1g"``, ``"512k"``, ``"1024"``, ``"1.5GiB"``.

    Not the Docker SDK's ``docker.utils.parse_bytes``: it refuses ``GiB`` and ``t`` and raises
    ``DockerException``, where settings validation needs a ``ValueError`` (pydantic's cue)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a size: {text!r} (expected e.g. 256m or 1g)")
    return int(float(match[1]) * _UNITS[match[2].lower()])


MIN_SECRET_BYTES = 32
MIN_SECRET_VALUES = 16  # distinct byte values: 32 random bytes hold ~30; "abab..." holds 2
SECRET_HINT = "make one with `openssl rand -hex 32`"


def secret_problem(text: str) -> str | None:
    """Why ``text`` cannot be the cluster secret, or None. The secret keys every proof and every
    frame between gateways and hosts, and a host proves it to anyone who connects: a guessable
    one is recovered offline from a single handshake. So it must be at least
    ``MIN_SECRET_BYTES`` random bytes, written in hex or base64."""
    raw = _decoded(text.strip())
    if raw is None:
        return f"is not hex or base64; {SECRET_HINT}"
    if len(raw) < MIN_SECRET_BYTES:
        return (f"holds {len(raw)} bytes; it must be at least {MIN_SECRET_BYTES} random bytes: "
                f"{SECRET_HINT}")
    if len(set(raw)) < MIN_SECRET_VALUES:
        return f"repeats a few bytes; it must be random: {SECRET_HINT}"
    return None


def _decoded(text: str) -> bytes | None:
    if re.fullmatch(r"(?:[0-9a-fA-F]{2})+", text):
        return bytes.fromhex(text)
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_"
                                if re.search(r"[-_]", text) else None, validate=True)
    except (binascii.Error, ValueError):
        return None


@dataclass(frozen=True)
class ClusterAuth:
    """What gateways and sandbox hosts need to trust each other (``envscaler.sandbox.hosts.wire``): the
    shared cluster secret and, optionally, TLS (a host's certificate and key; the CA file a
    gateway checks it with). A weak secret is refused here (``ValueError``), wherever the
    secret comes from."""

    secret: bytes
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None

    def __post_init__(self) -> None:
        problem = secret_problem(self.secret.decode("utf-8", "replace"))
        if problem is not None:
            raise ValueError(f"ENVSCALER_CLUSTER_SECRET {problem}")

    def server_tls(self) -> ssl.SSLContext | None:
        if self.tls_cert is None:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.tls_cert, self.tls_key)
        return context

    def client_tls(self) -> ssl.SSLContext | None:
        if self.tls_ca is None:
            return None
        return ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(self.tls_ca))


@dataclass(frozen=True)
class ClusterConfig:
    """Where a gateway finds sandbox hosts (their registry in Redis) and how it proves itself
    to them; set only for the ``remote`` backend."""

    redis_url: str
    auth: ClusterAuth


@dataclass(frozen=True)
class SandboxConfig:
    """Each field that has a setting of the gateway bears that setting's name (`Settings`,
    ``ENVSCALER_<NAME>``), and `Settings.sandbox_config` copies it; the image is the resolved one
    (the setting may leave it unset: then the image of the checkout is built)."""

    sandbox_backend: str = "docker"
    sandbox_image: str = "envscaler-sandbox:latest"
    sandbox_runtime: str | None = None  # a Docker runtime, e.g. "runsc" for gVisor
    sandbox_memory: str = "256m"
    sandbox_cpus: float = 1.0
    sandbox_pids: int = 64
    sandbox_slots: int = 32  # sessions one runtime container serves at once (Docker backend)
    sandbox_tmpfs: str = "16m"
    sandbox_log_size: str = "1m"  # container output kept on the host, the newest (Docker backend)
    socket_root: Path = Path("/tmp/envscaler")
    start_timeout: float = 20.0
    pool_size: int = 4
    max_sandboxes: int = 1024
    sandbox_create_concurrency: int = 8  # sandbox creations in flight at once, per pool
    heartbeat_interval: float = 5.0
    docker_timeout: float = 15.0  # seconds for a Docker engine request, and for a free thread
    docker_threads: int = 16  # threads of the Docker backend's own for engine calls
    labels: dict[str, str] = field(default_factory=dict)
    # Environment sources each runtime container compiles once at its start (the catalogue's):
    # a load of one of them skips compiling it.
    sources: tuple[str, ...] = ()
    cluster: ClusterConfig | None = None  # the ``remote`` backend's hosts
