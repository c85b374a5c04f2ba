"""BFCL's own execution of ground truths, run where untrusted code may run: a throwaway container
of the sandbox image (with the environments' requirements installed, as the gateway's sandboxes
have them), ``envscaler.importers.bfcl.runner`` inside.

The container has no network, a read-only root, the sandboxes' memory, CPU and process limits and
runtime (``ENVSCALER_SANDBOX_*``), no capabilities, and is removed afterwards. It sees BFCL's
package folder read-only at ``/bfcl``, the job (the runner and the questions) read-only at
``/job``, and writes the executions to ``/out``, the only writable place besides a small ``/tmp``.
It is killed when it outlives the gateway's deadlines for the loads and calls it runs.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from envscaler.importers.bfcl import runner
from envscaler.importers.bfcl.checkout import Checkout

if TYPE_CHECKING:
    from envscaler.server.settings import Settings

CODE, JOB, OUT = "/bfcl", "/job", "/out"
RUNNER_MODULE = "bfcl_runner"
JOB_FILE, OUT_FILE = "job.json", "executions.json"
STDERR_TAIL = 40  # lines of the container's stderr kept when it fails
ENGINE_SLACK = 60  # seconds the engine may take to answer, beyond the container's deadline

Progress = Callable[[str], None]
"""Called with each question's id once BFCL's execution of it is done."""


class ContainerError(Exception):
    """BFCL's execution could not run at all: no Docker engine, no image."""


class BfclOutcome(BaseModel):
    """What the runner reports for one question: its results and state, or why it did not run."""

    results: list[str] = []
    state: dict[str, Any] = {}
    error: str | None = None


_OUTCOMES = TypeAdapter(dict[str, BfclOutcome])


def images(requirement_sets: Iterable[tuple[str, ...]],
           settings: Settings) -> dict[tuple[str, ...], str]:
    """The image of each requirement set (the empty set: the sandbox image), built when this
    Docker engine lacks it, as `envscaler sandbox build` builds them."""
    from docker.errors import DockerException

    from envscaler.sandbox.errors import SandboxUnavailable
    from envscaler.sandbox.image import resolve_image
    from envscaler.sandbox.image_pools import build_images

    try:
        base = resolve_image(settings)
    except (DockerException, SandboxUnavailable) as exc:
        raise ContainerError(f"no sandbox image to run BFCL's code in: {exc}") from exc
    sets = set(requirement_sets)
    built = build_images("docker", base, sets - {()})
    if built.failures:
        raise ContainerError("; ".join(f"{' '.join(pins)}: {reason}"
                                       for pins, reason in sorted(built.failures.items())))
    return {**built.tags, **({(): base} if () in sets else {})}


def execute(checkout: Checkout, questions: list[dict[str, Any]], image: str,
            progress: Progress, settings: Settings) -> dict[str, BfclOutcome]:
    """BFCL's execution of ``questions`` (each with ``id``, ``involved_classes``,
    ``initial_config`` and ``ground_truth``, as in BFCL's files) in one container of ``image``;
    a question the container did not finish has an outcome with its ``error``."""
    import docker
    from docker.errors import DockerException

    deadline = (settings.load_timeout * len(questions) + settings.call_timeout
                * sum(len(turn) for question in questions for turn in question["ground_truth"]))
    with tempfile.TemporaryDirectory(prefix="envscaler-bfcl-") as directory:
        job, out = _job(Path(directory), checkout, questions)
        try:
            client = docker.from_env(timeout=int(deadline) + ENGINE_SLACK)
            container = client.containers.create(image, **_container_options(settings, image, {
                str(checkout.import_root()): {"bind": CODE, "mode": "ro"},
                str(job): {"bind": JOB, "mode": "ro"}, str(out): {"bind": OUT, "mode": "rw"}}))
        except (DockerException, OSError) as exc:  # OSError: the engine's connection failing
            raise ContainerError(f"cannot create a container of {image}: {exc}") from exc
        try:
            failure = _run(container, deadline, progress)
        except (DockerException, OSError) as exc:
            raise ContainerError(f"the Docker engine failed BFCL's execution: {exc}") from exc
        finally:
            with suppress(DockerException):
                container.remove(force=True)
        outcomes = {} if failure else _outcomes(out / OUT_FILE)
    missing = BfclOutcome(error="its container did not finish: "
                          + (failure or "the runner wrote no outcome for it"))
    return {question["id"]: outcomes.get(question["id"], missing) for question in questions}


def _job(directory: Path, checkout: Checkout,
         questions: list[dict[str, Any]]) -> tuple[Path, Path]:
    """The job folder (the runner, and the questions with the module file of each class, as the
    container sees them) and the output folder, which the container's user may write."""
    job, out = directory / "job", directory / "out"
    job.mkdir()
    out.mkdir()
    job.chmod(0o755)
    out.chmod(0o777)
    root = checkout.import_root()
    classes = {name for question in questions for name in question["involved_classes"]
               if name in checkout.classes}
    module_files = {name: f"{CODE}/{checkout.module_file(name).relative_to(root).as_posix()}"
                    for name in sorted(classes)}
    (job / JOB_FILE).write_text(json.dumps({"import_root": CODE, "module_files": module_files,
                                            "questions": questions}), encoding="utf-8")
    shutil.copyfile(runner.__file__, job / f"{RUNNER_MODULE}.py")
    for path in job.iterdir():
        path.chmod(0o644)
    return job, out


def _container_options(settings: Settings, image: str,
                       volumes: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The sandboxes' confinement, as nobody, running the runner on the job."""
    from envscaler.sandbox.backends.docker import confinement

    return {**confinement(settings.sandbox_config(image=image)),
            "command": ["python3", "-s", "-m", RUNNER_MODULE, f"{JOB}/{JOB_FILE}",
                        f"{OUT}/{OUT_FILE}"],
            "environment": {"PYTHONPATH": JOB}, "user": "65534:65534", "volumes": volumes,
            "network_disabled": True}


def _run(container: Any, deadline: float, progress: Progress) -> str | None:
    """Run ``container`` to its end, reporting each line it prints as progress; why it failed
    (killed at ``deadline`` seconds, a non-zero exit with its stderr's end), or None."""
    from docker.errors import DockerException

    killed = threading.Event()

    def kill() -> None:
        killed.set()
        with suppress(DockerException):
            container.kill()

    timer = threading.Timer(deadline, kill)
    timer.start()
    try:
        container.start()
        pending = ""
        for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=False):
            pending += chunk.decode(errors="replace")
            *lines, pending = pending.split("\n")
            for line in lines:
                progress(line.strip())
        status = container.wait().get("StatusCode")
    finally:
        timer.cancel()
    if killed.is_set() and status != 0:
        return f"killed after {deadline:g} s"
    if status != 0:
        tail = container.logs(stdout=False, stderr=True, tail=STDERR_TAIL).decode(errors="replace")
        return f"exit status {status}: {tail.strip()}"
    return None


def _outcomes(path: Path) -> dict[str, BfclOutcome]:
    """What the runner wrote; nothing when it wrote nothing valid (each question then says so)."""
    try:
        return _OUTCOMES.validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return {}
