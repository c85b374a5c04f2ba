"""The `envscaler` command: one entry point for everything an operator does.

Each command's module is imported only when that command runs: ``envscaler --help`` and a client
command never import the service (FastAPI, Docker, the settings), and the help lists every
command from `COMMANDS` alone."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import typer
from typer import _click
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class LazyCommand:
    module: str  # under envscaler.cli
    attribute: str  # a Typer of subcommands, or a command's function
    help: str  # the line the top-level help shows (tests/unit/test_cli_lazy.py keeps it true)

    def load(self, name: str) -> _click.Command:
        target = getattr(importlib.import_module(f"envscaler.cli.{self.module}"), self.attribute)
        if not isinstance(target, typer.Typer):  # a command's function
            function, target = target, typer.Typer(add_completion=False)
            target.command(name=name)(function)
        command = typer.main.get_command(target)
        command.name = name
        return command


COMMANDS: dict[str, LazyCommand] = {
    "sandbox": LazyCommand("sandbox_cmd", "app", "Build the sandbox images; remove leftover "
                           "sandboxes; serve a node's sandboxes to gateways (host)."),
    "serve": LazyCommand("serve_cmd", "serve", "Run the gateway on the catalogue (with --ray, "
                         "over a Ray cluster's sandbox hosts)."),
    "envs": LazyCommand("envs_cmd", "app", "The environments a gateway serves."),
    "scenarios": LazyCommand("envs_cmd", "scenarios",
                             "An environment's scenarios: id, split and task."),
    "session": LazyCommand("session_cmd", "app",
                           "Open a session, call its tools, read its state, validate it."),
    "check": LazyCommand("check_cmd", "check", "Replay each scenario's reference solution: it "
                         "must reach reward 1.0, its initial state less."),
    "synth": LazyCommand("synth_cmd", "app", "Synthesize environments (skel), scenarios (scen) "
                         "or both (all); resumable."),
    "gate": LazyCommand("gate_cmd", "gate", "Check environments: what failed and why, per "
                        "environment and scenario; exit 1 on failure."),
    "import": LazyCommand("import_cmd", "app", "Import environments published in other formats "
                          "into the catalogue format."),
    "eval": LazyCommand("eval_cmd", "app", "Score a model's answers to a benchmark through the "
                        "service, as the benchmark's own scorer does."),
    "rollout": LazyCommand("rollout_cmd", "rollout", "Run scenarios through a model (or their "
                           "reference solutions); one episode a JSONL line."),
    "export": LazyCommand("export_cmd", "app",
                          "Training data: SFT from episodes, NeMo Gym rows."),
    "bench": LazyCommand("bench_cmd", "bench", "Benchmark tool calls, sessions, validation, "
                         "episodes and density against the floors; print the Markdown table."),
}


class LazyGroup(TyperGroup):
    """The top-level group: commands loaded by name, listed without loading any."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._listing = False
        self._loaded: dict[str, _click.Command] = {}

    def list_commands(self, ctx: _click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        lazy = COMMANDS.get(cmd_name)
        if lazy is None:
            return None
        if self._listing:  # the help's one line per command
            return TyperCommand(cmd_name, help=lazy.help)
        if cmd_name not in self._loaded:
            self._loaded[cmd_name] = lazy.load(cmd_name)
        return self._loaded[cmd_name]

    def format_help(self, ctx: _click.Context, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(cls=LazyGroup, no_args_is_help=True, add_completion=False,
                  help="EnvScaler: synthesized tool environments served from sandboxes.")


@app.callback()
def main() -> None:
    """EnvScaler: synthesized tool environments served from sandboxes."""
