"""Several gateway processes on one port, each with a listening socket of its own
(``SO_REUSEPORT``), under a small supervisor that restarts a worker that dies, with a backoff,
and gives up on one that keeps dying (`RestartPolicy`).

Why not uvicorn's ``--workers``: there every worker waits on one shared listening socket, and the
one that wakes first accepts every pending connection. A client that opens its connections at
once (a rollout batch, a load generator) can find all of them on one worker, which saturates its
core while the others idle: measured with ``envscaler bench``, 64 connections gave 1,250 calls/s
on some runs and 1,600 on others. With a socket per worker the kernel spreads new connections
over the workers by a hash of their addresses.

Nothing outlives the supervisor: each worker arms ``PR_SET_PDEATHSIG`` (SIGTERM: a clean
shutdown that removes its sandboxes) when it starts, and kills itself ``ORPHAN_GRACE`` seconds
after it finds itself orphaned, since no supervisor is left to escalate.

Metrics: the supervisor gives the workers a fresh private ``PROMETHEUS_MULTIPROC_DIR``, where
prometheus_client keeps each process's values, so ``/metrics`` on any worker sums them all
(``server.metrics``). A dead worker is marked dead there (its live gauges drop out, its counts
stay); the directory is removed when the supervisor ends, or, when it could not (SIGKILL), by the
next supervisor that starts: a supervisor holds a ``flock`` on its directory while it runs.
"""

from __future__ import annotations

import fcntl
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import uvicorn
from prometheus_client import multiprocess

from sandbox.runtime.contain import die_with_parent
from server.app import configure_logging
from server.metrics import MULTIPROC_DIR_ENV

log = logging.getLogger("envscaler.server.workers")

BACKLOG = 2048
STARTUP_FAILURE = 3  # uvicorn's exit status when the application does not start
STOP_TIMEOUT = 30.0
ORPHAN_GRACE = 10.0
ORPHAN_POLL = 0.5
METRICS_PREFIX = "envscaler-metrics-"
METRICS_DIR_MIN_AGE = 10.0  # seconds: a younger one may be about to be locked


def default_count() -> int:
    """One worker per CPU this process may run on (its affinity mask, narrowed by ``taskset`` or
    a cpuset), which can be fewer than the machine has."""
    return len(os.sched_getaffinity(0))


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port) that other processes of this user may bind too."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def _worker(host: str, port: int, config: dict[str, Any], supervisor: int) -> None:
    die_with_parent(supervisor, signal.SIGTERM)
    threading.Thread(target=_kill_when_orphaned, args=(supervisor,), daemon=True,
                     name="envscaler-orphan-watch").start()
    sock = listening_socket(host, port)
    sock.listen(BACKLOG)
    server = uvicorn.Server(uvicorn.Config(**config))
    server.run(sockets=[sock])
    if not server.started:  # its lifespan failed: a crash to the supervisor, not a clean exit
        sys.exit(STARTUP_FAILURE)


def _kill_when_orphaned(supervisor: int) -> None:
    """Bounds the clean shutdown that the parent-death SIGTERM starts: it may hang (a request
    that never ends, an engine that does not answer), and nobody else would ever kill it."""
    while os.getppid() == supervisor:
        time.sleep(ORPHAN_POLL)
    time.sleep(ORPHAN_GRACE)
    log.error("gateway worker pid=%s outlived its supervisor by %g s; killing it",
              os.getpid(), ORPHAN_GRACE)
    os.kill(os.getpid(), signal.SIGKILL)


def _locked_metrics_dir() -> tuple[str, int]:
    """A fresh private directory for the workers' metric files, and a descriptor that holds its
    lock (not inherited: the lock ends with the supervisor)."""
    _remove_stale_metrics_dirs()
    path = tempfile.mkdtemp(prefix=METRICS_PREFIX)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return path, fd


def _remove_stale_metrics_dirs() -> None:
    """Those of supervisors that ended without removing theirs: unlocked, and not brand new."""
    for path in Path(tempfile.gettempdir()).glob(METRICS_PREFIX + "*"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if time.time() - os.fstat(fd).st_mtime > METRICS_DIR_MIN_AGE:
                shutil.rmtree(path, ignore_errors=True)
        except BlockingIOError:
            pass  # a live supervisor's
        finally:
            os.close(fd)


@dataclass(frozen=True)
class RestartPolicy:
    """How a worker that dies is replaced (``ENVSCALER_WORKER_RESTART_*``): after ``delay``
    seconds, doubled for each failure in a row of the same worker slot, up to ``max_delay``. A
    failure is in a row when its worker ran less than ``max_delay`` seconds; after ``limit`` of
    them the supervisor gives up and exits non-zero: a worker that cannot start (a bad
    catalogue, a broken install) is a fault to report, not to retry every second for ever."""

    delay: float = 1.0
    max_delay: float = 30.0
    limit: int = 5

    def backoff(self, failures: int) -> float:
        return float(min(self.max_delay, self.delay * 2 ** (failures - 1)))


class WorkersFailing(RuntimeError):
    """A worker slot failed ``RestartPolicy.limit`` times in a row."""


@dataclass
class _Slot:
    """One worker's place: its process, when it started, its failures in a row, and when it
    is due to be started again (None: it runs)."""

    process: BaseProcess
    started: float
    failures: int = 0
    restart_at: float | None = None


class Supervisor:
    """Starts ``count`` workers, restarts any that dies (`RestartPolicy`), stops them all on
    SIGINT or SIGTERM."""

    def __init__(self, count: int, config: dict[str, Any],
                 policy: RestartPolicy | None = None) -> None:
        """``config``: the keyword arguments of ``uvicorn.Config`` (host, port, log_level, ...)."""
        self.host, self.port = str(config["host"]), int(config["port"])
        self.count, self.config = count, config
        self.policy = policy or RestartPolicy()
        self.context = multiprocessing.get_context("spawn")
        self.slots: list[_Slot] = []
        self.stopping = False

    def _start(self) -> BaseProcess:
        process = self.context.Process(
            target=_worker, args=(self.host, self.port, self.config, os.getpid()),
            name="envscaler-gateway-worker")
        process.start()
        return process

    def _stop(self, signum: int, _frame: Any) -> None:
        self.stopping = True

    def run(self) -> None:
        configure_logging(str(self.config.get("log_level", "INFO")))
        # Held (bound, never listening) for as long as the supervisor runs: a port taken by
        # another program fails here, once, with a clear error, not in every worker forever.
        guard = listening_socket(self.host, self.port)
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._stop)
        metrics_dir, metrics_lock = _locked_metrics_dir()
        os.environ[MULTIPROC_DIR_ENV] = metrics_dir  # inherited by the workers
        try:
            self.slots = [_Slot(self._start(), time.monotonic()) for _ in range(self.count)]
            log.info("gateway workers started pids=%s", [s.process.pid for s in self.slots])
            while not self.stopping:
                time.sleep(0.2)
                self._restart_dead()
        finally:
            self._stop_all()
            guard.close()
            shutil.rmtree(metrics_dir, ignore_errors=True)
            os.close(metrics_lock)

    def _restart_dead(self) -> None:
        """Start the slots that are due; schedule the restart of workers that died (never a
        sleep here: the other slots and the stop signal are watched meanwhile)."""
        now = time.monotonic()
        for slot in self.slots:
            if self.stopping:
                return
            if slot.restart_at is not None:
                if now >= slot.restart_at:
                    slot.process, slot.started, slot.restart_at = self._start(), now, None
                continue
            worker = slot.process
            if worker.is_alive():
                continue
            multiprocess.mark_process_dead(worker.pid)  # in $PROMETHEUS_MULTIPROC_DIR
            ran = now - slot.started
            slot.failures = slot.failures + 1 if ran < self.policy.max_delay else 1
            if slot.failures >= self.policy.limit:
                log.error("gateway worker pid=%s exited with %s after %.1f s: %d failures in a "
                          "row, each within %g s of its start; giving up",
                          worker.pid, worker.exitcode, ran, slot.failures, self.policy.max_delay)
                raise WorkersFailing(f"a gateway worker failed {slot.failures} times in a row "
                                     f"(last exit status {worker.exitcode}); see the log above")
            delay = self.policy.backoff(slot.failures)
            log.error("gateway worker pid=%s exited with %s after %.1f s; restarting in %g s "
                      "(failure %d of %d in a row)", worker.pid, worker.exitcode, ran, delay,
                      slot.failures, self.policy.limit)
            slot.restart_at = now + delay

    def _stop_all(self) -> None:
        deadline = time.monotonic() + STOP_TIMEOUT
        workers = [slot.process for slot in self.slots]
        for worker in workers:
            if worker.is_alive():
                worker.terminate()  # SIGTERM: uvicorn shuts down gracefully (lifespan)
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.is_alive():
                worker.kill()
                worker.join()
