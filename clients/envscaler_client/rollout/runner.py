"""Many episodes at once, written to an append-only JSONL file, resumable.

- At most ``concurrency`` episodes (so sessions) at a time, from a pool of workers.
- One episode failing (the model, the gateway, a bug) never stops the others: it is written with
  its termination and error.
- Every episode is one line, written and flushed as it ends. A rerun on the same file skips the
  episodes already in it (by `envscaler_client.rollout.episode_key`); with ``retry_errors`` it
  redoes those that ended in an error (the newer line then supersedes the older one). A line cut
  short by an interruption is ignored and the file stays readable.
- Each worker keeps its session from one episode to the next of the same environment and resets
  it to the next scenario and seed (the sandbox is reset in place, not replaced): the same start
  as a new session, for a fraction of the cost. Specs are grouped by environment for that. A
  session is replaced when the environment changes, when the gateway failed during an episode
  (the session may be gone) and when a reset fails; ``reuse_sessions=False`` opens one per
  episode.
- Sessions are always closed, also when the run is cancelled.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from itertools import groupby
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from envscaler_client.aio import AsyncEnvClient, AsyncSession
from envscaler_client.errors import CapacityError, EnvScalerError
from envscaler_client.models import EnvDetail
from envscaler_client.rollout.episode import (
    ERROR_TERMINATIONS,
    Episode,
    EpisodeError,
    Timings,
    episode_key,
    run_episode,
)
from envscaler_client.rollout.policy import Policy
from envscaler_client.rollout.prompts import NON_CONVERSATION
from envscaler_client.rollout.user import SimulatedUser

log = logging.getLogger("envscaler.rollout")


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to run: a scenario, a seed (the sandbox's, and the model's when sent)."""

    env: str
    scenario: str
    seed: int = 0
    mode: str = NON_CONVERSATION
    split: str | None = None
    member: int = 0
    """Its place in a group of episodes of the same scenario and seed (GRPO's group)."""

    @property
    def key(self) -> str:
        return episode_key(self.env, self.scenario, self.mode, self.seed, self.member)

    @property
    def start(self) -> tuple[str, str, int, str]:
        """What the episodes of one group share."""
        return self.env, self.scenario, self.seed, self.mode


def grouped(specs: list[EpisodeSpec], size: int) -> list[EpisodeSpec]:
    """Each spec as ``size`` members of its group (one group per scenario and seed)."""
    return [dataclasses.replace(spec, member=member) for spec in specs for member in range(size)]


# ---------------------------------------------------------------- the file

def read_episodes(path: str | Path) -> Iterator[dict[str, Any]]:
    """The episodes of a rollout file, as dicts, in file order; lines that are not an episode
    (cut short by an interruption) are skipped."""
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return
    with handle:
        for line in handle:
            try:
                record = json.loads(line)
            except ValueError:
                if line.strip():
                    log.warning("%s: skipping a line that is not JSON (an interrupted write?)",
                                path)
                continue
            if isinstance(record, dict) and isinstance(record.get("key"), str):
                yield record


def latest_episodes(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Key -> the last record of that key (a retried episode supersedes the failed one)."""
    latest: dict[str, dict[str, Any]] = {}
    for record in records:
        latest.pop(record["key"], None)  # keep file order of the last occurrences
        latest[record["key"]] = record
    return latest


def done_keys(path: str | Path, retry_errors: bool = False) -> set[str]:
    """Keys of the episodes a rerun skips: all of those in the file, or, with ``retry_errors``,
    those whose last record did not end in an error."""
    latest = latest_episodes(read_episodes(path))
    return {key for key, record in latest.items()
            if not (retry_errors and record.get("termination") in ERROR_TERMINATIONS)}


class EpisodeWriter:
    """Append-only JSONL: one episode a line, flushed (and fsynced) as it is written."""

    def __init__(self, path: str | Path, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle: IO[str] = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115
        self._handle.seek(0, os.SEEK_END)
        if self._handle.tell() > 0:  # a line cut short by an interruption stays on its own line
            self._handle.seek(self._handle.tell() - 1)
            last = self._handle.read(1)
            self._handle.seek(0, os.SEEK_END)
            if last != "\n":
                self._handle.write("\n")
        self.written = 0

    def write(self, episode: Episode) -> None:
        self._handle.write(episode.to_json() + "\n")
        self._handle.flush()
        if self.fsync:
            os.fsync(self._handle.fileno())
        self.written += 1

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> EpisodeWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------- the run

@dataclass
class RolloutResult:
    episodes: list[Episode] = field(default_factory=list)
    """The episodes run now, in the order they ended."""
    skipped: int = 0
    """Specs skipped because their episode was already in the output file."""


async def open_session(client: AsyncEnvClient, spec: EpisodeSpec,
                       attempts: int = 6) -> AsyncSession:
    """A session for ``spec``, waiting and trying again while the gateway is at capacity
    (429/503 ``Retry-After``): a rollout wider than the sandbox pool waits for a free slot."""
    for attempt in range(1, attempts + 1):
        try:
            return await client.create_session(spec.env, spec.scenario, seed=spec.seed)
        except CapacityError as exc:
            if attempt >= attempts:
                raise
            delay = min(30.0, exc.retry_after if exc.retry_after else 0.5 * 2 ** attempt)
            log.info("gateway at capacity (%s); opening %s again in %.1f s", exc, spec.key, delay)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


SOUND_SESSION_ERRORS = frozenset({"NoChecklist", "CheckExhausted"})
"""Validation errors that leave the session as it was: no checks to run, or a check that ran
out of its budget (the episode is an error with no reward; the session goes on)."""


def group_by_env(specs: list[EpisodeSpec]) -> list[EpisodeSpec]:
    """The specs with those of one environment next to each other (environments in order of first
    appearance, specs in their order), so that a worker's next episode is usually of the
    environment its session is already on."""
    rank = {env: n for n, env in enumerate(dict.fromkeys(spec.env for spec in specs))}
    return sorted(specs, key=lambda spec: rank[spec.env])


def session_suspect(episode: Episode) -> bool:
    """Whether the gateway failed during the episode (the session may be closed, expired or
    broken): its session is then not reused. The model or the user failing leaves it sound, and
    so do validations that answer about the scenario's checks (`SOUND_SESSION_ERRORS`)."""
    return any(error is not None and error.stage not in ("agent", "user")
               and error.type not in SOUND_SESSION_ERRORS
               for error in (episode.error, episode.validation_error))


class SessionSeat:
    """A worker's session, carried from one episode to the next of the same environment.

    `take` gives a session at the start of a spec's scenario and seed: the held one reset in place
    when it is of the spec's environment, else a new one. `done` keeps it for the next episode
    only with ``reuse`` and when the gateway did not fail during the episode; `release` closes it
    in any case (the worker's end, a cancellation).
    """

    def __init__(self, client: AsyncEnvClient, reuse: bool) -> None:
        self.client, self.reuse = client, reuse
        self.session: AsyncSession | None = None
        self.epoch = 0
        """The held session's epoch: 0 when new, one more after each reset."""

    async def take(self, spec: EpisodeSpec) -> AsyncSession:
        session = self.session
        if session is not None and session.env == spec.env:
            try:
                self.epoch = (await session.reset(spec.scenario, seed=spec.seed)).epoch
                return session
            except EnvScalerError as exc:  # e.g. it expired: a new session serves as well
                log.info("could not reset session %s for %s (%s); opening a new one",
                         session.id, spec.key, exc)
        await self.release()
        self.session, self.epoch = await open_session(self.client, spec), 0
        return self.session

    async def done(self, episode: Episode) -> None:
        if not self.reuse or session_suspect(episode):
            await self.release()

    async def release(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            await self.close_quietly(session)

    @staticmethod
    async def close_quietly(session: AsyncSession) -> None:
        try:
            await session.close()  # after a cancel too: it is delivered once
        except EnvScalerError as exc:
            log.warning("could not close session %s: %s (it expires after the gateway's "
                        "session TTL)", session.id, exc)


def failed_episode(spec: EpisodeSpec, stage: str, exc: BaseException, *,
                   termination: str = "gateway_error", started_at: float = 0.0,
                   policy_name: str | None = None) -> Episode:
    """The record of an episode that could not run (its session could not be opened...)."""
    kind = getattr(exc, "type", None)
    message = getattr(exc, "message", None)
    return Episode(key=spec.key, env=spec.env, scenario=spec.scenario, split=spec.split,
                   seed=spec.seed, mode=spec.mode, policy=policy_name,
                   termination=termination,  # type: ignore[arg-type]
                   error=EpisodeError(stage=stage,
                                      type=kind if isinstance(kind, str) else type(exc).__name__,
                                      message=message if isinstance(message, str) else str(exc)),
                   timings=Timings(started_at=started_at))


async def run_rollouts(
        client: AsyncEnvClient, specs: Iterable[EpisodeSpec],
        policy_for: Callable[[EpisodeSpec], Policy], *, out: str | Path | None = None,
        user: SimulatedUser | None = None, concurrency: int = 8, max_steps: int | None = None,
        resume: bool = True, retry_errors: bool = False, limit: int | None = None,
        policy_name: str | None = None, envs: dict[str, EnvDetail] | None = None,
        on_start: Callable[[int], None] | None = None,
        on_episode: Callable[[Episode], None] | None = None,
        reuse_sessions: bool = True) -> RolloutResult:
    """Run an episode per spec with at most ``concurrency`` at a time (a group runs whole; give
    ``client`` ``limits=connection_limits(max(concurrency, group size))``, or no cap: a cap below
    that queues requests).

    ``policy_for(spec)`` gives the policy of one episode (e.g. ``policy.with_seed(spec.seed)``
    or a `ReferencePolicy` of its scenario). With ``out``, each episode is appended to that JSONL
    file as it ends and, with ``resume``, specs whose episode is already there are skipped
    (``retry_errors``: except those that ended in an error). ``limit``: run at most that many
    episodes (the first ones in ``specs`` order). ``on_start(total)`` is told how many will run,
    ``on_episode`` each as it ends. ``reuse_sessions``: a worker resets its session to its next
    episode of the same environment (see the module); False: a new session per episode.
    Consecutive specs of one scenario and seed (`grouped`) are a group: its first member's
    session is forked for the others (`AsyncSession.fork`), all run at once, and the forks are
    closed after.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    wanted = list(dict.fromkeys(specs))  # the same spec twice is one episode
    done = done_keys(out, retry_errors) if out is not None and resume else set()
    todo = [spec for spec in wanted if spec.key not in done]
    result = RolloutResult(skipped=len(wanted) - len(todo))
    if limit is not None:
        todo = todo[:max(0, limit)]
    if reuse_sessions:
        todo = group_by_env(todo)
    if on_start is not None:
        on_start(len(todo))
    details = dict(envs or {})
    turns: dict[str, dict[str, list[str] | None]] = {}
    for name in dict.fromkeys(spec.env for spec in todo):
        if name not in details:
            details[name] = await client.env(name)
        turns[name] = {scenario.id: scenario.turns for scenario in await client.scenarios(name)}
    writer = EpisodeWriter(out) if out is not None else None
    groups = [list(group) for _, group in groupby(todo, key=lambda spec: spec.start)]
    queue = iter(groups)

    async def one(spec: EpisodeSpec, seat: SessionSeat,
                  session: AsyncSession | None = None) -> Episode:
        started_at, clock = time.time(), time.perf_counter()
        try:
            session = session or await seat.take(spec)
        except EnvScalerError as exc:
            return failed_episode(spec, "session", exc, started_at=started_at,
                                  policy_name=policy_name)
        ready = time.perf_counter() - clock
        try:
            scripted = turns[spec.env].get(spec.scenario) if spec.mode == NON_CONVERSATION else None
            episode = await run_episode(session, policy_for(spec), mode=spec.mode, user=user,
                                        max_steps=max_steps, env=details[spec.env],
                                        policy_name=policy_name, split=spec.split,
                                        turns=scripted)
            episode.timings.session_s = round(ready, 6)
        except Exception as exc:  # noqa: BLE001 - a bug in one episode must not stop the run
            log.exception("episode %s failed", spec.key)
            episode = failed_episode(spec, "runner", exc, termination="internal_error",
                                     started_at=started_at, policy_name=policy_name)
            episode.session_id = session.id
        episode.key, episode.member = spec.key, spec.member
        episode.epoch = seat.epoch
        return episode

    async def lead(spec: EpisodeSpec, seat: SessionSeat) -> Episode:
        episode = await one(spec, seat)
        await seat.done(episode)
        return episode

    async def group(specs: list[EpisodeSpec], seat: SessionSeat) -> list[Episode]:
        """The first member on the seat's session; the others on its forks, taken before any
        member acts (then each goes its own way)."""
        if len(specs) == 1:
            return [await lead(specs[0], seat)]
        try:
            session = await seat.take(specs[0])
            forks = await session.fork(len(specs) - 1)
        except EnvScalerError as exc:
            await seat.release()
            return [failed_episode(spec, "session", exc, started_at=time.time(),
                                   policy_name=policy_name) for spec in specs]
        try:
            return list(await asyncio.gather(
                lead(specs[0], seat),
                *(one(spec, seat, fork) for spec, fork in zip(specs[1:], forks, strict=True))))
        finally:
            for fork in forks:
                await SessionSeat.close_quietly(fork)

    def record(episode: Episode) -> None:
        if writer is not None:
            writer.write(episode)
        result.episodes.append(episode)
        if on_episode is not None:
            on_episode(episode)

    async def worker() -> None:
        seat = SessionSeat(client, reuse_sessions)
        try:
            for specs in queue:  # shared: each group goes to one worker
                for episode in await group(specs, seat):
                    record(episode)
        finally:
            await seat.release()

    width = max((len(g) for g in groups), default=1)
    workers = [asyncio.ensure_future(worker())
               for _ in range(min(max(1, concurrency // width), len(groups)))]
    try:
        await asyncio.gather(*workers)
    except Exception:
        for task in workers:  # a worker failed (its callback, the file): stop the others
            task.cancel()
        raise
    finally:
        # gather returns as soon as one worker failed or was cancelled (all are when the run is):
        # wait until the others have closed their sessions.
        if workers:
            await asyncio.wait(workers)
        if writer is not None:
            writer.close()
    return result
