"""The client installs on its own: its wheel requires httpx and pydantic only (the trainer
adapters' frameworks are extras), and it works with none of the service's packages importable."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CLIENTS = REPO_ROOT / "clients"
SERVICE_PACKAGES = ("fastapi", "starlette", "uvicorn", "redis", "docker", "typer", "rich", "click",
                    "jsonschema", "server", "sandbox", "envformat", "synth", "cli",
                    "transformers", "trl", "verl", "torch")  # the trainers are extras


def test_the_wheel_requires_httpx_and_pydantic_only(tmp_path: Path) -> None:
    source = tmp_path / "clients"  # a copy: the build leaves no build/ or egg-info in the checkout
    shutil.copytree(CLIENTS, source, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                   "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", str(source), "-w",
                    str(tmp_path / "wheels")], check=True, capture_output=True, timeout=300)
    [wheel] = (tmp_path / "wheels").glob("envscaler_client-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [metadata] = [name for name in names if name.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    requires = {
        re.match(r"[A-Za-z0-9_.-]+",
                 line.split(":", 1)[1].strip()).group(0).lower()  # type: ignore[union-attr]
        for line in lines if line.startswith("Requires-Dist:") and "extra ==" not in line
    }
    assert requires == {"httpx", "pydantic"}
    # the trainer adapters' frameworks are optional extras, never the base client's
    extras = {line.split(":", 1)[1].strip() for line in lines if line.startswith("Provides-Extra:")}
    assert extras == {"trl", "verl"}
    packaged = {name for name in names if not name.startswith("envscaler_client-")}
    assert packaged == {
        path.relative_to(CLIENTS).as_posix()
        for path in (CLIENTS / "envscaler_client").rglob("*.py")
    }


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
for module in ("rows", "signatures", "trl"):  # the verl adapter is verl's to import
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
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).is_relative_to(CLIENTS / "envscaler_client")
