"""`envscaler eval`: benchmarks' own scores for given answers, computed through the service.

Each subcommand reads answers in the benchmark's terms, runs them in sessions of the imported
scenarios (an embedded gateway on ``--catalogue`` unless ``--url`` names one) and prints the
score the benchmark's own scorer gives.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from envscaler_client import EnvClient
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from cli._common import ApiKey, GatewayUrl, JsonOutput, connect, err, gateway, out, print_json

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="Score answers as a benchmark's own scorer would, through the service.")


@app.command("tau-bench")
def tau_bench(
    catalogue: Annotated[Path, typer.Option(
        "--catalogue", help="The catalogue `envscaler import tau-bench` wrote (its --out).")],
    actions: Annotated[Path, typer.Option(
        "--actions", help="JSONL, one task a line: {task_id, env, actions: [{name, kwargs}], "
        "outputs}; task_id: the index in tau's test split, env: retail or airline, outputs: "
        "the agent's messages to the user.")],
    url: GatewayUrl = None,
    api_key: ApiKey = None,
    json_output: JsonOutput = False,
) -> None:
    """tau-bench's reward of each action sequence (1.0 when the database ends as the task's
    ground truth leaves it and every required output was said to the user, else 0.0), printed
    as {"retail-0": 1.0, ...}. Exit 1 when a line could not be scored (the error is shown)."""
    from importers.replay_score import AnswersFileError
    from importers.tau_bench.scoring import read_actions, score_all, terminate_tools

    try:
        lines = read_actions(actions)
        ending = {domain: terminate_tools(catalogue, domain)
                  for domain in {line.env for line in lines}}
    except AnswersFileError as exc:
        _fail(str(exc))
    _scored(url, api_key, catalogue, json_output,
            lambda client, advance: score_all(client, lines, ending, advance))


@app.command("acebench")
def acebench(
    catalogue: Annotated[Path, typer.Option(
        "--catalogue", help="The catalogue `envscaler import acebench` wrote (its --out).")],
    calls: Annotated[Path, typer.Option(
        "--calls", help="JSONL, one question a line: {id, calls: [{name, arguments}]}; id: "
        "ACEBench's question id, e.g. agent_multi_step_0.")],
    url: GatewayUrl = None,
    api_key: ApiKey = None,
    json_output: JsonOutput = False,
) -> None:
    """ACEBench's end-to-end verdict of each call sequence (1.0 when the final states pass its
    agent checker against the possible answer, else 0.0), printed as
    {"agent_multi_step_0": 1.0, ...}. Exit 1 when a line could not be scored."""
    from importers.acebench.scoring import question_envs, read_calls, score_all
    from importers.replay_score import AnswersFileError

    try:
        lines = read_calls(calls)
        envs = question_envs(catalogue)
    except AnswersFileError as exc:
        _fail(str(exc))
    _scored(url, api_key, catalogue, json_output,
            lambda client, advance: score_all(client, lines, envs, advance))


def _scored(url: str | None, api_key: str | None, catalogue: Path, json_output: bool,
            run: Callable[[EnvClient, Callable[[int, int], None]], list[Any]]) -> None:
    """Run the scoring on a gateway and print the rewards by key; exit 1 when a line could not
    be scored (its error on stderr)."""
    with (gateway(url, catalogue) as base_url, connect(base_url, api_key) as client,
          _progress(json_output) as advance):
        scores = run(client, advance)
    rewards = {entry.key: entry.reward for entry in scores if entry.reward is not None}
    if json_output:
        print_json(rewards)
    else:
        table = Table()
        table.add_column("case", no_wrap=True)
        table.add_column("reward", justify="right")
        for key, reward in rewards.items():
            table.add_row(key, f"{reward:.1f}")
        out.print(table)
        if rewards:
            out.print(f"average {sum(rewards.values()) / len(rewards):.4f} over "
                      f"{len(rewards)} cases")
    failed = [entry for entry in scores if entry.reward is None]
    for entry in failed:
        err.print(Text.assemble(("not scored ", "red"), f"{entry.key}: {entry.error}"))
    raise typer.Exit(1 if failed else 0)


def _fail(message: str) -> NoReturn:
    err.print(Text.assemble(("error: ", "red"), message))
    raise typer.Exit(1)


class _progress:
    """A progress bar over the lines, on stderr, when it is a terminal."""

    def __init__(self, quiet: bool) -> None:
        self.progress = Progress(TextColumn("scoring"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=err, transient=True,
                                 disable=quiet or not err.is_terminal)
        self.task = self.progress.add_task("score", total=None)

    def __enter__(self):  # type: ignore[no-untyped-def]
        self.progress.start()

        def advance(done: int, total: int) -> None:
            self.progress.update(self.task, completed=done, total=total)

        return advance

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()
