"""The client installs on its own: its wheel requires httpx, httptools and pydantic only (the
trainer adapters' frameworks, and verifiers for the envscaler_verifiers taskset it also carries, are
extras), carries none of the service's packages (the command line included), and works with none
of them importable; the project installs the `envscaler` command beside it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from envscaler.cli.main import COMMANDS
from tests.deadlines import scaled

REPO_ROOT = Path(__file__).resolve().parents[2]
CLIENTS = REPO_ROOT / "clients"
SERVICE_PACKAGES = ("fastapi", "starlette", "uvicorn", "redis", "docker", "typer", "rich", "click",
                    "jsonschema", "envscaler", "transformers", "trl", "verl",
                    "torch")  # the trainers are extras
BUILT = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")


def build_wheel(source: Path, wheels: Path) -> None:
    """``pip wheel`` of ``source``, a copy (the build leaves build/ and egg-info in its source)."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", str(source), "-w",
                    str(wheels)], check=True, capture_output=True, timeout=scaled(300))


def client_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "clients"
    shutil.copytree(CLIENTS, source, ignore=BUILT)
    build_wheel(source, tmp_path / "wheels")
    [wheel] = (tmp_path / "wheels").glob("envscaler_client-*.whl")
    return wheel


def project_wheel(tmp_path: Path) -> Path:
    """The project's wheel, built from a copy of what it packages (pyproject.toml's packages)."""
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    packages = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    source = tmp_path / "project"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    for name in packages:
        if "." not in name:
            shutil.copytree(REPO_ROOT / name, source / name, ignore=BUILT)
    build_wheel(source, tmp_path / "wheels")
    [wheel] = (tmp_path / "wheels").glob("envscaler-*.whl")
    return wheel


def test_the_wheel_requires_httpx_httptools_and_pydantic_only(tmp_path: Path) -> None:
    wheel = client_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [metadata] = [name for name in names if name.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    requires = {
        re.match(r"[A-Za-z0-9_.-]+",
                 line.split(":", 1)[1].strip()).group(0).lower()  # type: ignore[union-attr]
        for line in lines if line.startswith("Requires-Dist:") and "extra ==" not in line
    }
    assert requires == {"httpx", "httptools", "pydantic"}
    # the trainer adapters' frameworks are optional extras, never the base client's
    extras = {line.split(":", 1)[1].strip() for line in lines if line.startswith("Provides-Extra:")}
    assert extras == {"trl", "verl", "gem", "verifiers"}
    packaged = {name for name in names if not name.startswith("envscaler_client-")}
    assert packaged == {
        path.relative_to(CLIENTS).as_posix()
        for package in ("envscaler_client", "envscaler_verifiers")
        for path in (CLIENTS / package).rglob("*.py")
    }
    # neither the command line nor any other package of the service
    assert not {name.partition("/")[0] for name in names} & set(SERVICE_PACKAGES)


@pytest.mark.timeout(600)
def test_the_installed_project_runs_envscaler_beside_the_installed_client(tmp_path: Path) -> None:
    """The project's wheel carries one package, ``envscaler``, with the command line (and not the
    client, a distribution of its own); installed with the client's, `envscaler --help` runs from what was installed."""
    wheels = [client_wheel(tmp_path), project_wheel(tmp_path)]
    with zipfile.ZipFile(wheels[1]) as archive:
        names = archive.namelist()
        [entry_points] = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()
    assert "envscaler = envscaler.cli.main:app" in scripts.splitlines()
    assert {"envscaler/cli/__main__.py", "envscaler/cli/main.py"} <= set(names)
    # one package of its own, nothing generic beside it in site-packages
    assert {name.partition("/")[0] for name in names} == {"envscaler", "envscaler-0.1.0.dist-info"}
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
                    "--target", str(site), *map(str, wheels)],
                   check=True, capture_output=True, timeout=scaled(300))
    env = {**os.environ, "PYTHONPATH": str(site)}  # before the checkout's editable installs
    where = subprocess.run(
        [sys.executable, "-c", "import envscaler.cli, envscaler_client, envscaler.server\n"
         "for module in (envscaler.cli, envscaler_client, envscaler.server): print(module.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=scaled(60), check=True)
    assert all(Path(path).is_relative_to(site) for path in where.stdout.split())
    helped = subprocess.run([str(site / "bin" / "envscaler"), "--help"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=scaled(120), check=False)
    assert helped.returncode == 0, helped.stderr
    assert "Usage: envscaler" in helped.stdout
    listed = {line.strip("│ ").split(" ")[0] for line in helped.stdout.splitlines()}
    assert set(COMMANDS) <= listed


REFUSING_IMPORT = """
import asyncio, importlib, pkgutil, sys

BLOCKED = set(sys.argv[1].split(","))


class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not installed with the client")
        return None


sys.meta_path.insert(0, Refuse())
try:
    import fastapi
except ImportError:
    pass
else:
    raise AssertionError("the import blocker does not work")

import envscaler_client
for module in pkgutil.iter_modules(envscaler_client.__path__):
    importlib.import_module(f"envscaler_client.{module.name}")
for module in ("rows", "signatures", "slot", "trl", "nemo_gym"):  # verl, gem: theirs to import
    importlib.import_module(f"envscaler_client.adapters.{module}")
for name in envscaler_client.__all__:
    getattr(envscaler_client, name)

once = envscaler_client.RetryPolicy(attempts=1)
with envscaler_client.EnvClient("http://127.0.0.1:9", retry=once) as client:
    try:
        client.health()
    except envscaler_client.TransportError as exc:
        assert exc.unreachable


async def main():
    async with envscaler_client.AsyncEnvClient("http://127.0.0.1:9") as client:
        assert client.base_url == "http://127.0.0.1:9"


asyncio.run(main())
loaded = sorted(name for name in sys.modules if name.partition(".")[0] in BLOCKED)
assert not loaded, loaded
print(envscaler_client.__file__)
"""


def test_the_client_imports_and_runs_without_any_service_package(tmp_path: Path) -> None:
    command = [sys.executable, "-I", "-c", REFUSING_IMPORT, ",".join(SERVICE_PACKAGES)]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True,
                            timeout=scaled(60),
                            check=False)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).is_relative_to(CLIENTS / "envscaler_client")
