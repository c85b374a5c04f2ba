"""Fetching the two release files from the Hugging Face hub at pinned revisions, sha256-checked.

``{endpoint}/datasets/{repo}/resolve/{revision}/{filename}`` is the hub's plain-HTTP file URL (it
redirects to a CDN, so redirects are followed). The endpoint is ``HF_ENDPOINT`` when set (the
variable huggingface_hub reads, e.g. a mirror), else https://huggingface.co; with
``HF_HUB_OFFLINE=1`` nothing is fetched.

A file already in the destination with the pinned sha256 is used as it is (no network). A
download is streamed to ``<name>.part`` while hashed, and kept only when its sha256 is the pinned
one; otherwise it is deleted and the download refused. An unreachable network fails at once with
what to do instead (fetch the files by other means, then ``--from``), never after a long hang:
connecting is bounded by ``connect_timeout``, silence by ``read_timeout``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import httpx

from envscaler.importers.envscaler_release import pins
from envscaler.importers.envscaler_release.pins import HF_ENDPOINT, PinnedFile
from envscaler.importers.envscaler_release.source import sha256_of

ByteProgress = Callable[[PinnedFile, int, int | None], None]
"""Called as bytes arrive: (file, bytes so far, total bytes or None)."""

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0
_OFFLINE_VALUES = {"1", "true", "yes", "on"}


class DownloadError(Exception):
    """The release files could not be fetched or were not the pinned bytes; says what to do."""


def endpoint_from_environment() -> str:
    return (os.environ.get("HF_ENDPOINT") or HF_ENDPOINT).rstrip("/")


def download_release(dest: Path, *, endpoint: str | None = None,
                     files: Iterable[PinnedFile] | None = None,
                     connect_timeout: float = CONNECT_TIMEOUT, read_timeout: float = READ_TIMEOUT,
                     progress: ByteProgress | None = None) -> dict[str, Path]:
    """Make sure ``dest`` holds each pinned file (default ``pins.PINNED``) with its pinned
    sha256; returns {kind: path}. Raises DownloadError saying what to do instead."""
    files = pins.PINNED if files is None else tuple(files)
    endpoint = (endpoint or endpoint_from_environment()).rstrip("/")
    dest.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    pending: list[PinnedFile] = []
    for pinned in files:
        target = dest / pinned.filename
        if target.is_file():
            digest = sha256_of(target)
            if digest != pinned.sha256:
                raise DownloadError(
                    f"{target} exists but is not {pinned.repo_id}@{pinned.short_revision} "
                    f"(sha256 {digest}, pinned {pinned.sha256}); move it away to download the "
                    "pinned file, or import it as it is with --from (without --download)")
            paths[pinned.kind] = target
        else:
            pending.append(pinned)
    if not pending:
        return paths
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _OFFLINE_VALUES:
        raise DownloadError("HF_HUB_OFFLINE is set, so nothing is downloaded; "
                            + _by_hand(pending, dest))
    timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
    with httpx.Client(timeout=timeout, follow_redirects=True, trust_env=True,
                      headers={"User-Agent": "envscaler-importer"}) as client:
        for pinned in pending:
            paths[pinned.kind] = _fetch(client, endpoint, pinned, dest, progress)
    return paths


def _fetch(client: httpx.Client, endpoint: str, pinned: PinnedFile, dest: Path,
           progress: ByteProgress | None) -> Path:
    url = pinned.url(endpoint)
    target = dest / pinned.filename
    part = dest / (pinned.filename + ".part")
    digest = hashlib.sha256()
    try:
        with client.stream("GET", url) as response:
            if response.status_code != 200:
                raise DownloadError(f"{url} answered HTTP {response.status_code}; "
                                    + _by_hand([pinned], dest))
            size = response.headers.get("content-length")
            total = int(size) if size and size.isdigit() else None
            received = 0
            with part.open("wb") as stream:
                for chunk in response.iter_bytes(1 << 20):
                    stream.write(chunk)
                    digest.update(chunk)
                    received += len(chunk)
                    if progress is not None:
                        progress(pinned, received, total)
    except httpx.TimeoutException as exc:
        part.unlink(missing_ok=True)
        phase = "connecting to" if isinstance(exc, httpx.ConnectTimeout) else "waiting for"
        raise DownloadError(f"timed out {phase} {endpoint} (is the network or the hub "
                            f"reachable from here?); " + _by_hand([pinned], dest)) from None
    except (httpx.ConnectError, httpx.UnsupportedProtocol, httpx.ProxyError) as exc:
        part.unlink(missing_ok=True)
        raise DownloadError(f"cannot reach {endpoint}: {_reason(exc)} (the network or the hub is "
                            "unreachable from here); " + _by_hand([pinned], dest)) from None
    except httpx.HTTPError as exc:
        part.unlink(missing_ok=True)
        raise DownloadError(f"downloading {url} failed: {_reason(exc)}; "
                            + _by_hand([pinned], dest)) from None
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    found = digest.hexdigest()
    if found != pinned.sha256:
        part.unlink(missing_ok=True)
        raise DownloadError(f"{url} served bytes with sha256 {found}, but "
                            f"{pinned.repo_id}@{pinned.short_revision} is pinned at "
                            f"{pinned.sha256}; the file was refused and not kept")
    part.replace(target)
    return target


def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__


def _by_hand(files: Iterable[PinnedFile], dest: Path) -> str:
    wanted = "; ".join(f"{pinned.url(HF_ENDPOINT)} (sha256 {pinned.sha256})" for pinned in files)
    return (f"fetch the file(s) by other means into {dest} and run again, or import local "
            f"files with --from DIR: {wanted}")
