"""--download against a hub on 127.0.0.1 serving the fixture's bytes (never the internet): pinned
files fetched and kept, a sha256 mismatch refused and nothing kept, files already there reused
without a request, and unreachable or silent hubs failing at once with what to do instead."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from envscaler.cli.main import app
from typer.testing import CliRunner

from envscaler.format.loader import load_env
from envscaler.importers.envscaler_release import DownloadError, download_release
from envscaler.importers.envscaler_release import pins as pins_module
from envscaler.importers.envscaler_release.pins import PinnedFile
from tests.deadlines import scaled

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "envscaler_release" / "hf"
ENVS_BYTES = (FIXTURE / "191_env_metadata_processed.json").read_bytes()
ROWS_BYTES = (FIXTURE / "envscaler_rl_scenario_metadata.json").read_bytes()
REVISION = "0123456789abcdef0123456789abcdef01234567"


def pinned(kind: str, data: bytes, filename: str) -> PinnedFile:
    return PinnedFile(kind=kind, repo_id=f"test/{kind}", filename=filename, revision=REVISION,
                      sha256=hashlib.sha256(data).hexdigest())


PINS = (pinned("envs", ENVS_BYTES, "191_env_metadata_processed.json"),
        pinned("scenarios", ROWS_BYTES, "envscaler_rl_scenario_metadata.json"))


class Hub:
    """A tiny hub on 127.0.0.1: ``files`` maps URL paths to bytes; the envs file is served
    through a redirect, as the real hub redirects to its CDN."""

    def __init__(self, files: dict[str, bytes], stall: bool = False) -> None:
        self.files = files
        self.requests: list[str] = []
        self.released = threading.Event()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # the http.server API
                hub.requests.append(self.path)
                if stall:  # accept, then say nothing until the test is over
                    hub.released.wait(scaled(10))
                    return
                if self.path.startswith("/datasets/") and "envs" in self.path:
                    self.send_response(302)
                    self.send_header("Location", "/cdn" + self.path)
                    self.end_headers()
                    return
                data = hub.files.get(self.path.removeprefix("/cdn"))
                if data is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Hub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def served(envs: bytes = ENVS_BYTES, rows: bytes = ROWS_BYTES) -> dict[str, bytes]:
    return {f"/datasets/{PINS[0].repo_id}/resolve/{REVISION}/{PINS[0].filename}": envs,
            f"/datasets/{PINS[1].repo_id}/resolve/{REVISION}/{PINS[1].filename}": rows}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once it is closed


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test here may reach beyond loopback: no proxies, the pins are the fixture's, and the
    default endpoint is a closed port on 127.0.0.1."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setattr(pins_module, "PINNED", PINS)
    yield


def test_pinned_files_are_fetched_verified_and_kept(tmp_path: Path) -> None:
    progress: list[tuple[str, int, int | None]] = []
    with Hub(served()) as hub:
        paths = download_release(tmp_path, endpoint=hub.url,
                                 progress=lambda f, n, total: progress.append((f.kind, n, total)))
    assert paths == {"envs": tmp_path / PINS[0].filename, "scenarios": tmp_path / PINS[1].filename}
    assert paths["envs"].read_bytes() == ENVS_BYTES and paths["scenarios"].read_bytes() == ROWS_BYTES
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(p.filename for p in PINS)
    assert ("envs", len(ENVS_BYTES), len(ENVS_BYTES)) in progress
    assert any(path.startswith("/cdn/") for path in hub.requests)  # the redirect was followed


def test_files_already_there_with_the_pinned_sha256_are_used_without_a_request(
        tmp_path: Path) -> None:
    (tmp_path / PINS[0].filename).write_bytes(ENVS_BYTES)
    (tmp_path / PINS[1].filename).write_bytes(ROWS_BYTES)
    with Hub(served()) as hub:
        download_release(tmp_path, endpoint=hub.url)
    assert hub.requests == []


def test_a_sha256_mismatch_is_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    tampered = ENVS_BYTES.replace(b"Mobile messaging", b"Mobile messaginG")
    with Hub(served(envs=tampered)) as hub, pytest.raises(DownloadError) as caught:
        download_release(tmp_path, endpoint=hub.url)
    message = str(caught.value)
    assert f"sha256 {hashlib.sha256(tampered).hexdigest()}" in message
    assert f"pinned at {PINS[0].sha256}" in message and "refused and not kept" in message
    assert not (tmp_path / PINS[0].filename).exists()
    assert not list(tmp_path.glob("*.part"))


def test_a_local_file_that_is_not_the_pinned_one_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / PINS[0].filename).write_bytes(b"[]")
    with Hub(served()) as hub, pytest.raises(DownloadError, match="exists but is not"):
        download_release(tmp_path, endpoint=hub.url)
    assert (tmp_path / PINS[0].filename).read_bytes() == b"[]" and hub.requests == []


def test_a_missing_file_on_the_hub_says_what_to_do(tmp_path: Path) -> None:
    with Hub({}) as hub, pytest.raises(DownloadError) as caught:
        download_release(tmp_path, endpoint=hub.url)
    assert "answered HTTP 404" in str(caught.value) and "--from DIR" in str(caught.value)


def test_an_unreachable_hub_fails_at_once_with_what_to_do(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(DownloadError) as caught:
        download_release(tmp_path)  # HF_ENDPOINT: a closed port on 127.0.0.1
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert message.startswith("cannot reach http://127.0.0.1:") and "unreachable" in message
    assert "--from DIR" in message and PINS[0].sha256 in message
    assert not list(tmp_path.iterdir())


def test_a_silent_hub_times_out_instead_of_hanging(tmp_path: Path) -> None:
    with Hub(served(), stall=True) as hub, pytest.raises(DownloadError, match="timed out "
                                                                               "waiting for"):
        download_release(tmp_path, endpoint=hub.url, read_timeout=0.5)
    assert not list(tmp_path.iterdir())


def test_offline_mode_fetches_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with Hub(served()) as hub, pytest.raises(DownloadError, match="HF_HUB_OFFLINE"):
        download_release(tmp_path, endpoint=hub.url)
    assert hub.requests == []


def test_the_command_downloads_then_imports(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    with Hub(served()) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        result = CliRunner().invoke(app, [
            "import", "envscaler-release", "--download", "--from", str(tmp_path / "cache"),
            "--out", str(tmp_path / "out"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["pipeline_version"] == f"envscaler-release@{REVISION}"
    assert report["envs_file"]["pinned_revision"] == REVISION
    manifest = load_env(tmp_path / "out" / "envscaler_env_1_rl").manifest
    assert manifest.provenance.pipeline_version == f"envscaler-release@{REVISION}"


def test_the_command_fails_with_status_1_when_the_hub_is_unreachable(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [
        "import", "envscaler-release", "--download", "--from", str(tmp_path / "cache"),
        "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "error: cannot reach http://127.0.0.1:" in result.stderr
    assert not (tmp_path / "out").exists()
