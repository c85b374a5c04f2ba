"""Every gateway error reaches the caller as the right exception, with the gateway's type, message,
field, status and Retry-After; tool failures stay results."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from envscaler_client import (
    AuthError,
    CallTimeoutError,
    CapacityError,
    EnvClient,
    EnvScalerError,
    InvalidArgumentsError,
    NotFoundError,
    RetryPolicy,
    SessionClosedError,
    TransportError,
)

from envscaler.server.embedded_redis import free_port
from tests.integration.gateway_fixtures import COUNTER
from tests.integration.live_gateway import *  # the fixtures: catalogue_root, live_gateway
from tests.integration.live_gateway import (
    FlakyProxy,
    LiveGateway,
    gateway_settings,
    running_gateway,
)

UNKNOWN_SESSION = "A" * 24


@pytest.fixture
def client(live_gateway: LiveGateway) -> Iterator[EnvClient]:
    with EnvClient(live_gateway.url, live_gateway.api_key) as client:
        yield client


def test_unknown_things_are_not_found(client: EnvClient) -> None:
    cases = [(lambda: client.env("no_such_env"), "UnknownEnv"),
             (lambda: client.scenarios("no_such_env"), "UnknownEnv"),
             (lambda: client.create_session("no_such_env"), "UnknownEnv"),
             (lambda: client.create_session(COUNTER, "no-such-scenario"), "UnknownScenario"),
             (lambda: client.session(UNKNOWN_SESSION), "UnknownSession")]
    for action, error_type in cases:
        with pytest.raises(NotFoundError) as caught:
            action()
        assert (caught.value.type, caught.value.status) == (error_type,
                                                            404) and caught.value.message
    with client.create_session(COUNTER, "counter-1") as session:
        with pytest.raises(NotFoundError) as caught:
            session.call("no_such_tool")
        assert caught.value.type == "UnknownTool"


def test_arguments_that_do_not_match_the_schema_name_the_field(client: EnvClient) -> None:
    with client.create_session(COUNTER, "counter-1") as session:
        with pytest.raises(InvalidArgumentsError) as caught:
            session.call("increment", {"name": 5})
        assert (caught.value.type, caught.value.field, caught.value.status) == ("InvalidArguments",
                                                                                "name", 422)
        with pytest.raises(InvalidArgumentsError) as malformed:
            session.call("increment", '{"name": ')
        assert malformed.value.field == "arguments" and "JSON" in malformed.value.message
        assert session.trajectory().entries == []  # rejected before any sandbox saw them
    with pytest.raises(InvalidArgumentsError) as request:
        client.create_session(COUNTER, seed=-1)
    assert request.value.type == "InvalidRequest" and request.value.field == "body.seed"


def test_authentication(live_gateway: LiveGateway) -> None:
    for key in (None, "not-a-key"):
        with EnvClient(live_gateway.url, key) as anonymous, pytest.raises(AuthError) as caught:
            anonymous.envs()
        assert (caught.value.type, caught.value.status) == ("Unauthorized", 401)
    with EnvClient(live_gateway.url,
                   live_gateway.api_key) as admin, admin.create_session(COUNTER) as session:
        # The agent token as the client's key: tools and calls only.
        with EnvClient(live_gateway.url,
                       session.agent_token) as agent, pytest.raises(AuthError) as caught:
            agent.session(session.id)  # reads the tools (allowed), then the session's record (not)
        assert (caught.value.type, caught.value.status) == ("Forbidden", 403)


def test_a_closed_session_refuses_calls_but_stays_readable(client: EnvClient) -> None:
    session = client.create_session(COUNTER, "counter-1")
    session.call("increment", {"name": "a", "by": 2})
    session.close()
    with pytest.raises(SessionClosedError) as caught:
        session.call("increment", {"name": "b"})
    assert (caught.value.type, caught.value.status) == ("SessionClosed", 409)
    assert session.state().state["counters"]["a"] == 3
    assert session.validate().passed == 1


def test_validation_without_a_checklist(client: EnvClient) -> None:
    with client.create_session(COUNTER, init_config={"counters": {}}) as session, \
            pytest.raises(EnvScalerError) as caught:
        session.validate()
    assert (type(caught.value), caught.value.type, caught.value.status) == (EnvScalerError,
                                                                            "NoChecklist", 409)


def test_a_tool_past_its_deadline_raises_and_the_session_goes_on(client: EnvClient) -> None:
    with client.create_session(COUNTER, "counter-1") as session:
        with pytest.raises(CallTimeoutError) as caught:
            session.call("spin")
        assert (caught.value.type, caught.value.status) == ("Timeout", 504)
        assert session.call("increment", {"name": "a"}).result["data"]["value"] == 2
        spin, increment = session.trajectory().calls
        assert spin.error is not None and spin.error.type == "Timeout" and increment.ok


def test_no_gateway_is_a_transport_error() -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    with EnvClient(nobody, retry=RetryPolicy(attempts=2, backoff=0.01)) as client, \
            pytest.raises(TransportError) as caught:
        client.envs()
    assert caught.value.unreachable and caught.value.type == "ConnectError"
    assert caught.value.status is None


def test_capacity_exhausted_carries_retry_after_and_creation_is_not_retried(
        redis_url: str, catalogue_root: Path, sandbox_image: str, socket_root: Path,
        tmp_path: Path) -> None:
    settings = gateway_settings(redis_url, catalogue_root, sandbox_image, socket_root, pool_size=0,
                                max_sandboxes=1)
    with running_gateway(settings, tmp_path / "gateway.log") as gateway, \
            FlakyProxy(gateway.port) as proxy, EnvClient(proxy.url, gateway.api_key) as client, \
            client.create_session(COUNTER, "counter-1"):
        with pytest.raises(CapacityError) as caught:
            client.create_session(COUNTER, "counter-1")
        assert (caught.value.type, caught.value.status) == ("CapacityExhausted", 429)
        assert caught.value.retry_after is not None and caught.value.retry_after >= 1
        assert proxy.statuses("POST /v1/sessions HTTP") == [201, 429]
