"""`envscaler import envscaler-release`: the published EnvScaler release into catalogue folders.

Reads the two release files (Hugging Face or GitHub shape, told apart by name and by content),
converts every environment and RL scenario it can (``envscaler.importers.envscaler_release``), writes
``OUT/<env_id>/`` folders that ``envscaler.format.loader.load_env`` accepts, and reports each record that
could not be imported with its id and the reason. Exit status: 0 when at least one environment was
imported (bad records or not), 1 when none was (including unreadable files and failed downloads).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from envscaler.cli._common import (
    ApiKey,
    GatewayUrl,
    JsonOutput,
    compact,
    connect,
    err,
    fail,
    gateway,
    out,
    phase_progress,
    print_json,
)

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="Import environments published in other formats into the catalogue format.")

DEFAULT_CACHE = Path("~/.cache/envscaler/envscaler-release")
OutDir = Annotated[Path, typer.Option(
    "--out", help="Catalogue folder to write OUT/<env_id>/ into (created when missing).")]


@app.command("envscaler-release")
def envscaler_release(
    out_dir: OutDir,
    from_dir: Annotated[Path | None, typer.Option(
        "--from", show_default=False,
        help="Folder with the release files: 191_env_metadata_processed.json + "
             "envscaler_rl_scenario_metadata.json (Hugging Face) or 191_env_metadata.json + "
             "rl_scenario_metadata.json (GitHub). With --download, where the files are kept "
             f"(default {DEFAULT_CACHE}).")] = None,
    envs: Annotated[Path | None, typer.Option(
        "--envs", show_default=False, help="The environments file (instead of finding it in "
        "--from).")] = None,
    scenarios: Annotated[Path | None, typer.Option(
        "--scenarios", show_default=False, help="The RL scenarios file (instead of finding it "
        "in --from).")] = None,
    download: Annotated[bool, typer.Option(
        "--download", help="Fetch the Hugging Face files at the pinned revisions (sha256 "
        "checked; HF_ENDPOINT picks a mirror) unless --from already holds them.")] = False,
    limit: Annotated[int | None, typer.Option(
        min=1, show_default=False, help="Stop after importing N environments (release order).")]
    = None,
    created: Annotated[str | None, typer.Option(
        show_default=False, help="provenance.created of the environments (default: the "
        "release's date, 2026-01-09).")] = None,
    revision: Annotated[str | None, typer.Option(
        show_default=False, help="Revision to record in provenance.pipeline_version (default: "
        "the pinned revision when the environments file is the pinned one, else 'local').")]
    = None,
    json_output: JsonOutput = False,
) -> None:
    """Convert the EnvScaler release (191 environments, 2,550 RL scenarios) into OUT/<env_id>/.

    Ids: release env_id `env_12_rl` becomes `envscaler_env_12_rl`; scenario ids are the task_ids.
    Scenarios have no reference solution in the release: they are imported unverified and are
    still served and validated. Exit 1 when no environment could be imported.
    """
    from envscaler.importers.envscaler_release import (
        DownloadError,
        SourceError,
        download_release,
        import_release,
    )
    from envscaler.importers.envscaler_release.source import find_file

    if download:
        if envs is not None or scenarios is not None:
            fail("--download fetches both files; it does not combine with --envs / --scenarios")
        dest = (from_dir or DEFAULT_CACHE).expanduser()
        try:
            with _byte_progress(json_output) as on_bytes:
                paths = download_release(dest, progress=on_bytes)
        except DownloadError as exc:
            fail(str(exc))
        envs_path, scenarios_path = paths["envs"], paths["scenarios"]
    else:
        if from_dir is None and (envs is None or scenarios is None):
            fail("say where the release files are: --from DIR, or --envs FILE --scenarios FILE "
                  "(or fetch them with --download)")
        try:
            envs_path = envs or find_file(from_dir, "envs")  # type: ignore[arg-type]
            scenarios_path = scenarios or find_file(from_dir, "scenarios")  # type: ignore[arg-type]
        except SourceError as exc:
            fail(str(exc))
    try:
        with _env_progress(json_output) as on_env:
            report = import_release(envs_path, scenarios_path, out_dir, limit=limit,
                                    created=created, revision=revision, progress=on_env)
    except (SourceError, ValueError) as exc:
        fail(str(exc))
    if json_output:
        print_json(report.to_dict())
    else:
        _render(report, pinned=report.envs_file["pinned_revision"] is not None)
    raise typer.Exit(0 if report.imported else 1)


@app.command("bfcl")
def bfcl(
    from_dir: Annotated[Path, typer.Option(
        "--from", help="A gorilla checkout (or its berkeley-function-call-leaderboard folder): "
        "its multi-turn data files, function docs and func_source_code classes are read.")],
    out_dir: OutDir,
    category: Annotated[list[str] | None, typer.Option(
        "--category", show_default=False, help="Multi-turn category to import: base (default) "
        "or miss_param; repeat for several.")] = None,
    requirement: Annotated[list[str] | None, typer.Option(
        "--requirement", show_default=False, help="An exact pin (NAME==VERSION) of a package "
        "the classes import, e.g. mpmath==1.3.0 for MathAPI; repeat for several. Environments "
        "list those their code imports in env.json's requirements.")] = None,
    json_output: JsonOutput = False,
) -> None:
    """Convert BFCL's multi-turn questions into OUT/<env_id>/: one environment per set of
    classes questions involve (bfcl-<classes>), one scenario per question with its user turns,
    its ground truth as each turn's reference calls and checks of the state the ground truth
    leaves (replayed in a sandbox: BFCL's code never runs in this process). Exit 1 when no
    environment could be imported.
    """
    from envscaler.importers.bfcl import CheckoutError, import_bfcl

    report = _in_sandboxes(lambda hub: import_bfcl(
        from_dir, out_dir, hub, categories=tuple(category or ("base",)),
        requirements=tuple(requirement or ())), CheckoutError)
    _render_imported(report, json_output, "questions",
                     detail=lambda env: ", ".join(env.classes))
    raise typer.Exit(0 if report.imported else 1)


@app.command("tau-bench")
def tau_bench(
    from_dir: Annotated[Path, typer.Option(
        "--from", help="A tau-bench checkout: its tau_bench/envs/<domain>/ tools, policy, data "
        "and test tasks are read.")],
    out_dir: OutDir,
    domain: Annotated[list[str] | None, typer.Option(
        "--domain", show_default=False, help="retail or airline (default both); repeat for "
        "several.")] = None,
    json_output: JsonOutput = False,
) -> None:
    """Convert tau-bench's domains into OUT/tau-<domain>/: tau's tools (with respond, its
    message to the user), its database as a shared data file, its policy as the introduction,
    one scenario per test task (retail-0, ...) whose check is tau's reward (the ground truth is
    replayed in a sandbox: tau's code never runs in this process). Exit 1 when no environment
    could be imported.
    """
    from envscaler.importers.tau_bench import CheckoutError, import_tau_bench
    from envscaler.importers.tau_bench.checkout import DOMAINS

    report = _in_sandboxes(lambda hub: import_tau_bench(
        from_dir, out_dir, hub, domains=tuple(domain or DOMAINS)), CheckoutError)
    _render_imported(report, json_output, "tasks")
    raise typer.Exit(0 if report.imported else 1)


@app.command("acebench")
def acebench(
    from_dir: Annotated[Path, typer.Option(
        "--from", help="An ACEBench checkout: its data_all/data_en agent files, "
        "possible answers and model_inference scenario classes are read.")],
    out_dir: OutDir,
    category: Annotated[list[str] | None, typer.Option(
        "--category", show_default=False, help="multi_step or multi_turn (default both); "
        "repeat for several.")] = None,
    json_output: JsonOutput = False,
) -> None:
    """Convert ACEBench's agent category into OUT/<env_id>/: one environment per set of classes
    questions involve (acebench-<classes>), one scenario per question whose check is ACEBench's
    end-to-end rule; its milestones are the reference solution when replaying them (in a
    sandbox: ACEBench's code never runs in this process) passes it, else the scenario is
    unverified. Exit 1 when no environment could be imported.
    """
    from envscaler.importers.acebench import CheckoutError, import_acebench
    from envscaler.importers.acebench.checkout import CATEGORIES

    report = _in_sandboxes(lambda hub: import_acebench(
        from_dir, out_dir, hub, categories=tuple(category or CATEGORIES)), CheckoutError)
    _render_imported(report, json_output, "questions")
    if not json_output:
        for problem in report.unverified:
            err.print(Text.assemble(("unverified ", "yellow"), f"{problem.record}: ",
                                    problem.reason))
    raise typer.Exit(0 if report.imported else 1)


@app.command("bfcl-compare")
def bfcl_compare(
    from_dir: Annotated[Path, typer.Option(
        "--from", help="The gorilla checkout the questions were imported from.")],
    catalogue: Annotated[Path, typer.Option(
        "--catalogue", help="The catalogue `envscaler import bfcl` wrote (its --out).")],
    url: GatewayUrl = None,
    api_key: ApiKey = None,
    category: Annotated[str, typer.Option(
        help="The multi-turn category to compare: base or miss_param.")] = "base",
    report_file: Annotated[Path | None, typer.Option(
        "--report", show_default=False, help="Also write the whole report to this JSON file.")]
    = None,
    json_output: JsonOutput = False,
) -> None:
    """Check that the gateway reproduces BFCL's own execution of the imported questions: each
    question's ground truth run by BFCL's code (in a throwaway container: it never runs in this
    process) and its reference calls sent through the gateway must give the same call results
    (rendered as BFCL renders them) and the same final state of every class. Differences are
    reported, not failed: exit 0 when the comparison ran, 1 when it could not.
    """
    from envscaler.importers.bfcl.fidelity import FidelityError, measure, plan

    try:
        planned = plan(from_dir, catalogue, category)
        with (gateway(url, catalogue) as base_url, connect(base_url, api_key) as client,
              phase_progress(json_output) as step):
            report = measure(planned, client, gateway=url or "embedded", step=step)
    except FidelityError as exc:
        fail(str(exc))
    if report_file is not None:
        try:
            report_file.write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False)
                                   + "\n", encoding="utf-8")
        except OSError as exc:
            fail(f"cannot write the report to {report_file}: {exc}")
    if json_output:
        print_json(report.to_dict())
    else:
        _render_fidelity(report)


def _in_sandboxes(run: Callable[[Any], Awaitable[Any]],
                  checkout_error: type[Exception]) -> Any:
    """A benchmark import, run with sandboxes of its own (where the benchmark's code runs);
    a checkout that lacks what it needs, or a bad option, fails with its message."""
    import asyncio

    from envscaler.synth.sandboxes import SandboxHub

    async def imported() -> Any:
        async with SandboxHub.from_environment(limit=1) as hub:
            return await run(hub)

    try:
        return asyncio.run(imported())
    except (checkout_error, ValueError) as exc:
        fail(str(exc))


def _render_imported(report, json_output: bool, records: str,  # type: ignore[no-untyped-def]
                     detail: Callable[[Any], str] | None = None) -> None:
    """A benchmark import's report: its JSON, or each environment, each record not imported
    with its reason, and the count of ``records`` (the report's word for them) imported."""
    if json_output:
        print_json(report.to_dict())
        return
    for env in report.imported:
        suffix = f" ({detail(env)})" if detail is not None else ""
        out.print(f"{env.env_id}: {env.scenarios} scenarios, {env.tools} tools{suffix}")
    for problem in report.errors:
        err.print(Text.assemble(("not imported ", "yellow"), f"{problem.record}: ",
                                problem.reason))
    counts = report.counts()
    out.print(f"{counts['scenarios_imported']} of {counts[records]} {records} imported "
              f"into {counts['envs_imported']} environments in {report.out}")


class _env_progress:
    """A progress bar over the environment records, on stderr, when it is a terminal."""

    def __init__(self, quiet: bool) -> None:
        self.progress = Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[record]}"), TimeElapsedColumn(),
                                 console=err, transient=True,
                                 disable=quiet or not err.is_terminal)
        self.task = self.progress.add_task("import", total=None, record="")

    def __enter__(self):  # type: ignore[no-untyped-def]
        self.progress.start()

        def advance(done: int, total: int, record: str) -> None:
            self.progress.update(self.task, completed=done, total=total, record=record)

        return advance

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


class _byte_progress:
    """A download bar per file, on stderr, when it is a terminal."""

    def __init__(self, quiet: bool) -> None:
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                 TimeElapsedColumn(), console=err, transient=True,
                                 disable=quiet or not err.is_terminal)
        self.tasks: dict[str, int] = {}

    def __enter__(self):  # type: ignore[no-untyped-def]
        self.progress.start()

        def advance(pinned, received: int, total: int | None) -> None:  # type: ignore[no-untyped-def]
            if pinned.filename not in self.tasks:
                self.tasks[pinned.filename] = self.progress.add_task(
                    f"{pinned.repo_id}@{pinned.short_revision}", total=total)
            self.progress.update(self.tasks[pinned.filename], completed=received, total=total)

        return advance

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def _render(report, *, pinned: bool) -> None:  # type: ignore[no-untyped-def]
    counts = report.counts()
    if report.imported:
        table = Table(title=f"imported into {report.out}")
        table.add_column("environment", no_wrap=True)
        table.add_column("release env_id", no_wrap=True)
        table.add_column("tools", justify="right")
        table.add_column("scenarios", justify="right")
        table.add_column("release-only tools", overflow="fold")
        for env in report.imported:
            table.add_row(env.env_id, env.release_env_id, str(env.tools), str(env.scenarios),
                          ", ".join(env.release_only_tools) or "-")
        out.print(table)
    problems = [*report.errors, *report.skipped]
    if problems:
        table = Table(title="not imported")
        table.add_column("", no_wrap=True)
        table.add_column("kind", no_wrap=True)
        table.add_column("record", no_wrap=True)
        table.add_column("reason", overflow="fold")
        for problem in report.errors:
            table.add_row(Text("error", style="red"), problem.kind, problem.record, problem.reason)
        for problem in report.skipped:
            table.add_row(Text("skipped", style="yellow"), problem.kind, problem.record,
                          problem.reason)
        out.print(table)
    for env in report.imported:
        for warning in env.warnings:
            if not warning.startswith("the release also exposes private"):
                err.print(Text.assemble((f"{env.env_id}: ", "yellow"), warning))
    hidden = sum(1 for env in report.imported for name in env.release_only_tools
                 if name.startswith("_"))
    if hidden:
        err.print(f"{hidden} private helper method(s) that the release listed as tools are not "
                  "tools here (release-only tools above)")
    if report.imported:
        err.print("tool schemas are derived from env.py; the release's own schemas are not used")
    source = "the pinned files" if pinned else "not the pinned files"
    summary = (f"{counts['envs_imported']} of {counts['env_records']} environments imported "
               f"({counts['envs_skipped']} skipped, {counts['envs_failed']} failed"
               + (f", {counts['envs_not_examined']} not examined (--limit)"
                  if counts["envs_not_examined"] else "")
               + f"); {counts['scenarios_imported']} of {counts['scenario_records']} RL "
               f"scenarios imported, all unverified (the release has no reference solutions), "
               f"{counts['scenarios_failed']} failed; {report.pipeline_version} ({source})")
    err.print(summary, style="green" if report.imported else "red")


SHOWN_DIFFERENCES = 3  # per question, in the table; --json and --report have them all


def _render_fidelity(report) -> None:  # type: ignore[no-untyped-def]
    counts = report.counts()
    out.print(f"BFCL {report.category} questions: the gateway ({report.gateway}) against "
              "BFCL's own execution")
    table = Table()
    table.add_column("questions", no_wrap=True)
    table.add_column("", justify="right")
    for label, key in [("in the checkout", "questions"), ("imported", "imported"),
                       ("compared", "compared"), ("calls equal", "calls_equal"),
                       ("state equal", "state_equal"), ("exact on both", "exact")]:
        table.add_row(label, str(counts[key]))
    out.print(table)
    for row in report.comparisons:
        if row.compared and not row.exact:
            _render_differences(row)
    for row in report.comparisons:
        if not row.compared:
            err.print(Text.assemble(("not compared ", "yellow"), f"{row.id}: {row.error}"))
    err.print(f"{counts['exact']} of {counts['compared']} compared questions exact "
              f"({counts['imported']} of {counts['questions']} imported)",
              style="green" if counts["exact"] == counts["compared"] else "yellow")


def _render_differences(row) -> None:  # type: ignore[no-untyped-def]
    """One table per differing question (titled with it, so the cells keep the width)."""
    table = Table(title=f"{row.id} ({row.env})", title_justify="left")
    table.add_column("where", overflow="fold")
    table.add_column("gateway", overflow="fold")
    table.add_column("BFCL", overflow="fold")
    cells = _differences(row)
    for where, ours, theirs in cells[:SHOWN_DIFFERENCES]:
        table.add_row(where, ours, theirs)
    if len(cells) > SHOWN_DIFFERENCES:
        table.add_row(f"and {len(cells) - SHOWN_DIFFERENCES} more (--json)", "", "")
    out.print(table)


def _differences(row) -> list[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    """A question's differences as table cells: where, the gateway's side, BFCL's side."""
    calls = [(f"call {diff.index} {diff.call}", _cell(diff.gateway), _cell(diff.bfcl))
             for diff in row.call_differences]
    states = [(f"state {diff.path}", _cell(diff.gateway), _cell(diff.bfcl))
              for diff in row.state_differences]
    return calls + states


def _cell(value: object, limit: int = 80) -> str:
    """A call's result text, or a state's value as JSON, shortened to ``limit`` characters."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[: limit - 1] + "…"
    return compact(value, limit)
