"""Shared pieces of the gateway tests: a catalogue, settings, in-process and subprocess gateways.

Everything is real: the Redis is the suite's redis-server (tests/conftest.py), sandboxes are real
runtimes, and every gateway test runs on each backend of ``ENVSCALER_TEST_SANDBOX_BACKENDS``
(default ``docker,process``); environment code only ever runs inside them, never in the test
process.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis as redis_sync

from envscaler.server.app import create_app
from envscaler.server.settings import Settings
from tests.conftest import TEST_LABELS
from envscaler.server.store import session_key
from tests.deadlines import scaled

__all__ = ["backend_kwargs", "catalogue_root", "make_settings", "redis_client"]  # the fixtures

REPO_ROOT = Path(__file__).resolve().parents[2]
BACKENDS = os.environ.get("ENVSCALER_TEST_SANDBOX_BACKENDS", "docker,process").split(",")
BACKEND = BACKENDS[0]  # for tests that run once, e.g. the fuzz run
WORK_DEADLINES = ("call_timeout", "load_timeout", "docker_timeout", "redis_timeout")
LIBRARY = "library_loans"
COUNTER = "counter_lab"

COUNTER_SOURCE = '''\
import os
import random
import time
import uuid
from typing import Dict, List


class CounterLab:
    def __init__(self, init_config: dict):
        # Named counters.
        self.counters: Dict[str, int] = {}
        # What happened, in order.
        self.history: List[str] = []
        self.init_config = init_config

    def increment(self, name: str, by: int = 1) -> dict:
        """Add to a named counter.

        Args:
            name (str): The counter.
            by (int): How much to add.

        Returns:
            dict: {"success": True, "data": {"name", "before", "value"}}.
        """
        before = self.counters.get(name, 0)
        self.counters[name] = before + by
        self.history.append(f"{name}:{before}->{before + by}")
        return {"success": True, "data": {"name": name, "before": before, "value": before + by}}

    def nap(self, seconds: float) -> dict:
        """Sleep for real, then note it.

        Args:
            seconds (float): How long to sleep.

        Returns:
            dict: {"success": True, "data": seconds}.
        """
        time.sleep(seconds)
        self.history.append(f"nap:{seconds}")
        return {"success": True, "data": seconds}

    def token(self) -> dict:
        """A fresh id, a random number and the time, from the sandbox's seeded sources.

        Returns:
            dict: {"success": True, "data": {"uuid", "random", "time"}}.
        """
        value = {"uuid": uuid.uuid4().hex, "random": random.random(), "time": time.time()}
        self.history.append("token:" + value["uuid"])
        return {"success": True, "data": value}

    def spin(self) -> dict:
        """Never return.

        Returns:
            dict: nothing, ever.
        """
        self.history.append("spin")
        while True:
            pass

    def explode(self, message: str) -> dict:
        """Note the call, then raise.

        Args:
            message (str): The error message.

        Returns:
            dict: nothing; it raises ValueError.
        """
        self.history.append("explode:" + message)
        raise ValueError(message)

    def crash(self) -> dict:
        """End the sandbox's process at once.

        Returns:
            dict: nothing; the process exits.
        """
        os._exit(3)

    def blob(self, size: int) -> dict:
        """A long string.

        Args:
            size (int): Its length.

        Returns:
            dict: {"success": True, "data": "xxx..."}.
        """
        self.history.append(f"blob:{size}")
        return {"success": True, "data": "x" * size}
'''

COUNTER_MANIFEST = {
    "id": COUNTER,
    "class_name": "CounterLab",
    "summary": "Named counters, for gateway tests.",
    "introduction": "A tiny environment whose tools count, sleep, draw random values, loop, "
    "raise and crash.",
    "state_space": [
        {"entity": "Counter", "attributes": "name, value", "description": "A named integer."}
    ],
    "constraint_rules": [],
    "operations": [
        {"name": n, "description": n, "type": t}
        for n, t in [
            ("increment", "state_change"),
            ("nap", "state_change"),
            ("token", "state_change"),
            ("spin", "query"),
            ("explode", "state_change"),
            ("crash", "query"),
            ("blob", "state_change"),
        ]
    ],
    "tools": [],
    "provenance": {
        "model": "hand-written",
        "created": "2025-01-01",
        "pipeline_version": "test",
        "content_hash": "sha256:" + "0" * 64,
    },
}


def _check(body: str) -> str:
    return "def check_func(final_state):\n    " + body + "\n"


COUNTER_SCENARIOS = [
    {
        "id": "counter-1",
        "split": "rl",
        "task": "Bring counter a to 3 and create counter b.",
        "init_config": {"counters": {"a": 1}},
        "checklist": [
            {
                "item": "Has counter a reached 3?",
                "check_func": _check("return final_state['counters'].get('a') == 3"),
            },
            {
                "item": "Has counter b been created?",
                "check_func": _check("return 'b' in final_state['counters']"),
            },
        ],
        "solution": [
            {"name": "increment", "arguments": {"name": "a", "by": 2}},
            {"name": "increment", "arguments": {"name": "b"}},
        ],
    },
    {
        "id": "counter-2",
        "split": "eval",
        "task": "Bring counter z to 11.",
        "init_config": {"counters": {"z": 10}},
        "checklist": [
            {
                "item": "Has counter z reached 11?",
                "check_func": _check("return final_state['counters'].get('z') == 11"),
            }
        ],
        "solution": [{"name": "increment", "arguments": {"name": "z"}}],
    },
]


def build_catalogue(root: Path) -> Path:
    """A catalogue with the real ``library_loans`` and the test environment ``counter_lab``."""
    from envscaler.format import load_env, sync_manifest

    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO_ROOT / "generated_envs" / LIBRARY, root / LIBRARY)
    env_dir = root / COUNTER
    env_dir.mkdir()
    (env_dir / "env.py").write_text(COUNTER_SOURCE)
    (env_dir / "env.json").write_text(json.dumps(COUNTER_MANIFEST, indent=2))
    (env_dir / "scenarios.jsonl").write_text(
        "".join(json.dumps(s) + "\n" for s in COUNTER_SCENARIOS)
    )
    sync_manifest(env_dir)  # derives the tool schemas statically (AST); nothing is executed
    load_env(env_dir, strict=True)  # fails loudly here if the test environment breaks the format
    return root


@pytest.fixture(scope="session")
def catalogue_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_catalogue(tmp_path_factory.mktemp("catalogue") / "envs")


@pytest.fixture(params=BACKENDS)
def backend_kwargs(request: pytest.FixtureRequest, socket_root: Path) -> dict[str, Any]:
    """Settings of the sandbox backend under test."""
    if request.param == "docker":
        return {
            "sandbox_backend": "docker",
            "sandbox_image": request.getfixturevalue("sandbox_image"),
            "socket_root": socket_root,
        }
    return {"sandbox_backend": "process", "socket_root": socket_root}


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis_sync.Redis]:
    """A synchronous client of the suite's Redis, emptied first so tests do not see each other."""
    client = redis_sync.Redis.from_url(redis_url, decode_responses=True)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def make_settings(
    redis_url: str,
    redis_client: redis_sync.Redis,
    catalogue_root: Path,
    backend_kwargs: dict[str, Any],
):  # type: ignore[no-untyped-def]
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "redis_url": redis_url,
            "catalogue": catalogue_root,
            "pool_size": 1,
            "max_sandboxes": 32,
            "api_keys": [],
            "log_level": "WARNING",
            **backend_kwargs,
        }
        values.update(overrides)
        # The deadlines of the gateway's own work follow the machine like the tests' (a tool
        # call that takes 1 s when quiet must not hit a 5 s deadline at a load of 10).
        for name in WORK_DEADLINES:
            values[name] = scaled(values.get(name, Settings.model_fields[name].default))
        return Settings(**values)

    return make


@asynccontextmanager
async def running_gateway(
    settings: Settings, labels: dict[str, str] | None = None, token: str | None = None
) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    """The app in this process (lifespan run by hand), with an ASGI client."""
    app = create_app(settings, sandbox_labels=labels if labels is not None else TEST_LABELS)
    async with app.router.lifespan_context(app):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost", headers=headers, timeout=60
        ) as client:
            yield app, client


def session_record(redis_client: redis_sync.Redis, session_id: str) -> dict[str, str]:
    return redis_client.hgetall(session_key(session_id))


def sandbox_handle(redis_client: redis_sync.Redis, session_id: str) -> dict[str, str]:
    raw = session_record(redis_client, session_id).get("sandbox")
    assert raw, f"session {session_id} has no sandbox"
    return json.loads(raw)


def sandbox_alive(handle: dict[str, Any], socket_root: Path) -> bool:
    """Whether the handle's runtime lives: its process, or its container slot's processes."""
    if handle["backend"] == "docker":
        from docker.errors import APIError

        try:
            return bool(slot_processes(handle))
        except APIError:  # the container is gone, or stopped
            return False
    pid_file = socket_root / handle["instance"] / handle["id"] / "runtime.pid"
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status").read_text()
    return "State:\tZ" not in status


def sandbox_released(handle: dict[str, str], socket_root: Path, wait: float = 5.0) -> bool:
    """Whether the session's sandbox no longer holds anything of it: gone, or (Docker) recycled
    in the background into a fresh runtime with nothing loaded."""
    from envscaler.sandbox.runtime import protocol

    deadline = time.monotonic() + scaled(wait)
    while True:
        if not sandbox_alive(handle, socket_root):
            return True
        try:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(1.0)
                sock.connect(str(socket_root / handle["instance"] / handle["name"]
                                 / protocol.runtime_socket_name(handle.get("slot", 0))))
                protocol.send_message(sock, {"op": "ping"})
                reply = protocol.recv_message(sock)
            if reply and reply["ok"] and reply["result"]["loaded"] is False:
                return True
        except OSError:
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def kill_sandbox(handle: dict[str, Any], socket_root: Path) -> None:
    """Kill a session's sandbox from outside, as a crash or an operator would (no clean-up): its
    process (the process backend), or every process of its slot's user (a container's slot: the
    container and its other slots live on)."""
    if handle["backend"] == "docker":
        for pid in slot_processes(handle):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return
    pid = int((socket_root / handle["instance"] / handle["id"] / "runtime.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + scaled(5)
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            if "State:\tZ" in Path(f"/proc/{pid}/status").read_text():
                return  # dead; its parent has not reaped it yet
        except (ProcessLookupError, FileNotFoundError):
            return
        time.sleep(0.01)
    raise AssertionError(f"sandbox process {pid} survived SIGKILL")


def runtime_of(handle: dict[str, Any]) -> tuple[str, int, int]:
    """What tells one runtime from another: its container, its slot in it, and the slot's
    generation (a recycled slot runs a fresh runtime)."""
    return handle["id"], handle.get("slot", 0), handle.get("generation", 0)


def slot_processes(handle: dict[str, Any]) -> list[int]:
    """The host's ids of the processes of a container slot's user (``--uid-base`` plus the slot,
    from the keeper's command line): found in ``/proc`` by their cgroup, at once (a session's idle
    TTL may be a second); through the engine where the host cannot see them (gVisor)."""
    members = [pid for pid in _host_pids() if handle["id"] in _read(f"/proc/{pid}/cgroup")]
    commands = {pid: _read(f"/proc/{pid}/cmdline").split("\0") for pid in members}
    bases = [int(args[args.index("--uid-base") + 1]) for args in commands.values()
             if "--uid-base" in args]
    if bases:
        uid = bases[0] + handle.get("slot", 0)
        return [pid for pid in members if _uid(pid) == uid]
    import docker

    container = docker.from_env().containers.get(handle["id"])
    command = container.attrs["Config"]["Cmd"]
    uid = int(command[command.index("--uid-base") + 1]) + handle.get("slot", 0)
    listed = container.top(ps_args="-eo pid,uid")
    return [int(pid) for pid, user in listed["Processes"] if int(user) == uid]


def _host_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _uid(pid: int) -> int | None:
    for line in _read(f"/proc/{pid}/status").splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


LAUNCHER = """
import json, os, uvicorn
from tests.conftest import TEST_LABELS
from envscaler.server.app import create_app
from envscaler.server.http import server_options
from envscaler.server.settings import Settings
labels = json.loads(os.environ.get("ENVSCALER_TEST_LABELS", "{}"))
settings = Settings()
uvicorn.run(create_app(settings, sandbox_labels=labels), host="127.0.0.1",
            port=int(os.environ["ENVSCALER_TEST_PORT"]), log_level="warning",
            **server_options(settings))
"""


class ChildProcess:
    """A service under test in a process of its own: ``process`` once started."""

    process: subprocess.Popen[bytes] | None = None

    def kill(self) -> None:
        """SIGKILL: no shutdown, no clean-up, as when a machine or container dies."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(scaled(10))

    def stop(self) -> None:
        """SIGTERM, and SIGKILL after 20 s (on a quiet machine)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(scaled(20))
            except subprocess.TimeoutExpired:
                self.kill()


class GatewayProcess(ChildProcess):
    """A gateway in its own process (uvicorn), for restarts and several gateways on one Redis."""

    def __init__(self, settings: Settings, labels: dict[str, str], log_path: Path) -> None:
        self.backend = settings.sandbox_backend
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.env = {
            **os.environ,
            "ENVSCALER_TEST_PORT": str(self.port),
            "ENVSCALER_TEST_LABELS": json.dumps(labels),
        }
        for name, value in settings.model_dump().items():
            if value is None:
                continue
            key = f"ENVSCALER_{name.upper()}"
            self.env[key] = ",".join(value) if isinstance(value, list) else str(value)
        self.process: subprocess.Popen[bytes] | None = None
        self.instances: list[str] = []  # one per start: each process is a new service instance

    def start(self, timeout: float = 30.0) -> GatewayProcess:
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER], cwd=REPO_ROOT, env=self.env, stdout=log, stderr=log
        )
        log.close()
        deadline = time.monotonic() + scaled(timeout)
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"gateway exited with {self.process.returncode}: "
                    f"{self.log_path.read_text()[-3000:]}"
                )
            try:
                if httpx.get(self.url + "/readyz", timeout=scaled(1)).status_code == 200:
                    self.instances.append(
                        httpx.get(self.url + "/healthz", timeout=scaled(1)).json()["instance"]
                    )
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.kill()
        raise AssertionError(
            f"gateway not ready in {scaled(timeout):g} s: {self.log_path.read_text()[-3000:]}"
        )

    def remove_sandboxes(self, socket_root: Path) -> None:
        """Remove what killed instances left (other gateways would reap it, but later)."""
        for instance in self.instances:
            if self.backend == "docker":
                import docker

                client = docker.from_env()
                from docker.errors import APIError, NotFound

                for container in client.api.containers(
                    all=True, filters={"label": f"envscaler.instance={instance}"}
                ):
                    try:
                        client.api.remove_container(container["Id"], force=True)
                    except NotFound:
                        pass
                    except APIError as exc:  # 409: its gateway is removing it right now
                        if exc.status_code != 409:
                            raise
            for pid_file in (socket_root / instance).glob("*/runtime.pid"):
                try:
                    pid = int(pid_file.read_text())
                    if str(pid_file.parent).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                        os.killpg(
                            pid, signal.SIGKILL
                        )  # only a runtime of that sandbox, never a reused pid
                except (OSError, ValueError):
                    pass
            shutil.rmtree(socket_root / instance, ignore_errors=True)

    def client(self, token: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=scaled(60))


def own_redis_db(redis_url: str, db: int) -> str:
    """The suite's Redis at database ``db``, emptied: for a module's gateway of its own."""
    url = redis_url.rsplit("/", 1)[0] + f"/{db}"
    redis_sync.Redis.from_url(url).flushdb()
    return url


@contextmanager
def gateway_process(settings: Settings, log_path: Path) -> Iterator[GatewayProcess]:
    """A gateway process while the block runs; stopped and its sandboxes removed however it
    ends."""
    process = GatewayProcess(settings, TEST_LABELS, log_path).start()
    try:
        yield process
    finally:
        process.stop()
        process.remove_sandboxes(settings.socket_root)
