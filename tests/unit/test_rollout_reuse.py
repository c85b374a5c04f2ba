"""The runner's session-reuse decisions without a gateway: how specs are ordered (runs of one
environment, nothing lost or repeated) and which episodes leave a session not worth reusing."""

from __future__ import annotations

import pytest
from envscaler_client.rollout import Episode, EpisodeError, EpisodeSpec
from envscaler_client.rollout.runner import group_by_env, session_suspect


def test_specs_are_grouped_by_env_in_order_of_first_appearance() -> None:
    specs = [EpisodeSpec("b", "b-1"), EpisodeSpec("a", "a-1", 1), EpisodeSpec("b", "b-2"),
             EpisodeSpec("a", "a-1", 0), EpisodeSpec("c", "c-1"), EpisodeSpec("b", "b-1", 3)]
    assert [(s.env, s.scenario, s.seed) for s in group_by_env(specs)] == [
        ("b", "b-1", 0), ("b", "b-2", 0), ("b", "b-1", 3),
        ("a", "a-1", 1), ("a", "a-1", 0), ("c", "c-1", 0)]
    assert group_by_env([]) == []


def episode(termination: str = "completed", error: EpisodeError | None = None,
            validation_error: EpisodeError | None = None) -> Episode:
    return Episode(key="k", env="e", termination=termination,  # type: ignore[arg-type]
                   error=error, validation_error=validation_error)


def failure(stage: str, kind: str = "SessionClosed") -> EpisodeError:
    return EpisodeError(stage=stage, type=kind, message="...")


@pytest.mark.parametrize(("ended", "suspect"), [
    (episode(), False),
    (episode("max_steps"), False),
    (episode("model_error", failure("agent", "HTTP500")), False),
    (episode("user_error", failure("user", "ModelError")), False),
    (episode("completed", validation_error=failure("validate", "NoChecklist")), False),
    (episode("gateway_error", validation_error=failure("validate", "CheckExhausted")), False),
    (episode("gateway_error", failure("tool")), True),
    (episode("gateway_error", failure("session", "ConnectError")), True),
    (episode("gateway_error", failure("validate", "SessionExpired")), True),
    (episode("model_error", failure("agent"), failure("validate", "ReadTimeout")), True),
    (episode("internal_error", failure("runner", "KeyError")), True),
])
def test_a_session_is_not_reused_after_the_gateway_failed(ended: Episode, suspect: bool) -> None:
    assert session_suspect(ended) is suspect
