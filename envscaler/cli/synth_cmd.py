"""`envscaler synth ...`: build environments and scenarios with a model (SkelBuilder,
ScenGenerator).

Model access, record/replay and pipeline knobs come from ENVSCALER_SYNTH_* variables; the options
below override the most common ones. Sandboxes come from ENVSCALER_SANDBOX_*.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from envscaler.synth.workdir import DEFAULT_NAME as WORKDIR_NAME

app = typer.Typer(no_args_is_help=True,
                  help="Synthesize environments (skel), scenarios (scen) or both (all); resumable.")
console = Console(stderr=True)

Tasks = Annotated[Path, typer.Option(exists=True, dir_okay=False,
                                      help="JSON list or JSONL of task descriptions")]
Mode = Annotated[str | None, typer.Option(
    help="live | record | replay (default: ENVSCALER_SYNTH_MODE or live)")]
TranscriptPath = Annotated[Path | None, typer.Option(
    "--transcript",
    help="JSONL transcript for record/replay (default: ENVSCALER_SYNTH_TRANSCRIPT)")]
WorkdirPath = Annotated[Path | None, typer.Option(
    "--workdir", help=f"per-stage, per-item results for resume (default: OUT/{WORKDIR_NAME})")]
StopAfter = Annotated[str | None, typer.Option(
    "--stop-after", help="stop after this stage (e.g. logic.methods)")]
Fresh = Annotated[bool, typer.Option("--fresh",
                                     help="forget earlier results in the work directory")]
Overwrite = Annotated[bool, typer.Option(
    "--overwrite", help="replace environment files that exist with other content")]
Dual = Annotated[bool | None, typer.Option(
    "--dual-check/--no-dual-check", show_default=False,
    help="run the paper's dual-agent check (default: ENVSCALER_SYNTH_DUAL_CHECK, on)")]
CatalogueOut = Annotated[Path, typer.Option(
    help="the catalogue folder to write environments into")]
Configs = Annotated[int | None, typer.Option(
    "--configs", help="initial states per environment (default: ENVSCALER_SYNTH_CONFIGS_PER_ENV "
    "or 10)")]


def _settings(**overrides: Any):  # type: ignore[no-untyped-def]
    from pydantic import ValidationError

    from envscaler.synth.settings import SynthSettings

    try:
        return SynthSettings(**{key: value for key, value in overrides.items()
                                if value is not None})
    except ValidationError as exc:
        console.print(f"[red]error:[/red] invalid synthesis settings: {escape(str(exc))}")
        raise typer.Exit(2) from None


def _prepare_workdir(workdir: Path, fresh: bool) -> Path:
    if fresh and workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir


def _finish(result: Any) -> None:
    result.report.render(console, result.stage_usage)
    usage = result.usage
    cost = "" if usage.get("cost_usd") is None else f", ${usage['cost_usd']:.4f}"
    console.print(f"model calls: {usage['calls']} ({usage['prompt_tokens']} prompt + "
                  f"{usage['completion_tokens']} completion tokens{cost})")
    console.print(f"report: {result.report_path}")
    if result.report.outcome.startswith(("aborted", "incomplete")):
        console.print(f"[red]error:[/red] {escape(result.report.outcome)}")
        raise typer.Exit(1)


def _run(coroutine: Any) -> Any:
    from docker.errors import DockerException

    from envscaler.sandbox.errors import SandboxError
    from envscaler.format import EnvFolderError
    from envscaler.synth.llm import SynthAbort
    from envscaler.synth.skel.topics import TaskFileError

    try:
        return asyncio.run(coroutine)
    except (TaskFileError, EnvFolderError, SynthAbort) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    except (DockerException, SandboxError) as exc:
        console.print(f"[red]error:[/red] no sandboxes: {escape(str(exc))}\nrun scripts/bootstrap, "
                      "or set ENVSCALER_SANDBOX_BACKEND=process on a host without Docker")
        raise typer.Exit(1) from None


def _check_stage(stop_after: str | None) -> None:
    from envscaler.synth.pipeline import STAGES

    if stop_after is not None and stop_after not in STAGES:
        console.print(f"[red]error:[/red] unknown stage {stop_after!r}; "
                      f"stages: {', '.join(STAGES)}")
        raise typer.Exit(2)


@app.command()
def skel(tasks: Tasks,
         out: Annotated[Path, typer.Option(help="folder for the environment skeletons")],
         workdir: WorkdirPath = None, mode: Mode = None, transcript: TranscriptPath = None,
         dual_check: Dual = None, stop_after: StopAfter = None, fresh: Fresh = False,
         overwrite: Overwrite = False) -> None:
    """SkelBuilder: task descriptions -> quality-gated environments (env.py + env.json)."""
    from envscaler.synth.pipeline import run_skel

    _check_stage(stop_after)
    settings = _settings(mode=mode, transcript=transcript)
    work = _prepare_workdir(workdir or out / WORKDIR_NAME, fresh)
    result = _run(run_skel(settings, tasks=tasks, out=out, workdir=work, dual=dual_check,
                           stop_after=stop_after, overwrite=overwrite, console=console))
    _finish(result)


@app.command()
def scen(envs: Annotated[Path, typer.Option(
             exists=True, help="an environment folder or a folder of them")],
         out: Annotated[Path | None, typer.Option(help="where to write (default: in place)")]
         = None,
         workdir: WorkdirPath = None, mode: Mode = None, transcript: TranscriptPath = None,
         configs: Configs = None, stop_after: StopAfter = None, fresh: Fresh = False,
         overwrite: Overwrite = False) -> None:
    """ScenGenerator: verified scenarios (scenarios.jsonl) for existing environments."""
    from envscaler.synth.pipeline import run_scen

    _check_stage(stop_after)
    from envscaler.format import EnvFolderError, env_folders

    try:  # before the work directory is made in it
        env_folders(envs, required=True)
    except EnvFolderError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    settings = _settings(mode=mode, transcript=transcript, configs_per_env=configs)
    work = _prepare_workdir(workdir or (out or envs) / WORKDIR_NAME, fresh)
    result = _run(run_scen(settings, envs=envs, out=out, workdir=work, stop_after=stop_after,
                           overwrite=overwrite, console=console))
    _finish(result)


@app.command(name="all")
def all_(tasks: Tasks,
         out: CatalogueOut,
         workdir: WorkdirPath = None, mode: Mode = None, transcript: TranscriptPath = None,
         dual_check: Dual = None, configs: Configs = None, stop_after: StopAfter = None,
         fresh: Fresh = False, overwrite: Overwrite = False) -> None:
    """Both: task descriptions -> environments with verified scenarios, in the catalogue format."""
    from envscaler.synth.pipeline import run_all

    _check_stage(stop_after)
    settings = _settings(mode=mode, transcript=transcript, configs_per_env=configs)
    work = _prepare_workdir(workdir or out / WORKDIR_NAME, fresh)
    result = _run(run_all(settings, tasks=tasks, out=out, workdir=work, dual=dual_check,
                          stop_after=stop_after, overwrite=overwrite, console=console))
    _finish(result)


RunDir = Annotated[Path, typer.Argument(exists=True, file_okay=False, help=(
    "run directory: settings.json, tasks.jsonl, replies/, transcript.jsonl"))]


@app.command()
def record(run_dir: RunDir, out: CatalogueOut) -> None:
    """Record a run from its reply files (replies/) into its transcript.jsonl, writing the
    environments to OUT."""
    from envscaler.synth.record import RecordError, record_run

    try:
        result = _run(record_run(run_dir, out, console=console))
    except RecordError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(1) from None
    _finish(result)


@app.command()
def replay(run_dir: RunDir, out: CatalogueOut) -> None:
    """Regenerate a run's environments from its transcript.jsonl alone, offline."""
    from envscaler.synth.record import replay_run

    _finish(_run(replay_run(run_dir, out, console=console)))


@app.command(name="replay-server")
def replay_server(transcript: Annotated[Path, typer.Option(exists=True, dir_okay=False)],
                  port: Annotated[int, typer.Option(min=0, max=65535)] = 8765) -> None:
    """Serve a transcript as an OpenAI-compatible endpoint on 127.0.0.1 (for offline runs)."""
    from envscaler.synth.replay_server import ReplayServer
    from envscaler.synth.transcript import Transcript

    server = ReplayServer(Transcript(transcript), port=port)
    console.print(f"replaying {transcript} at {server.base_url} (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
