"""`envscaler check`: health-check a pool of environments, scenario by scenario, through a gateway.

For every scenario of the catalogue: open a session, validate it untouched (it must score below
1.0, or the checks do not test the task), replay the reference solution, validate again (it must
score 1.0). The solutions come from the catalogue files, since the gateway never reveals them;
the gateway is a running one (``--url``) or one embedded here on the same files
(``envscaler.server.embedded_gateway``). Scenarios without a solution (``verified: false``, e.g. imported
from the EnvScaler release) are reported as unverified, not as failures.

Validating the session before its first call is validating a fresh, untouched session, since
validation changes nothing: one sandbox per scenario instead of two.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from envscaler_client import (
    AsyncEnvClient,
    AsyncSession,
    EnvScalerError,
    SessionSpec,
    connection_limits,
    run_sessions,
)
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column, Table
from rich.text import Text

from envscaler.cli._common import (
    DEFAULT_CATALOGUE,
    ApiKey,
    CataloguePath,
    GatewayUrl,
    JsonOutput,
    err,
    explained,
    fail,
    gateway,
    out,
    print_json,
)

if TYPE_CHECKING:
    from envscaler.format.loader import Catalogue
    from envscaler.format.models import Scenario

Status = Literal["passed", "failed", "error", "unverified"]
"""failed: the scenario is wrong (its solution, checks or files); error: it could not be checked."""
STATUSES: tuple[Status, ...] = ("passed", "failed", "error", "unverified")
STYLES = {"passed": "green", "failed": "red", "error": "red", "unverified": "yellow"}

EnvFilter = Annotated[list[str] | None, typer.Option(
    "--env", show_default=False, help="Only this environment (repeat for several).")]
Concurrency = Annotated[int, typer.Option(min=1, help="Scenarios checked at once.")]


@dataclass
class Row:
    env: str
    scenario: str
    split: str
    status: Status
    initial_reward: float | None = None
    reward: float | None = None
    detail: str = ""


@dataclass(frozen=True)
class Target:
    env: str
    scenario: Scenario


def check(url: GatewayUrl = None, api_key: ApiKey = None,
          catalogue: CataloguePath = DEFAULT_CATALOGUE, env: EnvFilter = None,
          concurrency: Concurrency = 4, json_output: JsonOutput = False) -> None:
    """Replay each scenario's reference solution: it must reach reward 1.0, its initial state less.

    Exit status 1 when any scenario fails; scenarios without a solution are reported as unverified.
    """
    loaded = _load(catalogue)
    known = sorted(set(loaded.envs) | {error.file.parent.name for error in loaded.errors})
    selected = env or known
    missing = [name for name in selected if name not in known]
    if missing:
        fail(f"no environment {', '.join(missing)} in {catalogue}",
             f"the environments of {catalogue} are: {', '.join(known) or 'none'}")
    rows, targets = _plan(loaded, selected)
    if targets:
        with gateway(url, catalogue) as base_url, explained(base_url):
            rows += asyncio.run(_replay_all(base_url, api_key, targets, concurrency))
    order = {name: number for number, name in enumerate(selected)}
    rows.sort(key=lambda row: (order[row.env], row.scenario))
    counts = {status: sum(1 for row in rows if row.status == status) for status in STATUSES}
    if json_output:
        print_json({"ok": not (counts["failed"] or counts["error"]), "catalogue": str(catalogue),
                    "gateway": url or "embedded", "summary": counts,
                    "results": [asdict(row) for row in rows]})
    else:
        _report(rows)
    if counts["failed"]:
        err.print(f"{counts['failed']} of {len(rows)} scenarios failed. Fix the reference solution "
                  f"or the check functions in {catalogue}/<env>/scenarios.jsonl (a scenario with "
                  "no solution must say \"verified\": false), or the environment's files, as the "
                  "detail says; then run `envscaler check` again.")
    if counts["error"]:
        err.print(f"{counts['error']} of {len(rows)} scenarios could not be checked: the gateway "
                  "failed them (see the detail and the gateway's log); run `envscaler check` "
                  "again once it is healthy.")
    if counts["failed"] or counts["error"]:
        raise typer.Exit(1)
    if not json_output:
        err.print(f"no scenario fails: {counts['passed']} passed, "
                  f"{counts['unverified']} unverified", style="green")


# ---------------------------------------------------------------- the plan

def _load(catalogue: Path) -> Catalogue:
    from envscaler.format.loader import FormatError, load_catalogue

    try:
        return load_catalogue(catalogue)
    except FormatError as exc:
        fail(str(exc), "pass --catalogue PATH (or set ENVSCALER_CATALOGUE) to the folder of "
                       "environments")


def _plan(loaded: Catalogue, selected: list[str]) -> tuple[list[Row], list[Target]]:
    """Rows that need no gateway (broken folders, unverified scenarios), and what to replay."""
    rows = [Row(env=error.file.parent.name, scenario="-", split="-", status="failed",
                detail=f"the environment does not load: {error}")
            for error in loaded.errors if error.file.parent.name in selected]
    targets: list[Target] = []
    for name in selected:
        package = loaded.envs.get(name)
        for scenario in package.scenarios if package is not None else ():
            if scenario.solution is None:
                rows.append(Row(name, scenario.id, scenario.split, "unverified",
                                detail="no reference solution to replay"))
            else:
                targets.append(Target(name, scenario))
    return rows, targets


# ---------------------------------------------------------------- the replay

async def _replay_all(base_url: str, api_key: str | None, targets: list[Target],
                      concurrency: int) -> list[Row]:
    by_key = {(target.env, target.scenario.id): target for target in targets}

    async def replay(session: AsyncSession) -> Row:
        return await _replay(session, by_key[(session.env, session.scenario or "")])

    specs = [SessionSpec(target.env, target.scenario.id) for target in targets]
    with Progress(TextColumn("checking scenarios"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as progress:
        bar = progress.add_task("check", total=len(targets))
        async with AsyncEnvClient(base_url, api_key,
                                  limits=connection_limits(concurrency)) as client:
            await client.health()  # unreachable or refused: one explained error, not one per row
            results = await run_sessions(client, specs, replay, concurrency=concurrency,
                                         on_result=lambda _index, _result: progress.advance(bar))
    return [result if isinstance(result, Row) else _error_row(target, result)
            for target, result in zip(targets, results, strict=True)]


async def _replay(session: AsyncSession, target: Target) -> Row:
    before = await session.validate()
    failed_steps = []
    for number, step in enumerate(target.scenario.solution or (), start=1):
        result = await session.call(step.name, step.arguments)
        if not result.ok and result.error is not None:
            failed_steps.append(f"step {number} {step.name} failed: {result.error.type}: "
                                f"{result.error.message}")
    after = await session.validate()
    problems = []
    if after.reward < 1.0:
        missed = "; ".join(check.item + (f" ({check.error})" if check.error else "")
                           for check in after.checks if not check.passed)
        problems += [f"the solution reaches {after.reward:g}, not 1.0; failing: {missed}",
                     *failed_steps]
    if before.reward >= 1.0:
        problems.append("the untouched initial state already scores 1.0: the checks do not test "
                        "the task")
    return Row(target.env, target.scenario.id, target.scenario.split,
               "failed" if problems else "passed", before.reward, after.reward, "; ".join(problems))


def _error_row(target: Target, exc: Exception) -> Row:
    status: Status = "error"
    detail = str(exc) if isinstance(exc, EnvScalerError) else f"{type(exc).__name__}: {exc}"
    if isinstance(exc, EnvScalerError) and exc.type in ("UnknownEnv", "UnknownScenario"):
        status, detail = "failed", f"{detail} (is the gateway serving the same catalogue?)"
    return Row(target.env, target.scenario.id, target.scenario.split, status, detail=detail)


def _report(rows: list[Row]) -> None:
    """A table of rewards per environment, then the details of what did not pass (too long for a
    table cell).

    One table per environment, titled with it, rather than an env column: with the catalogue's
    long names, env and scenario columns that could not wrap left the others no room, and a
    terminal (or a pipe's 80 columns) showed them as empty stray columns. The scenario column
    folds when it must; the short columns never wrap.
    """
    for env, group in groupby(rows, key=lambda row: row.env):
        table = Table(Column("scenario", overflow="fold"),
                      *(Column(name, no_wrap=True) for name in ("split", "initial", "reward",
                                                                "result")),
                      title=env, title_justify="left")
        for row in group:
            table.add_row(row.scenario, row.split, _reward(row.initial_reward),
                          _reward(row.reward), Text(row.status, style=STYLES[row.status]))
        out.print(table)
    for row in rows:
        if row.detail:
            out.print(Text.assemble((f"{row.env} {row.scenario}", STYLES[row.status]),
                                    f": {row.detail}"))


def _reward(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
