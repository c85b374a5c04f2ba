"""Containment and behaviour of Docker sandboxes, each property asserted against a real engine.

The hostile environment below runs only inside sandbox containers, never in this process.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator

import docker
import pytest

from envscaler.sandbox.backends.docker import SLOT_UIDS, DockerBackend
from envscaler.sandbox.config import SandboxConfig
from envscaler.sandbox.errors import CallTimeout, CapacityExhausted, RuntimeFault, SandboxGone
from envscaler.sandbox.pool import SandboxPool
from envscaler.sandbox.runtime.envhost import source_digest
from envscaler.sandbox.runtime.protocol import runtime_socket_name
from envscaler.sandbox.sandbox import Sandbox
from tests.conftest import new_instance
from tests.deadlines import scaled

SLOT_UIDS_SPAN = range(SLOT_UIDS.start, SLOT_UIDS.stop + SLOT_UIDS.step)

HOSTILE_ENV = '''
import os, random, socket, time, uuid
from datetime import datetime
from typing import Dict


class Probe:
    def __init__(self, init_config: dict):
        self.counter: int = 0
        self.events: Dict[str, dict] = {}
        self._secret = "not state"

    def record(self, label: str) -> dict:
        """Store an event with a clock reading, a uuid and a random draw."""
        self.counter += 1
        event_id = str(uuid.uuid4())
        self.events[event_id] = {"label": label, "at": datetime.now().isoformat(),
                                 "t": time.time(), "r": random.random()}
        return {"success": True, "data": {"id": event_id, **self.events[event_id]}}

    def identity(self) -> dict:
        return {"success": True, "data": {"uid": os.getuid(), "gid": os.getgid()}}

    def interfaces(self) -> dict:
        return {"success": True, "data": sorted(name for _, name in socket.if_nameindex())}

    def route_out(self) -> dict:
        """UDP connect only looks up a route; no packet is sent (192.0.2.1 is TEST-NET-1)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.connect(("192.0.2.1", 9))
            return {"success": True, "data": "routed"}
        except OSError as exc:
            return {"success": False, "error": exc.strerror}
        finally:
            sock.close()

    def write(self, path: str) -> dict:
        try:
            with open(path, "w") as handle:
                handle.write("x")
            return {"success": True, "data": path}
        except OSError as exc:
            return {"success": False, "error": exc.strerror}

    def fork_bomb(self) -> dict:
        children = []
        try:
            for _ in range(10_000):
                pid = os.fork()
                if pid == 0:
                    time.sleep(60)
                    os._exit(0)
                children.append(pid)
        except OSError as exc:
            error = exc.strerror
        for pid in children:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        return {"success": True, "data": {"forked": len(children), "error": error}}

    def memory_bomb(self) -> dict:
        hoard = []
        while True:
            hoard.append(bytearray(64 * 1024 * 1024))

    def spin(self) -> dict:
        while True:
            pass

    def reach_runtimes(self) -> dict:
        """Send a ping to every runtime socket of the container: which answer?"""
        import glob, json, struct
        answered = {}
        for path in sorted(glob.glob("/run/envscaler/runtime*.sock")):
            sock = socket.socket(socket.AF_UNIX)
            sock.settimeout(2)
            try:
                sock.connect(path)
                body = json.dumps({"op": "ping"}).encode()
                sock.sendall(struct.pack(">I", len(body)) + body)
                answered[path] = len(sock.recv(4)) == 4
            except OSError as exc:
                answered[path] = repr(exc)
            finally:
                sock.close()
        return {"success": True, "data": answered}

    def retire_siblings(self) -> dict:
        """Ask the keeper to retire every slot: what does it answer?"""
        import json, struct
        answers = []
        for slot in range(16):
            sock = socket.socket(socket.AF_UNIX)
            sock.settimeout(2)
            try:
                sock.connect("/run/envscaler/control.sock")
                body = json.dumps({"op": "retire", "slot": slot, "generation": 0}).encode()
                sock.sendall(struct.pack(">I", len(body)) + body)
                answers.append(len(sock.recv(4)) == 4)
            except OSError as exc:
                answers.append(repr(exc))
            finally:
                sock.close()
        return {"success": True, "data": answers}

    def compiled(self) -> dict:
        """The digests of the sources this runtime found compiled by its keeper."""
        import sys
        return {"success": True, "data": sorted(sys.modules["envscaler.sandbox.runtime.envhost"].COMPILED)}

    def kill_everything(self) -> dict:
        try:
            os.kill(-1, 9)  # every process this user may signal, but itself
        except ProcessLookupError:  # gVisor: there is none
            pass
        os.kill(os.getpid(), 9)
        return {"success": True}

    def _hidden(self) -> dict:
        return {"success": True}
'''
TOOLS = ["record", "identity", "interfaces", "route_out", "write", "fork_bomb", "memory_bomb", "spin",
         "reach_runtimes", "retire_siblings", "compiled", "kill_everything"]


@pytest.fixture(params=[None, "runsc"], ids=["runc", "gvisor"])
async def pool(request: pytest.FixtureRequest, docker_config: SandboxConfig) -> AsyncIterator[SandboxPool]:
    # Under gVisor the cgroup's pid limit also counts the Sentry's own threads: it needs headroom.
    pids = 32 if request.param is None else 64
    config = dataclasses.replace(docker_config, sandbox_memory="128m", sandbox_pids=pids,
                                 sandbox_runtime=request.param)
    pool = SandboxPool(DockerBackend(config, new_instance()), config)
    await pool.start()
    yield pool
    await pool.close()


async def loaded(pool: SandboxPool, seed: int = 7) -> Sandbox:
    sandbox = await pool.claim("test")
    await sandbox.load(source=HOSTILE_ENV, class_name="Probe", tools=TOOLS, init_config={}, seed=seed,
                       max_result_bytes=1 << 20, timeout=scaled(10))
    return sandbox


async def test_runs_as_a_user_of_its_own_without_network(pool: SandboxPool) -> None:
    sandbox, sibling = await loaded(pool), await loaded(pool)
    identity = (await sandbox.call("identity", {}, timeout=scaled(5)))["data"]
    sibling_identity = (await sibling.call("identity", {}, timeout=scaled(5)))["data"]
    assert identity["uid"] == identity["gid"] and identity["uid"] in SLOT_UIDS_SPAN
    assert sibling_identity["uid"] != identity["uid"]  # a user per slot, and per container
    assert (await sandbox.call("interfaces", {}, timeout=scaled(5)))["data"] == ["lo"]
    routed = await sandbox.call("route_out", {}, timeout=scaled(5))
    assert routed["success"] is False
    assert routed["error"] in {"Network is unreachable", "No route to host"}  # runc, gVisor


async def test_root_filesystem_is_read_only(pool: SandboxPool) -> None:
    sandbox = await loaded(pool)
    assert (await sandbox.call("write", {"path": "/opt/envscaler/x"},
                               timeout=scaled(5)))["success"] is False
    assert (await sandbox.call("write", {"path": "/etc/passwd"},
                               timeout=scaled(5)))["success"] is False
    assert (await sandbox.call("write", {"path": "/tmp/scratch"},
                               timeout=scaled(5)))["success"] is True


async def test_fork_bomb_is_held_by_the_pid_limit(pool: SandboxPool) -> None:
    bystander = await loaded(pool)
    sandbox = await loaded(pool)
    result = await sandbox.call("fork_bomb", {}, timeout=scaled(30))
    assert result["data"]["forked"] < pool.config.sandbox_pids  # its slot's own limit
    assert result["data"]["error"] == "Resource temporarily unavailable"
    assert (await sandbox.call("record", {"label": "after"}, timeout=scaled(5)))["success"] is True
    assert (await bystander.call("record", {"label": "unharmed"},
                                 timeout=scaled(5)))["success"] is True


async def test_memory_bomb_is_killed_and_reported(pool: SandboxPool) -> None:
    sandbox = await loaded(pool)
    with pytest.raises(SandboxGone, match="out of memory"):
        await sandbox.call("memory_bomb", {}, timeout=scaled(30))
    assert sandbox.destroyed


async def test_endless_loop_hits_the_deadline_and_the_next_sandbox_is_unaffected(pool: SandboxPool) -> None:
    bystander = await loaded(pool)
    runaway = await loaded(pool)
    with pytest.raises(CallTimeout):
        await runaway.call("spin", {}, timeout=scaled(1))
    assert runaway.destroyed and not await pool.backend.is_running(runaway.handle)
    assert (await bystander.call("record", {"label": "still here"},
                                 timeout=scaled(5)))["success"] is True
    fresh = await loaded(pool)
    assert (await fresh.call("record", {"label": "new"}, timeout=scaled(5)))["success"] is True


@pytest.mark.parametrize("name", ["_hidden", "__init__", "__class__", "counter", "events", "absent"])
async def test_only_advertised_tools_are_callable(pool: SandboxPool, name: str) -> None:
    sandbox = await loaded(pool)
    with pytest.raises(RuntimeFault) as caught:
        await sandbox.call(name, {}, timeout=scaled(5))
    assert caught.value.kind == "ToolNotFound"


async def test_same_seed_and_calls_give_identical_bytes(pool: SandboxPool) -> None:
    async def run(seed: int) -> str:
        sandbox = await loaded(pool, seed)
        results = [await sandbox.call("record", {"label": f"e{i}"},
                                      timeout=scaled(5)) for i in range(3)]
        return json.dumps([results, await sandbox.state(timeout=scaled(5))], sort_keys=True)

    first, second, other = await asyncio.gather(run(7), run(7), run(8))
    assert first == second
    assert first != other


async def test_killed_container_is_noticed_on_the_next_call(pool: SandboxPool, docker_client) -> None:  # type: ignore[no-untyped-def]
    sandbox = await loaded(pool)
    docker_client.api.kill(sandbox.id)
    with pytest.raises(SandboxGone):
        await sandbox.call("record", {"label": "x"}, timeout=scaled(5))


async def test_a_slot_reaches_no_sibling(pool: SandboxPool) -> None:
    """Sessions sharing a container: one's code can talk to no runtime but its own, and what it
    kills is its own; its sibling answers throughout, and the keeper says why it ended."""
    sandbox, sibling = await loaded(pool), await loaded(pool)
    assert sandbox.id == sibling.id  # the pool's second claim takes the same container's next slot
    reached = (await sandbox.call("reach_runtimes", {}, timeout=scaled(10)))["data"]
    assert len(reached) == pool.config.sandbox_slots
    own = f"/run/envscaler/{runtime_socket_name(sandbox.handle.slot)}"
    answering = {path for path, answered in reached.items() if answered is True}
    # Under gVisor no socket of the host answers from inside; under runc its own does, which
    # shows the probe reaches what it may.
    assert answering == ({own} if pool.config.sandbox_runtime is None else set()), reached
    # nor its keeper: none of its siblings is recycled or retired on its word
    answers = (await sandbox.call("retire_siblings", {}, timeout=scaled(10)))["data"]
    assert True not in answers, answers
    assert (await sibling.call("record", {"label": "kept"}, timeout=scaled(5)))["success"] is True
    with pytest.raises(SandboxGone, match="killed by signal 9"):
        await sandbox.call("kill_everything", {}, timeout=scaled(10))
    assert (await sibling.call("record", {"label": "unharmed"},
                               timeout=scaled(5)))["success"] is True


async def test_the_keeper_compiles_the_catalogue_once_for_its_runtimes(
        docker_config: SandboxConfig) -> None:
    """Sources given to a runtime container are compiled once, before its runtimes exist (one
    that does not compile is left out, for its load to report); each runtime loads them
    compiled, and runs them as it would have. The next container of the image compiles
    nothing: its keeper is handed what the first one compiled."""
    config = dataclasses.replace(docker_config, sandbox_slots=2,
                                 sources=(HOSTILE_ENV, "def broken(:\n"))
    pool = SandboxPool(DockerBackend(config, new_instance()), config)
    await pool.start()
    try:
        first, second, third = await loaded(pool), await loaded(pool), await loaded(pool)
        assert first.id == second.id != third.id  # two slots a container
        for sandbox in (first, second, third):
            compiled = (await sandbox.call("compiled", {}, timeout=scaled(5)))["data"]
            assert compiled == [source_digest(HOSTILE_ENV)]
            assert (await sandbox.call("record", {"label": "x"},
                                       timeout=scaled(5)))["success"] is True
        logs = [docker.from_env().api.logs(sandbox.id).decode() for sandbox in (first, third)]
        assert "1 environments compiled here" in logs[0]
        assert "1 environments compiled by an earlier sandbox" in logs[1]
        plain = SandboxPool(DockerBackend(docker_config, new_instance()), docker_config)
        await plain.start()
        try:
            uncached = await loaded(plain)
            assert (await uncached.call("compiled", {}, timeout=scaled(5)))["data"] == []
        finally:
            await plain.close()
    finally:
        await pool.close()


async def test_a_dead_instance_s_sandbox_is_never_handed_out(docker_config: SandboxConfig) -> None:
    """A session of a gateway that died ends here: its slot is recycled into this pool, but its
    container is about to be reaped with the dead gateway's others, so no claim gets it (a
    session rebuilt on it would die again at once)."""
    config = dataclasses.replace(docker_config, pool_size=1, sandbox_slots=1)
    pool = SandboxPool(DockerBackend(config, new_instance()), config)
    await pool.start()
    dead = DockerBackend(config, new_instance())  # never started: no heartbeat, taken for dead
    try:
        await _pool_holds(pool, ready=1, live=1)
        handle = (await dead.create_runtimes({}, None, 1))[0]
        pool.reclaim(Sandbox(handle, pool.backend))
        await _pool_holds(pool, ready=2, live=2)  # recycled: first in line, its pages warm
        claimed = await pool.claim("s1")
        assert claimed.handle.instance == pool.backend.instance
        assert not await pool.backend.is_running(handle)
    finally:
        await pool.close()
        await dead.close()


async def test_claims_beyond_the_capacity_are_refused_not_kept_waiting(
        docker_config: SandboxConfig) -> None:
    """Three claims at once on a pool of two: one container of two slots is made, and the third
    claim is refused (429 at the gateway) rather than left to wait for a sandbox that no
    creation will bring (within one start timeout: a waiting claim gives up after two)."""
    config = dataclasses.replace(docker_config, pool_size=0, max_sandboxes=2)
    pool = SandboxPool(DockerBackend(config, new_instance()), config)
    await pool.start()
    try:
        async with asyncio.timeout(config.start_timeout):
            results = await asyncio.gather(*(pool.claim(f"s{i}") for i in range(3)),
                                           return_exceptions=True)
        assert sum(isinstance(r, Sandbox) for r in results) == 2, results
        assert sum(isinstance(r, CapacityExhausted) for r in results) == 1, results
    finally:
        await pool.close()


async def test_a_claim_outlives_a_creation_whose_container_died_starting(
        docker_config: SandboxConfig, docker_client, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A container killed before its runtime answered (as an engine restart kills what it ran)
    fails its creation at the start timeout, and the claim waiting for it is served by the next
    creation rather than refused."""
    config = dataclasses.replace(docker_config, pool_size=0, sandbox_slots=1,
                                 start_timeout=scaled(5))
    backend = DockerBackend(config, new_instance())
    create_and_start = backend._create_and_start
    killed: list[str] = []

    def killed_at_once(*args, **kwargs):  # type: ignore[no-untyped-def]
        container_id = create_and_start(*args, **kwargs)
        if not killed:
            docker_client.api.kill(container_id)
            killed.append(container_id)
        return container_id

    monkeypatch.setattr(backend, "_create_and_start", killed_at_once)
    pool = SandboxPool(backend, config)
    await pool.start()
    try:
        sandbox = await pool.claim("s1")
        await sandbox.ping()
        assert killed and sandbox.id != killed[0]
        assert (pool.stats().failed, pool.stats().started) == (1, 1)
    finally:
        await pool.close()
    assert await pool.backend.list_own() == []


async def _pool_holds(pool: SandboxPool, ready: int, live: int) -> None:
    for _ in range(100):
        if (pool.stats().ready, pool.stats().live) == (ready, live):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"not {ready} ready of {live} live: {pool.stats()}")


async def test_warm_pool_fills_and_refills(docker_config: SandboxConfig, docker_client) -> None:  # type: ignore[no-untyped-def]
    """A container per session: the pool holds its target, and a claimed container is named
    after its session."""
    config = dataclasses.replace(docker_config, pool_size=2, sandbox_slots=1)
    pool = SandboxPool(DockerBackend(config, new_instance()), config)
    await pool.start()
    try:
        await _pool_holds(pool, ready=2, live=2)
        claimed = await pool.claim("s1")
        assert pool.stats().ready == 1
        await claimed.ping()
        for _ in range(100):  # renamed after the claim, off its path
            if docker_client.containers.get(claimed.id).name.endswith("-s1"):
                break
            await asyncio.sleep(0.05)
        container = docker_client.containers.get(claimed.id)
        assert container.name.endswith("-s1")
        assert container.labels["envscaler.pool"] == "default"
        await _pool_holds(pool, ready=2, live=3)
    finally:
        await pool.close()
    assert await pool.backend.list_own() == []


async def test_warm_pool_fills_by_whole_containers_of_slots(docker_config: SandboxConfig) -> None:
    """Four sessions per container: a target of 2 is met by one container's four slots; claims
    take slots of it with no new creation until the pool falls below its target."""
    config = dataclasses.replace(docker_config, pool_size=2, sandbox_slots=4)
    pool = SandboxPool(DockerBackend(config, new_instance()), config)
    await pool.start()
    try:
        await _pool_holds(pool, ready=4, live=4)
        first, second = await pool.claim("s1"), await pool.claim("s2")
        assert first.id == second.id and first.handle.slot != second.handle.slot
        assert pool.stats().started == 1
        third = await pool.claim("s3")  # one left: below the target, a container is made
        await _pool_holds(pool, ready=5, live=8)
        assert pool.stats().started == 2
        assert len({first.id, third.id}) == 1 and await pool.backend.list_own() != []
    finally:
        await pool.close()
    assert await pool.backend.list_own() == []


async def test_orphans_of_a_dead_instance_are_reaped(docker_config: SandboxConfig) -> None:
    dead = DockerBackend(docker_config, new_instance())
    handle = await dead.create({})
    # The instance never started its heartbeat, so for everyone else it is dead.
    assert await dead.is_running(handle)
    survivor = DockerBackend(docker_config, new_instance())
    await survivor.start()  # reaps on start-up
    try:
        assert not await survivor.is_running(handle)
        assert await dead.list_own() == []
    finally:
        await survivor.close()
