"""The run's results as a Markdown table, the floors it is held to, and PNG plots."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

FLOOR_CALL_P50_MS = 2.0        # tool call p50 at concurrency 1
FLOOR_CALLS_PER_SECOND = 1500  # at concurrency 64, across sessions
FLOOR_CREATE_WARM_P50_MS = 20.0
FLOOR_RESET_P50_MS = 10.0
FLOOR_DENSITY_SESSIONS = 1000
FLOOR_DENSITY_P99_MS = 1000.0


def _get(data: dict[str, Any], *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def floors(results: dict[str, Any]) -> list[dict[str, Any]]:
    main = results["config"]["envs"][0]
    calls = results.get("calls", {}).get(main, {})
    density = results.get("density", {})
    rows = [
        ("tool call p50 at concurrency 1", f"<= {FLOOR_CALL_P50_MS:g} ms",
         _get(calls, "1", "summary", "p50_ms"), "ms", lambda v: v <= FLOOR_CALL_P50_MS),
        ("tool calls/s at concurrency 64 across sessions", f">= {FLOOR_CALLS_PER_SECOND}",
         _get(calls, "64", "rps"), "/s", lambda v: v >= FLOOR_CALLS_PER_SECOND),
        ("session creation from the warm pool, p50", f"<= {FLOOR_CREATE_WARM_P50_MS:g} ms",
         _get(results, "sessions", "create_warm", "p50_ms"), "ms",
         lambda v: v <= FLOOR_CREATE_WARM_P50_MS),
        ("reset p50", f"<= {FLOOR_RESET_P50_MS:g} ms", _get(results, "sessions", "reset", "p50_ms"),
         "ms", lambda v: v <= FLOOR_RESET_P50_MS),
        (f"{FLOOR_DENSITY_SESSIONS} live sessions, call p99", f"<= {FLOOR_DENSITY_P99_MS:g} ms",
         # fewer live sessions (quick mode) say nothing of the floor: not judged
         _get(density, "calls", "summary", "p99_ms")
         if density.get("live_sessions", 0) >= FLOOR_DENSITY_SESSIONS else None, "ms",
         lambda v: v <= FLOOR_DENSITY_P99_MS),
    ]
    out = []
    for name, floor, value, unit, test in rows:
        measured = None if value is None else f"{value:g} {unit}"
        if name.startswith(str(FLOOR_DENSITY_SESSIONS)) and density:
            measured = (f"{measured} ({density.get('live_sessions')} live)" if value is not None
                        else f"not judged: {density.get('live_sessions')} live (--full holds "
                             f"{FLOOR_DENSITY_SESSIONS})")
        out.append({"floor": name, "target": floor, "measured": measured,
                    "met": None if value is None else bool(test(value))})
    return out


def _ms(value: Any) -> str:
    if value is None:
        return "-"
    if value < 0.1:
        return f"{value * 1000:.1f} us"
    return f"{value:.2f} ms" if value < 10 else f"{value:.0f} ms"


def _cores(result: dict[str, Any], key: str) -> str:
    value = _get(result, "cpu_cores", key)
    return "-" if value is None else f"{value:.2f}"


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

    sessions = results.get("sessions", {})
    lines += ["", "## Session life cycle (one request at a time)", "",
              "| operation | n | p50 | p99 |", "| --- | ---: | ---: | ---: |"]
    names = {"create_warm": "create, from the warm pool", "create_cold": "create, cold (no pool)",
             "reset": "reset (sandbox reused in place)",
             "validate": "validate ({} check functions)".format(
                 _get(sessions, "validate", "checks_per_validation"))}
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

    ro = results.get("rollouts")
    if ro:
        lines += ["", "## The rollout pattern through the Python client", "",
                  (f"{ro['episodes']} sessions at once, each: create, its scenario's reference "
                  f"solution, validate, close; one `{ro['client']}`."), "",
                  ("| episodes done | errors | mean reward | episodes/s | calls/s | create p50 / p99 | "
                  "call p50 / p99 | validate p50 | client CPU |"),
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
                  (f"| {ro['completed']} | {ro['errors']} | {ro['mean_reward']} | "
                  f"{ro['episodes_per_second']} | {ro['calls_per_second']} | "
                  f"{_ms(_get(ro, 'create', 'p50_ms'))} / {_ms(_get(ro, 'create', 'p99_ms'))} | "
                  f"{_ms(_get(ro, 'call', 'p50_ms'))} / {_ms(_get(ro, 'call', 'p99_ms'))} | "
                  f"{_ms(_get(ro, 'validate', 'p50_ms'))} | {ro['cpu_share']:.2f} cores |")]
        if ro.get("check_errors") or ro.get("tool_errors"):
            lines += ["", (f"Check functions that failed to run: {ro.get('check_errors') or 0}; "
                      f"tool calls answered ok=false: {ro.get('tool_errors') or 0}.")]

    lines += ["", "## Floors", "", "| floor | target | measured | met |", "| --- | --- | --- | --- |"]
    for f in results.get("floors", []):
        met = "-" if f["met"] is None else ("yes" if f["met"] else "**no**")
        lines.append(f"| {f['floor']} | {f['target']} | {f['measured'] or '-'} | {met} |")
    lines += ["", f"Containers left after the run: {meta.get('containers_left')}.", ""]
    return "\n".join(lines)


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
