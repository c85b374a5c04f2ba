"""The baselines a gateway call is compared with, for the same environment and call:

- ``in_process``: the way the paper's code runs tools — ``exec`` of the class source, an instance
  built from ``init_config`` (its top-level keys set as attributes), a direct method call. Generated
  code never runs in the gateway's or the benchmark's own process (project rule), so this runs in
  a throwaway container of the sandbox image (``docker run --rm``, no network, read-only root, all
  capabilities dropped, user 65534), started only for this, which times its own loop with
  ``perf_counter_ns``: the same interpreter as the sandbox runtime's, so the ratio compares like
  with like.
- ``in_process_episodes``: whole episodes the paper's way, in such a container limited to one core:
  the class source executed, an instance built from ``init_config``, the reference solution's
  calls made directly, then each check function executed with a global ``initial_state`` and
  called on the final state (EnvScaler semantics). Under the sandbox runtime's virtual clock and
  seeding (its ``determinism`` module, in the image), as through the gateway: the reference
  solutions were verified at its instant, and on the real clock most of them score below 1.0
  (dates decide fees, due dates, availability), which would make the two sides do different work.
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

from envscaler.bench.stats import summary
from envscaler.bench.workload import Probe
from envscaler.format.loader import EnvPackage
from envscaler.sandbox.backends.docker import DockerBackend
from envscaler.sandbox.config import SandboxConfig
from envscaler.sandbox.sandbox import Sandbox

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


# Runs inside the throwaway container, on the standard library only. The module goes into
# sys.modules as the sandbox runtime does it: dataclasses look their class's module up there.
IN_PROCESS_EPISODES = r"""
import copy, json, os, sys, time, types
clock = time.perf_counter_ns  # bound before the virtual clock replaces it
job = json.load(sys.stdin)
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # what the environments print goes to stderr; stdout carries the result
sys.path.insert(0, "/opt/envscaler")
from envscaler.sandbox.runtime.determinism import DEFAULT_START, install, parse_instant
determinism, start = install(), parse_instant(DEFAULT_START)

def public(env):
    return {k: v for k, v in vars(env).items() if not k.startswith("_")}

def episode(e):
    determinism.reseed(0, start)
    module = types.ModuleType("envscaler_env")
    sys.modules["envscaler_env"] = module
    exec(compile(e["source"], "env.py", "exec"), module.__dict__)
    config = copy.deepcopy(e["init_config"])
    env = getattr(module, e["class_name"])(config)
    for key, value in config.items():
        setattr(env, key, value)
    initial = copy.deepcopy(public(env))
    for call in e["solution"]:
        determinism.clock.advance_call()
        try:
            getattr(env, call["name"])(**call["arguments"])
        except Exception:
            pass
    final = copy.deepcopy(public(env))
    passed = 0
    for source in e["checks"]:
        namespace = {"__name__": "envscaler_check", "initial_state": initial}
        try:
            exec(compile(source, "check.py", "exec"), namespace)
            passed += namespace["check_func"](final) is True
        except Exception:
            pass
    return passed / len(e["checks"])

rewards = {e["scenario"]: episode(e) for e in job["episodes"]}  # warm-up, and the rewards
samples = []
began = clock()
while not samples or clock() - began < job["seconds"] * 1e9:
    for e in job["episodes"]:
        started = clock()
        episode(e)
        samples.append(clock() - started)
json.dump({"ns": samples, "wall_ns": clock() - began, "rewards": rewards}, out)
"""


def _throwaway(image: str, script: str, job: dict[str, Any], label: str,
               extra: tuple[str, ...] = ()) -> Any:
    """``script`` run on ``job`` (stdin, JSON) in a locked-down container of the sandbox image that
    exists only for this; its stdout, decoded."""
    command = ["docker", "run", "--rm", "-i", "--network", "none", "--read-only",
               "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "65534:65534",
               "--memory", "256m", "--pids-limit", "64", "--label", label, *extra,
               "--entrypoint", "python3", image, "-I", "-S", "-c", script]
    done = subprocess.run(command, input=json.dumps(job), capture_output=True, text=True,
                          timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the in-process baseline failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def in_process(image: str, env: EnvPackage, probe: Probe, calls: int, label: str) -> dict[str, Any]:
    scenario = env.scenario(probe.scenario)
    assert scenario is not None
    job = {"source": env.source, "class_name": env.manifest.class_name,
           "init_config": env.initial_config(scenario), "tool": probe.tool,
           "arguments": probe.arguments, "calls": calls}
    reply = _throwaway(image, IN_PROCESS, job, label)
    return {"how": "exec of the class + direct method call, in a throwaway container",
            **summary([ns / 1e9 for ns in reply["ns"]]),
            "result_ok": isinstance(reply["result"], dict) and reply["result"].get("success") is True}


def in_process_episodes(image: str, envs: dict[str, EnvPackage], seconds: float,
                        label: str) -> dict[str, Any]:
    """Every scenario with a solution and checks, once untimed (its reward), then over and over
    for ``seconds`` (one pass at least) on one core: episodes per second."""
    episodes = [{"scenario": f"{env.manifest.id}/{s.id}", "source": env.source,
                 "class_name": env.manifest.class_name, "init_config": env.initial_config(s),
                 "solution": [{"name": c.name, "arguments": dict(c.arguments)} for c in s.solution],
                 "checks": [item.check_func for item in s.checklist]}
                for env in envs.values() for s in env.scenarios if s.solution and s.checklist]
    reply = _throwaway(image, IN_PROCESS_EPISODES, {"episodes": episodes, "seconds": seconds},
                       label, extra=("--cpus", "1"))
    rewards = reply["rewards"]
    perfect = sum(1 for reward in rewards.values() if reward == 1.0)
    return {"how": "exec of the class, instance from init_config, the solution's calls made "
                   "directly, check functions exec'd with a global initial_state; the runtime's "
                   "virtual clock; one core, in a throwaway container",
            "scenarios": len(episodes), "episodes": len(reply["ns"]),
            "episodes_per_second": round(len(reply["ns"]) / (reply["wall_ns"] / 1e9), 1),
            "episode": summary([ns / 1e9 for ns in reply["ns"]]),
            "rewards": {"1.0": perfect, "below_1": len(rewards) - perfect},
            "rewards_below_1": {k: v for k, v in rewards.items() if v < 1.0}}


async def timed_calls(sandbox: Sandbox, probe: Probe, calls: int) -> list[float]:
    """Seconds of each of ``calls`` probe calls on a loaded sandbox, after a warm-up of up to
    200 untimed ones."""
    for _ in range(min(200, calls)):
        await sandbox.call(probe.tool, probe.arguments, timeout=5)
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await sandbox.call(probe.tool, probe.arguments, timeout=5)
        samples.append(time.perf_counter() - started)
    return samples


async def runtime_round_trip(image: str, env: EnvPackage, probe: Probe, calls: int,
                             socket_root: Path, labels: dict[str, str]) -> dict[str, Any]:
    scenario = env.scenario(probe.scenario)
    assert scenario is not None
    config = SandboxConfig(sandbox_image=image, socket_root=socket_root, pool_size=0, labels=labels)
    backend = DockerBackend(config, f"bench-{secrets.token_hex(3)}")
    await backend.start()
    sandbox = Sandbox(await backend.create({}), backend)
    try:
        await sandbox.load(source=env.source, class_name=env.manifest.class_name,
                           tools=env.tool_names, init_config=env.initial_config(scenario),
                           seed=0,
                           max_result_bytes=1 << 20, timeout=10)
        samples = await timed_calls(sandbox, probe, calls)
    finally:
        await sandbox.destroy()
        await backend.close()
    return {"how": "Sandbox.call from this process over the runtime's Unix socket", **summary(samples)}
