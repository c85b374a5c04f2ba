"""Rollouts: drive a model through scenarios over the gateway, record trajectories and rewards.

For trainers (an RL framework plugs its own generation in as the policy)::

    from envscaler_client import AsyncEnvClient
    from envscaler_client.rollout import run_episode

    async def policy(messages, tools):          # -> an assistant message dict
        return await my_engine.chat(messages, tools)

    async with AsyncEnvClient(url, api_key) as client:
        async with client.create_session("library_loans", scenario="library_loans-002",
                                         seed=7) as session:
            episode = await run_episode(session, policy, max_steps=30)
    episode.reward, episode.messages, episode.termination

`ChatCompletionsPolicy` is a policy for any OpenAI-compatible endpoint (httpx, no SDK),
`SimulatedUser` the user of conversation mode, `ReferencePolicy` a scenario's reference solution,
`run_rollouts` many episodes at once into a resumable JSONL file, and `export_sft` turns that file
into SFT data. Like the rest of the client, this needs httpx, httptools and pydantic only.
"""

from envscaler_client.rollout.episode import (
    ERROR_TERMINATIONS,
    NATURAL_ENDS,
    TERMINATIONS,
    CheckRecord,
    Episode,
    EpisodeError,
    Termination,
    Timings,
    TokenUsage,
    ToolCallRecord,
    TurnRecord,
    Usage,
    episode_key,
    execute_tool_call,
    run_episode,
)
from envscaler_client.rollout.export import ExportStats, export_sft, to_openai, to_sharegpt
from envscaler_client.rollout.policy import ChatCompletionsPolicy, Message, ModelError, Policy
from envscaler_client.rollout.prompts import (
    CONVERSATION,
    DEFAULT_MAX_STEPS,
    MODES,
    NON_CONVERSATION,
    STOP_SIGNAL,
    agent_system_prompt,
    tau_user_system_prompt,
    user_system_prompt,
)
from envscaler_client.rollout.reference import (
    CatalogueError,
    ReferencePolicy,
    load_references,
    load_solutions,
)
from envscaler_client.rollout.runner import (
    EpisodeSpec,
    EpisodeWriter,
    RolloutResult,
    done_keys,
    grouped,
    latest_episodes,
    read_episodes,
    run_rollouts,
)
from envscaler_client.rollout.user import SimulatedUser, UserTurn, parse_user_reply

__all__ = [
    "CONVERSATION",
    "DEFAULT_MAX_STEPS",
    "ERROR_TERMINATIONS",
    "MODES",
    "NATURAL_ENDS",
    "NON_CONVERSATION",
    "STOP_SIGNAL",
    "TERMINATIONS",
    "CatalogueError",
    "ChatCompletionsPolicy",
    "CheckRecord",
    "Episode",
    "EpisodeError",
    "EpisodeSpec",
    "EpisodeWriter",
    "ExportStats",
    "Message",
    "ModelError",
    "Policy",
    "ReferencePolicy",
    "RolloutResult",
    "SimulatedUser",
    "Termination",
    "Timings",
    "TokenUsage",
    "ToolCallRecord",
    "TurnRecord",
    "Usage",
    "UserTurn",
    "agent_system_prompt",
    "done_keys",
    "grouped",
    "episode_key",
    "execute_tool_call",
    "export_sft",
    "latest_episodes",
    "load_references",
    "load_solutions",
    "parse_user_reply",
    "read_episodes",
    "run_episode",
    "run_rollouts",
    "to_openai",
    "to_sharegpt",
    "tau_user_system_prompt",
    "user_system_prompt",
]
