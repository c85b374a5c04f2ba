"""The rollout ships with the client: ``pip install ./clients`` packages
`envscaler_client.rollout` and still requires httpx and pydantic only (no openai SDK)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.deadlines import scaled

CLIENTS = Path(__file__).resolve().parents[2] / "clients"


def test_the_client_wheel_carries_the_rollout_and_no_new_dependency(tmp_path: Path) -> None:
    source = tmp_path / "clients"
    shutil.copytree(CLIENTS, source, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                   "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", str(source), "-w",
                    str(tmp_path / "wheels")], check=True, capture_output=True, timeout=scaled(300))
    [wheel] = (tmp_path / "wheels").glob("envscaler_client-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [metadata] = [name for name in names if name.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    always = [line for line in lines  # what every install needs: the trainers' are extras
              if line.startswith("Requires-Dist:") and "extra ==" not in line]
    requires = {re.match(r"[A-Za-z0-9_.-]+", line.split(":", 1)[1].strip()).group(0).lower()
                for line in always}  # type: ignore[union-attr]
    assert requires == {"httpx", "httptools", "pydantic"}  # the client's own, nothing more
    assert {f"envscaler_client/rollout/{path.name}"
            for path in (CLIENTS / "envscaler_client" / "rollout").glob("*.py")} <= names
