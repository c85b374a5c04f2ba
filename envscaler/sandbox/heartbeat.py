"""Liveness of service instances, as files in the shared socket root.

Each running instance touches ``<socket_root>/instances/<instance>`` every few seconds. A sandbox
whose instance has no fresh file belongs to a dead instance and may be reaped. Files work across
gateway containers and hosts that share the socket root, with no dependency on Redis.

A heartbeat that stops while its instance lives gets that instance's live sandboxes reaped by the
others, so it is supervised: a beat that fails is logged as an error (and retried at the next
interval), a task that ends for any reason but `Heartbeat.stop` is restarted at once, and
`Heartbeat.check` fails readiness (``/readyz``) saying what is wrong.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

from envscaler.sandbox.errors import SandboxUnavailable
from envscaler.sandbox.socketroot import HEARTBEATS

log = logging.getLogger("envscaler.sandbox.heartbeat")


class Heartbeat:
    def __init__(self, socket_root: Path, instance: str, interval: float) -> None:
        self.directory = socket_root / HEARTBEATS
        self.path = self.directory / instance
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self._running = False
        self._error: str | None = None  # why the last beat failed; None when it succeeded
        self._last_beat = 0.0  # monotonic time of the last beat that succeeded

    def beat(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path.touch()
        self._last_beat = time.monotonic()

    def start(self) -> None:
        self.beat()
        self._running = True
        self._spawn()

    def _spawn(self) -> None:
        self._task = asyncio.create_task(self._run(), name="envscaler-heartbeat")
        self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        """The task ended, which it never does by itself: restart it unless stopped."""
        if not self._running or task is not self._task:
            return
        reason = "cancelled" if task.cancelled() else repr(task.exception())
        log.error("heartbeat task of %s ended (%s); restarting it", self.path.name, reason)
        self._spawn()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self._beat_or_log()

    def _beat_or_log(self) -> None:
        try:
            self.beat()
        except OSError as exc:
            self._error = f"cannot touch {self.path}: {exc.strerror or exc}"
            log.error("heartbeat failed: %s; other instances will take this one for dead and "
                      "reap its sandboxes", self._error)
            return
        if self._error is not None:
            log.warning("heartbeat of %s beats again", self.path.name)
        self._error = None

    def problem(self) -> str | None:
        """Why other instances may take this one for dead, or None."""
        if self._error is not None:
            return self._error
        if self._running and (self._task is None or self._task.done()):
            return "the heartbeat task is not running"
        age = time.monotonic() - self._last_beat
        if self._running and age > 2 * self.interval:
            return f"no heartbeat for {age:.0f} s (every {self.interval:g} s expected)"
        return None

    def check(self) -> None:
        """Raise `SandboxUnavailable` (not ready) while `problem` names one."""
        problem = self.problem()
        if problem is not None:
            raise SandboxUnavailable(f"this instance's heartbeat fails ({problem}): other "
                                     "instances would reap its sandboxes")

    async def stop(self) -> None:
        self._running = False
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self.path.unlink(missing_ok=True)

    def is_alive(self, instance: str) -> bool:
        """True when ``instance`` beat within three intervals."""
        try:
            age = time.time() - os.stat(self.directory / instance).st_mtime
        except FileNotFoundError:
            return False
        return age < 3 * self.interval
