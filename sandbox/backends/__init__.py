"""Sandbox backends: `base` defines the interface, one module per implementation."""

from __future__ import annotations

from sandbox.backends.base import SandboxBackend, SandboxHandle
from sandbox.config import SandboxConfig

__all__ = ["SandboxBackend", "SandboxHandle", "make_backend"]


def make_backend(config: SandboxConfig, instance: str) -> SandboxBackend:
    """The backend named by ``config.backend``; imports lazily so `process` needs no Docker SDK."""
    if config.backend == "docker":
        from sandbox.backends.docker import DockerBackend

        return DockerBackend(config, instance)
    if config.backend == "process":
        from sandbox.backends.process import ProcessBackend

        return ProcessBackend(config, instance)
    raise ValueError(f"unknown sandbox backend {config.backend!r}; choose 'docker' or 'process'")
