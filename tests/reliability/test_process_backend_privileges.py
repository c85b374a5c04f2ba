"""The process backend's environment code runs as user nobody with a scrubbed environment: it
cannot read the gateway's API keys (its own environment, the gateway's ``/proc/<pid>/environ``)
nor join the ``SO_REUSEPORT`` group of the gateway's port to take its connections.

A stand-in gateway process (started, like ``envscaler serve``, with ``ENVSCALER_API_KEYS`` in its
environment, and listening on a port with ``SO_REUSEPORT`` as its workers do) creates a process
sandbox and loads an environment that tries each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT, new_instance
from tests.deadlines import scaled

ADMIN_KEY = "admin-key-that-must-not-leak"

SPY_SOURCE = '''
import os
import socket


class Spy:
    def __init__(self, init_config: dict):
        self.port = init_config["port"]

    def probe(self) -> dict:
        found = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
                 "environ": dict(os.environ)}
        try:
            with open(f"/proc/{os.getppid()}/environ", "rb") as parent:
                found["parent_environ"] = parent.read().decode(errors="replace")
        except OSError as exc:
            found["parent_environ"] = f"refused: {exc.strerror}"
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            listener.bind(("127.0.0.1", self.port))
            listener.listen(1)
            found["bound_gateway_port"] = True
        except OSError as exc:
            found["bound_gateway_port"] = f"refused: {exc.strerror}"
        finally:
            listener.close()
        return {"success": True, "data": found}
'''

GATEWAY_SCRIPT = """
import asyncio, json, sys
from pathlib import Path
from envscaler.sandbox.backends.process import ProcessBackend
from envscaler.sandbox.config import SandboxConfig
from envscaler.sandbox.sandbox import Sandbox
from envscaler.server.workers import listening_socket

async def main():
    gateway_port = listening_socket("127.0.0.1", 0)
    gateway_port.listen(8)
    port = gateway_port.getsockname()[1]
    backend = ProcessBackend(SandboxConfig(sandbox_backend="process",
                                           socket_root=Path(sys.argv[1])), sys.argv[2])
    try:
        sandbox = Sandbox(await backend.create({}), backend)
        await sandbox.load(source=sys.argv[3], class_name="Spy", tools=["probe"],
                           init_config={"port": port}, seed=0, max_result_bytes=1 << 20,
                           timeout=float(sys.argv[4]))
        print(json.dumps(await sandbox.call("probe", {}, timeout=float(sys.argv[4]))), flush=True)
    finally:
        await backend.close()

asyncio.run(main())
"""


def test_environment_code_can_neither_read_the_api_keys_nor_take_the_gateways_port(
        socket_root: Path) -> None:
    environment = {**os.environ, "ENVSCALER_API_KEYS": ADMIN_KEY}
    gateway = subprocess.run(
        [sys.executable, "-c", GATEWAY_SCRIPT, str(socket_root), new_instance(), SPY_SOURCE,
         str(scaled(10))],
        cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=scaled(60))
    assert gateway.returncode == 0, gateway.stderr
    found = json.loads(gateway.stdout)["data"]
    assert (found["uid"], found["gid"], found["groups"]) == (65534, 65534, [])
    assert set(found["environ"]) <= {"PYTHONHASHSEED", "TZ", "MALLOC_ARENA_MAX", "PATH",
                                     "LC_CTYPE"}, found["environ"]
    assert found["parent_environ"] == "refused: Permission denied"
    assert found["bound_gateway_port"] == "refused: Address already in use"
    assert ADMIN_KEY not in gateway.stdout
