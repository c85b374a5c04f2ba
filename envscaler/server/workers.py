"""Several gateway processes on one port under a small supervisor that accepts the connections
and deals them to the workers in turn, restarts a worker that dies, with a backoff, and gives up
on one that keeps dying (`RestartPolicy`).

Why deal: a keep-alive connection stays on the worker that took it, so connections must be
spread evenly. With uvicorn's ``--workers`` every worker waits on one shared listening socket and
the one that wakes first accepts every pending connection (64 connections opened at once could
all land on one worker, saturating its core while the others idle). With a socket per worker
(``SO_REUSEPORT``) the kernel spreads them by a hash of their addresses: 64 connections split
27 : 37 as often as 32 : 32, and the busier worker's requests waited a third longer (validations
at 64 concurrent: p50 159 ms, p99 356 ms, one worker's requests at ~130 ms, the other's at ~220).
The supervisor's acceptor hands each connection (``SCM_RIGHTS`` over a socket pair) to the next
worker, which serves it as if it had accepted it (`DealtServer`): an even split, for one
``accept`` and one message per connection.

Nothing outlives the supervisor: each worker arms ``PR_SET_PDEATHSIG`` (SIGTERM: a clean
shutdown that removes its sandboxes) when it starts, and kills itself ``ORPHAN_GRACE`` seconds
after it finds itself orphaned, since no supervisor is left to escalate.

Metrics: the supervisor gives the workers a fresh private ``PROMETHEUS_MULTIPROC_DIR``, where
prometheus_client keeps each process's values, so ``/metrics`` on any worker sums them all
(``envscaler.server.metrics``). A dead worker is marked dead there (its live gauges drop out, its counts
stay); the directory is removed when the supervisor ends, or, when it could not (SIGKILL), by the
next supervisor that starts: a supervisor holds a ``flock`` on its directory while it runs.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
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
from multiprocessing import reduction
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import uvicorn
from prometheus_client import multiprocess

from envscaler.common.backoff import exponential
from envscaler.sandbox.runtime.contain import die_with_parent
from envscaler.server.app import configure_logging
from envscaler.server.metrics import MULTIPROC_DIR_ENV

log = logging.getLogger("envscaler.server.workers")

BACKLOG = 2048
DEAL_POLL = 0.5  # seconds: how often the acceptor looks whether the supervisor is stopping
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
    """A TCP socket bound to (host, port), and only this one: no other process may join it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


class DealtServer(uvicorn.Server):
    """uvicorn serving the connections its supervisor deals it, with no listening socket."""

    def __init__(self, config: uvicorn.Config, channel: Connection) -> None:
        super().__init__(config)
        self.channel = channel
        self.opening: set[asyncio.Task[Any]] = set()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=[])
        protocol = functools.partial(self.config.http_protocol_class, config=self.config,
                                     server_state=self.server_state,
                                     app_state=self.lifespan.state)
        loop = asyncio.get_running_loop()
        loop.add_reader(self.channel.fileno(), self._take, loop, protocol)

    def _take(self, loop: asyncio.AbstractEventLoop, protocol: Any) -> None:
        try:
            fd = reduction.recv_handle(self.channel)
        except (EOFError, OSError):  # the supervisor is gone: the orphan watch ends this one
            loop.remove_reader(self.channel.fileno())
            return
        task = loop.create_task(loop.connect_accepted_socket(protocol, socket.socket(fileno=fd)))
        self.opening.add(task)
        task.add_done_callback(self.opening.discard)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        asyncio.get_running_loop().remove_reader(self.channel.fileno())
        await super().shutdown(sockets)


def _worker(channel: Connection, config: dict[str, Any], supervisor: int) -> None:
    die_with_parent(supervisor, signal.SIGTERM)
    threading.Thread(target=_kill_when_orphaned, args=(supervisor,), daemon=True,
                     name="envscaler-orphan-watch").start()
    server = DealtServer(uvicorn.Config(**config), channel)
    server.run()
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
        return exponential(failures, self.delay, self.max_delay)


class WorkersFailing(RuntimeError):
    """A worker slot failed ``RestartPolicy.limit`` times in a row."""


@dataclass
class _Slot:
    """One worker's place: its process, the channel its connections are dealt on, when it
    started, its failures in a row, and when it is due to be started again (None: it runs)."""

    process: BaseProcess
    channel: Connection
    started: float
    failures: int = 0
    restart_at: float | None = None

    def deal(self, connection: socket.socket) -> bool:
        """Hand ``connection`` to this slot's worker; False when it cannot take it now."""
        if self.restart_at is not None:
            return False
        try:
            reduction.send_handle(self.channel, connection.fileno(), self.process.pid)
            return True
        except OSError:  # it died (restarted by the supervisor's loop)
            return False


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

    def _start(self) -> tuple[BaseProcess, Connection]:
        ours, theirs = self.context.Pipe()
        process = self.context.Process(target=_worker, args=(theirs, self.config, os.getpid()),
                                       name="envscaler-gateway-worker")
        process.start()
        theirs.close()
        return process, ours

    def _deal_forever(self, listener: socket.socket) -> None:
        """Accept every connection and hand it to the next worker that can take it (in turn).
        Each is closed here once dealt: the worker holds its own descriptor."""
        listener.settimeout(DEAL_POLL)
        turn = 0
        while not self.stopping:
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError as exc:  # e.g. too many open files: the client sees a reset
                log.error("accepting a connection failed: %s", exc)
                time.sleep(DEAL_POLL)
                continue
            with connection:
                for _ in range(len(self.slots)):
                    slot, turn = self.slots[turn % len(self.slots)], turn + 1
                    if slot.deal(connection):
                        break
                else:
                    log.error("no gateway worker could take a connection; closing it")

    def _stop(self, signum: int, _frame: Any) -> None:
        self.stopping = True

    def run(self) -> None:
        configure_logging(str(self.config.get("log_level", "INFO")))
        # A port taken by another program fails here, once, with a clear error.
        listener = listening_socket(self.host, self.port)
        listener.listen(BACKLOG)
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._stop)
        metrics_dir, metrics_lock = _locked_metrics_dir()
        os.environ[MULTIPROC_DIR_ENV] = metrics_dir  # inherited by the workers
        dealer = threading.Thread(target=self._deal_forever, args=(listener,), daemon=True,
                                  name="envscaler-dealer")
        try:
            self.slots = [_Slot(*self._start(), time.monotonic()) for _ in range(self.count)]
            log.info("gateway workers started pids=%s", [s.process.pid for s in self.slots])
            dealer.start()
            while not self.stopping:
                time.sleep(0.2)
                self._restart_dead()
        finally:
            self.stopping = True
            self._stop_all()  # first: the workers need not wait for the acceptor to notice
            if dealer.is_alive():
                dealer.join()
            listener.close()
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
                    slot.channel.close()
                    (slot.process, slot.channel), slot.started = self._start(), now
                    slot.restart_at = None
                continue
            worker = slot.process
            if worker.is_alive():
                continue
            multiprocess.mark_process_dead(worker.pid)  # in $PROMETHEUS_MULTIPROC_DIR
            ran = now - slot.started
            slot.failures = slot.failures + 1 if ran < self.policy.max_delay else 1
            if slot.failures >= self.policy.limit:
                self._stop_all()  # first: nothing the other workers print follows the verdict
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
