"""What a sandbox host started elsewhere (a Ray actor) is handed: the settings a host reads,
none other (no API keys), and it builds its settings from them alone, whatever its process's
environment holds. A host or gateway with a weak cluster secret does not start."""

from __future__ import annotations

import json
import secrets

import pytest
from typer.testing import CliRunner

from envscaler.cli.main import app
from envscaler.server.sandbox_host import HOST_SETTINGS, given_host_settings, host_settings
from envscaler.server.settings import Settings

SECRET = secrets.token_hex(32)


def test_a_host_is_handed_only_the_settings_a_host_reads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"API_KEYS": "admin-key-1,admin-key-2", "CLUSTER_SECRET": SECRET,
                        "SANDBOX_MEMORY": "300m", "REDIS_URL": "redis://r:6379/0",
                        "MAX_CONNECTIONS": "7", "SOCKET_ROOT": "/tmp/es-{node}"}.items():
        monkeypatch.setenv(f"ENVSCALER_{name}", value)
    handed = host_settings(Settings())
    assert set(handed) <= HOST_SETTINGS
    assert "admin-key" not in json.dumps(handed) and "max_connections" not in handed
    assert handed["cluster_secret"] == SECRET and handed["sandbox_memory"] == "300m"
    assert handed["redis_url"] == "redis://r:6379/0" and handed["socket_root"] == "/tmp/es-{node}"
    assert json.loads(json.dumps(handed)) == handed  # plain JSON: serialized as it crosses


def test_a_host_builds_its_settings_from_what_it_is_handed_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVSCALER_API_KEYS", "admin-key-1")
    monkeypatch.setenv("ENVSCALER_POOL_SIZE", "99")
    own = given_host_settings({"pool_size": 3, "redis_url": "redis://r:6379/0",
                               "cluster_secret": SECRET, "sandbox_backend": "process"})
    assert own.api_keys == [] and own.pool_size == 3 and own.sandbox_backend == "process"
    with pytest.raises(ValueError, match="not settings of a sandbox host: api_keys"):
        given_host_settings({"api_keys": ["admin-key-1"]})


@pytest.mark.parametrize("command", [["sandbox", "host", "--listen", "127.0.0.1:0"],
                                     ["serve", "--port", "1"]])
def test_a_weak_cluster_secret_stops_the_command_saying_how_to_make_one(
        command: list[str]) -> None:
    weak = "hunter2hunter2"
    result = CliRunner().invoke(app, command, env={
        "ENVSCALER_CLUSTER_SECRET": weak, "ENVSCALER_REDIS_URL": "redis://127.0.0.1:1/0"})
    assert result.exit_code == 2
    assert "ENVSCALER_CLUSTER_SECRET" in result.output
    assert "openssl rand -hex 32" in result.output and weak not in result.output
