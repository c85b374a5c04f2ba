"""Schemathesis fuzzes every operation of the OpenAPI document of a running gateway: no 5xx answer.

Half of the generated session ids (except for DELETE) are swapped for a real session's, so that
calls, resets and validations reach a live sandbox with arbitrary names, arguments and
configurations.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error

from envscaler.server.settings import Settings
from tests.conftest import TEST_LABELS
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.gateway_fixtures import BACKEND, COUNTER, GatewayProcess


@pytest.fixture(scope="module")
def fuzz_gateway(
    request: pytest.FixtureRequest,
    redis_url: str,
    socket_root: Path,
    catalogue_root: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[GatewayProcess, str]]:
    backend: dict[str, object] = {"sandbox_backend": BACKEND}
    if BACKEND == "docker":
        backend["sandbox_image"] = request.getfixturevalue("sandbox_image")
    gateway_settings = Settings(
        redis_url=redis_url,
        catalogue=catalogue_root,
        socket_root=socket_root,
        pool_size=1,
        max_sandboxes=16,
        call_timeout=2.0,
        call_order_wait=0.2,  # a generated `seq` past the next one waits this long, then runs
        log_level="WARNING",
        api_keys=[],
        **backend,
    )
    gateway = GatewayProcess(
        gateway_settings, TEST_LABELS, tmp_path_factory.mktemp("fuzz") / "gateway.log"
    ).start()
    try:
        created = httpx.post(
            gateway.url + "/v1/sessions", json={"env": COUNTER, "scenario": "counter-1"}, timeout=30
        )
        assert created.status_code == 201, created.text
        yield gateway, created.json()["session_id"]
    finally:
        gateway.stop()
        gateway.remove_sandboxes(socket_root)


MODES = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)


def test_no_operation_answers_a_server_error(fuzz_gateway: tuple[GatewayProcess, str]) -> None:
    gateway, session_id = fuzz_gateway
    schema = schemathesis.openapi.from_url(gateway.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15

    for operation in operations:
        for mode in MODES:

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=30,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def fuzz(case: schemathesis.Case) -> None:
                parameters = case.path_parameters or {}
                if (
                    "session_id" in parameters
                    and len(str(parameters["session_id"])) % 2 == 0
                    and operation.method.upper() != "DELETE"
                ):  # keep the session alive for the others
                    parameters["session_id"] = session_id
                case.call_and_validate(
                    base_url=gateway.url, checks=[not_a_server_error], timeout=30
                )

            try:
                fuzz()
            except Unsatisfiable:
                assert mode is schemathesis.GenerationMode.NEGATIVE  # no input to make invalid
            except Exception as exc:
                raise AssertionError(f"{operation.label} ({mode.value}): {exc}") from exc
