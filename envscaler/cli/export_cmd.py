"""`envscaler export`: training data. ``sft``: rollout episodes -> SFT data, filtered by reward;
``nemo-gym``: a NeMo Gym dataset (JSONL rows) of an environment's scenarios.

    envscaler export sft --in rollouts.jsonl --out sft.jsonl --format sharegpt
    envscaler export nemo-gym library_loans --split train --out library_loans.jsonl

The paper kept trajectories on the agent's word alone; here only episodes that ended naturally
and reached ``--min-reward`` (1.0: every check of the scenario holds) are kept. The conversion is
`envscaler_client.rollout.export_sft`.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from envscaler_client import DEFAULT_URL
from envscaler_client.adapters.nemo_gym import nemo_gym_rows
from envscaler_client.rollout import NATURAL_ENDS, TERMINATIONS, export_sft, read_episodes

from envscaler.cli._common import ApiKey, EnvId, JsonOutput, Split, Url, err, explained, fail, print_json

app = typer.Typer(no_args_is_help=True, help="Training data: SFT from episodes, NeMo Gym rows.")


class Format(str, Enum):
    openai = "openai"
    sharegpt = "sharegpt"


@app.command()
def sft(
        in_path: Annotated[Path, typer.Option("--in", help="Episodes (`envscaler rollout --out`).",
                                              show_default=False)],
        out_path: Annotated[Path, typer.Option("--out", help="The training data (JSONL).",
                                               show_default=False)],
        fmt: Annotated[Format, typer.Option(
            "--format", help="openai: {messages, tools}; sharegpt: LlamaFactory's ShareGPT "
            "with tools.")] = Format.openai,
        min_reward: Annotated[float, typer.Option(
            help="Keep episodes whose reward is at least this.")] = 1.0,
        termination: Annotated[list[str] | None, typer.Option(
            help="Keep episodes that ended so (repeat); default: completed and user_stop.",
            show_default=False)] = None,
        include_unscored: Annotated[bool, typer.Option(
            help="Also keep episodes without a reward (scenarios without checks).")] = False,
        keep_reasoning: Annotated[bool, typer.Option(
            help="Keep the model's reasoning (reasoning_content; <think> in sharegpt).")] = False,
        metadata: Annotated[bool, typer.Option(
            help="Add each episode's key, scenario, reward and termination.")] = False,
        json_output: JsonOutput = False) -> None:
    """Write the episodes of --in that ended naturally with reward >= --min-reward as SFT data."""
    if not in_path.is_file():
        fail(f"no file {in_path}", "pass --in the JSONL written by `envscaler rollout --out`", 2)
    unknown = [name for name in termination or () if name not in TERMINATIONS]
    if unknown:
        fail(f"unknown termination {', '.join(unknown)}",
             f"terminations are: {', '.join(TERMINATIONS)}", 2)
    samples, stats = export_sft(read_episodes(in_path), fmt.value, min_reward=min_reward,
                                terminations=termination or NATURAL_ENDS,
                                include_unscored=include_unscored, keep_reasoning=keep_reasoning,
                                metadata=metadata)
    _write_jsonl(out_path, samples)
    if json_output:
        print_json({"out": str(out_path), "format": fmt.value, **stats.as_dict()})
        return
    dropped = ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in (
        ("unfinished", stats.unfinished), ("below_reward", stats.below_reward),
        ("unscored", stats.unscored), ("malformed", stats.malformed)) if count)
    err.print(f"wrote {stats.written} of {stats.read} episodes to {out_path} ({fmt.value})"
              + (f"; left out: {dropped}" if dropped else ""),
              style="green" if stats.written else "yellow")


@app.command("nemo-gym")
def nemo_gym(
        env: EnvId,
        out_path: Annotated[Path, typer.Option("--out", help="The dataset (JSONL).",
                                               show_default=False)],
        split: Split = None,
        seeds: Annotated[int, typer.Option(min=1, help="Rows per scenario, seeds 0..N-1.")] = 1,
        agent: Annotated[str | None, typer.Option(
            help="The agent_ref name of every row (the NeMo Gym agent to run them).",
            show_default=False)] = None,
        url: Url = DEFAULT_URL, api_key: ApiKey = None, json_output: JsonOutput = False) -> None:
    """Write one NeMo Gym row per scenario (and seed) of ENV, for the gateway's NeMo Gym door."""
    with explained(url):
        rows = nemo_gym_rows(env, split, seeds, agent=agent, url=url, api_key=api_key)
    _write_jsonl(out_path, rows)
    if json_output:
        print_json({"out": str(out_path), "rows": len(rows)})
        return
    err.print(f"wrote {len(rows)} NeMo Gym rows of {env} to {out_path}", style="green")


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    """All the lines, or nothing: through a temporary file replaced at the end."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)
