"""The `envscaler` command: one entry point for everything an operator does."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="EnvScaler: synthesized tool environments served from sandboxes.")
