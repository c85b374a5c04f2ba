"""Sandbox backends: `base` defines the interface, one module per implementation."""

from __future__ import annotations

from envscaler.sandbox.backends.base import SandboxBackend, SandboxHandle
from envscaler.sandbox.config import SandboxConfig

__all__ = ["SandboxBackend", "SandboxHandle", "make_backend"]


def make_backend(config: SandboxConfig, instance: str) -> SandboxBackend:
    """The backend named by ``config.sandbox_backend``; imports lazily so `process` needs no
    Docker SDK. ``remote``: sandboxes on sandbox hosts (``config.cluster``)."""
    if config.sandbox_backend == "docker":
        from envscaler.sandbox.backends.docker import DockerBackend

        return DockerBackend(config, instance)
    if config.sandbox_backend == "process":
        from envscaler.sandbox.backends.process import ProcessBackend

        return ProcessBackend(config, instance)
    if config.sandbox_backend == "remote":
        from envscaler.sandbox.backends.remote import RemoteBackend

        return RemoteBackend(config, instance)
    raise ValueError(f"unknown sandbox backend {config.sandbox_backend!r}; choose 'docker', "
                     "'process' or 'remote'")
