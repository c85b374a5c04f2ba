"""Running a stage over its items: concurrency, resume from the work directory, progress, report.

A stage's work function gets ``(item, input)`` and returns JSON data, or raises ``ItemDropped``
(kept in the report and the work directory: the item is finished) or ``TransientFailure`` (kept
in the report only: a next run tries the item again, and this run stops after the stage). Any
other exception aborts the run; what was finished stays in the work directory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from rich.progress import Progress

from envscaler.synth.llm import ItemDropped, ModelClient, TransientFailure
from envscaler.synth.report import RunReport
from envscaler.synth.sandboxes import SandboxHub
from envscaler.synth.settings import SynthSettings
from envscaler.synth.workdir import DROPPED, OK, ItemRecord, WorkDir, fingerprint

Work = Callable[[str, Any], Awaitable[Any]]


class StopRun(Exception):
    """The run was asked to stop after a stage (``--stop-after``)."""

    def __init__(self, stage: str) -> None:
        super().__init__(f"stopped after {stage}")
        self.stage = stage


class Incomplete(Exception):
    """Items of a stage failed transiently: later stages must not run on a partial set (a
    de-duplication, for one, would keep what the missing item should have replaced)."""

    def __init__(self, stage: str, pending: int) -> None:
        super().__init__(f"incomplete: {pending} item(s) of {stage} could not reach the model; "
                         "run again to resume")
        self.stage = stage
        self.pending = pending


@dataclass
class Run:
    settings: SynthSettings
    model: ModelClient | None
    hub: SandboxHub | None
    workdir: WorkDir
    report: RunReport
    progress: Progress | None = None
    stop_after: str | None = None

    async def stage(self, name: str, items: list[tuple[str, Any]], work: Work, *,
                    concurrency: int | None = None) -> dict[str, Any]:
        """The data of the items that came through ``name``, in the order of ``items``."""
        report = self.report.stage(name)
        report.items_in += len(items)
        model = self.settings.stage_model(name)
        salt = {"model": model.model, "temperature": model.temperature, "seed": self.settings.seed}
        task = self.progress.add_task(name, total=len(items)) if self.progress else None
        results: dict[str, Any] = {}
        todo: list[tuple[str, Any, str]] = []
        for item, value in items:
            expected = fingerprint({"input": value, "settings": salt})
            record = self.workdir.load(name, item, expected)
            if record is None:
                todo.append((item, value, expected))
                continue
            report.resumed += 1
            self._finish(name, record, results, task)
        limit = asyncio.Semaphore(concurrency or model.concurrency)

        async def one(item: str, value: Any, expected: str) -> None:
            async with limit:
                try:
                    data = await work(item, value)
                except ItemDropped as exc:
                    record = ItemRecord(item, DROPPED, expected, reason=str(exc))
                except TransientFailure as exc:
                    report.pending.append({"item": item, "reason": str(exc)})
                    self._advance(task)
                    return
                else:
                    record = ItemRecord(item, OK, expected, data=data)
            self.workdir.save(name, record)
            self._finish(name, record, results, task)

        try:
            async with asyncio.TaskGroup() as group:
                for item, value, expected in todo:
                    group.create_task(one(item, value, expected))
        except BaseExceptionGroup as group_error:
            raise _first(group_error) from None
        if report.pending:
            raise Incomplete(name, len(report.pending))
        if self.stop_after == name:
            raise StopRun(name)
        return {item: results[item] for item, _ in items if item in results}

    def select(self, name: str, items_in: int, kept: int, drops: list[tuple[str, str]]) -> None:
        """Report a stage computed over the whole set at once (no per-item work, no resume)."""
        report = self.report.stage(name)
        report.items_in += items_in
        report.items_out += kept
        report.drops += [{"item": item, "reason": reason} for item, reason in drops]
        if self.progress:
            self.progress.add_task(name, total=items_in, completed=items_in)
        if self.stop_after == name:
            raise StopRun(name)

    def _finish(self, name: str, record: ItemRecord, results: dict[str, Any],
                task: Any) -> None:
        report = self.report.stage(name)
        if record.status == OK:
            results[record.item] = record.data
            report.items_out += 1
        else:
            report.drops.append({"item": record.item, "reason": record.reason or "dropped"})
        self._advance(task)

    def _advance(self, task: Any) -> None:
        if self.progress is not None and task is not None:
            self.progress.advance(task)


def _first(group: BaseExceptionGroup) -> BaseException:
    """The first leaf exception of a (nested) exception group."""
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error
