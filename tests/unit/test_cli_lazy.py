"""The command line imports only what a command uses: the help lists every command without
importing any, and a client command never imports the service."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from envscaler.cli.main import COMMANDS
from tests.deadlines import scaled

SERVICE = ("fastapi", "starlette", "docker", "redis", "uvicorn", "envscaler.server",
           "envscaler.sandbox")

IMPORTED_BY = """
import json, sys
from typer.testing import CliRunner
from envscaler.cli.main import app
result = CliRunner().invoke(app, sys.argv[1:])
print(json.dumps({"code": result.exit_code, "output": result.output, "modules": list(sys.modules)}))
"""


def run(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", IMPORTED_BY, *args], capture_output=True,
                          text=True, check=True, timeout=scaled(60))
    return json.loads(done.stdout)


def loaded(modules: list[str], prefix: str) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for name in modules)


def test_the_help_lists_every_command_and_imports_none() -> None:
    result = run("--help")
    assert result["code"] == 0, result["output"]
    for name in COMMANDS:
        assert f" {name} " in result["output"], name
    assert not [name for name in result["modules"] if name.startswith("envscaler.cli.")
                and name not in ("envscaler.cli.main",)]
    assert not [prefix for prefix in (*SERVICE, "envscaler_client", "httpx")
                if loaded(result["modules"], prefix)]


@pytest.mark.parametrize("command", ["envs", "session", "scenarios"])
def test_a_client_command_imports_no_service(command: str) -> None:
    result = run(command, "--help")
    assert result["code"] == 0, result["output"]
    assert not [prefix for prefix in SERVICE if loaded(result["modules"], prefix)]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_listed_help_is_the_commands_own(name: str) -> None:
    command = COMMANDS[name].load(name)
    own = " ".join((command.help or "").split("\n\n")[0].split())
    assert COMMANDS[name].help == own


def test_an_unknown_command_is_refused_with_the_usage() -> None:
    result = run("nope")
    assert result["code"] == 2
    assert "No such command 'nope'" in result["output"]
