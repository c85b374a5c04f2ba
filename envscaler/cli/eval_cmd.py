"""`envscaler eval`: a model's answers to a benchmark, scored through the service as the
benchmark's own scorer scores them.

Each subcommand reads answers in the benchmark's terms, runs them in sessions of the imported
scenarios (an embedded gateway on ``--catalogue`` unless ``--url`` names one) and prints the
score the benchmark's own scorer gives. `bfcl`: BFCL's multi-turn result files (or rollouts of
imported BFCL scenarios), each question replayed turn by turn and judged by BFCL's multi-turn
rules (``envscaler.importers.bfcl.evaluate``); `tau-bench` and `acebench`: action or call sequences judged
by the imported scenarios' checks, which are those benchmarks' rewards. No benchmark's code runs
in this process.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from envscaler_client import EnvClient
from rich.table import Table
from rich.text import Text

from envscaler.cli._common import (
    DEFAULT_CATALOGUE,
    ApiKey,
    CataloguePath,
    GatewayUrl,
    JsonOutput,
    connect,
    err,
    fail,
    gateway,
    out,
    phase_progress,
    print_json,
)

SCORING = "scoring"
app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="Score a model's answers to a benchmark through the service, as the "
                  "benchmark's own scorer does.")


@app.command("bfcl")
def bfcl(
    from_dir: Annotated[Path, typer.Option(
        "--from", help="The gorilla checkout the questions come from (its multi-turn questions "
        "and ground truth are read).")],
    results: Annotated[Path | None, typer.Option(
        "--results", show_default=False, help="A BFCL multi-turn result file (what BFCL's "
        "generation writes, e.g. BFCL_v4_multi_turn_base_result.json).")] = None,
    rollouts: Annotated[Path | None, typer.Option(
        "--rollouts", show_default=False, help="Instead: an `envscaler rollout` output file of "
        "imported BFCL scenarios.")] = None,
    catalogue: CataloguePath = DEFAULT_CATALOGUE,
    url: GatewayUrl = None,
    api_key: ApiKey = None,
    decoder: Annotated[str, typer.Option(
        help="How a step is decoded, as BFCL's handlers do: fc (a function-calling model's "
        "{name: arguments} list), prompting (text such as [f(a=1)]), or auto (fc when any step "
        "is a list or an object). Rollouts are fc.")] = "auto",
    json_output: JsonOutput = False,
) -> None:
    """Score each question of a BFCL multi-turn result file by BFCL's rules: the model's calls
    and the ground truth's replayed turn by turn in two sessions of the question's environment
    (`envscaler import bfcl` wrote it); per turn, every class's state equal and the ground
    truth's results among the model's. Prints each verdict with BFCL's error type and the
    accuracy. Exit 1 when the scoring cannot run.
    """
    from envscaler.importers.bfcl.decode import FUNCTION_CALLING
    from envscaler.importers.bfcl.evaluate import (
        EvalError,
        EvalReport,
        decoder_of,
        questions,
        result_answers,
        rollout_answers,
        score,
    )

    if (results is None) == (rollouts is None):
        fail("give one of --results FILE (BFCL's result file) and --rollouts FILE")
    try:
        if results is not None:
            answers = result_answers(results)
            chosen = decoder_of(answers, decoder)
        else:
            answers = rollout_answers(rollouts)  # type: ignore[arg-type]
            chosen = FUNCTION_CALLING
        found = questions(from_dir, list(answers))
    except EvalError as exc:
        fail(str(exc))
    report = EvalReport(str(results or rollouts), chosen, url or "embedded")
    with (gateway(url, catalogue) as base_url, connect(base_url, api_key) as client,
          phase_progress(json_output) as step):
        score(client, answers, found, report, lambda done, total: step(SCORING, done, total))
    if json_output:
        print_json(report.to_dict())
    else:
        _render(report)


def _render(report) -> None:  # type: ignore[no-untyped-def]
    table = Table(title=f"{report.source} ({report.decoder} decoder, gateway {report.gateway})")
    table.add_column("question", no_wrap=True)
    table.add_column("valid")
    table.add_column("error type", no_wrap=True)
    table.add_column("why", overflow="fold")
    for key, verdict in report.verdicts.items():
        table.add_row(key, Text("yes", "green") if verdict.valid else Text("no", "red"),
                      verdict.error_type or "", verdict.error_message or "")
    out.print(table)
    for key, reason in report.not_scored.items():
        err.print(Text.assemble(("not scored ", "yellow"), f"{key}: {reason}"))
    valid = sum(verdict.valid for verdict in report.verdicts.values())
    accuracy = report.accuracy
    summary = (f"accuracy {accuracy:.2%}: {valid} of {len(report.verdicts)} scored questions "
               "valid" if accuracy is not None else "no question scored")
    out.print(summary + (f" ({len(report.not_scored)} not scored)" if report.not_scored else ""))


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
    from envscaler.importers.replay_score import AnswersFileError
    from envscaler.importers.tau_bench.scoring import read_actions, score_all, terminate_tools

    try:
        lines = read_actions(actions)
        ending = {domain: terminate_tools(catalogue, domain)
                  for domain in {line.env for line in lines}}
    except AnswersFileError as exc:
        fail(str(exc))
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
    from envscaler.importers.acebench.scoring import question_envs, read_calls, score_all
    from envscaler.importers.replay_score import AnswersFileError

    try:
        lines = read_calls(calls)
        envs = question_envs(catalogue)
    except AnswersFileError as exc:
        fail(str(exc))
    _scored(url, api_key, catalogue, json_output,
            lambda client, advance: score_all(client, lines, envs, advance))


def _scored(url: str | None, api_key: str | None, catalogue: Path, json_output: bool,
            run: Callable[[EnvClient, Callable[[int, int], None]], list[Any]]) -> None:
    """Run the scoring on a gateway and print the rewards by key; exit 1 when a line could not
    be scored (its error on stderr)."""
    with (gateway(url, catalogue) as base_url, connect(base_url, api_key) as client,
          phase_progress(json_output) as step):
        scores = run(client, lambda done, total: step(SCORING, done, total))
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
