"""Who is calling: API keys (admin) and agent tokens (their own session's tools)."""

from __future__ import annotations

import pytest

from envscaler.server.auth import ANONYMOUS_ADMIN, Authenticator, check_agent, token_hash, verify_agent
from envscaler.server.errors import ApiError

SESSION = "s" * 24
TOKEN = f"{SESSION}.{'t' * 32}"


def status(call) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(ApiError) as caught:
        call()
    return caught.value.status, caught.value.type


def test_keys_configured() -> None:
    auth = Authenticator(["key-one", "key-two"])
    assert auth.authenticate("Bearer key-two").is_admin
    assert auth.authenticate("bearer   key-one ").is_admin
    assert (
        auth.authenticate("Bearer key-one").owner
        == auth.authenticate("Bearer key-one").owner
        != "anonymous"
    )
    for header in (None, "", "Bearer", "Bearer nope", "Basic key-one", "key-one"):
        assert status(lambda h=header: auth.authenticate(h)) == (401, "Unauthorized")


def test_agent_tokens_are_recognised_and_never_admin() -> None:
    for auth in (Authenticator(["key"]), Authenticator([])):
        caller = auth.authenticate(f"Bearer {TOKEN}")
        assert (
            not caller.is_admin
            and caller.session_id == SESSION
            and caller.token_hash == token_hash(TOKEN)
        )


def test_no_keys_means_admin_without_a_token() -> None:
    auth = Authenticator([])
    assert auth.open and auth.authenticate(None) is ANONYMOUS_ADMIN
    assert auth.authenticate("Bearer anything").is_admin


def test_agent_checks() -> None:
    caller = Authenticator([]).authenticate(f"Bearer {TOKEN}")
    verify_agent(caller, SESSION, token_hash(TOKEN))
    check_agent(caller, SESSION)
    assert status(lambda: check_agent(caller, "o" * 24)) == (403, "Forbidden")
    assert status(lambda: verify_agent(caller, "o" * 24, token_hash(TOKEN))) == (403, "Forbidden")
    assert status(lambda: verify_agent(caller, SESSION, token_hash("other"))) == (
        401,
        "Unauthorized",
    )
    assert status(lambda: verify_agent(caller, SESSION, None)) == (401, "Unauthorized")
    verify_agent(ANONYMOUS_ADMIN, SESSION, None)  # admins pass
