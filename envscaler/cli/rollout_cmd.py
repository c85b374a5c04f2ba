"""`envscaler rollout`: drive a model (or the reference solutions) through scenarios over the
gateway and write one episode a line to a JSONL file, resumably.

    envscaler rollout --base-url http://127.0.0.1:8001/v1 --model qwen3-8b \\
        --env library_loans --split rl --out rollouts.jsonl --concurrency 16
    envscaler rollout --policy reference --env library_loans --out reference.jsonl

Everything goes through the gateway's public API (`envscaler_client`); the model is any
OpenAI-compatible chat-completions endpoint, spoken to with httpx. The logic lives in
`envscaler_client.rollout`; this module is options, checks before the run, and the report.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from envscaler_client import DEFAULT_URL, AsyncEnvClient, ScenarioSummary, connection_limits
from envscaler_client.rollout import (
    DEFAULT_MAX_STEPS,
    ERROR_TERMINATIONS,
    TERMINATIONS,
    CatalogueError,
    ChatCompletionsPolicy,
    Episode,
    EpisodeSpec,
    Policy,
    ReferencePolicy,
    SimulatedUser,
    grouped,
    load_references,
    run_rollouts,
)
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from envscaler.cli._common import (
    DEFAULT_CATALOGUE,
    ApiKey,
    CataloguePath,
    JsonOutput,
    Split,
    Url,
    err,
    explained,
    fail,
    out,
    print_json,
)


class Mode(str, Enum):
    non_conversation = "non-conversation"
    conversation = "conversation"


class UserStyle(str, Enum):
    envscaler = "envscaler"
    tau = "tau"


class PolicyKind(str, Enum):
    model = "model"
    reference = "reference"


OutFile = Annotated[Path, typer.Option("--out", help="The JSONL file of episodes (appended to; "
                                       "episodes already in it are skipped).", show_default=False)]
Envs = Annotated[list[str], typer.Option("--env", help="Environment id (repeat for several).",
                                         show_default=False)]
Scenarios = Annotated[list[str] | None, typer.Option(
    "--scenario", help="Scenario id (repeat for several); default: every scenario of --split, "
    "or all.", show_default=False)]
BaseUrl = Annotated[str | None, typer.Option(
    "--base-url", envvar="ENVSCALER_MODEL_BASE_URL", show_default=False,
    help="The model's OpenAI-compatible endpoint, e.g. http://127.0.0.1:8001/v1.")]
Model = Annotated[str | None, typer.Option(envvar="ENVSCALER_MODEL", show_default=False,
                                           help="The model name sent to the endpoint.")]
KeyEnv = Annotated[str, typer.Option(
    "--api-key-env", help="Environment variable holding the model endpoint's API key "
    "(unset: no Authorization header).")]


def rollout(
        out_path: OutFile, env: Envs, scenario: Scenarios = None, split: Split = None,
        mode: Annotated[Mode, typer.Option(help="non-conversation: the task is the first user "
                                           "message; conversation: a simulated user holds it."
                                           )] = Mode.non_conversation,
        policy: Annotated[PolicyKind, typer.Option(
            help="model: the model at --base-url; reference: replay each scenario's reference "
            "solution from --catalogue (no model).")] = PolicyKind.model,
        base_url: BaseUrl = None, model: Model = None, api_key_env: KeyEnv = "OPENAI_API_KEY",
        temperature: Annotated[float | None, typer.Option(
            help="Sampling temperature (default: the endpoint's).", show_default=False)] = None,
        max_tokens: Annotated[int | None, typer.Option(
            min=1, help="Tokens per model answer.", show_default=False)] = None,
        user_base_url: Annotated[str | None, typer.Option(
            help="The simulated user's endpoint (default: --base-url).", show_default=False)]
        = None,
        user_model: Annotated[str | None, typer.Option(
            help="The simulated user's model (default: --model).", show_default=False)] = None,
        user_api_key_env: Annotated[str | None, typer.Option(
            help="Variable holding the user endpoint's key (default: --api-key-env).",
            show_default=False)] = None,
        user_temperature: Annotated[float, typer.Option(
            help="The simulated user's temperature (the paper's 0.7).")] = 0.7,
        user_style: Annotated[UserStyle, typer.Option(
            help="envscaler: the paper's user (# Thought / # Reply); tau: tau-bench's user "
                 "(its prompt and greeting, plain replies, the agent's messages also sent to "
                 "the environment's respond tool, for scenarios imported from tau-bench).")]
        = UserStyle.envscaler,
        concurrency: Annotated[int, typer.Option(min=1, help="Episodes at once.")] = 4,
        max_steps: Annotated[int | None, typer.Option(
            min=1, help="Agent turns per episode (default 30 non-conversation, 40 conversation).",
            show_default=False)] = None,
        seed: Annotated[int, typer.Option(min=0, help="Seed of the first episode of each "
                                          "scenario (sandbox and model).")] = 0,
        group_size: Annotated[int, typer.Option(min=1, max=65, help="Episodes per scenario and "
                                                "seed, started together on forks of one session "
                                                "(GRPO's group).")] = 1,
        samples: Annotated[int, typer.Option(min=1, help="Episodes per scenario, with seeds "
                                             "--seed, --seed+1, ...")] = 1,
        limit: Annotated[int | None, typer.Option(
            min=0, help="Run at most this many episodes now (rerun to continue).",
            show_default=False)] = None,
        retry_errors: Annotated[bool, typer.Option(
            help="Run again the episodes of --out that ended in an error.")] = False,
        reuse_sessions: Annotated[bool, typer.Option(
            help="Reset a session to the next episode of its environment instead of opening a "
            "new one (the same start, much cheaper); --no-reuse-sessions: a session per "
            "episode.")] = True,
        send_seed: Annotated[bool, typer.Option(
            help="Send each episode's seed to the model endpoint.")] = True,
        model_timeout: Annotated[float, typer.Option(
            min=1, help="Seconds a model answer may take.")] = 300.0,
        model_attempts: Annotated[int, typer.Option(
            min=1, help="Tries per model request (timeouts, 429, 5xx are retried).")] = 3,
        catalogue: CataloguePath = DEFAULT_CATALOGUE,
        url: Url = DEFAULT_URL, api_key: ApiKey = None, json_output: JsonOutput = False) -> None:
    """Run scenarios through a model (or their reference solutions); one episode a JSONL line.

    Exit status 1 when an episode of this run ended in an error (rerun with --retry-errors).
    """
    if scenario and split:
        fail("--scenario and --split are exclusive", "give scenario ids, or a split, not both", 2)
    conversation = mode is Mode.conversation
    user_base_url = user_base_url or base_url
    user_model = user_model or model
    if policy is PolicyKind.model and not (base_url and model):
        fail("--policy model needs --base-url and --model",
             "pass the model's OpenAI-compatible endpoint and name, e.g. --base-url "
             "http://127.0.0.1:8001/v1 --model qwen3-8b (or --policy reference)", 2)
    if conversation and not (user_base_url and user_model):
        fail("conversation mode needs a simulated user",
             "pass --user-base-url and --user-model (they default to --base-url and --model)", 2)
    for variable in dict.fromkeys(v for v in (api_key_env, user_api_key_env) if v):
        if variable != "OPENAI_API_KEY" and not os.environ.get(variable):
            err.print(f"warning: ${variable} is not set: the model endpoint gets no API key",
                      style="yellow")
    solutions: dict[str, dict[str, list[list[dict[str, Any]]] | None]] = {}
    if policy is PolicyKind.reference:
        for name in env:
            try:
                solutions[name] = load_references(catalogue, name)
            except CatalogueError as exc:
                fail(str(exc), "pass --catalogue PATH (or set ENVSCALER_CATALOGUE) to the folder "
                     "of environments the gateway serves")
    plan = _Plan(env=env, scenarios=scenario, split=split, mode=mode.value, seed=seed,
                 samples=samples, group_size=group_size)
    try:
        with explained(url):
            summary = asyncio.run(_run(
                plan, out_path, url, api_key, policy, solutions, base_url, model,
                os.environ.get(api_key_env) or None, temperature, max_tokens, send_seed,
                model_timeout, model_attempts, user_base_url if conversation else None,
                user_model, os.environ.get(user_api_key_env or api_key_env) or None,
                user_temperature, user_style.value, concurrency, max_steps, limit, retry_errors,
                reuse_sessions))
    except KeyboardInterrupt:
        err.print(f"interrupted: the episodes that ended are in {out_path}; run the same "
                  "command again to go on from there", style="yellow")
        raise typer.Exit(130) from None
    _report(summary, out_path, json_output)


class _Plan:
    def __init__(self, env: list[str], scenarios: list[str] | None, split: str | None, mode: str,
                 seed: int, samples: int, group_size: int = 1) -> None:
        self.env, self.scenarios, self.split = env, scenarios, split
        self.mode, self.seed, self.samples = mode, seed, samples
        self.group_size = group_size


async def _specs(client: AsyncEnvClient, plan: _Plan) -> list[EpisodeSpec]:
    specs: list[EpisodeSpec] = []
    for name in plan.env:
        await client.env(name)  # an unknown environment: one explained error
        listed: list[ScenarioSummary] = await client.scenarios(name, plan.split)
        if plan.scenarios:
            by_id = {s.id: s for s in await client.scenarios(name)}
            missing = [s for s in plan.scenarios if s not in by_id]
            if len(plan.env) == 1 and missing:
                fail(f"no scenario {', '.join(missing)} in {name}",
                     f"list them with `envscaler scenarios {name}`")
            listed = [by_id[s] for s in plan.scenarios if s in by_id]
        if not listed:
            fail(f"no scenario to run in {name}" + (f" (split {plan.split})" if plan.split else ""),
                 f"list them with `envscaler scenarios {name}`")
        specs += [EpisodeSpec(name, s.id, plan.seed + n, plan.mode, s.split)
                  for s in listed for n in range(plan.samples)]
    return grouped(specs, plan.group_size)


async def _probe(policy: ChatCompletionsPolicy, what: str, key_env: str) -> None:
    """Fail clearly before the run when the endpoint is unreachable or refuses the key."""
    try:
        response = await policy.models()
    except httpx.TransportError as exc:
        fail(f"the {what} endpoint {policy.base_url} is unreachable: "
             f"{type(exc).__name__}: {exc}",
             f"is the model server running? check --{'user-' if what == 'user' else ''}base-url "
             "(OpenAI-compatible, usually ending in /v1)")
    if response.status_code in (401, 403):
        fail(f"the {what} endpoint {policy.base_url} refused the API key "
             f"(HTTP {response.status_code})",
             f"put the endpoint's key in the environment variable {key_env}, or name another "
             "one with --api-key-env")


async def _run(plan: _Plan, out_path: Path, url: str, api_key: str | None, kind: PolicyKind,
               solutions: dict[str, dict[str, list[list[dict[str, Any]]] | None]],
               base_url: str | None, model: str | None, model_key: str | None,
               temperature: float | None, max_tokens: int | None, send_seed: bool,
               timeout: float, attempts: int, user_base_url: str | None,
               user_model: str | None, user_key: str | None, user_temperature: float,
               user_style: str, concurrency: int, max_steps: int | None, limit: int | None,
               retry_errors: bool, reuse_sessions: bool) -> dict[str, Any]:
    agent: ChatCompletionsPolicy | None = None
    user: SimulatedUser | None = None
    width = max(concurrency, plan.group_size)  # sessions at once: a group runs whole
    async with AsyncEnvClient(url, api_key, limits=connection_limits(width)) as client:
        await client.health()  # unreachable or refused: one explained error
        specs = await _specs(client, plan)
        unsolved = 0
        if kind is PolicyKind.reference:
            kept = [spec for spec in specs if solutions[spec.env].get(spec.scenario)]
            unsolved = len({(s.env, s.scenario) for s in specs} -
                           {(s.env, s.scenario) for s in kept})
            if unsolved:
                err.print(f"{unsolved} scenarios have no reference solution in the catalogue "
                          "(unverified, or another catalogue than the gateway's): skipped",
                          style="yellow")
            specs = kept
            if max_steps is None:  # long solutions still fit, with each turn's final answer
                longest = max((sum(len(turn) + 1 for turn in solutions[s.env][s.scenario] or ())
                               for s in specs), default=0)
                max_steps = max(DEFAULT_MAX_STEPS[plan.mode], longest)
        try:
            if kind is PolicyKind.model:
                assert base_url and model
                agent = ChatCompletionsPolicy(base_url, model, model_key, temperature=temperature,
                                              max_tokens=max_tokens, timeout=timeout,
                                              attempts=attempts)
                await _probe(agent, "model", "--api-key-env")
            if user_base_url and user_model:
                user = SimulatedUser(user_base_url, user_model, user_key,
                                     temperature=user_temperature, timeout=timeout,
                                     attempts=attempts, style=user_style)  # type: ignore[arg-type]
                assert user._chat is not None
                await _probe(user._chat, "user", "--user-api-key-env")

            def policy_for(spec: EpisodeSpec) -> Policy:
                if agent is not None:
                    return agent.with_seed(spec.seed) if send_seed else agent
                return ReferencePolicy.per_turn(solutions[spec.env][spec.scenario] or [])

            counts: Counter[str] = Counter()
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), TextColumn("{task.fields[status]}"), console=err,
                          transient=True) as progress:
                bar = progress.add_task("episodes", total=None, status="")

                def started(total: int) -> None:
                    progress.update(bar, total=total)

                def ended(episode: Episode) -> None:
                    counts[episode.termination] += 1
                    status = " ".join(f"{name} {counts[name]}" for name in TERMINATIONS
                                      if counts[name])
                    progress.update(bar, advance=1, status=status)

                result = await run_rollouts(
                    client, specs, policy_for, out=out_path, user=user, concurrency=concurrency,
                    max_steps=max_steps, retry_errors=retry_errors, limit=limit,
                    policy_name=model if agent is not None else "reference",
                    on_start=started, on_episode=ended, reuse_sessions=reuse_sessions)
        finally:
            if agent is not None:
                await agent.aclose()
            if user is not None:
                await user.aclose()
    return {"episodes": result.episodes, "skipped": result.skipped, "planned": len(specs),
            "unsolved": unsolved}


def _report(summary: dict[str, Any], out_path: Path, json_output: bool) -> None:
    episodes: list[Episode] = summary["episodes"]
    by_end: dict[str, list[Episode]] = {}
    for episode in episodes:
        by_end.setdefault(episode.termination, []).append(episode)
    rewards = [e.reward for e in episodes if e.reward is not None]
    tokens = {"agent": sum(e.usage.agent.total_tokens for e in episodes),
              "user": sum(e.usage.user.total_tokens for e in episodes)}
    errors = [e for e in episodes if e.termination in ERROR_TERMINATIONS]
    if json_output:
        print_json({"out": str(out_path), "ran": len(episodes), "skipped": summary["skipped"],
                    "terminations": {name: len(group) for name, group in by_end.items()},
                    "mean_reward": sum(rewards) / len(rewards) if rewards else None,
                    "solved": sum(1 for r in rewards if r >= 1.0), "tokens": tokens,
                    "errors": [{"key": e.key, "termination": e.termination,
                                "error": e.error.model_dump() if e.error else None}
                               for e in errors]})
    else:
        table = Table("termination", "episodes", "mean reward", "reward 1.0",
                      title=f"{len(episodes)} episodes -> {out_path}")
        for name in TERMINATIONS:
            group = by_end.get(name)
            if not group:
                continue
            scored = [e.reward for e in group if e.reward is not None]
            style = "red" if name in ERROR_TERMINATIONS else "green"
            table.add_row(Text(name, style=style), str(len(group)),
                          f"{sum(scored) / len(scored):.3f}" if scored else "-",
                          str(sum(1 for r in scored if r >= 1.0)))
        out.print(table)
        if summary["skipped"]:
            err.print(f"{summary['skipped']} episodes were already in {out_path}: skipped")
        if tokens["agent"] or tokens["user"]:
            err.print(f"tokens: agent {tokens['agent']}, user {tokens['user']}")
    if errors:
        causes = Counter(f"{e.termination}: {e.error.type}: {e.error.message}" if e.error
                         else e.termination for e in errors)
        for cause, count in causes.most_common(5):
            err.print(Text.assemble(("error: ", "red"), f"{cause} ({count} episodes)"))
        err.print(f"{len(errors)} episodes ended in an error; they are in {out_path} with their "
                  "error. Fix the cause, then rerun the same command with --retry-errors to run "
                  "them again.", style="yellow")
        raise typer.Exit(1)
