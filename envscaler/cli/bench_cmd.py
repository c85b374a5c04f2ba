"""`envscaler bench`: measure the service against its floors (the `bench` package of the checkout).

It starts its own gateways (Docker backend, their own Redis), so it needs the Docker engine and the
sandbox image (`scripts/bootstrap`), and removes every container it made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console(stderr=True, highlight=False)


def bench(
    quick: Annotated[bool, typer.Option("--quick", help="every figure, briefly (about 3 minutes)")]
    = False,
    full: Annotated[bool, typer.Option(
        "--full", help="longer windows, 1,000 live sessions, episodes at 64 and 256 opened or "
        "reset (about 15 minutes)")]
    = False,
    out: Annotated[Path, typer.Option(help="where results.json, results.md and the PNG plots go")]
    = Path("bench/results"),
) -> None:
    """Benchmark tool calls, sessions, validation, episodes and density against the floors;
    print the Markdown table."""
    if quick and full:
        console.print("[red]error:[/red] choose --quick or --full")
        raise typer.Exit(2)
    try:
        from envscaler.bench.config import preset
        from envscaler.bench.run import run
        from envscaler.bench.stopping import Stopped
    except ImportError as exc:
        console.print(f"[red]error:[/red] the benchmark needs the checkout's `bench` package and "
                      f"matplotlib (pip install -e '.[bench]'): {exc}")
        raise typer.Exit(1) from None
    config = preset("full" if full else "quick")
    console.print(f"envscaler bench --{config.mode}: results in {out}/")
    from docker.errors import DockerException
    from rich.markup import escape

    try:
        results = run(config, out, say=lambda line: console.print(line, markup=False))
    except (RuntimeError, OSError, DockerException) as exc:  # e.g. the engine went away
        console.print(f"[red]error:[/red] the benchmark stopped: {escape(str(exc))}")
        raise typer.Exit(1) from None
    except Stopped as exc:
        console.print(f"the benchmark stopped by {exc}; what it started was removed")
        raise typer.Exit(1) from None
    print((out / "results.md").read_text())
    missed = [f["floor"] for f in results["floors"] if f["met"] is False]
    if missed:
        console.print(f"floors missed: {'; '.join(missed)}", markup=False)
