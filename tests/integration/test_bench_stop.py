"""`envscaler bench` stopped half-way (SIGTERM in its sandbox-hosts phase, where a run once hung
and, killed, left its gateway and its containers running) removes everything it started: no
process it started runs afterwards, no container of its socket roots or its label is left.

The tiny preset (the test suite's) runs as a subprocess until its sandbox hosts have containers;
speed is never asserted."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests import processes
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import REPO_ROOT

pytestmark = [pytest.mark.docker, pytest.mark.redis]

BENCH = ("import sys; from pathlib import Path; from envscaler.bench.config import preset; "
         "from envscaler.bench.run import run; run(preset('tiny'), Path(sys.argv[1]), "
         "say=lambda line: print(line, flush=True))")
REACH_HOSTS_WITHIN = 400.0  # seconds (scaled) for the tiny run to reach its sandbox hosts
STOPPED_WITHIN = 240.0  # seconds (scaled) for it to remove what it started once told to stop


def _hosts_with_containers(bench: int, docker_client: Any) -> list[processes.Proc]:
    """The run's sandbox-host processes whose socket root holds a container already."""
    found = []
    for proc in processes.descendants(bench):
        if "sandbox host" not in proc.cmdline:
            continue
        environ = dict(item.split(b"=", 1) for item in proc.read("environ").split(b"\0")
                       if b"=" in item)
        root = environ.get(b"ENVSCALER_SOCKET_ROOT", b"").decode()
        if root and docker_client.api.containers(
                all=True, quiet=True, filters={"label": f"envscaler.socket-root={root}"}):
            found.append(proc)
    return found


def _running(procs: list[processes.Proc]) -> list[processes.Proc]:
    now = processes.running()
    return [proc for proc in procs if now.get(proc.pid) == proc]


def _run_containers(docker_client: Any, prefix: str, label: str) -> list[str]:
    rooted = docker_client.api.containers(all=True, filters={"label": "envscaler.socket-root"})
    labelled = docker_client.api.containers(all=True, quiet=True, filters={"label": label})
    return sorted({c["Id"] for c in labelled} | {
        c["Id"] for c in rooted if c["Labels"]["envscaler.socket-root"].startswith(prefix)})


@pytest.mark.timeout(REACH_HOSTS_WITHIN + STOPPED_WITHIN + 60)
def test_a_bench_stopped_by_sigterm_in_its_hosts_phase_leaves_nothing_running(
    sandbox_image: str, docker_client: Any, tmp_path: Path
) -> None:
    log = tmp_path / "bench.log"
    with open(log, "wb") as out:
        bench = subprocess.Popen([sys.executable, "-c", BENCH, str(tmp_path / "results")],
                                 cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT)
    prefix = f"/tmp/esb-{bench.pid}-"
    started: list[processes.Proc] = []
    label = "envscaler.bench=unknown"
    try:
        deadline = time.monotonic() + scaled(REACH_HOSTS_WITHIN)
        while not _hosts_with_containers(bench.pid, docker_client):
            assert bench.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"no sandbox host: {log.read_text()[-3000:]}"
            time.sleep(0.5)
        started = processes.descendants(bench.pid)
        commands = " ".join(proc.cmdline for proc in started)
        assert "cli serve" in commands and "sandbox host" in commands  # its gateway, its hosts
        [run_id] = re.findall(r"^run (\w+): ", log.read_text(), re.MULTILINE)
        label = f"envscaler.bench={run_id}"
        assert _run_containers(docker_client, prefix, label)

        bench.send_signal(signal.SIGTERM)
        bench.wait(scaled(STOPPED_WITHIN))
        output = log.read_text()
        assert bench.returncode != 0 and "SIGTERM: stopping" in output, output[-3000:]
        assert processes.wait_gone(lambda: _running(started), 10) == []
        assert _run_containers(docker_client, prefix, label) == []
        assert not list(Path("/tmp").glob(Path(prefix).name + "*"))
    finally:  # whatever the outcome, nothing of it outlives the test
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        processes.kill(_running(started))
        for cid in _run_containers(docker_client, prefix, label):
            docker_client.api.remove_container(cid, force=True)
        for root in Path("/tmp").glob(Path(prefix).name + "*"):
            shutil.rmtree(root, ignore_errors=True)
