"""A benchmark's answer scored through a gateway: its calls sent to a session of the imported
scenario in order, each failure of a call (a tool that raises, an unknown tool, arguments its
schema refuses) taken as the agent's failed action, as the benchmarks take them, and the
scenario's checks run. Shared by the `envscaler eval` commands."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from envscaler_client import EnvClient
from envscaler_client.errors import EnvScalerError, InvalidArgumentsError, NotFoundError

AGENT_FAILURES = ("UnknownTool", "InvalidArguments")


@dataclass(frozen=True)
class Score:
    """One answer's outcome: 1.0 when every check passed, else 0.0; None with ``error`` when it
    could not be scored (an error of the gateway, not of the answer's calls)."""

    key: str
    reward: float | None
    error: str | None = None


def score_calls(client: EnvClient, key: str, env: str, scenario: str,
                calls: Iterable[tuple[str, dict[str, Any]]]) -> Score:
    try:
        with client.create_session(env, scenario=scenario) as session:
            for name, arguments in calls:
                try:
                    session.call(name, arguments)
                except (NotFoundError, InvalidArgumentsError) as exc:
                    if exc.type not in AGENT_FAILURES:
                        raise
            validation = session.validate()
    except EnvScalerError as exc:
        return Score(key, None, str(exc))
    return Score(key, 1.0 if validation.passed == validation.total else 0.0)


__all__ = ["Score", "score_calls"]
