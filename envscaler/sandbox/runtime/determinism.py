"""Virtual time and seeded randomness, so that environment code reproduces byte for byte.

Generated tools stamp records with ``datetime.now()`` and make ids with ``uuid.uuid4()``; with the
real clock and entropy no two rollouts agree. ``install()`` patches the standard library once, at
runtime start, so that the same source + init_config + seed + calls give identical results and
state in any sandbox, any day.

Covered:

- Time: a ``VirtualClock`` starting at 2025-01-01T09:00:00Z (or the load field ``clock_start``).
  It moves forward exactly 1 s when a tool call starts and 1 ms on every read, so successive reads
  strictly increase. It feeds ``time.time``/``time_ns``, ``monotonic``/``monotonic_ns``,
  ``perf_counter``/``perf_counter_ns``, ``process_time``/``process_time_ns`` (the last three count
  seconds since the clock's start), and ``time.localtime``/``gmtime``/``ctime``/``asctime``/
  ``strftime`` called without a time argument.
- ``datetime.datetime`` and ``datetime.date`` are replaced in the ``datetime`` module by
  subclasses whose ``now(tz=None)``, ``utcnow()``, ``today()`` and ``date.today()`` read the clock;
  naive values are UTC. ``isinstance``/``issubclass`` checks against them accept real instances too.
  Code that does ``from datetime import datetime`` after ``install()`` gets the subclass.
- Randomness: the global ``random`` generator is seeded with the seed; ``random.Random()`` made
  without a seed draws its seed from a seeded generator; ``uuid.uuid4`` and ``uuid.uuid1`` (node
  and clock sequence included) come from a dedicated seeded generator; ``os.urandom`` and
  ``random._urandom`` (hence ``random.SystemRandom`` and ``secrets``) return seeded bytes.
- ``reseed`` (at load and reset) restarts the clock and re-seeds every generator.

Not covered: ``time.sleep`` really sleeps (the call deadline bounds it; the clock does not move);
``os.getrandom`` and reads of ``/dev/urandom``; ``hash()`` of str/bytes (the launcher sets
``PYTHONHASHSEED=0``); ``id()`` and memory addresses (``jsonsafe`` strips them from reprs); check
functions, which run in a fresh, unpatched interpreter.

The runtime's own modules bind ``time.monotonic`` at import (``threading``, ``subprocess``,
``socketserver``, ``queue``), so ``install()`` must run after they are imported; runtime code that
needs real time uses ``REAL_MONOTONIC``.
"""

from __future__ import annotations

import datetime as datetime_module
import os
import queue  # noqa: F401 - imported before install(): they bind the real clocks at import
import random
import subprocess  # noqa: F401 - (see the docstring)
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

REAL_MONOTONIC = time.monotonic
DEFAULT_START = "2025-01-01T09:00:00+00:00"
_REAL_DATE = datetime_module.date
_REAL_DATETIME = datetime_module.datetime
_REAL_RANDOM = random.Random
_REAL_UUID1 = uuid.uuid1
_CALL_STEP_NS = 1_000_000_000
_READ_STEP_NS = 1_000_000
_installed: Determinism | None = None


def parse_instant(text: str) -> int:
    """Nanoseconds since the epoch of an ISO 8601 date-time; naive means UTC."""
    moment = _REAL_DATETIME.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime_module.UTC)
    delta = moment - _REAL_DATETIME(1970, 1, 1, tzinfo=datetime_module.UTC)
    return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000


class VirtualClock:
    """Time that moves only when environment code acts: +1 s per call, +1 ms per read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.start_ns = self._now_ns = parse_instant(DEFAULT_START)

    def restart(self, start_ns: int) -> None:
        with self._lock:
            self.start_ns = self._now_ns = start_ns

    def advance_call(self) -> None:
        with self._lock:
            self._now_ns += _CALL_STEP_NS

    def read_ns(self) -> int:
        """The current instant; the next read returns 1 ms later."""
        with self._lock:
            value = self._now_ns
            self._now_ns += _READ_STEP_NS
            return value

    def seconds(self) -> float:
        return self.read_ns() / 1e9

    def elapsed_ns(self) -> int:
        return self.read_ns() - self.start_ns

    def export(self) -> tuple[int, int]:
        with self._lock:
            return self.start_ns, self._now_ns

    def restore(self, exported: tuple[int, int]) -> None:
        with self._lock:
            self.start_ns, self._now_ns = exported


class _RealTypeCheck(type):
    """``isinstance``/``issubclass`` against a patched class answer as for the real class it
    replaces, so values made before the patch (or by C code, like ``datetime.date()``) pass."""

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls.__mro__[1])

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, cls.__mro__[1])


class Determinism:
    """The clock and the seeded generators behind every patched function."""

    def __init__(self) -> None:
        self.clock = VirtualClock()
        self._uuids = _REAL_RANDOM(0)
        self._bytes = _REAL_RANDOM(0)
        self._seeds = _REAL_RANDOM(0)

    def reseed(self, seed: int, start_ns: int) -> None:
        """Back to the state a fresh runtime would have after seeding with ``seed``."""
        random.seed(seed)
        self._uuids = _REAL_RANDOM(f"uuid:{seed}")
        self._bytes = _REAL_RANDOM(f"urandom:{seed}")
        self._seeds = _REAL_RANDOM(f"random.Random():{seed}")
        uuid._last_timestamp = None  # type: ignore[attr-defined]  # uuid1 keeps it across calls
        self.clock.restart(start_ns)

    def export(self) -> dict[str, Any]:
        """Everything ``reseed`` sets, as it is now: a fork's runtime goes on from here."""
        return {"uuids": self._uuids.getstate(), "bytes": self._bytes.getstate(),
                "seeds": self._seeds.getstate(), "clock": self.clock.export(),
                "uuid_timestamp": uuid._last_timestamp}  # type: ignore[attr-defined]

    def restore(self, exported: dict[str, Any]) -> None:
        self._uuids.setstate(exported["uuids"])
        self._bytes.setstate(exported["bytes"])
        self._seeds.setstate(exported["seeds"])
        self.clock.restore(exported["clock"])
        uuid._last_timestamp = exported["uuid_timestamp"]  # type: ignore[attr-defined]

    def next_seed(self) -> int:
        return self._seeds.getrandbits(128)

    def urandom(self, size: int, /) -> bytes:
        return self._bytes.randbytes(size)

    def uuid4(self) -> uuid.UUID:
        return uuid.UUID(int=self._uuids.getrandbits(128), version=4)

    def uuid1(self, node: int | None = None, clock_seq: int | None = None) -> uuid.UUID:
        """The real ``uuid1`` fed seeded node and clock sequence; it reads ``time.time_ns``, which
        is virtual. The multicast bit marks the node as random, as RFC 4122 asks."""
        if node is None:
            node = self._uuids.getrandbits(48) | 1 << 40
        if clock_seq is None:
            clock_seq = self._uuids.getrandbits(14)
        return _REAL_UUID1(node=node, clock_seq=clock_seq)


def install() -> Determinism:
    """Patch the standard library (once per process) and return the controlling object."""
    global _installed
    if _installed is None:
        os.environ["TZ"] = "UTC"
        time.tzset()
        _installed = Determinism()
        _patch_time(_installed.clock)
        _patch_datetime(_installed.clock)
        _patch_randomness(_installed)
    return _installed


def _patch_time(clock: VirtualClock) -> None:
    time.time = clock.seconds
    time.time_ns = clock.read_ns
    for name in ("monotonic", "perf_counter", "process_time"):
        setattr(time, name, lambda: clock.elapsed_ns() / 1e9)
        setattr(time, f"{name}_ns", clock.elapsed_ns)
    for name in ("localtime", "gmtime", "ctime"):
        setattr(time, name, _defaulting_to_now(getattr(time, name), clock))
    real_asctime, real_strftime = time.asctime, time.strftime

    def asctime(*moment: time.struct_time) -> str:
        return real_asctime(*moment) if moment else real_asctime(time.localtime())

    def strftime(format: str, *moment: time.struct_time) -> str:
        return real_strftime(format, *moment) if moment else real_strftime(format, time.localtime())

    time.asctime, time.strftime = asctime, strftime


def _defaulting_to_now(real: Callable[..., Any], clock: VirtualClock) -> Callable[..., Any]:
    def patched(seconds: float | None = None) -> Any:
        return real(clock.seconds() if seconds is None else seconds)

    patched.__name__ = real.__name__
    return patched


def _patch_datetime(clock: VirtualClock) -> None:
    epoch = _REAL_DATETIME(1970, 1, 1)

    class datetime(_REAL_DATETIME, metaclass=_RealTypeCheck):
        @classmethod
        def now(cls, tz: datetime_module.tzinfo | None = None) -> Any:
            utc = epoch + datetime_module.timedelta(microseconds=clock.read_ns() // 1000)
            value = cls.combine(utc.date(), utc.time())
            return value if tz is None else tz.fromutc(value.replace(tzinfo=tz))

        @classmethod
        def utcnow(cls) -> Any:
            return cls.now()

        @classmethod
        def today(cls) -> Any:
            return cls.now()

    class date(_REAL_DATE, metaclass=_RealTypeCheck):
        @classmethod
        def today(cls) -> Any:
            now = datetime.now()
            return cls(now.year, now.month, now.day)

    for patched in (datetime, date):
        patched.__module__, patched.__qualname__ = "datetime", patched.__name__
    datetime_module.datetime = datetime  # type: ignore[misc]
    datetime_module.date = date  # type: ignore[misc]


def _patch_randomness(determinism: Determinism) -> None:
    class Random(_REAL_RANDOM):
        """``random.Random()`` without a seed takes one from the seeded stream, not the OS."""

        def seed(self, a: Any = None, version: int = 2) -> None:
            super().seed(determinism.next_seed() if a is None else a, version)

    Random.__module__ = "random"
    random.Random = Random  # type: ignore[misc]
    os.urandom = determinism.urandom
    random._urandom = determinism.urandom  # type: ignore[attr-defined]
    uuid.uuid4 = determinism.uuid4
    uuid.uuid1 = determinism.uuid1
