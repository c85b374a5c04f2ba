"""Virtual time and seeded randomness. Patching happens in child interpreters, never in pytest's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from envscaler.sandbox.runtime.determinism import DEFAULT_START, VirtualClock, parse_instant

REPO_ROOT = Path(__file__).resolve().parents[2]
PRELUDE = """
import json
import envscaler.sandbox.runtime.envhost  # as in the runtime: its modules are imported before install()
from envscaler.sandbox.runtime import determinism
d = determinism.install()
def reseed(seed, start=determinism.DEFAULT_START):
    d.reseed(seed, determinism.parse_instant(start))
"""
SAMPLE = """
import datetime as dt, os, random, secrets, time, uuid
from datetime import datetime, date, timezone
reseed(SEED)
values = {
    "time": [time.time(), time.time()], "time_ns": time.time_ns(),
    "monotonic": time.monotonic(), "perf_counter_ns": time.perf_counter_ns(),
    "now": datetime.now().isoformat(), "now_utc": datetime.now(timezone.utc).isoformat(),
    "module_now": dt.datetime.now().isoformat(), "utcnow": datetime.utcnow().isoformat(),
    "today": date.today().isoformat(), "strftime": time.strftime("%Y-%m-%d %H:%M:%S"),
    "ctime": time.ctime(), "localtime": list(time.localtime())[:6],
    "uuid4": str(uuid.uuid4()), "uuid1": str(uuid.uuid1()),
    "random": random.random(), "choice": random.choice("abcdef"),
    "instance": random.Random().random(), "urandom": os.urandom(8).hex(),
    "secrets": secrets.token_hex(8), "system": random.SystemRandom().random(),
}
print(json.dumps(values))
"""


def run(code: str, **replacements: Any) -> Any:
    """Run ``PRELUDE + code`` in a fresh interpreter (as the runtime is started); its stdout JSON."""
    for name, value in replacements.items():
        code = code.replace(name, repr(value))
    completed = subprocess.run([sys.executable, "-s", "-c", PRELUDE + textwrap.dedent(code)],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=30, check=False,
                               env={"PYTHONHASHSEED": "0", "PATH": os.defpath})
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def test_same_seed_gives_identical_values_in_separate_processes() -> None:
    first, second = run(SAMPLE, SEED=7), run(SAMPLE, SEED=7)
    assert json.dumps(first) == json.dumps(second)
    assert first["now"] == "2025-01-01T09:00:00.005000"  # five reads before it, 1 ms each


def test_a_different_seed_changes_randomness_but_not_time() -> None:
    first, other = run(SAMPLE, SEED=7), run(SAMPLE, SEED=8)
    for key in ("uuid4", "random", "instance", "urandom", "secrets", "system"):
        assert first[key] != other[key], key
    for key in ("time", "now", "today", "strftime"):
        assert first[key] == other[key], key


def test_values_are_well_formed() -> None:
    values = run(SAMPLE, SEED=1)
    assert values["uuid4"][14] == "4"  # version 4
    assert values["uuid1"][14] == "1"
    assert values["today"] == "2025-01-01"
    assert values["now_utc"].endswith("+00:00")
    assert values["localtime"][:4] == [2025, 1, 1, 9]
    assert values["ctime"].startswith("Wed Jan  1 09:00:00 2025")
    assert values["time"] == [1_735_722_000.0, 1_735_722_000.001]
    assert values["monotonic"] > 0


def test_reads_step_1_ms_and_calls_step_1_s() -> None:
    steps = run("""
        import time
        reseed(0)
        first, second = time.time_ns(), time.time_ns()
        d.clock.advance_call()
        third = time.time_ns()
        print(json.dumps([second - first, third - second]))
    """)
    assert steps == [1_000_000, 1_001_000_000]


def test_reseed_restarts_clock_and_generators_and_clock_start_moves_the_origin() -> None:
    values = run("""
        import random, uuid
        from datetime import datetime
        def sample():
            return [datetime.now().isoformat(), str(uuid.uuid4()), str(uuid.uuid1()), random.random()]
        reseed(3)
        first = sample()
        d.clock.advance_call()
        sample()
        reseed(3)
        again = sample()
        reseed(3, "2030-05-06T07:08:09+02:00")
        moved = datetime.now().isoformat()
        print(json.dumps([first, again, moved]))
    """)
    first, again, moved = values
    assert first == again
    assert moved == "2030-05-06T05:08:09"  # naive values are UTC


def test_patched_classes_keep_isinstance_and_explicit_arguments_keep_meaning() -> None:
    checks = run("""
        import time
        import datetime as dt
        from datetime import date, datetime, timedelta, timezone
        reseed(0)
        now = datetime.now()
        print(json.dumps({
            "module_attr": dt.datetime is datetime,
            "real_date_is_date": isinstance(now.date(), date),
            "real_datetime_is_datetime": isinstance(dt.datetime.fromtimestamp(0), datetime),
            "datetime_subclass_of_date": issubclass(datetime, date),
            "arithmetic": (now + timedelta(days=1)).isoformat(),
            "parsed": type(datetime.fromisoformat("2020-01-01")) is datetime,
            "explicit_localtime": time.localtime(0).tm_year,
            "explicit_strftime": time.strftime("%Y", time.gmtime(86400 * 366)),
            "fromtimestamp": datetime.fromtimestamp(0, timezone.utc).year,
            "aware_now": datetime.now(timezone(timedelta(hours=2))).isoformat(),
        }))
    """)
    assert checks == {
        "module_attr": True, "real_date_is_date": True, "real_datetime_is_datetime": True,
        "datetime_subclass_of_date": True, "arithmetic": "2025-01-02T09:00:00",
        "parsed": True, "explicit_localtime": 1970, "explicit_strftime": "1971",
        "fromtimestamp": 1970, "aware_now": "2025-01-01T11:00:00.001000+02:00",
    }


def test_runtime_machinery_keeps_real_time_and_does_not_move_the_clock() -> None:
    result = run("""
        import subprocess, sys, time
        from envscaler.sandbox.runtime.determinism import REAL_MONOTONIC
        reseed(0)
        before = time.time_ns()
        started = REAL_MONOTONIC()
        time.sleep(0.2)  # really sleeps
        subprocess.run([sys.executable, "-c", "pass"], timeout=10)  # real deadline, no clock reads
        real_elapsed = REAL_MONOTONIC() - started
        after = time.time_ns()
        print(json.dumps({"virtual": after - before, "real": real_elapsed,
                          "again": determinism.install() is d}))
    """)
    assert result["virtual"] == 1_000_000
    assert result["real"] >= 0.2
    assert result["again"] is True


def test_virtual_clock_in_isolation() -> None:
    clock = VirtualClock()
    start = parse_instant(DEFAULT_START)
    assert clock.read_ns() == start
    assert clock.elapsed_ns() == 1_000_000
    clock.advance_call()
    assert clock.read_ns() == start + 2_000_000 + 1_000_000_000
    clock.restart(5)
    assert clock.seconds() == 5e-9


def test_parse_instant() -> None:
    assert parse_instant("1970-01-01T00:00:01") == 1_000_000_000
    assert parse_instant("1970-01-01T01:00:00+01:00") == 0
    assert parse_instant("2025-01-01T09:00:00Z") == 1_735_722_000 * 10**9
    assert parse_instant("1970-01-01T00:00:00.000001") == 1000
