"""Sandboxes as locked-down Docker containers (optionally under gVisor), via the Docker SDK.

The SDK is synchronous, so every engine call runs in a worker thread and never blocks the loop:
threads of this backend's own (``ENVSCALER_DOCKER_THREADS``), so that an engine that hangs (it
accepts and never answers) holds only them, never the default executor other work shares. Every
engine request is bounded by ``ENVSCALER_DOCKER_TIMEOUT`` (the SDK client's timeout, and the wait
for its answer), and so is the wait for a free thread: a hung engine answers requests with a
clear 503 within that bound. Only a create that started is awaited to its end (each of its
requests within the client's timeout), so that its container is known, to be removed.
The runtime's socket lives in a per-sandbox host directory bind-mounted at /run/envscaler, so a
container can reach only its own socket and needs no network at all.

A runtime container serves ``ENVSCALER_SANDBOX_SLOTS`` sessions at once (``create_runtimes``): its
keeper runs one runtime per slot, each as a user of its own drawn from a range unique to the
container, under the per-session limits times the slots for the container as a whole. A handle
names one slot; ``destroy`` retires that slot alone, and removes the container with its last.
"""

from __future__ import annotations

import asyncio
import logging
import os
import dataclasses
import json
import re
import secrets
import shutil
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import docker
from docker.errors import APIError, DockerException, NotFound
from requests.exceptions import RequestException

from envscaler.sandbox import socketroot
from envscaler.sandbox.backends.base import (
    CONTROL_NAME,
    MAX_SLOTS,
    RUNTIME,
    SECRET_NAME,
    SOCKET_NAME,
    COMPILED_NAME,
    SOURCES_NAME,
    SandboxBackend,
    SandboxHandle,
    make_socket_dir,
    write_for_keeper,
)
from envscaler.sandbox.client import RuntimeClient, RuntimeFault, wait_for_runtime
from envscaler.sandbox.config import SandboxConfig, parse_size
from envscaler.sandbox.errors import SandboxError, SandboxGone, SandboxUnavailable
from envscaler.sandbox.heartbeat import Heartbeat

log = logging.getLogger("envscaler.sandbox.docker")

MANAGED = "envscaler.managed"
INSTANCE = "envscaler.instance"
ROLE = "envscaler.role"
TRUSTED_CAPABILITIES = ["SETUID", "SETGID", "KILL"]
# Liveness is judged from heartbeat files under the socket root, so an instance may only judge
# (and reap) sandboxes created under the same socket root.
SOCKET_ROOT = "envscaler.socket-root"
SANDBOX = "envscaler.sandbox"  # the sandbox's directory name under its instance's
CONTAINER_ID = re.compile(r"[0-9a-f]{64}")  # a full id: never a name or a prefix to resolve
SOCKET_IN_CONTAINER = "/run/envscaler"
KEEPER_PROCESSES = 8  # docker-init, the keeper and what it forks to wipe scratch space
REAP_INTERVAL = 30.0
MAX_COMPILED_BYTES = 256 * 2**20  # a catalogue's code, compiled (13 environments: 0.8 MB)
RETRY_INTERVAL = 5.0  # removals that failed while the engine was away are retried this often
DIAGNOSE_WAIT = 2.0
KEEPER_TIMEOUT = 5.0  # for the keeper's answer about one slot
# Slot users: a range of MAX_SLOTS drawn per container from here, so that no two containers of
# the machine share a user (RLIMIT_NPROC counts a user's processes machine-wide).
SLOT_UIDS = range(1 << 20, (1 << 31) - MAX_SLOTS, MAX_SLOTS)
# What the engine's client raises when the engine is down or restarting: the SDK's own errors,
# and requests' connection errors, which it lets through unwrapped.
ENGINE_ERRORS = (DockerException, RequestException)

T = TypeVar("T")


class EngineBusy(DockerException):
    """No engine thread became free within the timeout: each waits on an engine that does not
    answer. A `DockerException`, so every handler of an engine that is away handles it."""


class DockerBackend(SandboxBackend):
    name = "docker"
    recyclable = True

    def __init__(self, config: SandboxConfig, instance: str) -> None:
        super().__init__(instance, config.socket_root)
        self.config = config
        self.isolation = "gvisor" if config.sandbox_runtime == "runsc" else "container"
        self.slots_per_creation = config.sandbox_slots
        self._sources_text = json.dumps(list(config.sources)).encode()
        # The sources as the first container of each image compiled them (keeper.compiled_code)
        self._compiled: dict[str, bytes] = {}
        self.heartbeat = Heartbeat(config.socket_root, instance, config.heartbeat_interval)
        self._client: docker.DockerClient | None = None
        self._reaper: asyncio.Task[None] | None = None
        self._unremoved: set[str] = set()  # containers to remove once the engine answers again
        # Handles to destroy once the engine can tell whether their containers are this service's
        self._undecided: dict[str, SandboxHandle] = {}
        # Containers known to be this service's, by id: (instance, sandbox name) from their labels
        self._known: dict[str, tuple[str, str]] = {}
        self._slots: dict[str, int] = {}  # slots of the containers this process created
        self._threads = ThreadPoolExecutor(config.docker_threads,
                                           thread_name_prefix="envscaler-docker")

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            try:
                self._client = docker.from_env(timeout=self.config.docker_timeout)
            except DockerException as exc:
                raise SandboxUnavailable(f"no Docker engine answers: {exc}; run "
                                         "scripts/bootstrap") from exc
        return self._client

    async def _engine(self, call: Callable[..., T], *args: Any, abandon: bool = True) -> T:
        """``call`` on an engine thread, waited for at most the engine timeout: then
        `EngineBusy`, and the call is dropped if it has not started (every thread is stuck on a
        hung engine), else left to the client's own timeout, its outcome ignored. Without
        ``abandon`` a call that started is awaited to its end (a create, whose container must be
        known to be removed)."""
        job = self._threads.submit(call, *args)
        result = asyncio.wrap_future(job)
        try:
            return await asyncio.wait_for(asyncio.shield(result), self.config.docker_timeout)
        except TimeoutError:
            if not (job.cancel() or abandon):
                return await result
            result.add_done_callback(_ignore_outcome)
            raise EngineBusy(f"the Docker engine did not answer within "
                             f"{self.config.docker_timeout:g} s") from None

    async def start(self) -> None:
        self.claim_root()
        self.heartbeat.start()
        removed = await self.reap_orphans()
        if removed:
            log.info("reaped %d sandboxes left by dead instances", removed)
        self._reaper = asyncio.create_task(self._reap_forever(), name="envscaler-reaper")

    async def _reap_forever(self) -> None:
        reaped = time.monotonic()
        while True:
            await asyncio.sleep(RETRY_INTERVAL)
            await self._retry_removals()
            if time.monotonic() - reaped < REAP_INTERVAL:
                continue
            reaped = time.monotonic()
            try:
                await self.reap_orphans()
            except Exception:
                log.exception("reaping orphaned sandboxes failed; will retry")

    async def _retry_removals(self) -> None:
        for container_id in list(self._unremoved):
            try:
                await self._engine(self._remove, container_id)
            except ENGINE_ERRORS:
                return  # still away: next time
            self._unremoved.discard(container_id)
            log.info("removed sandbox %s after the engine came back", container_id[:12])
        for handle in [self._undecided.pop(key) for key in list(self._undecided)]:
            await self.destroy(handle)  # undecided again while the engine is still away

    def _container_spec(self, name: str, directory: Path, labels: dict[str, str],
                        role: str, image: str, slots: int) -> dict[str, Any]:
        cfg = self.config
        host_config = self.client.api.create_host_config(
            **confinement(cfg, slots),
            # Root with only these: the keeper and the checker run untrusted code as another
            # user, which can then neither signal nor trace them (runtime/contain.py).
            cap_add=TRUSTED_CAPABILITIES, init=True,
            binds={str(directory): {"bind": SOCKET_IN_CONTAINER, "mode": "rw"}},
            log_config=_log_config(cfg.sandbox_log_size),
        )
        all_labels = {**cfg.labels, **labels, MANAGED: "1", INSTANCE: self.instance, ROLE: role,
                      SOCKET_ROOT: str(cfg.socket_root), SANDBOX: name}
        return {"image": image, "name": f"envscaler-{self.instance}-{name}",
                "labels": all_labels,
                "host_config": host_config, "user": "0:0", "network_disabled": True,
                "command": _command(role, slots, cfg.sandbox_pids, parse_size(cfg.sandbox_memory))}

    async def create(self, labels: dict[str, str], role: str = RUNTIME,
                     image: str | None = None) -> SandboxHandle:
        return await self._create_container(labels, role, image, 1)

    async def create_runtimes(self, labels: dict[str, str], image: str | None = None,
                              count: int = 1) -> list[SandboxHandle]:
        slots = max(1, min(count, self.config.sandbox_slots))
        first = await self._create_container(labels, RUNTIME, image, slots)
        return [dataclasses.replace(first, slot=slot) for slot in range(slots)]

    async def _create_container(self, labels: dict[str, str], role: str, image: str | None,
                                slots: int) -> SandboxHandle:
        name = socketroot.new_sandbox_name()
        directory = socketroot.sandbox_dir(self.config.socket_root, self.instance, name)
        pending = SandboxHandle(id="", name=name, backend=self.name, instance=self.instance)
        secret = self.secret(pending)  # claims the root first, if ``start`` has not
        # World-writable while it starts: the keeper binds its sockets as the container's root,
        # which is another user than a gateway that does not run as root.
        socket_path = make_socket_dir(directory, 0o777)
        # Read and removed by the keeper (or checker) before any untrusted code runs in it.
        write_for_keeper(directory / SECRET_NAME, secret)
        image = image or self.config.sandbox_image
        compiles = role == RUNTIME and bool(self.config.sources)
        if compiles:
            compiled = self._compiled.get(image)
            if compiled is None:
                write_for_keeper(directory / SOURCES_NAME, self._sources_text)
            else:
                write_for_keeper(directory / COMPILED_NAME, compiled)
        # A worker thread cannot be cancelled: shielding it lets a cancelled create still learn
        # the id of the container the thread goes on to start, and remove it.
        starting = asyncio.ensure_future(
            self._engine(lambda: self._create_and_start(name, directory, labels, role, image,
                                                        slots), abandon=False))
        try:
            handle = SandboxHandle(id=await asyncio.shield(starting), name=name,
                                   backend=self.name, instance=self.instance)
            self._known[handle.id] = (handle.instance, handle.name)
            self._slots[handle.id] = slots
            await wait_for_runtime(str(socket_path), secret, self.config.start_timeout,
                                   lambda: None)
            if compiles and image not in self._compiled:
                self._keep_compiled(image, directory / COMPILED_NAME)
            # The runtime has bound its socket: from now on the directory is read-only to the
            # sandbox, so environment code cannot swap the socket for a link to another socket
            # (which the next gateway to attach would follow) nor fill the host's disk through it.
            await asyncio.to_thread(directory.chmod, 0o755)
            return handle
        except BaseException as exc:
            container_id = await _result_or_none(starting)
            # OSError: requests' connection errors (the engine is down) are OSErrors too
            failed = isinstance(exc, (DockerException, OSError, SandboxGone, TimeoutError))
            reason = await self._logs_tail(container_id) if container_id and failed else ""
            if container_id:
                await self._remove_now_or_later(container_id)
                self._forget(container_id)
            shutil.rmtree(directory, ignore_errors=True)
            if failed:
                raise SandboxUnavailable(f"sandbox did not start: {exc}\n{reason}".strip()) from exc
            raise

    def _keep_compiled(self, image: str, path: Path) -> None:
        """What this container's keeper compiled, for the next containers of ``image``: read
        once its runtimes answer, so before any untrusted code ran in it (its runtimes have
        loaded nothing yet; its keeper wrote the file before forking them)."""
        try:
            with path.open("rb") as compiled:
                data = compiled.read(MAX_COMPILED_BYTES + 1)
            path.unlink()
        except OSError:
            return  # nothing compiled (no sources compile), or already handed on
        if len(data) <= MAX_COMPILED_BYTES:
            self._compiled[image] = data

    def _create_and_start(self, name: str, directory: Path, labels: dict[str, str],
                          role: str, image: str, slots: int) -> str:
        spec = self._container_spec(name, directory, labels, role, image, slots)
        container = self.client.api.create_container(**spec)
        self.client.api.start(container["Id"])
        return container["Id"]

    async def _logs_tail(self, container_id: str) -> str:
        def tail() -> str:
            try:
                return self.client.api.logs(container_id, tail=20).decode(errors="replace")
            except ENGINE_ERRORS:
                return ""
        try:
            return await self._engine(tail)
        except EngineBusy:
            return ""

    def _remove(self, container_id: str) -> None:
        try:
            self.client.api.remove_container(container_id, force=True)
        except NotFound:
            pass
        except APIError as exc:
            if exc.status_code != 409:  # 409: removal already in progress
                raise

    async def destroy(self, handle: SandboxHandle) -> None:
        """Retire the handle's slot (its runtime killed, its socket refusing); remove the container
        with its last live slot, or when its keeper does not answer. A handle whose slot has been
        recycled since (another session's now) is left alone."""
        try:
            answer = await self._keeper(handle, "retire", generation=handle.generation)
        except RuntimeFault as exc:
            if exc.kind == "Stale":
                log.info("not retiring slot %d of sandbox %s: %s", handle.slot, handle.id[:12],
                         exc.message)
                return
            answer = None
        except SandboxError:
            answer = None
        if answer is None or answer.get("live") == 0:
            await self.destroy_container(handle)

    async def _keeper(self, handle: SandboxHandle, op: str, **fields: Any) -> dict[str, Any]:
        """The container's keeper's answer about the handle's slot, once the handle is known to
        name this service's container (``SandboxError`` when it is not, or is not running)."""
        if not await self._owned(handle):
            raise SandboxGone(f"sandbox {handle.id[:12]} is not this service's running container")
        control = RuntimeClient(str(self.directory(handle) / CONTROL_NAME), self.secret(handle))
        try:
            async with asyncio.timeout(KEEPER_TIMEOUT):
                return await control.request({"op": op, "slot": handle.slot, **fields})
        except TimeoutError:
            raise SandboxGone(f"the keeper of sandbox {handle.id[:12]} did not answer") from None
        finally:
            control.close()

    async def destroy_container(self, handle: SandboxHandle) -> None:
        """Remove the container now, or as soon as the engine answers again (never raises for
        an engine that is away: a destroy is on some error path already), and its directory.

        Only what provably is the handle's sandbox: a container carrying this service's labels
        for the handle's names, and its directory under this root; a directory whose container is
        gone only when nothing answers on its socket (a forged id must not take a live sandbox's
        directory). Anything else is left alone, and said so."""
        try:  # what this process created is known without the engine, and waits for it
            owned = await self._owned(handle)
        except SandboxUnavailable as exc:
            self._undecided[handle.id] = handle
            log.warning("not removing sandbox %s yet: the engine cannot tell whether it is this "
                        "service's (%s); will decide once it answers", handle.id[:12], exc)
            return
        directory = self.directory(handle)
        if owned is True:
            await self._remove_now_or_later(handle.id)
            self._forget(handle.id)
        elif owned is False:
            log.warning("refusing to remove container %s: it is not this service's sandbox %s/%s "
                        "(a forged or stale handle)", handle.id[:12], handle.instance, handle.name)
            return
        if owned is True or not await asyncio.to_thread(_answers, directory / SOCKET_NAME):
            shutil.rmtree(directory, ignore_errors=True)

    async def verify(self, handle: SandboxHandle) -> bool:
        return await self._owned(handle) is True

    def orphaned(self, handle: SandboxHandle) -> bool:
        return handle.instance != self.instance and not self.heartbeat.is_alive(handle.instance)

    def _forget(self, container_id: str) -> None:
        self._known.pop(container_id, None)
        self._slots.pop(container_id, None)

    async def _owned(self, handle: SandboxHandle) -> bool | None:
        """Whether ``handle.id`` is the container this service created for the handle's names
        (None: no container has that id). Raises ``SandboxUnavailable`` with no engine."""
        if self._known.get(handle.id) == (handle.instance, handle.name):
            return True
        if not CONTAINER_ID.fullmatch(handle.id):
            return False
        info = await self._inspect(handle.id)
        if info is None:
            return None
        labels = (info.get("Config") or {}).get("Labels") or {}
        owned = (info.get("Id") == handle.id and labels.get(MANAGED) == "1"
                 and labels.get(SOCKET_ROOT) == str(self.config.socket_root)
                 and labels.get(INSTANCE) == handle.instance and labels.get(SANDBOX) == handle.name)
        if owned:
            self._known[handle.id] = (handle.instance, handle.name)
        return owned

    async def _inspect(self, container_id: str) -> dict[str, Any] | None:
        def inspect() -> dict[str, Any] | None:
            try:
                return self.client.api.inspect_container(container_id)
            except NotFound:
                return None
            except ENGINE_ERRORS as exc:
                raise SandboxUnavailable(f"the Docker engine does not answer: {exc}") from exc
        try:
            return await self._engine(inspect)
        except EngineBusy as exc:
            raise SandboxUnavailable(str(exc)) from exc

    async def _remove_now_or_later(self, container_id: str) -> None:
        try:
            await self._engine(self._remove, container_id)
        except (*ENGINE_ERRORS, SandboxUnavailable) as exc:  # no engine, or no client of it
            self._unremoved.add(container_id)
            log.warning("removing sandbox %s failed (%s); will retry", container_id[:12], exc)

    async def name_session(self, handle: SandboxHandle, session_id: str | None) -> None:
        """Rename a container of one slot to end with the session id (or back to its pool name):
        Docker labels cannot change. A container of several sessions keeps its name."""
        if self._slots.get(handle.id) != 1:
            return
        name = f"envscaler-{handle.instance}-{handle.name}"
        if session_id is not None:
            name += f"-{session_id}"
        try:
            if await self._owned(handle):
                await self._engine(lambda: self.client.api.rename(handle.id, name))
        except (SandboxUnavailable, *ENGINE_ERRORS) as exc:  # gone, a name refused: cosmetic
            log.debug("renaming sandbox %s failed: %s", handle.id[:12], exc)

    async def is_running(self, handle: SandboxHandle) -> bool:
        """Whether the handle's runtime is there to serve it: the container runs, and the slot
        has a runtime of the handle's generation."""
        if not await self._owned(handle):
            return False
        info = await self._inspect(handle.id)
        if not (info and info["State"].get("Running")):
            return False
        try:
            status = await self._keeper(handle, "status")
        except SandboxError:
            return False
        return status["generation"] == handle.generation and status["runtime_pid"] != 0

    async def diagnose(self, handle: SandboxHandle) -> str:
        """Why the slot's runtime died, as its keeper saw it; else why the container stopped
        (docker-init as PID 1 stops it a moment after the keeper)."""
        try:
            owned = await self._owned(handle)
        except SandboxUnavailable:
            return "the Docker engine does not answer"
        if owned is None:
            return "container is gone"
        if not owned:
            return "not a sandbox of this service"
        ended = await self._slot_ended(handle)
        if ended is not None:
            return ended

        def settled_state() -> dict[str, Any] | None:
            try:
                self.client.api.wait(handle.id, timeout=DIAGNOSE_WAIT)
            except (ConnectionError, *ENGINE_ERRORS):
                pass
            try:
                return self.client.api.inspect_container(handle.id)["State"]
            except NotFound:
                return None
            except ENGINE_ERRORS:
                return {"EngineAway": True}

        try:
            state = await self._engine(settled_state)
        except EngineBusy:
            state = {"EngineAway": True}
        if state is None:
            return "container is gone"
        if state.get("EngineAway"):
            return "the Docker engine does not answer"
        if state.get("OOMKilled"):
            return f"killed: out of memory (limit {self._memory_limit(handle)})"
        if not state.get("Running"):
            return f"container exited with status {state.get('ExitCode')}"
        return ""

    async def _slot_ended(self, handle: SandboxHandle) -> str | None:
        """Why the slot's runtime ended, as its keeper saw it ("" while it runs); None when the
        keeper does not answer (the container is stopping, or gone)."""
        try:
            ended: str = (await self._keeper(handle, "status"))["ended"]
        except SandboxError:
            return None
        if ended.startswith("killed: out of memory"):
            return f"{ended} (limit {self._memory_limit(handle)})"
        return ended

    def _memory_limit(self, handle: SandboxHandle) -> str:
        slots = self._slots.get(handle.id, 1)
        if slots == 1:
            return self.config.sandbox_memory
        return (f"{self.config.sandbox_memory} per session, "
                f"{parse_size(self.config.sandbox_memory) * slots // 2**20}m for the {slots} "
                "sessions of its container")

    async def _list(self, *label_filters: str) -> list[dict[str, Any]]:
        filters = {"label": [f"{MANAGED}=1", f"{SOCKET_ROOT}={self.config.socket_root}",
                             *label_filters]}
        try:
            return await self._engine(lambda: self.client.api.containers(all=True, filters=filters))
        except ENGINE_ERRORS as exc:
            raise SandboxUnavailable(f"the Docker engine does not answer: {exc}") from exc

    def _handles(self, containers: list[dict[str, Any]]) -> list[SandboxHandle]:
        """Handles of listed containers whose labels name a sandbox directory under this root
        (labels are data too: names that could leave the root are skipped)."""
        handles = []
        for container in containers:
            labels = container.get("Labels") or {}
            instance, name = labels.get(INSTANCE), labels.get(SANDBOX)
            if socketroot.valid_instance(instance) and socketroot.valid_sandbox(name):
                handles.append(SandboxHandle(id=container["Id"], name=name, backend=self.name,
                                             instance=instance))
        return handles

    async def list_own(self) -> list[SandboxHandle]:
        return self._handles(await self._list(f"{INSTANCE}={self.instance}"))

    async def reap_orphans(self) -> int:
        containers = await self._list()
        existing = {container["Id"] for container in containers}
        for container_id in [known for known in self._known if known not in existing]:
            self._known.pop(container_id, None)  # removed elsewhere (another gateway's doing)
        dead = [handle for handle in self._handles(containers) if handle.instance != self.instance
                and not self.heartbeat.is_alive(handle.instance)]
        for handle in dead:
            await self.destroy_container(handle)
        self._remove_dead_socket_dirs()
        return len(dead)

    def _remove_dead_socket_dirs(self) -> None:
        """Directories of dead instances: only those provably the service's (``socketroot``)."""
        for directory in socketroot.owned_instance_dirs(self.config.socket_root):
            if directory.name != self.instance and not self.heartbeat.is_alive(directory.name):
                shutil.rmtree(directory, ignore_errors=True)

    async def health(self) -> dict[str, object]:
        """The engine answers, the image exists and the socket root takes new sandboxes: what
        creating a sandbox needs (each a reason for 503 on /readyz, named)."""
        self.heartbeat.check()

        def probe() -> dict[str, Any]:
            info = self.client.version()
            try:
                self.client.api.inspect_image(self.config.sandbox_image)
            except NotFound:
                raise SandboxUnavailable(f"the sandbox image {self.config.sandbox_image} does not "
                                         "exist "
                                         "in the engine; build it with `envscaler sandbox build`"
                                         ) from None
            directory = self.config.socket_root / self.instance
            if not os.access(directory if directory.exists() else self.config.socket_root,
                             os.W_OK | os.X_OK):
                raise SandboxUnavailable(f"the socket root {directory} is not writable")
            return info

        try:
            info = await self._engine(probe)
        except EngineBusy as exc:
            raise SandboxUnavailable(str(exc)) from exc
        return {"backend": self.name, "isolation": self.isolation, "engine": info.get("Version"),
                "image": self.config.sandbox_image,
                "runtime": self.config.sandbox_runtime or "runc",
                "slots": self.config.sandbox_slots}

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        if not self.claimed:
            return  # it never started: nothing of its exists, and the root may be another's
        try:
            await self._retry_removals()
            for handle in await self.list_own():
                await self.destroy_container(handle)
        except SandboxUnavailable as exc:  # other instances reap what is left once it is back
            log.warning("could not remove this instance's sandboxes: %s", exc)
        shutil.rmtree(self.config.socket_root / self.instance, ignore_errors=True)
        await self.heartbeat.stop()


def confinement(cfg: SandboxConfig, slots: int = 1) -> dict[str, Any]:
    """What holds every container that runs untrusted code (keyword arguments of the Docker SDK's
    ``create_host_config`` and ``containers.create`` alike): no network, a read-only root, no
    capabilities, no privilege gain, no shared IPC, and the sandboxes' memory, CPU, process and
    ``/tmp`` limits and runtime. A container of ``slots`` sessions gets their sum of memory,
    processes and ``/tmp`` (each slot's processes are held by its own limit too) and the CPU of
    one: a session's calls are short, and the machine has far fewer cores than sessions."""
    memory = parse_size(cfg.sandbox_memory) * slots
    return {"network_mode": "none", "read_only": True, "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"], "ipc_mode": "none",
            "mem_limit": memory, "memswap_limit": memory,
            "nano_cpus": int(cfg.sandbox_cpus * 1e9),
            "pids_limit": cfg.sandbox_pids * slots + KEEPER_PROCESSES,
            "runtime": cfg.sandbox_runtime,
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={parse_size(cfg.sandbox_tmpfs) * slots}"}}


def _log_config(log_size: str) -> dict[str, Any]:
    """What a sandbox writes to stdout and stderr stays on the host's disk (the engine's
    json-file) capped at ``log_size``: two files of half of it, the older dropped as the newer
    fills, so the last lines are there for diagnostics (``_logs_tail``) however much environment
    code writes. (Docker's default keeps all of it: a thread writing to stderr filled the disk.)"""
    half = max(1, parse_size(log_size) // 2)
    return {"Type": "json-file", "Config": {"max-size": str(half), "max-file": "2"}}


def _answers(socket_path: Path) -> bool:
    """Whether something listens on ``socket_path`` (a live sandbox's directory is not removed
    on the word of a handle whose container is gone)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(socket_path))
        except OSError:
            return False
    return True


def _command(role: str, slots: int, processes: int, memory: int) -> list[str]:
    """``slots`` runtimes under their keeper (so they can be recycled), each with at most
    ``processes`` processes and ``memory`` bytes, or a checker."""
    command = ["python3", "-s", "-m", "envscaler.sandbox.runtime", "--role", role,
               "--socket", f"{SOCKET_IN_CONTAINER}/{SOCKET_NAME}",
               "--secret-file", f"{SOCKET_IN_CONTAINER}/{SECRET_NAME}"]
    if role == RUNTIME:
        command += ["--control", f"{SOCKET_IN_CONTAINER}/{CONTROL_NAME}",
                    "--sources-file", f"{SOCKET_IN_CONTAINER}/{SOURCES_NAME}",
                    "--compiled-file", f"{SOCKET_IN_CONTAINER}/{COMPILED_NAME}", "--slots", str(slots),
                    "--uid-base", str(SLOT_UIDS[secrets.randbelow(len(SLOT_UIDS))]),
                    "--processes", str(processes), "--memory", str(memory)]
    return command


def _ignore_outcome(future: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of an engine call given up on, so that none is logged as lost."""
    if not future.cancelled():
        future.exception()


async def _result_or_none(task: asyncio.Future[str]) -> str | None:
    try:
        return await task
    except Exception:  # noqa: BLE001 - no container: the engine failed (requests' errors are
        return None  # OSErrors), or there was no client to ask (SandboxUnavailable)
