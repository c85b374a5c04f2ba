"""The sandbox image, tagged by the hash of what goes into it, so a stale image is never used."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path
from typing import Protocol

import docker
from docker.errors import BuildError, ImageNotFound

from envscaler.sandbox.errors import SandboxUnavailable

SANDBOX_DIR = Path(__file__).resolve().parent
REPOSITORY = "envscaler-sandbox"


def context_files() -> dict[str, bytes]:
    """The build context: the Dockerfile, the packages' ``__init__.py`` and the runtime's sources."""
    files = {"Dockerfile": (SANDBOX_DIR / "Dockerfile").read_bytes(),
             "envscaler/__init__.py": (SANDBOX_DIR.parent / "__init__.py").read_bytes(),
             "envscaler/sandbox/__init__.py": (SANDBOX_DIR / "__init__.py").read_bytes()}
    for path in sorted((SANDBOX_DIR / "runtime").glob("*.py")):
        files[f"envscaler/sandbox/runtime/{path.name}"] = path.read_bytes()
    return files


def image_tag(base_image: str) -> str:
    digest = hashlib.sha256(base_image.encode())
    for name, data in context_files().items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return f"{REPOSITORY}:{digest.hexdigest()[:12]}"


def context_tar(files: dict[str, bytes]) -> io.BytesIO:
    """A build context of ``files`` (path in the context -> bytes), for a custom-context build."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


def build_image(client: docker.DockerClient, base_image: str) -> str:
    """Build the image for ``base_image`` (which must exist locally or be pullable); return its tag."""
    tag = image_tag(base_image)
    try:
        client.images.get(base_image)
    except ImageNotFound:
        raise SandboxUnavailable(
            f"base image {base_image} is not on this Docker engine; run scripts/bootstrap "
            "(builds envscaler-base:bookworm) or set ENVSCALER_SANDBOX_BASE_IMAGE") from None
    try:
        client.images.build(fileobj=context_tar(context_files()), custom_context=True, tag=tag,
                            rm=True, buildargs={"BASE_IMAGE": base_image}, pull=False)
    except BuildError as exc:
        log = "".join(str(line.get("stream", line.get("error", ""))) for line in exc.build_log)
        raise SandboxUnavailable(f"building {tag} failed: {exc.msg}\n{log[-2000:]}") from exc
    client.images.get(tag).tag(REPOSITORY, "latest")
    return tag


class ImageSettings(Protocol):
    sandbox_image: str | None
    sandbox_base_image: str


def resolve_image(settings: ImageSettings, client: docker.DockerClient | None = None) -> str:
    """The image sandboxes run, the one answer for every entry point: the configured one
    (``ENVSCALER_SANDBOX_IMAGE``), else this checkout's, built on the base image when the engine
    lacks it."""
    if settings.sandbox_image:
        return settings.sandbox_image
    return ensure_image(client or docker.from_env(), settings.sandbox_base_image)


def ensure_image(client: docker.DockerClient, base_image: str) -> str:
    """The current runtime's image tag, built first when this engine does not have it."""
    tag = image_tag(base_image)
    try:
        client.images.get(tag)
    except ImageNotFound:
        return build_image(client, base_image)
    return tag
