"""An episode whose validation answers ``CheckExhausted`` (a check ran out of its CPU time or
memory) is recorded as an error with no reward, never as a reward of 0; the client raises its
typed error for it."""

from __future__ import annotations

from typing import Any

import httpx
from envscaler_client import CheckExhaustedError
from envscaler_client.errors import error_from_response
from envscaler_client.rollout import run_episode

MESSAGE = "1 of 2 checks ran out of their budget, so no reward was computed: checklist[1] ..."


class ExhaustedSession:
    """What `run_episode` uses of a session, with a validation that answers CheckExhausted."""

    env, scenario, seed, id, task = "counter", "counter-1", 0, "S1", "Count to one."
    tools: list[dict[str, Any]] = []

    async def validate(self) -> Any:
        request = httpx.Request("POST", "http://gateway/v1/sessions/S1/validate")
        raise error_from_response(httpx.Response(
            500, json={"ok": False, "error": {"type": "CheckExhausted", "message": MESSAGE}},
            request=request))


async def test_an_exhausted_validation_is_an_error_without_a_reward() -> None:
    async def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return "Done."

    episode = await run_episode(ExhaustedSession(), policy,  # type: ignore[arg-type]
                                system_prompt="You count.")
    assert episode.reward is None and episode.passed is None and episode.checks == []
    assert episode.termination == "gateway_error"
    assert episode.validation_error is not None and episode.error == episode.validation_error
    assert (episode.validation_error.stage, episode.validation_error.type,
            episode.validation_error.message) == ("validate", "CheckExhausted", MESSAGE)


def test_the_client_raises_its_typed_error_for_check_exhausted() -> None:
    error = error_from_response(httpx.Response(
        500, json={"ok": False, "error": {"type": "CheckExhausted", "message": MESSAGE}},
        request=httpx.Request("POST", "http://gateway/v1/sessions/S1/validate")))
    assert type(error) is CheckExhaustedError
    assert (error.type, error.status, error.message, error.retry_after) == (
        "CheckExhausted", 500, MESSAGE, None)
