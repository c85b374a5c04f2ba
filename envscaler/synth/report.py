"""The run report: for every stage, items in and out, and the reason for every drop."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from envscaler.synth.llm import StageUsage


@dataclass
class StageReport:
    stage: str
    items_in: int = 0
    items_out: int = 0
    resumed: int = 0
    drops: list[dict[str, str]] = field(default_factory=list)
    pending: list[dict[str, str]] = field(default_factory=list)  # to be retried by a next run

    def to_dict(self, usage: StageUsage | None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "stage": self.stage, "in": self.items_in, "out": self.items_out,
            "resumed": self.resumed,
            "dropped": sorted(self.drops, key=lambda drop: drop["item"]),
            "pending": sorted(self.pending, key=lambda drop: drop["item"])}
        if usage is not None:
            data["usage"] = usage.to_dict()
        return data


@dataclass
class RunReport:
    stages: dict[str, StageReport] = field(default_factory=dict)
    outcome: str = "complete"  # "complete" | "stopped after <stage>" | "aborted: <reason>"

    def stage(self, name: str) -> StageReport:
        return self.stages.setdefault(name, StageReport(name))

    def to_dict(self, usage: dict[str, StageUsage] | None = None) -> dict[str, Any]:
        usage = usage or {}
        stages = [report.to_dict(self._usage(name, usage)) for name, report in self.stages.items()]
        return {"outcome": self.outcome, "stages": stages,
                "usage": _merge(list(usage.values())).to_dict(),
                "model_stages": {name: stats.to_dict() for name, stats in sorted(usage.items())}}

    @staticmethod
    def _usage(stage: str, usage: dict[str, StageUsage]) -> StageUsage | None:
        """A stage's usage, including its sub-stages' (``quality.dual`` has tester and checker)."""
        parts = [stats for name, stats in usage.items()
                 if name == stage or name.startswith(stage + ".")]
        return _merge(parts) if parts else None

    def write(self, path: Path, usage: dict[str, StageUsage] | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(usage), indent=2, ensure_ascii=False) + "\n",
                        encoding="utf-8")

    def render(self, console: Console, usage: dict[str, StageUsage] | None = None) -> None:
        data = self.to_dict(usage)
        table = Table(title=f"synthesis run: {escape(data['outcome'])}")
        for column in ("stage", "in", "out", "dropped", "pending", "resumed", "calls", "tokens",
                       "cost $"):
            table.add_column(column, justify="left" if column == "stage" else "right")
        for stage in data["stages"]:
            stats = stage.get("usage") or {}
            tokens = stats.get("prompt_tokens", 0) + stats.get("completion_tokens", 0)
            cost = stats.get("cost_usd")
            table.add_row(stage["stage"], str(stage["in"]), str(stage["out"]),
                          str(len(stage["dropped"])), str(len(stage["pending"])),
                          str(stage["resumed"]), str(stats.get("calls", "")),
                          str(tokens) if stats else "", "" if cost is None else f"{cost:.4f}")
        console.print(table)
        for stage in data["stages"]:
            for drop in stage["dropped"]:
                console.print(f"[yellow]dropped[/yellow] {stage['stage']} {escape(drop['item'])}: "
                              f"{escape(drop['reason'])}", highlight=False, soft_wrap=True)
            for drop in stage["pending"]:
                console.print(f"[red]pending[/red] {stage['stage']} {escape(drop['item'])}: "
                              f"{escape(drop['reason'])} (a next run retries it)",
                              highlight=False, soft_wrap=True)


def _merge(parts: list[StageUsage]) -> StageUsage:
    merged = StageUsage()
    for stats in parts:
        merged.calls += stats.calls
        merged.prompt_tokens += stats.prompt_tokens
        merged.completion_tokens += stats.completion_tokens
        merged.unusable_replies += stats.unusable_replies
        merged.transport_errors += stats.transport_errors
        if stats.cost is not None:
            merged.cost = (merged.cost or 0.0) + stats.cost
    return merged
