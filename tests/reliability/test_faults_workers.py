"""The worker supervisor of `envscaler serve` when a worker keeps dying: it restarts it with a
backoff that doubles up to a cap, and after ENVSCALER_WORKER_RESTART_LIMIT failures in a row it
gives up and exits 1 with a clear error, instead of restarting it every second for ever."""

from __future__ import annotations

import re
from pathlib import Path

from envscaler.server.embedded_redis import free_port
from tests.deadlines import scaled
from tests.integration.serve_helpers import serve, serve_env


def test_a_worker_that_keeps_dying_is_restarted_with_backoff_then_given_up(
    redis_url: str, socket_root: Path, tmp_path: Path
) -> None:
    env = serve_env(socket_root, redis_url=redis_url.rsplit("/", 1)[0] + "/7",
                    catalogue=str(tmp_path / "no-such-catalogue"),  # every worker fails to start
                    worker_restart_delay="0.1", worker_restart_max_delay="30",
                    worker_restart_limit="4")
    log_path = tmp_path / "gateway.log"
    process = serve(free_port(), env, log_path, workers=2)
    assert process.wait(scaled(120)) == 1
    log = log_path.read_text()
    delays = [float(d) for d in re.findall(r"restarting in ([0-9.]+) s \(failure", log)]
    # each slot: 0.1, 0.2, 0.4, then the fourth failure ends it (the other slot may be between)
    assert sorted(set(delays)) == [0.1, 0.2, 0.4], log[-3000:]
    assert "4 failures in a row" in log and "giving up" in log, log[-3000:]
    assert "error: a gateway worker failed 4 times in a row" in log, log[-3000:]
    assert "Traceback" not in log.split("giving up", 1)[1], log[-3000:]
