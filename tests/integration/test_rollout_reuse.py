"""Session reuse in `run_rollouts` and `envscaler rollout`, against a live gateway (real Redis,
real Docker sandboxes): a worker resets its session to its next episode of the same environment
instead of opening a new one. Proved here: fewer sessions than episodes (the gateway's own
counter), the same rewards as a session per episode, each episode recording only its own epoch of
the session's trajectory, a new session when the environment changes, after a gateway failure
and when a reset fails, every session closed (also on cancellation), and the off switch."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from envscaler.cli.main import app
from envscaler_client import AsyncEnvClient, AsyncSession, EnvClient
from envscaler_client.rollout import (
    Episode,
    EpisodeSpec,
    Policy,
    ReferencePolicy,
    load_solutions,
    run_rollouts,
)
from typer.testing import CliRunner

from tests.deadlines import scaled
from tests.integration.gateway_fixtures import COUNTER, LIBRARY
from tests.integration.live_gateway import *  # the fixtures: catalogue_root, live_gateway
from tests.integration.live_gateway import LiveGateway


def sessions_created(gateway: LiveGateway, env: str) -> float:
    """The gateway's ``envscaler_sessions_created_total`` for ``env``."""
    text = httpx.get(f"{gateway.url}/metrics").text
    match = re.search(rf'^envscaler_sessions_created_total{{env="{env}"}} (\S+)$', text,
                      re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def spy_on_sessions(client: AsyncEnvClient) -> list[AsyncSession]:
    """The sessions ``client`` creates from now on, in order."""
    created: list[AsyncSession] = []
    create = client.create_session

    async def recorded(*args: Any, **kwargs: Any) -> AsyncSession:
        session = await create(*args, **kwargs)
        created.append(session)
        return session

    client.create_session = recorded  # type: ignore[assignment, method-assign]
    return created


def reference(catalogue: Path) -> Callable[[EpisodeSpec], Policy]:
    solutions = {env: load_solutions(catalogue, env) for env in (COUNTER, LIBRARY)}
    return lambda spec: ReferencePolicy(solutions[spec.env][spec.scenario] or [])


def library_specs(catalogue: Path, samples: int) -> list[EpisodeSpec]:
    scenarios = sorted(load_solutions(catalogue, LIBRARY))
    return [EpisodeSpec(LIBRARY, scenario, seed) for scenario in scenarios
            for seed in range(samples)]


def epochs_by_session(episodes: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Session id -> the epochs its episodes ran in, sorted."""
    epochs: dict[str, list[int]] = {}
    for episode in episodes:
        epochs.setdefault(episode["session_id"], []).append(episode["epoch"])
    return {session_id: sorted(numbers) for session_id, numbers in epochs.items()}


def assert_closed(gateway: LiveGateway, session_ids: set[str]) -> None:
    with EnvClient(gateway.url, gateway.api_key) as client:
        for session_id in session_ids:
            assert client.session(session_id).closed, session_id


def assert_own_epoch(gateway: LiveGateway, episodes: list[Episode]) -> None:
    """Each episode's calls are exactly its epoch's calls in the session's trajectory, and that
    epoch started from the episode's scenario and seed; a session keeps its last two episodes,
    the resets since trimmed the others."""
    with EnvClient(gateway.url, gateway.api_key) as client:
        for episode in episodes:
            assert episode.session_id is not None and episode.epoch is not None
            entries = client.session(episode.session_id).trajectory().entries
            kept = {e.epoch for e in entries}
            if episode.epoch < max(kept) - 1:
                assert episode.epoch not in kept, episode.key
                continue
            mine = [e for e in entries if e.epoch == episode.epoch]
            assert [(e.index, e.name, e.arguments) for e in mine if e.kind == "call"] == [
                (c.index, c.name, c.arguments) for c in episode.tool_calls], episode.key
            if episode.epoch > 0:
                marker = mine[0]
                assert (marker.kind, marker.scenario, marker.seed) == (
                    "reset", episode.scenario, episode.seed), episode.key


async def rollout(gateway: LiveGateway, specs: list[EpisodeSpec],
                  policy_for: Callable[[EpisodeSpec], Policy], **options: Any
                  ) -> tuple[list[Episode], list[AsyncSession]]:
    async with AsyncEnvClient(gateway.url, gateway.api_key) as client:
        created = spy_on_sessions(client)
        result = await run_rollouts(client, specs, policy_for, **options)
    return result.episodes, created


async def test_reused_sessions_give_the_rewards_of_new_ones_with_fewer_sessions(
        live_gateway: LiveGateway, catalogue_root: Path) -> None:
    specs = library_specs(catalogue_root, samples=3)  # 4 scenarios x 3 seeds
    policy_for = reference(catalogue_root)

    before = sessions_created(live_gateway, LIBRARY)
    reused, created = await rollout(live_gateway, specs, policy_for, concurrency=2)
    reused_count = sessions_created(live_gateway, LIBRARY) - before
    fresh, fresh_created = await rollout(live_gateway, specs, policy_for, concurrency=2,
                                         reuse_sessions=False)
    fresh_count = sessions_created(live_gateway, LIBRARY) - before - reused_count

    assert len(reused) == len(fresh) == len(specs) == 12
    assert reused_count == len(created) == 2  # one per worker, reset from episode to episode
    assert fresh_count == len(fresh_created) == 12  # one per episode
    epochs = epochs_by_session([e.model_dump() for e in reused])
    assert set(epochs) == {s.id for s in created}
    assert all(numbers == list(range(len(numbers))) for numbers in epochs.values())
    assert {e.epoch for e in fresh} == {0}
    rewards = {e.key: e.reward for e in reused}
    assert rewards == {e.key: e.reward for e in fresh}
    assert set(rewards.values()) == {1.0}
    assert all(e.termination == "completed" and e.passed == e.total > 0 for e in reused)
    # the same tool results: each reset episode started where a new session starts
    assert {e.key: [(c.name, c.result) for c in e.tool_calls] for e in reused} == {
        e.key: [(c.name, c.result) for c in e.tool_calls] for e in fresh}
    assert_own_epoch(live_gateway, reused)
    assert_closed(live_gateway, {s.id for s in created + fresh_created})


async def test_episodes_are_grouped_by_env_and_a_new_env_gets_a_new_session(
        live_gateway: LiveGateway, catalogue_root: Path) -> None:
    specs = [EpisodeSpec(COUNTER, "counter-1"), EpisodeSpec(LIBRARY, "library_loans-001"),
             EpisodeSpec(COUNTER, "counter-2"), EpisodeSpec(LIBRARY, "library_loans-002")]
    episodes, created = await rollout(live_gateway, specs, reference(catalogue_root),
                                      concurrency=1)
    assert [(e.scenario, e.epoch) for e in episodes] == [
        ("counter-1", 0), ("counter-2", 1), ("library_loans-001", 0), ("library_loans-002", 1)]
    assert [s.env for s in created] == [COUNTER, LIBRARY]
    assert [e.session_id for e in episodes] == [created[0].id] * 2 + [created[1].id] * 2
    assert all(e.reward == 1.0 for e in episodes)
    assert_own_epoch(live_gateway, episodes)
    assert_closed(live_gateway, {s.id for s in created})


async def test_a_session_is_replaced_after_a_gateway_failure_or_a_failed_reset(
        live_gateway: LiveGateway, catalogue_root: Path) -> None:
    solve = reference(catalogue_root)
    episodes: list[Episode] = []

    def close(session_id: str) -> None:
        with EnvClient(live_gateway.url, live_gateway.api_key) as client:
            client.session(session_id).close()

    def ended(episode: Episode) -> None:
        episodes.append(episode)
        if len(episodes) == 1:
            close(episode.session_id or "")  # gone between episodes: the reset fails

    def policy_for(spec: EpisodeSpec) -> Policy:
        if spec.seed != 2:
            return solve(spec)

        async def pull_the_rug(messages: list[dict[str, Any]],
                               tools: list[dict[str, Any]]) -> dict[str, Any]:
            close(episodes[-1].session_id or "")  # gone under the agent's feet
            return await solve(spec)(messages, tools)
        return pull_the_rug

    specs = [EpisodeSpec(COUNTER, "counter-1", seed) for seed in range(3)]
    _, created = await rollout(live_gateway, [*specs, EpisodeSpec(COUNTER, "counter-2")],
                               policy_for, concurrency=1, on_episode=ended)
    first, second, broken, last = episodes
    assert [s.id for s in created] == [first.session_id, second.session_id, last.session_id]
    assert broken.session_id == second.session_id and broken.epoch == 1
    assert broken.termination == "gateway_error" and broken.error is not None
    assert broken.error.type == "SessionClosed"
    assert (second.epoch, last.epoch) == (0, 0)
    assert [e.reward for e in (first, second, last)] == [1.0, 1.0, 1.0]
    assert_closed(live_gateway, {s.id for s in created})


async def test_cancelling_a_run_closes_the_held_sessions(live_gateway: LiveGateway) -> None:
    turns = 0
    stuck = asyncio.Event()

    async def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        nonlocal turns
        turns += 1
        if turns > 2:  # two episodes done, the next two hang
            stuck.set()
            await asyncio.Event().wait()
        return "Nothing to do."

    specs = [EpisodeSpec(COUNTER, "counter-1", seed) for seed in range(6)]
    async with AsyncEnvClient(live_gateway.url, live_gateway.api_key) as client:
        created = spy_on_sessions(client)
        run = asyncio.create_task(run_rollouts(client, specs, lambda spec: policy,
                                               concurrency=2))
        await asyncio.wait_for(stuck.wait(), scaled(60))
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert len(created) == 2  # one per worker, reset for its second episode
        assert all(session.closed for session in created)
    assert_closed(live_gateway, {s.id for s in created})


def test_the_command_reuses_sessions_unless_told_not_to(
        live_gateway: LiveGateway, catalogue_root: Path, tmp_path: Path) -> None:
    def run(*extra: str) -> list[dict[str, Any]]:
        out = tmp_path / f"reference{len(extra)}.jsonl"
        result = CliRunner().invoke(app, [
            "rollout", "--policy", "reference", "--env", LIBRARY, "--samples", "2",
            "--concurrency", "2", "--catalogue", str(catalogue_root), "--out", str(out), *extra],
            env={"ENVSCALER_URL": live_gateway.url, "ENVSCALER_API_KEY": live_gateway.api_key})
        assert result.exit_code == 0, result.output
        return [json.loads(line) for line in out.read_text().splitlines()]

    before = sessions_created(live_gateway, LIBRARY)
    reused = run()
    middle = sessions_created(live_gateway, LIBRARY)
    fresh = run("--no-reuse-sessions")
    after = sessions_created(live_gateway, LIBRARY)

    assert len(reused) == len(fresh) == 8
    assert middle - before == len({e["session_id"] for e in reused}) == 2
    assert after - middle == len({e["session_id"] for e in fresh}) == 8
    assert {e["key"]: e["reward"] for e in reused} == {e["key"]: e["reward"] for e in fresh}
    assert {e["reward"] for e in reused} == {1.0}
    assert all(numbers == list(range(len(numbers)))
               for numbers in epochs_by_session(reused).values())
    assert_closed(live_gateway, {e["session_id"] for e in reused + fresh})
