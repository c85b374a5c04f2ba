"""The `envscaler` command as a person uses it from a shell: run as a subprocess from a directory
that is not the checkout, against a live gateway named by ``ENVSCALER_URL``; its output piped
(``ID=$(envscaler session open ...)``) or on a terminal (a pseudo-terminal here); and the
`check` table at a pipe's 80 columns with the catalogue's long names."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from envscaler.cli import check_cmd
from rich.console import Console

from envscaler.checkout import DEFAULT_CATALOGUE
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import COUNTER, LIBRARY
from tests.integration.live_gateway import *  # the fixtures: catalogue_root, live_gateway
from tests.integration.live_gateway import LiveGateway


def envscaler(gateway: LiveGateway, cwd: Path, *args: str,
              stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    """``envscaler ARGS`` in ``cwd``, with the gateway and key in the environment and no
    ENVSCALER_CATALOGUE, as a person would set them."""
    env = {**os.environ, "ENVSCALER_URL": gateway.url, "ENVSCALER_API_KEY": gateway.api_key}
    env.pop("ENVSCALER_CATALOGUE", None)
    return subprocess.run([sys.executable, "-m", "envscaler.cli", *args], cwd=cwd, env=env,
                          stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=scaled(300))


def test_session_open_prints_only_the_id_when_piped(live_gateway: LiveGateway,
                                                    tmp_path: Path) -> None:
    opened = envscaler(live_gateway, tmp_path, "session", "open", COUNTER, "--scenario",
                       "counter-1")
    assert opened.returncode == 0, opened.stderr
    session_id = opened.stdout.removesuffix("\n")
    assert opened.stdout == session_id + "\n" and " " not in session_id, opened.stdout
    assert "Bring counter a to 3" in opened.stderr and "agent token" in opened.stderr
    # what the README does with it: ID=$(envscaler session open ...); envscaler session call $ID
    called = envscaler(live_gateway, tmp_path, "session", "call", session_id, "increment",
                       '{"name": "a", "by": 2}')
    assert called.returncode == 0 and json.loads(called.stdout)["data"]["value"] == 3
    assert envscaler(live_gateway, tmp_path, "session", "close", session_id).returncode == 0


def test_session_open_prints_the_summary_on_a_terminal(live_gateway: LiveGateway,
                                                       tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    try:
        opened = envscaler(live_gateway, tmp_path, "session", "open", COUNTER, "--scenario",
                           "counter-1", stdout=terminal)
        os.close(terminal)
        terminal = -1
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the writer closed
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(controller)
        if terminal != -1:
            os.close(terminal)
    assert opened.returncode == 0, opened.stderr
    text = shown.decode()
    assert "session " in text and "task " in text and "Bring counter a to 3" in text, text
    session_id = text.split("session", 1)[1].split()[0]
    assert envscaler(live_gateway, tmp_path, "session", "close", session_id).returncode == 0


def test_commands_find_the_catalogue_from_any_directory_and_use_envscaler_url(
        live_gateway: LiveGateway, tmp_path: Path) -> None:
    assert not (tmp_path / "generated_envs").exists()
    listing = envscaler(live_gateway, tmp_path, "envs", "--json")
    assert listing.returncode == 0, listing.stderr
    assert {env["id"] for env in json.loads(listing.stdout)} == {COUNTER, LIBRARY}  # that gateway

    checked = envscaler(live_gateway, tmp_path, "check", "--env", LIBRARY, "--json")
    assert checked.returncode == 0, checked.stderr
    report = json.loads(checked.stdout)
    assert report["catalogue"] == str(DEFAULT_CATALOGUE) and report["gateway"] == live_gateway.url
    assert report["summary"]["passed"] == len(report["results"]) > 0, report["summary"]


LONG_ENV = "multi_specialty_clinic_booking_desk"


@pytest.mark.parametrize("width", [80, 100])
def test_the_check_table_has_no_stray_columns(monkeypatch: pytest.MonkeyPatch,
                                              width: int) -> None:
    rows = [check_cmd.Row(LONG_ENV, f"{LONG_ENV}-{n:03d}", "train", "passed", 0.25, 1.0)
            for n in (1, 2)]
    rows += [check_cmd.Row(LIBRARY, f"{LIBRARY}-001", "eval", "unverified"),
             check_cmd.Row(LIBRARY, f"{LIBRARY}-002", "rl", "failed", 0.0, 0.5, "it missed")]
    page = io.StringIO()
    monkeypatch.setattr(check_cmd, "out", Console(file=page, width=width, markup=False,
                                                  highlight=False))
    check_cmd._report(rows)
    lines = page.getvalue().splitlines()
    headers = [line for line in lines if line.startswith("┃")]
    body = [line for line in lines if line.startswith("│")]
    assert headers and body
    for line in headers:
        cells = [cell.strip() for cell in line.strip("┃").split("┃")]
        assert cells == ["scenario", "split", "initial", "reward", "result"], line
    for line in body:
        assert len(line.strip("│").split("│")) == 5, line  # no column squeezed to nothing
        assert all(len(cell) >= 3 for cell in line.strip("│").split("│")), line
    text = page.getvalue()
    shown = "".join(line.strip("│").split("│")[0].strip() for line in body)
    for row in rows:
        assert row.scenario in shown  # whole, if folded
        assert row.status in text
    assert f"{LONG_ENV}" in text and "it missed" in text
