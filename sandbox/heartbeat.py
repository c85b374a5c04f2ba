"""Liveness of service instances, as files in the shared socket root.

Each running instance touches ``<socket_root>/instances/<instance>`` every few seconds. A sandbox
whose instance has no fresh file belongs to a dead instance and may be reaped. Files work across
gateway containers and hosts that share the socket root, with no dependency on Redis.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path


class Heartbeat:
    def __init__(self, socket_root: Path, instance: str, interval: float) -> None:
        self.directory = socket_root / "instances"
        self.path = self.directory / instance
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    def beat(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path.touch()

    def start(self) -> None:
        self.beat()
        self._task = asyncio.create_task(self._run(), name="envscaler-heartbeat")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.beat()

    async def stop(self) -> None:
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
