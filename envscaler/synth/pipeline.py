"""The runs the command line starts: ``skel``, ``scen`` and ``all``, with resume and a report.

A run keeps per-stage, per-item results in its work directory, so running it again after an
interruption redoes only unfinished items. It ends with ``report.json`` in the work directory:
for each stage, items in and out and the reason for every drop, plus model usage and cost.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from envscaler.format import env_folders
from envscaler.synth.llm import ModelClient, StageUsage, SynthAbort
from envscaler.synth.report import RunReport
from envscaler.synth.run import Incomplete, Run, StopRun
from envscaler.synth.sandboxes import SandboxHub
from envscaler.synth.scen.generator import generate_scenarios
from envscaler.synth.settings import SynthSettings
from envscaler.synth.skel.builder import build_skeletons
from envscaler.synth.skel.topics import read_tasks
from envscaler.synth.workdir import WorkDir

REPORT_NAME = "report.json"
STAGES = ("topics.judge", "topics.infer", "topics.select", "logic.state", "logic.skeleton",
          "logic.operations", "logic.methods", "logic.assemble", "quality.static",
          "quality.config", "quality.executable", "quality.dual", "skel.write", "scen.load",
          "scen.configs", "scen.tasks", "scen.checklist", "scen.checks", "scen.solution",
          "scen.gate", "scen.write")
SKELETONS = "skeletons"


@dataclass
class RunResult:
    report: RunReport
    report_path: Path
    usage: dict[str, Any]  # totals over the run's model calls
    stage_usage: dict[str, StageUsage]

    @property
    def complete(self) -> bool:
        return self.report.outcome == "complete"


async def run_skel(settings: SynthSettings, *, tasks: Path, out: Path, workdir: Path,
                   dual: bool | None = None, stop_after: str | None = None,
                   overwrite: bool = False, hub: SandboxHub | None = None,
                   console: Console | None = None) -> RunResult:
    task_list = read_tasks(tasks)

    async def body(run: Run) -> None:
        await build_skeletons(run, task_list, out, overwrite=overwrite,
                              dual=settings.dual_check if dual is None else dual)

    return await _execute(settings, workdir, body, stop_after=stop_after, hub=hub, console=console)


async def run_scen(settings: SynthSettings, *, envs: Path, out: Path | None, workdir: Path,
                   stop_after: str | None = None, overwrite: bool = False,
                   hub: SandboxHub | None = None, console: Console | None = None) -> RunResult:
    folders = env_folders(envs, required=True)
    target = out or (envs if folders != [envs] else envs.parent)

    async def body(run: Run) -> None:
        await generate_scenarios(run, folders, target, overwrite=overwrite)

    return await _execute(settings, workdir, body, stop_after=stop_after, hub=hub, console=console)


async def run_all(settings: SynthSettings, *, tasks: Path, out: Path, workdir: Path,
                  dual: bool | None = None, stop_after: str | None = None,
                  overwrite: bool = False, hub: SandboxHub | None = None,
                  console: Console | None = None) -> RunResult:
    """SkelBuilder into ``<workdir>/skeletons``, then ScenGenerator into ``out``: only environments
    with at least one verified scenario reach ``out``."""
    task_list = read_tasks(tasks)
    skeletons = workdir / SKELETONS

    async def body(run: Run) -> None:
        env_ids = await build_skeletons(run, task_list, skeletons, overwrite=True,
                                        dual=settings.dual_check if dual is None else dual)
        folders = [folder for folder in env_folders(skeletons) if folder.name in env_ids] \
            if skeletons.is_dir() else []
        await generate_scenarios(run, folders, out, overwrite=overwrite)

    return await _execute(settings, workdir, body, stop_after=stop_after, hub=hub, console=console)


async def _execute(settings: SynthSettings, workdir: Path, body: Callable[[Run], Awaitable[None]],
                   *, stop_after: str | None, hub: SandboxHub | None,
                   console: Console | None) -> RunResult:
    report = RunReport()
    model = ModelClient.from_settings(settings)
    own_hub = hub is None
    sandboxes = hub or SandboxHub.from_environment(limit=settings.sandbox_concurrency)
    progress = _progress(console) if console is not None else None
    run = Run(settings=settings, model=model, hub=sandboxes, workdir=WorkDir(workdir),
              report=report, progress=progress, stop_after=stop_after)
    try:
        with progress if progress is not None else nullcontext():
            await body(run)
    except StopRun as stop:
        report.outcome = f"stopped after {stop.stage}"
    except Incomplete as incomplete:
        report.outcome = str(incomplete)
    except SynthAbort as exc:
        report.outcome = f"aborted: {exc}"
    except BaseException as exc:  # interrupted: keep the report of what was done, then re-raise
        report.outcome = f"interrupted: {type(exc).__name__}: {exc}"
        raise
    finally:
        await model.close()
        if own_hub:
            await sandboxes.close()
        if model.transcript is not None and settings.mode == "record":
            model.transcript.compact()
        report.write(workdir / REPORT_NAME, model.usage)
    path = workdir / REPORT_NAME
    return RunResult(report=report, report_path=path, usage=report.to_dict(model.usage)["usage"],
                     stage_usage=model.usage)


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=False)
