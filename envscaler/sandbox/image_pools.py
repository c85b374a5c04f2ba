"""Warm pools per sandbox image on one backend: the configured image's, and one per requirement set
(env.json's ``requirements``) of the image built for that set (``envscaler.sandbox.requirements_image``).
A set's image is built when first asked for (or up front: ``ensure``), and its pool starts when a
sandbox of it is first claimed, so an environment that no one uses holds no sandboxes.

A set whose image cannot be built (a version the index lacks, no engine; the process backend, which
has no images) is remembered with the reason: `RequirementsUnavailable`, and its environments do
not load; the others are not affected.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from envscaler.format.models import EnvManifest
from envscaler.format.requirements import requirement_set
from envscaler.sandbox.backends.base import SandboxBackend
from envscaler.sandbox.config import SandboxConfig
from envscaler.sandbox.errors import SandboxUnavailable
from envscaler.sandbox.pool import SandboxPool

log = logging.getLogger("envscaler.sandbox.image_pools")

RequirementSet = tuple[str, ...]


class RequirementsUnavailable(Exception):
    """A requirement set has no sandbox image here; the message says why."""


def requirement_sets(manifests: Iterable[EnvManifest]) -> set[RequirementSet]:
    """The requirement sets of these environments (those that have requirements)."""
    return {pins for manifest in manifests if (pins := requirement_set(manifest.requirements))}


@dataclass
class RequirementImages:
    """The image of each requirement set, or why it has none."""

    tags: dict[RequirementSet, str] = field(default_factory=dict)
    failures: dict[RequirementSet, str] = field(default_factory=dict)


def build_images(backend: str, base_image: str,
                 sets: Iterable[RequirementSet]) -> RequirementImages:
    """Each set's image over ``base_image``, built when the engine lacks it, or why it has none
    (blocking: pip downloads and Docker builds)."""
    images = RequirementImages()
    for pins in sorted(sets):
        try:
            images.tags[pins] = _ensure_image(backend, base_image, pins)
        except SandboxUnavailable as exc:
            log.error("requirements image not built requirements=%s error=%s", " ".join(pins),
                      exc)
            images.failures[pins] = f"its requirements have no sandbox image: {exc}"
    return images


def _ensure_image(backend: str, base_image: str, pins: RequirementSet) -> str:
    if backend != "docker":
        raise SandboxUnavailable(f"the {backend} backend cannot install requirements "
                                 f"({' '.join(pins)}); serve it with the docker backend")
    import docker
    from docker.errors import DockerException

    from envscaler.sandbox.requirements_image import ensure_image

    try:
        client = docker.from_env()
    except DockerException as exc:
        raise SandboxUnavailable(f"no Docker engine answers: {exc}") from exc
    return ensure_image(client, base_image, pins)


class ImagePools:
    """The configured image's pool (``default``, which starts and closes the backend) and the
    pools of the requirement sets, on the same backend."""

    def __init__(self, backend: SandboxBackend, config: SandboxConfig,
                 name: str = "default") -> None:
        self.default = SandboxPool(backend, config, name)
        self._images = RequirementImages()
        self._by_image: dict[str, SandboxPool] = {}
        self._building = asyncio.Lock()

    async def start(self) -> None:
        await self.default.start()

    async def ensure(self, sets: Iterable[RequirementSet]) -> None:
        """Build the images of ``sets`` that are not known yet (in a worker thread)."""
        sets = set(sets)
        if not self._missing(sets):
            return
        async with self._building:
            if missing := self._missing(sets):
                config = self.default.config
                built = await asyncio.to_thread(build_images, config.sandbox_backend,
                                                config.sandbox_image, missing)
                self._images.tags |= built.tags
                self._images.failures |= built.failures

    def _missing(self, sets: set[RequirementSet]) -> set[RequirementSet]:
        return sets - self._images.tags.keys() - self._images.failures.keys()

    async def of(self, requirements: Iterable[str]) -> SandboxPool:
        """The pool whose sandboxes have ``requirements`` installed, its image built and the
        pool started when first needed; `RequirementsUnavailable` when the set has no image."""
        pins = requirement_set(requirements)
        if not pins:
            return self.default
        await self.ensure([pins])
        if pins in self._images.failures:
            raise RequirementsUnavailable(self._images.failures[pins])
        image = self._images.tags[pins]
        pool = self._by_image.get(image)
        if pool is None:
            pool = SandboxPool(self.default.backend, self.default.config,
                               f"{self.default.name}-requirements-{image.rpartition(':')[2]}",
                               image=image, owns_backend=False)
            self._by_image[image] = pool
            await pool.start()
        return pool

    async def close(self) -> None:
        """The requirement sets' pools first: the default's closes the backend."""
        for pool in self._by_image.values():
            await pool.close()
        await self.default.close()
