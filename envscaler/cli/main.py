"""The `envscaler` command: one entry point for everything an operator does."""

from __future__ import annotations

import typer

from envscaler.cli import (
    bench_cmd,
    check_cmd,
    envs_cmd,
    eval_cmd,
    export_cmd,
    gate_cmd,
    import_cmd,
    rollout_cmd,
    sandbox_cmd,
    serve_cmd,
    session_cmd,
    synth_cmd,
)

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="EnvScaler: synthesized tool environments served from sandboxes.")
app.add_typer(sandbox_cmd.app, name="sandbox")
app.command()(serve_cmd.serve)
app.add_typer(envs_cmd.app, name="envs")
app.command()(envs_cmd.scenarios)
app.add_typer(session_cmd.app, name="session")
app.command()(check_cmd.check)
app.add_typer(synth_cmd.app, name="synth")
app.command()(gate_cmd.gate)
app.add_typer(import_cmd.app, name="import")
app.add_typer(eval_cmd.app, name="eval")
app.command()(rollout_cmd.rollout)
app.add_typer(export_cmd.app, name="export")
app.command()(bench_cmd.bench)
app.add_typer(eval_cmd.app, name="eval")
