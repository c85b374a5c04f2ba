"""The `envscaler` command: one entry point for everything an operator does."""

from __future__ import annotations

import typer

from envscaler_cli import sandbox_cmd, serve_cmd

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="EnvScaler: synthesized tool environments served from sandboxes.")
app.add_typer(sandbox_cmd.app, name="sandbox")
app.command()(serve_cmd.serve)
