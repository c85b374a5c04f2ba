"""Record and replay of model exchanges: one JSONL line per exchange.

A line is ``{"key", "request", "meta", "response"}``:

- ``request``: the canonical request, ``{"model", "messages", "temperature", "attempt"}``;
- ``key``: the sha256 of the canonical JSON of ``request`` (sorted keys, no spaces, UTF-8), so a
  replay finds the reply to exactly the same prompt at the same attempt of the same item;
- ``meta``: ``{"stage", "item"}``, for people and for error messages (not part of the key);
- ``response``: the chat-completion object as the endpoint returned it.

The attempt number is in the key because a retry of a reply that did not parse may resend
a similar prompt, and each attempt has its own recorded reply.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_request(model: str, messages: list[dict[str, str]], temperature: float,
                      attempt: int) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": m["role"], "content": m["content"]}
                                         for m in messages],
            "temperature": float(temperature), "attempt": int(attempt)}


def request_key(request: dict[str, Any]) -> str:
    """sha256 (hex) of a canonical request."""
    return hashlib.sha256(canonical_json(request).encode("utf-8")).hexdigest()


class TranscriptError(Exception):
    """The transcript file cannot be read, or has no reply for a request."""


class ReplayMiss(TranscriptError):
    """No recorded reply for this request: the prompts or the inputs changed since recording."""

    def __init__(self, stage: str, item: str, attempt: int, key: str) -> None:
        super().__init__(f"no recorded reply for stage {stage!r}, item {item!r}, attempt {attempt} "
                         f"(key {key[:16]}...): the prompt or its inputs changed since the "
                         "transcript was recorded; record it again")
        self.stage, self.item, self.attempt, self.key = stage, item, attempt, key


@dataclass(frozen=True)
class Exchange:
    key: str
    request: dict[str, Any]
    meta: dict[str, Any]
    response: dict[str, Any]

    def to_json(self) -> str:
        return canonical_json({"key": self.key, "request": self.request, "meta": self.meta,
                               "response": self.response})


class Transcript:
    """A JSONL transcript: lookups by key, and appends (one flushed line per exchange)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._exchanges: dict[str, Exchange] = {}
        self._lock = threading.Lock()
        if path.exists():
            self._load()

    def _load(self) -> None:
        text = self.path.read_text(encoding="utf-8")
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                exchange = Exchange(key=data["key"], request=data["request"],
                                    meta=data.get("meta", {}), response=data["response"])
            except (ValueError, KeyError, TypeError) as exc:
                raise TranscriptError(f"{self.path}:{number}: not a transcript line ({exc})") from None
            if request_key(exchange.request) != exchange.key:
                raise TranscriptError(f"{self.path}:{number}: key does not match the request")
            self._exchanges.setdefault(exchange.key, exchange)  # the first recording wins

    def __len__(self) -> int:
        return len(self._exchanges)

    def __contains__(self, key: str) -> bool:
        return key in self._exchanges

    def get(self, key: str) -> Exchange | None:
        return self._exchanges.get(key)

    def exchanges(self) -> list[Exchange]:
        return list(self._exchanges.values())

    def append(self, request: dict[str, Any], meta: dict[str, Any],
               response: dict[str, Any]) -> Exchange:
        key = request_key(request)
        exchange = Exchange(key=key, request=request, meta=meta, response=response)
        with self._lock:
            if key in self._exchanges:
                return self._exchanges[key]
            self._exchanges[key] = exchange
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(exchange.to_json() + "\n")
        return exchange

    def compact(self) -> None:
        """Rewrite the file sorted by stage, item and attempt, so it diffs cleanly."""
        with self._lock:
            ordered = sorted(self._exchanges.values(),
                             key=lambda e: (str(e.meta.get("stage", "")), str(e.meta.get("item", "")),
                                            int(e.request.get("attempt", 0)), e.key))
            self.path.write_text("".join(e.to_json() + "\n" for e in ordered), encoding="utf-8")
