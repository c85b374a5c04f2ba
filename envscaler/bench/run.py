"""One benchmark run: every figure, side by side, on gateways started for it; then the report.

Phases, in order (each waits for the machine to be quiet first, and records how busy it was):

1. a gateway (`envscaler serve` with its default worker count unless ``workers`` is set, Docker
   backend, its own Redis) with a full warm pool;
2. session creation from the warm pool, reset (one request at a time);
3. tool calls at each concurrency level per environment (``envscaler.bench.loadgen`` in its own process),
   with the CPU of every component over the same window;
4. the baselines: the same call in-process (throwaway container) and over the runtime's socket;
   then sandbox hosts (`envscaler.bench.hosts`): the call through a host over TCP, and calls per second
   over 1, 2 and 3 hosts;
5. density: sessions topped up to ``density_sessions``, memory per session, calls across all;
6. validation of a solved 4-check scenario (live call sessions reset to it), one at a time and
   ``validate_concurrency`` at once;
   then a group of ``fork_count`` sessions at step k of that scenario, by one fork request
   against as many opens (``envscaler.bench.forks``);
7. episodes: whole in-process episodes (throwaway container, one core), then reference episodes
   through ``AsyncEnvClient`` (its own process) at each concurrency of ``episode_levels``, opening
   a session per episode or resetting one per lane; lease expiries from the gateway's log;
   the batch phase (`envscaler.bench.batch`): ``batch_lanes`` sessions opened at once by one client process,
   memory per live session, episodes/s, the client's CPU, all closed; with ``batch_rounds``, in
   turn with the same pattern at ``batch_baseline`` lanes, that many times;
8. the gateway stopped, every container of the run removed; a second gateway with no warm pool
   for cold session creation; then a check that no container of the run is left.

However the run ends (done, an exception, a wait that ran out, SIGTERM or SIGINT), `run` removes
what it started before it returns or raises: its gateways, every process below it, every
container of its socket roots or its label.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker
from docker.errors import DockerException

from envscaler.bench import (
    baseline,
    batch,
    calls,
    density,
    forks,
    hosts,
    largestate,
    lifecycle,
    report,
    rollouts,
)
from envscaler.bench.config import BenchConfig
from envscaler.bench.gateway import (LEASE_EXPIRED, RUN_PREFIX, Gateway, GatewayOptions,
                           remove_containers, run_containers, run_socket_root)
from envscaler.bench.procstat import CpuMeter, descendants, wait_for_quiet
from envscaler.bench.stopping import STOP, end_processes
from envscaler.bench.workload import lanes, load_envs, probe, scenario_with_checks
from envscaler.sandbox.image import resolve_image
from envscaler.server.settings import Settings

BENCH_LABEL = "envscaler.bench"
RELEASE_ABOVE = 800  # live sessions + episode lanes: above, the live sessions are closed first
END_TIMEOUT = 30.0  # seconds for the run's leftover processes to end on SIGTERM, before SIGKILL
VALIDATE_CHECKS = 4   # the validation figure's scenario has this many check functions


class Run:
    def __init__(self, config: BenchConfig, out_dir: Path, say: Callable[[str], None]) -> None:
        self.config = config
        self.out_dir = out_dir
        self.say = say
        self.run_id = secrets.token_hex(4)
        self.quiet: dict[str, float] = {}
        self.quiet_spent = 0.0
        self.phases: dict[str, float] = {}
        self.docker = docker.from_env(timeout=120)
        self.settings = Settings()
        self.gateways: list[Gateway] = []

    def wait_quiet(self, figure: str) -> None:
        """Let whatever else runs on the machine calm down first (bounded), and record the load
        seen: the figure is only as good as the machine was quiet."""
        left = self.config.quiet_budget - self.quiet_spent
        if left <= 0:
            return
        started = time.perf_counter()
        self.quiet[figure] = wait_for_quiet(self.config.quiet_cores,
                                            min(self.config.quiet_timeout, left))
        self.quiet_spent += time.perf_counter() - started

    def phase(self, name: str, started: float) -> None:
        self.phases[name] = round(time.perf_counter() - started, 1)
        self.say(f"  {name}: {self.phases[name]} s")

    # ------------------------------------------------------------------ the run

    def execute(self) -> dict[str, Any]:
        config, settings = self.config, self.settings
        began = time.perf_counter()
        image = resolve_image(settings, self.docker)
        envs = load_envs(settings.catalogue, config.envs)
        probes = {env_id: probe(envs[env_id]) for env_id in config.envs}
        main_env = config.envs[0]
        results: dict[str, Any] = {
            "meta": {"started": datetime.now(UTC).isoformat(timespec="seconds"),
                     "mode": config.mode, "host": density.host_limits(),
                     "kernel": platform.release(), "python": platform.python_version(),
                     "image": image,
                     "load_generator": "envscaler.bench.loadgen: asyncio Protocol, keep-alive HTTP/1.1, "
                                       "its own process",
                     "probes": {e: p.body() | {"scenario": p.scenario} for e, p in probes.items()}},
            "config": config.to_dict()}
        scratch = Path(tempfile.mkdtemp(prefix="envscaler-bench-"))
        gateway = Gateway(GatewayOptions(workers=config.workers, pool_size=config.pool_size),
                          image, scratch)
        self.gateways.append(gateway)
        left = 0
        try:
            started = time.perf_counter()
            self.say(f"gateway: {config.workers or 'default'} workers, warm pool "
                     f"{config.pool_size} each")
            gateway.start()
            workers = len(gateway.wait_ready())
            results["meta"]["gateway"] = (f"envscaler serve --workers {config.workers}"
                                          if config.workers else
                                          f"envscaler serve (its default: {workers} workers)")
            redis_before = gateway.redis_memory()
            self.phase("gateway start", started)

            results["sessions"] = self.lifecycle(gateway, probes[main_env])
            live = self.open_call_sessions(gateway, probes)
            results["calls"] = self.calls(gateway, probes, live)
            results["baselines"] = self.baselines(image, envs[main_env], probes[main_env])
            results["hosts"] = self.hosts(image, envs[main_env], probes[main_env], scratch)
            results["density"] = self.density(gateway, probes, live, redis_before)
            results["validate"] = self.validate(gateway, envs[main_env], live[main_env])
            results["forks"] = self.forks(gateway, envs[main_env])
            most = max(config.batch_lanes, *(level for levels in config.episode_levels.values()
                                             for level in levels))
            if sum(map(len, live.values())) + most > RELEASE_ABOVE:
                started = time.perf_counter()  # keep the machine's memory for the episodes
                calls.close_sessions(gateway.port, [s for ids in live.values() for s in ids])
                self.phase("close the live sessions", started)
            results["episodes"] = self.episodes(gateway, image, envs)
            results["batch"] = self.batch(gateway, envs)
            results["lease_expiries"] = gateway.log_count(LEASE_EXPIRED)
        finally:
            started = time.perf_counter()
            left += self.stop(gateway)
            self.phase("stop and remove containers", started)
        results["sessions"]["create_cold"] = self.cold_creation(image, scratch, probes[main_env])
        results["large_state"] = self.large_state(image, scratch, probes[main_env])
        leftovers = self.leftovers()
        shutil.rmtree(scratch, ignore_errors=True)
        results["meta"].update(quiet_before_figures=self.quiet, phases_seconds=self.phases,
                               total_seconds=round(time.perf_counter() - began, 1),
                               containers_removed=left, containers_left=leftovers)
        results["floors"] = report.floors(results)
        return results

    def stop(self, gateway: Gateway) -> int:
        """Remove the run's containers in parallel first (a gateway shutting down kills its own
        one at a time), then stop the gateway, whatever happened."""
        try:
            ids = gateway.containers()
            remove_containers(self.docker, ids, parallel=16)
        except DockerException as exc:
            self.say(f"  removing containers failed ({exc}); the gateway stop retries")
            ids = []
        return len(ids) + gateway.stop()

    def leftovers(self) -> int:
        """Containers of this run still there (removed now, and counted as a fault)."""
        found = run_containers(self.docker, f"{BENCH_LABEL}={self.run_id}")
        remove_containers(self.docker, found, parallel=16)
        return len(found)

    def clean_up(self) -> None:
        """Whatever the run left, however it ended: its gateways stopped (each bounded), every
        process below this one ended (sandbox hosts, load generators, Redis servers), then its
        containers removed and its socket roots."""
        for gateway in self.gateways:
            try:
                gateway.stop()
            except Exception as exc:  # noqa: BLE001 - the rest is removed below all the same
                self.say(f"  stopping a gateway failed: {exc!r}")
        end_processes(descendants(os.getpid())[1:], END_TIMEOUT)
        left = self.leftovers()
        for root in Path("/tmp").glob(Path(RUN_PREFIX).name + "*"):
            shutil.rmtree(root, ignore_errors=True)
        if left:
            self.say(f"  removed {left} containers the run left")

    # ------------------------------------------------------------------ figures

    def lifecycle(self, gateway: Gateway, probe_: Any) -> dict[str, Any]:
        config = self.config
        started = time.perf_counter()
        self.wait_quiet("sessions")
        warm, ids = lifecycle.create_sessions(gateway.port, probe_, config.warm_creations)
        reset = lifecycle.resets(gateway.port, ids[0], config.resets)
        lifecycle.delete_sessions(gateway.port, ids)
        self.phase("session life cycle", started)
        return {"create_warm": warm, "reset": reset}

    def open_call_sessions(self, gateway: Gateway, probes: dict[str, Any]) -> dict[str, list[str]]:
        started = time.perf_counter()
        live = {env_id: calls.open_sessions(gateway.port, probes[env_id],
                                            max(self.config.levels[env_id]))
                for env_id in self.config.envs}
        gateway.wait_ready()  # the pool refilled: starting containers is not a call's cost
        self.phase(f"open {sum(map(len, live.values()))} sessions", started)
        return live

    def meter(self, gateway: Gateway) -> CpuMeter:
        return CpuMeter(processes={"gateway": gateway.pids(), "redis": [gateway.redis_pid()]},
                        containers=gateway.containers())

    def calls(self, gateway: Gateway, probes: dict[str, Any],
              live: dict[str, list[str]]) -> dict[str, Any]:
        config = self.config
        started = time.perf_counter()
        meter = self.meter(gateway)
        figures: dict[str, Any] = {}
        for env_id in config.envs:
            figures[env_id] = {}
            for level in config.levels[env_id]:
                self.wait_quiet(f"calls {env_id} c={level}")
                requests = calls.call_requests(probes[env_id], live[env_id][:level])
                result = calls.load(gateway.port, calls.spread(requests, level), config.warmup,
                                    config.duration, meter)
                figures[env_id][str(level)] = result
                self.say(f"  {env_id} c={level}: {result['rps']} calls/s, "
                         f"p50 {result['summary'].get('p50_ms')} ms, "
                         f"p99 {result['summary'].get('p99_ms')} ms")
        self.phase("tool calls", started)
        return figures

    def baselines(self, image: str, env: Any, probe_: Any) -> dict[str, Any]:
        started = time.perf_counter()
        self.wait_quiet("baselines")
        label = f"{BENCH_LABEL}={self.run_id}"
        inproc = baseline.in_process(image, env, probe_, self.config.baseline_calls, label)
        root = run_socket_root()
        root.mkdir(mode=0o700)  # the service's alone: a socket root others may write is refused
        try:
            runtime = _run_async(baseline.runtime_round_trip(
                image, env, probe_, self.config.runtime_calls, root, {BENCH_LABEL: self.run_id}))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        self.phase("baselines", started)
        return {"in_process": inproc, "runtime": runtime}

    def hosts(self, image: str, env: Any, probe_: Any, scratch: Path) -> dict[str, Any]:
        config = self.config
        started = time.perf_counter()
        self.wait_quiet("sandbox hosts")
        figures = _run_async(hosts.measure(
            image, env, probe_, scratch, calls=config.host_calls, lanes=config.host_lanes,
            seconds=config.host_seconds, counts=config.host_counts))
        self.say(f"  through a sandbox host (TCP): p50 {figures['hop']['p50_ms']} ms; "
                 + ", ".join(f"{n} hosts {f['rps']} calls/s"
                             for n, f in figures["scaling"].items()))
        self.phase("sandbox hosts", started)
        return figures

    def density(self, gateway: Gateway, probes: dict[str, Any], live: dict[str, list[str]],
                redis_before: int) -> dict[str, Any]:
        config = self.config
        started = time.perf_counter()
        count = sum(map(len, live.values()))
        main_env = config.envs[0]
        if config.density_sessions > count:
            self.say(f"  opening {config.density_sessions - count} more sessions")
            live[main_env] = live[main_env] + calls.open_sessions(
                gateway.port, probes[main_env], config.density_sessions - count)
            count = config.density_sessions
        gateway.wait_ready()
        time.sleep(1.0)  # let the new runtimes settle to their idle footprint
        figures = density.measure(gateway, count, redis_before)
        requests = [r for env_id in config.envs
                    for r in calls.call_requests(probes[env_id], live[env_id])]
        self.wait_quiet("density calls")
        load = calls.load(gateway.port, calls.spread(requests, config.density_concurrency),
                          config.warmup, config.duration, self.meter(gateway))
        figures["calls"] = load
        self.say(f"  {count} live sessions: {figures['per_session_mib']} MiB each "
                 f"(containers + Redis); calls across all at c={config.density_concurrency}: "
                 f"{load['rps']}/s, p99 {load['summary'].get('p99_ms')} ms")
        self.phase("density", started)
        return figures

    def validate(self, gateway: Gateway, env: Any, live: list[str]) -> dict[str, Any]:
        """Validation of a solved scenario with a known number of checks: sessions prepared
        first (live ones of its environment, reset to it: no container to start), then validate
        called over and over, one at a time and then all at once."""
        config = self.config
        started = time.perf_counter()
        episode = scenario_with_checks(env, VALIDATE_CHECKS)
        ids = live[:config.validate_concurrency]
        lifecycle.solve(gateway.port, ids, episode)
        self.wait_quiet("validate c=1")
        one = lifecycle.validations(gateway.port, ids[0], config.validations)
        requests = [{"method": "POST", "path": f"/v1/sessions/{sid}/validate"} for sid in ids]
        self.wait_quiet(f"validate c={len(ids)}")
        many = calls.load(gateway.port, calls.spread(requests, len(ids)), config.warmup,
                          config.duration, self.meter(gateway))
        self.say(f"  validate ({episode.scenario}, {one['checks_per_validation']} checks): "
                 f"c=1 p50 {one.get('p50_ms')} ms, p99 {one.get('p99_ms')} ms; c={len(ids)} "
                 f"p99 {many['summary'].get('p99_ms')} ms")
        self.phase("validation", started)
        return {"env": episode.env, "scenario": episode.scenario,
                "checks": one["checks_per_validation"], "reward": one["reward"],
                "concurrency": {"1": one, str(len(ids)): many}}

    def forks(self, gateway: Gateway, env: Any) -> dict[str, Any]:
        """A group at step k of an episode by one fork request, against opening it."""
        started = time.perf_counter()
        episode = scenario_with_checks(env, VALIDATE_CHECKS)
        self.wait_quiet("forks")
        result = forks.fork_vs_open(gateway.port, episode, self.config.fork_rounds,
                                    self.config.fork_count)
        gateway.wait_ready()  # the pool refilled before the next figure
        self.say(f"  fork of {result['count']} at step {result['step']}: p50 "
                 f"{result['fork'].get('p50_ms')} ms; opening {result['count']}: "
                 f"{result['open'].get('p50_ms')} ms, and giving each the prefix: "
                 f"{result['open_and_replay'].get('p50_ms')} ms")
        self.phase("fork against open", started)
        return result

    def episodes(self, gateway: Gateway, image: str, envs: dict[str, Any]) -> dict[str, Any]:
        """Whole episodes in-process (one core), then through the gateway at each concurrency,
        opening a session per episode and resetting one per lane."""
        config = self.config
        started = time.perf_counter()
        self.wait_quiet("episodes in-process")
        inproc = baseline.in_process_episodes(image, envs, config.inprocess_seconds,
                                              f"{BENCH_LABEL}={self.run_id}")
        self.say(f"  in-process: {inproc['episodes_per_second']} episodes/s on one core")
        runs: dict[str, dict[str, Any]] = {}
        for pattern in rollouts.PATTERNS:
            runs[pattern] = {}
            for level in config.episode_levels.get(pattern, ()):
                result = self.episode_run(gateway, envs, pattern, level)
                result["gateway_to_in_process"] = round(
                    result["episodes_per_second"] / inproc["episodes_per_second"], 4)
                runs[pattern][str(level)] = result
        self.phase("episodes", started)
        return {"in_process": inproc, "runs": runs}

    def episode_run(self, gateway: Gateway, envs: dict[str, Any], pattern: str,
                    level: int) -> dict[str, Any]:
        gateway.wait_ready()  # the warm pool refilled after the run before
        self.wait_quiet(f"episodes {pattern} c={level}")
        expired = gateway.log_count(LEASE_EXPIRED)
        spec = {"url": gateway.url, "pattern": pattern, "window": self.config.episode_window,
                "lanes": [[asdict(episode) for episode in lane] for lane in lanes(envs, level)]}
        result = rollouts.spawn(spec, timeout=1800)
        result["lease_expiries"] = gateway.log_count(LEASE_EXPIRED) - expired
        self.say(f"  {pattern} per episode, c={level}: {result['episodes']} episodes, "
                 f"{result['episodes_per_second']}/s, rewards {result['rewards']}, "
                 f"errors {result['errors'] or 0}, lease expiries {result['lease_expiries']}")
        return result

    def batch(self, gateway: Gateway, envs: dict[str, Any]) -> dict[str, Any]:
        config = self.config
        started = time.perf_counter()
        gateway.wait_ready()
        self.wait_quiet(f"batch of {config.batch_lanes}")
        expired = gateway.log_count(LEASE_EXPIRED)
        if config.batch_rounds and config.batch_baseline != config.batch_lanes:
            figures = batch.measure_against(gateway.url, envs, config.batch_lanes,
                                            config.batch_baseline, config.batch_window,
                                            config.batch_rounds, self.say)
        else:
            figures = batch.measure(gateway.url, envs, config.batch_lanes, config.batch_window)
            self.say(batch.line(figures))
        figures["lease_expiries"] = gateway.log_count(LEASE_EXPIRED) - expired
        self.phase("batch", started)
        return figures

    def cold_creation(self, image: str, scratch: Path, probe_: Any) -> dict[str, Any]:
        started = time.perf_counter()
        gateway = Gateway(GatewayOptions(workers=1, pool_size=0), image, scratch)
        self.gateways.append(gateway)
        try:
            gateway.start()
            gateway.wait_ready(pool_full=False)
            self.wait_quiet("create cold")
            cold, _ = lifecycle.create_sessions(gateway.port, probe_, self.config.cold_creations)
        finally:
            remove_containers(self.docker, gateway.containers(), parallel=16)
            gateway.stop()
        self.phase("cold creation", started)
        return cold


    def large_state(self, image: str, scratch: Path, probe_: Any) -> dict[str, Any]:
        """`order_desk` at each size beside the small environment, on a gateway of their own;
        Redis's growth per closed session of each size."""
        started, config = time.perf_counter(), self.config
        catalogue = scratch / "large-state"
        sized = largestate.write_catalogue(catalogue, config.large_state_sizes,
                                           beside=(self.settings.catalogue / probe_.env,))
        gateway = Gateway(GatewayOptions(workers=config.workers,
                                         pool_size=config.large_state_opens + 2,
                                         env={"ENVSCALER_CATALOGUE": str(catalogue)}),
                          image, scratch)
        self.gateways.append(gateway)
        figures: dict[str, Any] = {}
        try:
            gateway.start()
            gateway.wait_ready()
            self.wait_quiet("large state")
            figures["small_call"] = largestate.small_calls(gateway.port, probe_,
                                                           config.large_state_calls)
            for size in sized:
                before = gateway.redis_memory()
                result = largestate.measure(
                    gateway.port, size.scenario, opens=config.large_state_opens,
                    calls=config.large_state_calls, states=config.large_state_reads,
                    validations=config.large_state_validations)
                if "sessions" in result:
                    result["redis_bytes_per_closed_session"] = round(
                        (gateway.redis_memory() - before) / result["sessions"])
                figures[size.scenario] = {"state_bytes": size.state_bytes, **result}
                self.say(f"  {size.scenario}: {_large_state_line(figures[size.scenario])}")
            figures["shared_custom_start"] = largestate.shared_custom_start(
                gateway.port, gateway.redis_memory, config.large_state_sizes[0],
                config.large_state_opens)
        finally:
            remove_containers(self.docker, gateway.containers(), parallel=16)
            gateway.stop()
        self.phase("large state", started)
        return figures


def _large_state_line(figure: dict[str, Any]) -> str:
    if "refused" in figure:
        return report.served(figure)
    return (f"open p50 {figure['open']['p50_ms']} ms, call p50 {figure['call']['p50_ms']} ms, "
            f"{report.served(figure)}")


def _run_async(coroutine: Any) -> Any:
    try:
        import uvloop
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    try:
        return runner(coroutine)
    finally:
        STOP.raise_if_stopped()  # its tasks were cancelled by a signal: the run stops


def run(config: BenchConfig, out_dir: Path, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure, then write ``results.json``, ``results.md`` and the plots into ``out_dir``;
    what the run started is removed however it ends."""
    bench = Run(config, out_dir, say)
    say(f"run {bench.run_id}: its containers carry {BENCH_LABEL}={bench.run_id} or a socket root "
        f"{RUN_PREFIX}*")
    with STOP.installed(say):
        try:
            results = bench.execute()
        finally:
            bench.clean_up()
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out_dir / "results.md").write_text(report.markdown(results))
    report.plots(results, out_dir)
    return results
