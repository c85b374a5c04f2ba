"""`envscaler export sft`: rollout episodes -> SFT training data, filtered by reward.

    envscaler export sft --in rollouts.jsonl --out sft.jsonl --format sharegpt

The paper kept trajectories on the agent's word alone; here only episodes that ended naturally
and reached ``--min-reward`` (1.0: every check of the scenario holds) are kept. The conversion is
`envscaler_client.rollout.export_sft`.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from envscaler_client.rollout import NATURAL_ENDS, TERMINATIONS, export_sft, read_episodes

from cli._common import JsonOutput, err, fail, print_json

app = typer.Typer(no_args_is_help=True, help="Turn rollout episodes into training data.")


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
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(out_path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for sample in samples:
            handle.write(json.dumps(sample, ensure_ascii=False) + "\n")
    tmp.replace(out_path)
    if json_output:
        print_json({"out": str(out_path), "format": fmt.value, **stats.as_dict()})
        return
    dropped = ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in (
        ("unfinished", stats.unfinished), ("below_reward", stats.below_reward),
        ("unscored", stats.unscored), ("malformed", stats.malformed)) if count)
    err.print(f"wrote {stats.written} of {stats.read} episodes to {out_path} ({fmt.value})"
              + (f"; left out: {dropped}" if dropped else ""),
              style="green" if stats.written else "yellow")
