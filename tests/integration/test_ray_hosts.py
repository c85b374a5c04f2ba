"""Sandbox hosts on a Ray cluster for real: a head and two worker nodes on this machine
(``ray.cluster_utils.Cluster``), a host pinned to each, each with its own socket root and
reached only over TCP; a worker node removed mid-episode and one added: the hosts follow, and
the sessions of the removed node are rebuilt elsewhere by replay."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any
from pathlib import Path

import httpx
import pytest
import redis as redis_sync

from envscaler.sandbox.hosts.registry import HOSTS_KEY
from tests.conftest import REPO_ROOT, SOCKET_ROOT
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import (
    COUNTER,
    LIBRARY,
    GatewayProcess,
    free_port,
    gateway_process,
    own_redis_db,
    running_gateway,
)
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.hosts_fixtures import SECRET
from tests.integration.redis_cluster import LocalRedisCluster
from tests.integration.test_host_failover import call, holder, remote_settings

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install .[ray]")
from ray.cluster_utils import Cluster  # noqa: E402

from envscaler_client import AsyncEnvClient  # noqa: E402
from envscaler_client.rollout import (  # noqa: E402
    EpisodeSpec,
    ReferencePolicy,
    load_solutions,
    run_rollouts,
)

from envscaler.server.ray_hosts import RayHosts  # noqa: E402

NODE = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}
HOST_SETTINGS = {"cluster_secret": SECRET, "sandbox_backend": "process", "pool_size": 1,
                 "socket_root": f"{SOCKET_ROOT}-{{node}}", "host_heartbeat": 0.3,
                 "log_level": "WARNING"}  # as envscaler.server.sandbox_host.host_settings hands them


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    try:
        for _ in range(2):
            cluster.add_node(**NODE)
        ray.init(address=cluster.address)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


async def test_hosts_follow_the_nodes_of_a_ray_cluster(cluster: Cluster, redis_url: str,
                                                       catalogue_root: Path,
                                                       tmp_path: Path) -> None:
    hosts_redis = own_redis_db(redis_url, 13)
    hosts = RayHosts({**HOST_SETTINGS, "redis_url": hosts_redis})
    try:
        await asyncio.to_thread(hosts.sync)
        nodes = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
        assert set(hosts.hosts) == nodes and len(nodes) == 3
        assert len({host.address for host in hosts.hosts.values()}) == 3
        for node_id in nodes:  # each its own socket root, on its node
            assert Path(f"{SOCKET_ROOT}-{node_id[:12]}").is_dir()

        async with running_gateway(remote_settings(hosts_redis, catalogue_root, tmp_path)) as (
                app, client):
            ids = [(await client.post("/v1/sessions", json={
                "env": COUNTER, "scenario": "counter-1", "seed": n})).json()["session_id"]
                for n in range(6)]
            await asyncio.gather(*(call(client, sid, "increment", name="a", by=2)
                                   for sid in ids))
            worker = cluster.list_all_nodes()[1]
            victim = hosts.hosts[worker.node_id].id
            on_victim = [sid for sid in ids if holder(hosts_redis, sid) == victim]
            assert on_victim
            cluster.remove_node(worker)
            await asyncio.gather(*(call(client, sid, "increment", name="b") for sid in ids))
            assert victim not in {holder(hosts_redis, sid) for sid in ids}
            for sid in ids:
                entries = (await client.get(f"/v1/sessions/{sid}/trajectory")).json()["entries"]
                assert [(e["index"], e["name"]) for e in entries] == [
                    (0, "increment"), (1, "increment")]
                assert (await client.post(f"/v1/sessions/{sid}/validate")).json()[
                    "reward"] == 1.0
            assert app.state.metrics.replay_mismatches._value.get() == 0

        await asyncio.to_thread(hosts.sync)
        assert worker.node_id not in hosts.hosts and len(hosts.hosts) == 2
        joined = cluster.add_node(**NODE)
        cluster.wait_for_nodes()
        await asyncio.to_thread(hosts.sync)
        assert joined.node_id in hosts.hosts and len(hosts.hosts) == 3
    finally:
        await asyncio.to_thread(hosts.close)
        _remove_node_roots()  # those of removed nodes too


def test_serve_ray_runs_gateways_over_the_clusters_hosts(cluster: Cluster, redis_url: str,
                                                         catalogue_root: Path,
                                                         tmp_path: Path) -> None:
    hosts_redis = own_redis_db(redis_url, 14)
    port = free_port()
    env = {**os.environ, "ENVSCALER_REDIS_URL": hosts_redis,
           "ENVSCALER_SANDBOX_BACKEND": "process", "ENVSCALER_POOL_SIZE": "1",
           "ENVSCALER_SOCKET_ROOT": f"{SOCKET_ROOT}-{{node}}", "ENVSCALER_LOG_LEVEL": "WARNING",
           "PYTHONPATH": f"{REPO_ROOT}:{REPO_ROOT / 'clients'}"}
    log = tmp_path / "serve.log"
    with open(log, "wb") as output:
        serve = subprocess.Popen(
            [sys.executable, "-m", "envscaler.cli", "serve", "--ray", cluster.address, "--port", str(port),
             "--workers", "1", "--catalogue", str(catalogue_root)],
            cwd=REPO_ROOT, env=env, stdout=output, stderr=output)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + scaled(90)
        while not _ready(url):
            assert serve.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        assert redis_sync.Redis.from_url(hosts_redis).hlen(HOSTS_KEY) == 3
        created = httpx.post(f"{url}/v1/sessions", json={"env": COUNTER,
                                                         "scenario": "counter-1"}).json()
        sid = created["session_id"]
        for arguments in ({"name": "a", "by": 2}, {"name": "b"}):
            reply = httpx.post(f"{url}/v1/sessions/{sid}/calls",
                               json={"name": "increment", "arguments": arguments})
            assert reply.status_code == 200, reply.text
        assert httpx.post(f"{url}/v1/sessions/{sid}/validate").json()["reward"] == 1.0
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(scaled(60))
        _remove_node_roots()
    assert redis_sync.Redis.from_url(hosts_redis).hlen(HOSTS_KEY) == 0  # each host withdrew


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=scaled(1)).status_code == 200
    except httpx.HTTPError:
        return False


EPISODES = 64  # four scenarios, sixteen seeds each: all at once


class HeldAfterFirstCall:
    """Every episode's first call, then a wait at the gate: the node dies only once each
    session has made a call (so its node provably held live sessions) and before any has made
    its second (so every episode is mid-run when it dies). Half of them (even seeds) go on as
    the node is killed, their calls in flight when it dies; the others once it is gone."""

    def __init__(self, episodes: int) -> None:
        self.waiting, self.episodes = 0, episodes
        self.all_waiting, self.killing, self.killed = (asyncio.Event(), asyncio.Event(),
                                                       asyncio.Event())

    def arrived(self) -> None:
        """One more episode at the gate (or ended before reaching it: it waits for nothing)."""
        self.waiting += 1
        if self.waiting >= self.episodes:
            self.all_waiting.set()

    def policy(self, spec: EpisodeSpec, solution: list[dict[str, Any]]) -> Any:
        reference = ReferencePolicy(solution)
        opened = self.killing if spec.seed % 2 == 0 else self.killed

        async def policy(messages: list[dict[str, Any]], tools: Any = None) -> Any:
            if sum(message.get("role") == "assistant" for message in messages) == 1:
                self.arrived()
                await opened.wait()
            return await reference(messages, tools)
        return policy


async def test_rollouts_survive_a_killed_node(cluster: Cluster, catalogue_root: Path,
                                              tmp_path: Path) -> None:
    """The issue's failover test: reference rollouts at concurrency 64 over the sandbox hosts
    of a head and two worker nodes, sessions in a three-master Redis Cluster; a worker node
    is killed mid-run. Every episode completes with reward 1.0 and its trajectory holds each
    call of the reference solution once, in order."""
    with LocalRedisCluster(tmp_path / "redis") as redis_cluster:
        hosts = RayHosts({**HOST_SETTINGS, "redis_url": redis_cluster.url, "pool_size": 8})
        try:
            await asyncio.to_thread(hosts.sync)
            settings = remote_settings(redis_cluster.url, catalogue_root, tmp_path)
            with gateway_process(settings, tmp_path / "gateway.log") as gateway:
                episodes, rebuilds = await _rollouts_with_a_node_killed(cluster, hosts, gateway)
        finally:
            await asyncio.to_thread(hosts.close)
            _remove_node_roots()
    assert len(episodes) == EPISODES
    assert {episode.reward for episode in episodes} == {1.0}
    assert rebuilds > 0  # sessions of the killed node were rebuilt elsewhere


async def _rollouts_with_a_node_killed(cluster: Cluster, hosts: RayHosts,
                                       gateway: GatewayProcess) -> tuple[list[Any], float]:
    solutions = load_solutions(REPO_ROOT / "generated_envs", LIBRARY)
    specs = [EpisodeSpec(LIBRARY, scenario, seed)
             for scenario in sorted(solutions) for seed in range(EPISODES // len(solutions))]
    gate = HeldAfterFirstCall(len(specs))
    async with AsyncEnvClient(gateway.url) as client:
        rollouts = asyncio.ensure_future(run_rollouts(
            client, specs, lambda spec: gate.policy(spec, solutions[spec.scenario] or []),
            concurrency=EPISODES, resume=False, on_episode=lambda episode: gate.arrived()))
        await gate.all_waiting.wait()
        gate.killing.set()
        await asyncio.to_thread(cluster.remove_node, cluster.list_all_nodes()[1])
        gate.killed.set()
        result = await rollouts
        for episode in result.episodes:
            solution = solutions[episode.scenario] or []
            session = await client.session(episode.session_id)
            entries = [entry for entry in (await session.trajectory()).calls
                       if entry.epoch == episode.epoch]
            assert [(e.name, e.arguments) for e in entries] == [
                (step["name"], step["arguments"]) for step in solution], (
                episode.key, episode.termination, episode.error)
            indices = [e.index for e in entries]
            assert indices == list(range(indices[0], indices[0] + len(solution)))
        metrics = httpx.get(f"{gateway.url}/metrics").text
    return result.episodes, _metric(metrics, "envscaler_session_rebuilds_total")


def _metric(text: str, name: str) -> float:
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith(name + " ") or line.startswith(name + "{"))


def _remove_node_roots() -> None:
    for root in Path(SOCKET_ROOT).parent.glob(f"{SOCKET_ROOT.name}-*"):
        shutil.rmtree(root, ignore_errors=True)
