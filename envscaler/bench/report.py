"""The run's results as a Markdown table, the floors it is held to, and PNG plots."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from envscaler.bench.rollouts import PATTERNS

FLOOR_CALL_P50_MS = 2.0         # tool call p50 at concurrency 1
FLOOR_CALLS_PER_SECOND = 2000   # at concurrency 64, across sessions
FLOOR_CREATE_WARM_P50_MS = 10.0
FLOOR_RESET_P50_MS = 10.0
FLOOR_VALIDATE_P50_MS = 15.0    # 4 checks, one validation at a time
FLOOR_VALIDATE_P99_MS = 250.0   # 4 checks, FLOOR_VALIDATE_AT at once
FLOOR_VALIDATE_AT = 64
FLOOR_EPISODES_PER_SECOND = 50  # reference episodes, FLOOR_EPISODES_AT at once
FLOOR_EPISODES_AT = 64
FLOOR_REWARDS_AT = 256          # every reward 1.0 with this many episodes at once
FLOOR_DENSITY_SESSIONS = 1000
FLOOR_DENSITY_P99_MS = 1000.0
FLOOR_BATCH_AT = 512            # the batch phase's floors judge a batch of this many
FLOOR_BATCH_OPEN_SECONDS = 5.0  # opening all of it at once, none failing
FLOOR_BATCH_MIB = 10.0          # machine memory per idle live session
FLOOR_BATCH_RATIO = 0.9         # its episodes/s against the same pattern at FLOOR_EPISODES_AT
LARGE_AT, LARGEST = "order_desk-3mb", "order_desk-30mb"  # the large-state floors' sizes
FLOOR_LARGE_CALL_RATIO = 1.5    # call p50 at 3 MB against the small environment's, same gateway
FLOOR_LARGE_OPEN_P50_MS = 100.0
FLOOR_LARGE_REDIS_BYTES = 1_000_000  # Redis growth per closed session of the 3 MB environment
PATTERN_NAMES = {"open": "open per episode", "reset": "reset per episode"}
# The episodes floor is the rollout pattern's: what `envscaler rollout` and `run_rollouts` do by
# default (a session per lane, reset between episodes). Opening a session per episode
# (`--no-reuse-sessions`) is measured and shown beside it, not judged.
FLOOR_PATTERN = "reset"


def _get(data: dict[str, Any], *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _floor(name: str, target: str, value: float | None, unit: str,
           test: Callable[[float], bool | None]) -> dict[str, Any]:
    """A floor's row; not judged (``met`` None) when the run did not measure it, or when the
    row is shown beside a floor (``test`` answers None)."""
    return {"floor": name, "target": target,
            "measured": None if value is None else f"{value:g} {unit}".strip(),
            "met": None if value is None or (met := test(value)) is None else bool(met)}


def floors(results: dict[str, Any]) -> list[dict[str, Any]]:
    main = results["config"]["envs"][0]
    calls = _get(results, "calls", main) or {}
    validate = _get(results, "validate", "concurrency") or {}
    runs = _get(results, "episodes", "runs") or {}
    return [
        _floor("tool call p50 at concurrency 1", f"<= {FLOOR_CALL_P50_MS:g} ms",
               _get(calls, "1", "summary", "p50_ms"), "ms", lambda v: v <= FLOOR_CALL_P50_MS),
        _floor("tool calls/s at concurrency 64 across sessions", f">= {FLOOR_CALLS_PER_SECOND:,}",
               _get(calls, "64", "rps"), "/s", lambda v: v >= FLOOR_CALLS_PER_SECOND),
        _floor("session open from the warm pool, p50", f"<= {FLOOR_CREATE_WARM_P50_MS:g} ms",
               _get(results, "sessions", "create_warm", "p50_ms"), "ms",
               lambda v: v <= FLOOR_CREATE_WARM_P50_MS),
        _floor("reset p50", f"<= {FLOOR_RESET_P50_MS:g} ms",
               _get(results, "sessions", "reset", "p50_ms"), "ms",
               lambda v: v <= FLOOR_RESET_P50_MS),
        _floor("validate p50, 4 checks, concurrency 1", f"<= {FLOOR_VALIDATE_P50_MS:g} ms",
               _get(validate, "1", "p50_ms"), "ms", lambda v: v <= FLOOR_VALIDATE_P50_MS),
        _floor(f"validate p99, 4 checks, concurrency {FLOOR_VALIDATE_AT}",
               f"<= {FLOOR_VALIDATE_P99_MS:g} ms",
               _get(validate, str(FLOOR_VALIDATE_AT), "summary", "p99_ms"), "ms",
               lambda v: v <= FLOOR_VALIDATE_P99_MS),
        *(_episodes_floor(runs, pattern) for pattern in PATTERNS),
        _rewards_floor(runs),
        _floor("session lock lease expiries, the whole run", "0",
               results.get("lease_expiries"), "", lambda v: v == 0),
        _density_floor(results.get("density") or {}),
        *_batch_floors(results.get("batch") or {}),
        *_large_state_floors(results.get("large_state") or {}),
        _fork_floor(results.get("forks") or {}),
    ]


def _batch_floors(batch: dict[str, Any]) -> list[dict[str, Any]]:
    """Judged on a batch of ``FLOOR_BATCH_AT`` (--full); a smaller one (--quick) is not. Its
    episodes/s against the batch phase's own windows at ``FLOOR_EPISODES_AT`` lanes, measured in
    turn with it (`envscaler.bench.batch.measure_against`)."""
    judged = batch.get("concurrency") == FLOOR_BATCH_AT
    opening = batch.get("open_all") or {}
    baseline = batch.get("baseline") or {}
    at_64 = (baseline.get("episodes_per_second")
             if baseline.get("lanes") == FLOOR_EPISODES_AT else None)
    ratio = (round(batch["episodes_per_second"] / at_64, 2)
             if judged and at_64 else None)
    open_row = _floor(f"batch: open {FLOOR_BATCH_AT} sessions at once from one client",
                      f"<= {FLOOR_BATCH_OPEN_SECONDS:g} s, none failed",
                      opening.get("seconds") if judged else None, "s",
                      lambda v: v <= FLOOR_BATCH_OPEN_SECONDS and opening["failed"] == 0)
    if open_row["measured"] is not None:
        open_row["measured"] += f", {opening['failed']} failed"
    return [
        open_row,
        _floor(f"batch of {FLOOR_BATCH_AT}: machine memory per live session",
               f"<= {FLOOR_BATCH_MIB:g} MiB",
               _get(batch, "memory", "per_live_session_mib") if judged else None, "MiB",
               lambda v: v <= FLOOR_BATCH_MIB),
        _floor(f"batch of {FLOOR_BATCH_AT}: episodes/s / the same pattern at "
               f"{FLOOR_EPISODES_AT} lanes, in turn", f">= {FLOOR_BATCH_RATIO:g}x", ratio, "x",
               lambda v: v >= FLOOR_BATCH_RATIO),
    ]


def _fork_floor(forked: dict[str, Any]) -> dict[str, Any]:
    """Forking N costs no more than opening N (the issue's floor), compared by p50."""
    fork, opened = _get(forked, "fork", "p50_ms"), _get(forked, "open", "p50_ms")
    ratio = None if fork is None or not opened else round(fork / opened, 2)
    return _floor(f"fork of {forked.get('count', 8)} at step k / opening as many, p50", "<= 1",
                  ratio, "x", lambda v: v <= 1)


def _large_state_floors(large: dict[str, Any]) -> list[dict[str, Any]]:
    at, small = large.get(LARGE_AT) or {}, _get(large, "small_call", "p50_ms")
    call = _get(at, "call", "p50_ms")
    ratio = round(call / small, 2) if call is not None and small else None
    largest = large.get(LARGEST)
    outcome = None if largest is None else served(largest)
    return [
        _floor("large state: tool call p50 at 3 MB / the small environment's",
               f"<= {FLOOR_LARGE_CALL_RATIO:g}x", ratio, "x",
               lambda v: v <= FLOOR_LARGE_CALL_RATIO),
        _floor("large state: session open p50 at 3 MB", f"<= {FLOOR_LARGE_OPEN_P50_MS:g} ms",
               _get(at, "open", "p50_ms"), "ms", lambda v: v <= FLOOR_LARGE_OPEN_P50_MS),
        _floor("large state: Redis growth per closed 3 MB session",
               f"< {FLOOR_LARGE_REDIS_BYTES:,} bytes", at.get("redis_bytes_per_closed_session"),
               " B", lambda v: v < FLOOR_LARGE_REDIS_BYTES),
        {"floor": "large state: 30 MB scores 1.0 or is refused at open naming the limit",
         "target": "reward 1.0, or 413 naming its limit", "measured": outcome,
         "met": None if largest is None else ("refused" in largest or largest["reward"] == 1.0)},
    ]


def served(figure: dict[str, Any]) -> str:
    """What became of a large-state size: refused at open, not judged, or its reward."""
    if "refused" in figure:
        return f"refused at open: {figure['refused']}"
    if figure.get("no_reward"):
        return f"no reward: {figure['no_reward']}"
    return f"reward {figure['reward']}"


def _episodes_floor(runs: dict[str, Any], pattern: str) -> dict[str, Any]:
    judged = pattern == FLOOR_PATTERN
    return _floor(f"episodes/s at {FLOOR_EPISODES_AT} concurrent reference episodes, "
                  f"{PATTERN_NAMES[pattern]}",
                  f">= {FLOOR_EPISODES_PER_SECOND}" if judged else "shown, not judged",
                  _get(runs, pattern, str(FLOOR_EPISODES_AT), "episodes_per_second"), "/s",
                  lambda v: v >= FLOOR_EPISODES_PER_SECOND if judged else None)


def _rewards_floor(runs: dict[str, Any]) -> dict[str, Any]:
    """Every episode at ``FLOOR_REWARDS_AT`` at once, both patterns, scored 1.0 and none failed."""
    at = [r for pattern in PATTERNS if (r := _get(runs, pattern, str(FLOOR_REWARDS_AT)))]
    row: dict[str, Any] = {"floor": f"every reward 1.0 at {FLOOR_REWARDS_AT} concurrent reference "
                                    "episodes", "target": "all 1.0, none failed",
                           "measured": None, "met": None}
    if at:
        done = sum(r["episodes"] for r in at)
        perfect = sum(r["rewards"]["1.0"] for r in at)
        failed = sum(sum(r["errors"].values()) for r in at)
        row["measured"] = f"{perfect} of {done} at 1.0, {failed} failed"
        row["met"] = done > 0 and perfect == done and failed == 0
    return row


def _density_floor(density: dict[str, Any]) -> dict[str, Any]:
    """Fewer live sessions than the floor's (quick mode) say nothing of it: not judged."""
    live = density.get("live_sessions", 0)
    row = _floor(f"{FLOOR_DENSITY_SESSIONS} live sessions, call p99",
                 f"<= {FLOOR_DENSITY_P99_MS:g} ms",
                 _get(density, "calls", "summary", "p99_ms")
                 if live >= FLOOR_DENSITY_SESSIONS else None, "ms",
                 lambda v: v <= FLOOR_DENSITY_P99_MS)
    if density:
        row["measured"] = (f"{row['measured']} ({live} live)" if row["met"] is not None else
                           f"not judged: {live} live (--full holds {FLOOR_DENSITY_SESSIONS})")
    return row


def _ms(value: Any) -> str:
    if value is None:
        return "-"
    if value < 0.1:
        return f"{value * 1000:.1f} us"
    return f"{value:.2f} ms" if value < 10 else f"{value:.0f} ms"


def _cores(result: dict[str, Any], key: str) -> str:
    value = _get(result, "cpu_cores", key)
    return "-" if value is None else f"{value:.2f}"


def _hosts_section(results: dict[str, Any]) -> list[str]:
    """The TCP hop of a sandbox host against the runtime's Unix socket, and calls per second
    over 1, 2, 3 hosts sharing this machine's cores (per core: what carries to a cluster)."""
    hop, local = _get(results, "hosts", "hop"), _get(results, "baselines", "runtime")
    if not hop:
        return []
    extra = (hop["p50_ms"] - local["p50_ms"]) if local else None
    lines = ["", "## Sandbox hosts (`envscaler sandbox host`, no gateway)", "",
             "| how | p50 | p99 | hop's p50 cost |", "| --- | ---: | ---: | ---: |",
             f"| through a sandbox host over TCP | {_ms(hop['p50_ms'])} | {_ms(hop['p99_ms'])} | "
             f"{_ms(extra)} |", "",
             "| hosts | sandboxes at once | calls/s | machine cores | hosts' cores | "
             "calls per core-second |", "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for count, spread in _get(results, "hosts", "scaling").items():
        lines.append(f"| {count} ({spread['hosts_used']} used) | {spread['lanes']} | "
                     f"{spread['rps']:.0f} | {spread['cores']['machine']:.2f} | "
                     f"{spread['cores']['hosts']:.2f} | {spread['calls_per_core_second']:.0f} |")
    return lines


def markdown(results: dict[str, Any]) -> str:
    meta, config = results["meta"], results["config"]
    host = meta["host"]
    main = config["envs"][0]
    lines = [f"# envscaler bench ({meta['mode']}, {meta['started']})", "",
             (f"{host['cores']} cores, {host['mem_total_gib']} GiB; gateway `{meta['gateway']}` on "
             f"the Docker backend with its own Redis; load generator: {meta['load_generator']}. "
             f"Total {meta['total_seconds']} s."), ""]

    lines += ["## Tool calls through the gateway", "",
              ("One session per concurrent caller. CPU columns: cores used over the measuring "
              "window (2.00 = the whole machine)."), "",
              ("| environment (tool) | concurrency | calls/s | p50 | p99 | gateway CPU | sandboxes "
              "CPU | Redis CPU | load generator CPU | other CPU |"),
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for env_id, levels in results.get("calls", {}).items():
        tool = meta["probes"][env_id]["name"]
        for level, r in levels.items():
            s = r["summary"]
            failed = f" ({r['failed']} failed)" if r.get("failed") else ""
            lines.append(f"| {env_id} (`{tool}`) | {level} | {r['rps']:.0f}{failed} | "
                         f"{_ms(s.get('p50_ms'))} | {_ms(s.get('p99_ms'))} | "
                         f"{_cores(r, 'gateway')} | {_cores(r, 'sandboxes')} | "
                         f"{_cores(r, 'redis')} | {_cores(r, 'load generator')} | "
                         f"{_cores(r, 'other')} |")

    base = results.get("baselines", {})
    gateway_p50 = _get(results, "calls", main, "1", "summary", "p50_ms")
    lines += ["", (f"## The same call without the gateway ({main}, "
              f"`{meta['probes'][main]['name']}`)"), "",
              "| how | p50 | p99 | gateway at concurrency 1, p50 / this p50 |",
              "| --- | ---: | ---: | ---: |"]
    for key, name in (("in_process", ("in-process, as the paper's code: `exec` of the class, "
                                     "direct method call (throwaway container)")),
                      ("runtime", "sandbox runtime round trip over its Unix socket, no gateway")):
        b = base.get(key)
        if b:
            ratio = f"{gateway_p50 / b['p50_ms']:.0f}x" if gateway_p50 and b["p50_ms"] else "-"
            lines.append(f"| {name} | {_ms(b['p50_ms'])} | {_ms(b['p99_ms'])} | {ratio} |")
    if gateway_p50:
        lines.append(f"| through the gateway (HTTP, Redis lock and trajectory, sandbox) | "
                     f"{_ms(gateway_p50)} | "
                     f"{_ms(_get(results, 'calls', main, '1', 'summary', 'p99_ms'))} | 1x |")

    lines += _hosts_section(results)

    sessions = results.get("sessions", {})
    lines += ["", "## Session life cycle (one request at a time)", "",
              "| operation | n | p50 | p99 |", "| --- | ---: | ---: | ---: |"]
    names = {"create_warm": "create, from the warm pool", "create_cold": "create, cold (no pool)",
             "reset": "reset (sandbox reused in place)"}
    for key, name in names.items():
        s = sessions.get(key)
        if s:
            lines.append(f"| {name} | {s['n']} | {_ms(s['p50_ms'])} | {_ms(s['p99_ms'])} |")

    d = results.get("density")
    if d:
        c = d["calls"]
        lines += ["", "## Density", "",
                  ("| live sessions | containers + Redis per session | of which Redis | "
                  "containerd shim per container (PSS) | gateway RSS | host tasks | calls across "
                  "all: concurrency, calls/s, p50, p99 |"),
                  "| ---: | ---: | ---: | ---: | ---: | ---: | --- |",
                  (f"| {d['live_sessions']} | {d['per_session_mib']} MiB | "
                  f"{d['redis_kib_per_session']} KiB | {d['shim_mib_per_container']} MiB | "
                  f"{d['gateway_rss_mib']} MiB | {d['host_tasks']} | {c['connections']}, "
                  f"{c['rps']:.0f}/s, {_ms(c['summary'].get('p50_ms'))}, "
                  f"{_ms(c['summary'].get('p99_ms'))} |")]

    lines += _validation(results.get("validate"))
    lines += _forks(results.get("forks"))
    lines += _episodes(results.get("episodes"))
    lines += _batch(results.get("batch"))
    lines += _large_state(results.get("large_state"))

    lines += ["", "## Floors", "", "| floor | target | measured | met |", "| --- | --- | --- | --- |"]
    for f in results.get("floors", []):
        met = "-" if f["met"] is None else ("yes" if f["met"] else "**no**")
        lines.append(f"| {f['floor']} | {f['target']} | {f['measured'] or '-'} | {met} |")
    lines += ["", f"Containers left after the run: {meta.get('containers_left')}.", ""]
    return "\n".join(lines)


def _large_state(large: dict[str, Any] | None) -> list[str]:
    if not large:
        return []
    lines = ["", "## Large states (`order_desk`, a database generated at each size)", "",
             (f"On a gateway of their own, one request at a time; the small environment's call "
              f"there: p50 {_ms(large['small_call']['p50_ms'])}."), "",
             ("| size (state JSON) | open p50 | call p50 | state read p50 | validate p50 | reward "
              "| Redis per closed session |"), "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, r in large.items():
        if name in ("small_call", "shared_custom_start"):
            continue
        size = f"{name} ({r['state_bytes'] / 1e6:.1f} MB)"
        if "refused" in r:
            lines.append(f"| {size} | refused at open: {r['refused']} | | | | | |")
            continue
        lines.append(f"| {size} | {_ms(r['open']['p50_ms'])} | {_ms(r['call']['p50_ms'])} | "
                     f"{_ms(r['state']['p50_ms'])} | {_ms(r['validate']['p50_ms'])} | "
                     f"{r['reward'] if r['reward'] is not None else served(r)} | "
                     f"{r['redis_bytes_per_closed_session'] / 1024:.1f} KiB |")
    shared = large.get("shared_custom_start")
    if shared:
        lines += ["", (f"A caller's own `init_config` of {shared['init_bytes'] / 1e6:.1f} MB, "
                       f"opened by {shared['sessions']} sessions at once: Redis grew by "
                       f"{shared['redis_growth_bytes'] / 1e6:.2f} MB while they lived (it keeps "
                       "that start once).")]
    return lines


def _validation(v: dict[str, Any] | None) -> list[str]:
    if not v:
        return []
    lines = ["", (f"## Validation ({v['env']} `{v['scenario']}`: {v['checks']} check functions, "
             f"solved by its reference solution, reward {v['reward']})"), "",
             "Sessions prepared first, then validate called over and over, one session each.", "",
             "| concurrency | validations | p50 | p99 | failed |",
             "| ---: | ---: | ---: | ---: | ---: |"]
    for level, r in v["concurrency"].items():
        s = r.get("summary", r)  # concurrency 1: a plain summary; more: the load generator's
        lines.append(f"| {level} | {s['n']} | {_ms(s.get('p50_ms'))} | {_ms(s.get('p99_ms'))} | "
                     f"{r.get('failed', 0)} |")
    return lines


def _forks(f: dict[str, Any] | None) -> list[str]:
    if not f:
        return []
    n = f["count"]
    lines = ["", (f"## Fork against open ({f['env']} `{f['scenario']}`: a group of {n} at step "
             f"{f['step']}, {f['rounds']} rounds, one request at a time)"), "",
             "| how the group is had | p50 | p99 |", "| --- | ---: | ---: |"]
    for key, name in (("fork", f"one fork of {n}"), ("open", f"{n} opens (step 0)"),
                      ("open_and_replay", f"{n} opens, each given the {f['step']} calls")):
        lines.append(f"| {name} | {_ms(f[key].get('p50_ms'))} | {_ms(f[key].get('p99_ms'))} |")
    return lines


def _pair(result: dict[str, Any], step: str) -> str:
    s = result.get(step) or {}
    return "-" if not s.get("n") else f"{_ms(s['p50_ms'])} / {_ms(s['p99_ms'])}"


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{kind}: {n}" for kind, n in counts.items()) or "0"


def _episodes(e: dict[str, Any] | None) -> list[str]:
    if not e:
        return []
    inproc = e["in_process"]
    runs = [r for by_level in e["runs"].values() for r in by_level.values()]
    any_run = runs[0]
    lines = ["", "## Episodes: the rollout pattern through the Python client", "",
             (f"Reference episodes over the catalogue's {inproc['scenarios']} scenarios with a "
              "solution. One lane per concurrent episode, each on one environment, cycling over "
              f"its scenarios and starting episodes for {any_run['window_seconds']:g} s (one at "
              "least). *Open per episode*: open a session on the scenario, replay the reference "
              "solution, validate, close. *Reset per episode*: each lane opens a session first; "
              "each episode resets it to the lane's next scenario, replays, validates (the "
              f"sessions close after). One `{any_run['client']}` in its own process; gateway : "
              "in-process compares with the in-process episodes below (one core)."), "",
             ("| pattern | concurrent | episodes (scenarios) | episodes/s | gateway : in-process | "
              "open p50 / p99 | reset p50 / p99 | validate p50 / p99 | close p50 / p99 | "
              "rewards 1.0 / below | lease expiries | errors |"),
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for pattern, by_level in e["runs"].items():
        for level, r in by_level.items():
            ratio = (f"1 : {1 / r['gateway_to_in_process']:.1f}" if r["gateway_to_in_process"]
                     else "-")
            lines.append(f"| {PATTERN_NAMES[pattern]} | {level} | {r['episodes']} "
                         f"({r['scenarios']}) | {r['episodes_per_second']:g} | {ratio} | "
                         f"{_pair(r, 'open')} | {_pair(r, 'reset')} | {_pair(r, 'validate')} | "
                         f"{_pair(r, 'close')} | {r['rewards']['1.0']} / {r['rewards']['below_1']} "
                         f"| {r['lease_expiries']} | {_counts(r['errors'])} |")
    lines += ["", (f"In-process, as the paper's code ({inproc['how']}): "
              f"**{inproc['episodes_per_second']:g} episodes/s** ({inproc['episodes']} episodes; "
              f"one episode p50 {_ms(inproc['episode']['p50_ms'])}, p99 "
              f"{_ms(inproc['episode']['p99_ms'])}; rewards 1.0: {inproc['rewards']['1.0']} of "
              f"{inproc['scenarios']}).")]
    tool_errors = sum((Counter(r["tool_errors"]) for r in runs), Counter())
    check_errors = sum((Counter(r["check_errors"]) for r in runs), Counter())
    if tool_errors or check_errors:
        lines += ["", (f"Tool calls answered ok=false: {_counts(tool_errors)}; check functions "
                  f"that failed to run: {_counts(check_errors)}.")]
    return lines


def _batch(b: dict[str, Any] | None) -> list[str]:
    if not b:
        return []
    opening, closing, memory = b["open_all"], b["close_all"], b["memory"]
    per_session = memory["per_live_session_mib"]
    failures = f" ({_counts(opening['failures'])})" if opening["failed"] else ""
    return ["", f"## Batch: {b['concurrency']} sessions from one client process", "",
            (f"One `{b['client']}` in its own process opens a session per lane at once, runs "
             f"reference episodes on each for {b['window_seconds']:g} s (reset per episode, as a "
             "trainer), then closes them all at once. Memory: the machine's `MemAvailable` "
             "before and after opening, per session opened (everything counted)."), "",
            ("| lanes | opened / failed | open all | memory per live session | episodes "
             "(scenarios) | episodes/s | reset / call / validate p50 | client CPU (cores, "
             "per request) | rewards 1.0 / below | lease expiries | errors | closed / failed "
             "| close all |"),
            "|" + " ---: |" * 6 + " --- | --- | ---: | ---: | --- | ---: | ---: |",
            (f"| {b['concurrency']} | {opening['opened']} / {opening['failed']}{failures} | "
             f"{opening['seconds']:g} s | {'-' if per_session is None else f'{per_session:g} MiB'}"
             f" | {b['episodes']} ({b['scenarios']}) | {b['episodes_per_second']:g} | "
             f"{_ms(_get(b, 'reset', 'p50_ms'))} / {_ms(_get(b, 'call', 'p50_ms'))} / "
             f"{_ms(_get(b, 'validate', 'p50_ms'))} | {b['cpu_share']:g}, "
             f"{_ms(b['cpu_ms_per_request'])} | {b['rewards']['1.0']} / "
             f"{b['rewards']['below_1']} | {b['lease_expiries']} | {_counts(b['errors'])} | "
             f"{closing['closed']} / {closing['failed']} | {closing['seconds']:g} s |"),
            *_batch_windows(b)]


def _batch_windows(b: dict[str, Any]) -> list[str]:
    """The windows measured in turn, when the batch was compared with fewer lanes."""
    if not b.get("windows"):
        return []
    turns = ", ".join(f"{w['lanes']} lanes {w['episodes_per_second']:g}/s"
                      for w in b["windows"])
    baseline = b["baseline"]
    return ["", (f"Measured in turn on the same gateway (each a fresh batch: opened, "
                 f"{b['window_seconds']:g} s of episodes, closed): {turns}. The row above is "
                 f"the first batch of {b['concurrency']}, with its episodes/s the mean of its "
                 f"windows ({b['episodes_per_second']:g}/s), against a mean of "
                 f"{baseline['episodes_per_second']:g}/s at {baseline['lanes']} lanes.")]


def plots(results: dict[str, Any], out_dir: Path) -> list[Path]:
    """``calls.png`` (throughput and latency against concurrency; the call's layers) and
    ``cpu.png`` (where the machine's cores went at each concurrency)."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    calls = results.get("calls", {})
    written = []
    fig, (ax_rps, ax_lat, ax_layers) = plt.subplots(1, 3, figsize=(13, 3.8), dpi=90)
    for env_id, levels in calls.items():
        xs = [int(k) for k in levels]
        ax_rps.plot(xs, [levels[k]["rps"] for k in levels], marker="o", label=env_id)
        ax_lat.plot(xs, [levels[k]["summary"]["p50_ms"] for k in levels], marker="o",
                    label=f"{env_id} p50")
        ax_lat.plot(xs, [levels[k]["summary"]["p99_ms"] for k in levels], marker="^",
                    linestyle="--", label=f"{env_id} p99")
    ax_rps.axhline(FLOOR_CALLS_PER_SECOND, color="grey", linewidth=0.8, linestyle=":",
                   label=f"floor at c=64: {FLOOR_CALLS_PER_SECOND}/s")
    levels = sorted({int(k) for env_levels in calls.values() for k in env_levels})
    for ax, title, ylabel in ((ax_rps, "tool calls/s", "calls/s"),
                              (ax_lat, "tool call latency", "ms")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels, [str(level) for level in levels])
        ax.set_xlabel("concurrent callers (one session each)")
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
    ax_lat.set_yscale("log")
    main = results["config"]["envs"][0]
    layers = [("in-process\n(exec, direct)", _get(results, "baselines", "in_process", "p50_ms")),
              ("sandbox runtime\n(Unix socket)", _get(results, "baselines", "runtime", "p50_ms")),
              ("gateway\n(HTTP, c=1)", _get(calls, main, "1", "summary", "p50_ms"))]
    layers = [(name, v) for name, v in layers if v]
    bars = ax_layers.bar([n for n, _ in layers], [v for _, v in layers], color="#4c72b0")
    ax_layers.set_yscale("log")
    ax_layers.set_ylabel("p50, ms")
    ax_layers.set_title(f"one call of {main}, p50")
    for bar, (_, value) in zip(bars, layers, strict=True):
        ax_layers.annotate(_ms(value), (bar.get_x() + bar.get_width() / 2, value),
                           ha="center", va="bottom", fontsize=8)
    ax_layers.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    path = out_dir / "calls.png"
    fig.savefig(path)
    plt.close(fig)
    written.append(path)

    groups = ["gateway", "sandboxes", "redis", "load generator", "docker daemons", "other"]
    labels, stacks = [], {g: [] for g in groups}
    for env_id, levels in calls.items():
        for level, r in levels.items():
            labels.append(f"{env_id[:16]}\nc={level}")
            for g in groups:
                stacks[g].append(_get(r, "cpu_cores", g) or 0.0)
    if labels:
        fig, ax = plt.subplots(figsize=(max(7, 1.1 * len(labels) + 2), 3.6), dpi=90)
        bottom = [0.0] * len(labels)
        for g in groups:
            ax.bar(labels, stacks[g], bottom=bottom, label=g)
            bottom = [b + v for b, v in zip(bottom, stacks[g], strict=True)]
        ax.set_ylabel("cores")
        ax.set_title("where the CPU goes during tool calls")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.tick_params(axis="x", labelsize=7)
        fig.tight_layout()
        path = out_dir / "cpu.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written
