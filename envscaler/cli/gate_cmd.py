"""`envscaler gate PATH...`: the static, executable and scenario gates on environment folders."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from envscaler.cli._common import JsonOutput, print_json

console = Console(stderr=True)


def gate(paths: Annotated[list[Path], typer.Argument(
             exists=True, help="environment folders, or catalogues of them")],
         as_json: JsonOutput = False,
         executable: Annotated[bool, typer.Option(
             "--exec/--no-exec", help="run the executable gate (in a sandbox)")] = True,
         scenarios: Annotated[bool, typer.Option(
             "--scenarios/--no-scenarios", help="run the scenario gate on every scenario")] = True,
         seed: Annotated[int, typer.Option(help="seed of the sandboxes' randomness")] = 0,
         valid_cases: Annotated[int, typer.Option(min=1, max=20, help="valid calls per tool")] = 3
         ) -> None:
    """Check environments: what failed and why, per environment and scenario; exit 1 on failure."""
    from envscaler.format import EnvFolderError, env_folders

    folders: list[Path] = []
    for path in paths:
        try:
            found = env_folders(path, required=True)
        except EnvFolderError as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}")
            raise typer.Exit(2) from None
        folders += [folder for folder in found if folder not in folders]
    reports = asyncio.run(_gate_all(folders, seed=seed, valid_cases=valid_cases,
                                    executable=executable, scenarios=scenarios))
    passed = all(report["passed"] for report in reports)
    if as_json:
        print_json({"passed": passed, "envs": reports})
    else:
        _render(reports)
    raise typer.Exit(0 if passed else 1)


async def _gate_all(folders: list[Path], **options: Any) -> list[dict[str, Any]]:
    from envscaler.synth.gates.folders import gate_folder
    from envscaler.synth.sandboxes import SandboxHub

    needs_sandbox = options["executable"] or options["scenarios"]
    hub = SandboxHub.from_environment(limit=2) if needs_sandbox else None
    reports = []
    try:
        for folder in folders:
            report = await gate_folder(folder, hub, **options)  # type: ignore[arg-type]
            reports.append(report.to_dict())
    finally:
        if hub is not None:
            await hub.close()
    return reports


def _status(gate: dict[str, Any] | None) -> str:
    if gate is None:
        return "-"
    if gate.get("skipped"):
        return "[yellow]skipped[/yellow]"
    return "[green]pass[/green]" if gate["passed"] else "[red]FAIL[/red]"


def _render(reports: list[dict[str, Any]]) -> None:
    table = Table(title="gates")
    for column in ("environment", "format", "static", "executable", "scenarios"):
        table.add_column(column)
    for report in reports:
        scenarios = report["scenarios"]
        good = sum(1 for result in scenarios.values() if result["passed"])
        table.add_row(report["env"], "[green]pass[/green]" if report["format"]["passed"]
                      else "[red]FAIL[/red]", _status(report["static"]),
                      _status(report["executable"]),
                      f"{good}/{len(scenarios)}" if scenarios else "-")
    console.print(table)
    for report in reports:
        if report["format"].get("error"):
            console.print(f"[red]{report['env']}[/red] format: "
                          f"{escape(report['format']['error'])}", highlight=False, soft_wrap=True)
        for skipped in report["format"].get("skipped_scenarios", []):
            console.print(f"[red]{report['env']}[/red] format: scenario skipped: "
                          f"{escape(skipped)}", highlight=False, soft_wrap=True)
        for name in ("static", "executable"):
            gate = report[name] or {}
            for problem in gate.get("problems", []):
                line = f" line {problem['line']}" if "line" in problem else ""
                console.print(f"[red]{report['env']}[/red] {name} "
                              f"{escape('[' + problem['rule'] + ']')}{line}: "
                              f"{escape(problem['message'])}", highlight=False, soft_wrap=True)
        for scenario_id, result in report["scenarios"].items():
            for problem in result["problems"]:
                console.print(f"[red]{scenario_id}[/red] scenario "
                              f"{escape('[' + problem['rule'] + ']')}: "
                              f"{escape(problem['message'])}", highlight=False, soft_wrap=True)
