"""The sandbox image of an environment's requirements: the sandbox image with a set of pinned
packages installed, built once per set and tagged by the hash of what goes into it.

The build has no network: the wheels are fetched on the host (``pip download`` with the host's pip
configuration, its index or find-links) for the sandbox image's Python, copied into the build
context, and installed offline by pip run from its own wheel (the sandbox image has no pip).
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import docker
from docker.errors import BuildError, DockerException, ImageNotFound

from envscaler.format.requirements import requirement_set
from envscaler.sandbox.errors import SandboxUnavailable
from envscaler.sandbox.image import context_tar

REPOSITORY = "envscaler-sandbox-reqs"
DOCKERFILE = Path(__file__).resolve().parent / "Dockerfile.requirements"
REQUIREMENTS_FILE = "requirements.txt"
DOWNLOAD_TIMEOUT = 600.0
PYTHON_VERSION = "import sys; print('%d.%d' % sys.version_info[:2])"


def image_tag(base_id: str, pins: Iterable[str]) -> str:
    """The tag of ``pins`` installed over the sandbox image whose id is ``base_id`` (its id, not
    a tag that may move, such as ``:latest``)."""
    digest = hashlib.sha256(base_id.encode() + b"\0" + DOCKERFILE.read_bytes() + b"\0")
    digest.update("\n".join(requirement_set(pins)).encode())
    return f"{REPOSITORY}:{digest.hexdigest()[:16]}"


def ensure_image(client: docker.DockerClient, base_image: str, pins: Iterable[str]) -> str:
    """The image of ``pins`` over ``base_image``, built first when this engine does not have it."""
    pins = requirement_set(pins)
    tag = image_tag(_image_id(client, base_image), pins)
    try:
        client.images.get(tag)
    except ImageNotFound:
        return build_image(client, base_image, pins)
    except DockerException as exc:
        raise SandboxUnavailable(f"the Docker engine does not answer: {exc}") from exc
    return tag


def build_image(client: docker.DockerClient, base_image: str, pins: Iterable[str]) -> str:
    """Fetch the wheels of ``pins`` on the host and build their image offline; its tag.
    ``SandboxUnavailable`` names what failed (the download's or the install's own words)."""
    pinned = requirement_set(pins)
    tag = image_tag(_image_id(client, base_image), pinned)
    with tempfile.TemporaryDirectory(prefix="envscaler-wheels-") as directory:
        wheels = Path(directory)
        pip_wheel = _download(pinned, _python_version(client, base_image), wheels)
        context = _context_tar(wheels, pinned)
    try:
        client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True, pull=False,
                            network_mode="none",
                            buildargs={"BASE_IMAGE": base_image, "PIP_WHEEL": pip_wheel},
                            labels={"envscaler.requirements": " ".join(pinned),
                                    "envscaler.base-image": base_image})
    except BuildError as exc:
        log = "".join(str(line.get("stream", line.get("error", ""))) for line in exc.build_log)
        raise SandboxUnavailable(f"installing {' '.join(pinned)} into {tag} failed: "
                                 f"{exc.msg}\n{log[-2000:]}") from exc
    except DockerException as exc:
        raise SandboxUnavailable(f"building {tag} failed: {exc}") from exc
    return tag


def _image_id(client: docker.DockerClient, image: str) -> str:
    try:
        return str(client.images.get(image).id)
    except ImageNotFound:
        raise SandboxUnavailable(f"the sandbox image {image} is not on this Docker engine; build "
                                 "it with `envscaler sandbox build`") from None
    except DockerException as exc:
        raise SandboxUnavailable(f"the Docker engine does not answer: {exc}") from exc


def _python_version(client: docker.DockerClient, base_image: str) -> str:
    """``3.11``: the sandbox image's Python, which the wheels must fit."""
    try:
        output = client.containers.run(base_image, ["python3", "-c", PYTHON_VERSION],
                                       remove=True, network_disabled=True, user="65534:65534")
    except DockerException as exc:
        raise SandboxUnavailable(f"cannot run {base_image} to learn its Python version: "
                                 f"{exc}") from exc
    return bytes(output).decode().strip()


def _download(pinned: tuple[str, ...], python: str, wheels: Path) -> str:
    """Download the wheels of ``pinned`` and their dependencies for ``python``, and a wheel of
    the host's pip to install them with; the pip wheel's file name."""
    try:
        pip = f"pip=={version('pip')}"
    except PackageNotFoundError:
        raise SandboxUnavailable(f"pip is not installed for {sys.executable}; it fetches the "
                                 "wheels of environments' requirements") from None
    command = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
               "--no-input", "--only-binary=:all:", "--python-version", python,
               "--dest", str(wheels), *pinned, pip]
    try:
        subprocess.run(command, capture_output=True, text=True, check=True,
                       timeout=DOWNLOAD_TIMEOUT)
    except subprocess.CalledProcessError as exc:
        raise SandboxUnavailable(f"fetching the wheels of {' '.join(pinned)} failed: "
                                 f"{(exc.stderr or exc.stdout).strip()[-2000:]}") from None
    except subprocess.TimeoutExpired:
        raise SandboxUnavailable(f"fetching the wheels of {' '.join(pinned)} took more than "
                                 f"{DOWNLOAD_TIMEOUT:g} s") from None
    return next(path.name for path in wheels.glob("pip-*.whl"))


def _context_tar(wheels: Path, pinned: tuple[str, ...]) -> io.BytesIO:
    files = {"Dockerfile": DOCKERFILE.read_bytes(),
             f"wheels/{REQUIREMENTS_FILE}": "".join(f"{pin}\n" for pin in pinned).encode()}
    for path in sorted(wheels.iterdir()):
        files[f"wheels/{path.name}"] = path.read_bytes()
    return context_tar(files)
