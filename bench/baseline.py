"""The baselines a gateway call is compared with, for the same environment and call:

- ``in_process``: the way the paper's code runs tools — ``exec`` of the class source, an instance
  built from ``init_config`` (its top-level keys set as attributes), a direct method call. Generated
  code never runs in the gateway's or the benchmark's own process (project rule), so this runs in
  a throwaway container of the sandbox image (``docker run --rm``, no network, read-only root, all
  capabilities dropped, user 65534), started only for this, which times its own loop with
  ``perf_counter_ns``: the same interpreter as the sandbox runtime's, so the ratio compares like
  with like.
- ``runtime``: one round trip from this process to a sandbox runtime over its Unix socket (what the
  gateway does once per call), on a sandbox this process starts and removes.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.stats import summary
from bench.workload import Probe
from envformat.loader import EnvPackage
from sandbox.backends.docker import DockerBackend
from sandbox.config import SandboxConfig
from sandbox.sandbox import Sandbox

# Runs inside the throwaway container, on the standard library only.
IN_PROCESS = r"""
import json, sys, time
job = json.load(sys.stdin)
namespace = {"__name__": "envscaler_env"}
exec(compile(job["source"], "env.py", "exec"), namespace)
cls = namespace[job["class_name"]]
env = cls(job["init_config"])
for key, value in job["init_config"].items():
    setattr(env, key, value)
method, arguments = getattr(env, job["tool"]), job["arguments"]
for _ in range(min(1000, job["calls"])):
    method(**arguments)
samples = []
clock = time.perf_counter_ns
for _ in range(job["calls"]):
    started = clock()
    method(**arguments)
    samples.append(clock() - started)
json.dump({"ns": samples, "result": method(**arguments)}, sys.stdout, default=str)
"""


def in_process(image: str, env: EnvPackage, probe: Probe, calls: int, label: str) -> dict[str, Any]:
    scenario = env.scenario(probe.scenario)
    assert scenario is not None
    job = {"source": env.source, "class_name": env.manifest.class_name,
           "init_config": scenario.init_config, "tool": probe.tool, "arguments": probe.arguments,
           "calls": calls}
    command = ["docker", "run", "--rm", "-i", "--network", "none", "--read-only",
               "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "65534:65534",
               "--memory", "256m", "--pids-limit", "64", "--label", label,
               "--entrypoint", "python3", image, "-I", "-S", "-c", IN_PROCESS]
    done = subprocess.run(command, input=json.dumps(job), capture_output=True, text=True,
                          timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the in-process baseline failed: {done.stderr[-2000:]}")
    reply = json.loads(done.stdout)
    return {"how": "exec of the class + direct method call, in a throwaway container",
            **summary([ns / 1e9 for ns in reply["ns"]]),
            "result_ok": isinstance(reply["result"], dict) and reply["result"].get("success") is True}


async def runtime_round_trip(image: str, env: EnvPackage, probe: Probe, calls: int,
                             socket_root: Path, labels: dict[str, str]) -> dict[str, Any]:
    scenario = env.scenario(probe.scenario)
    assert scenario is not None
    config = SandboxConfig(image=image, socket_root=socket_root, pool_size=0, labels=labels)
    backend = DockerBackend(config, f"bench-{secrets.token_hex(3)}")
    await backend.start()
    sandbox = Sandbox(await backend.create({}), backend)
    try:
        await sandbox.load(source=env.source, class_name=env.manifest.class_name,
                           tools=env.tool_names, init_config=scenario.init_config, seed=0,
                           max_result_bytes=1 << 20, timeout=10)
        for _ in range(min(200, calls)):
            await sandbox.call(probe.tool, probe.arguments, timeout=5)
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            await sandbox.call(probe.tool, probe.arguments, timeout=5)
            samples.append(time.perf_counter() - started)
    finally:
        await sandbox.destroy()
        await backend.close()
    return {"how": "Sandbox.call from this process over the runtime's Unix socket", **summary(samples)}
