"""A local OpenAI-compatible endpoint that answers from a transcript (standard library only).

``POST /v1/chat/completions`` computes the same key as the recorder (model, messages, temperature
and the attempt number sent in the ``X-EnvScaler-Attempt`` header) and returns the recorded
chat-completion object; a request that was never recorded gets a 404 naming the stage and item.
It binds 127.0.0.1 only. Tests drive the pipeline through it with the real ``openai`` SDK, so the
HTTP path is the one a live run takes; everything they see is a recorded response.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

from envscaler.synth.llm import HEADER_ATTEMPT, HEADER_ITEM, HEADER_STAGE
from envscaler.synth.transcript import ReplayMiss, Transcript, canonical_request, request_key

HOST = "127.0.0.1"
CHAT_PATH = "/v1/chat/completions"
MAX_BODY_BYTES = 64 * 1024 * 1024

Answer = Callable[[dict[str, Any], Mapping[str, str]], tuple[int, dict[str, Any]]]


def error_body(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code or kind, "param": None}}


class ChatServer:
    """Serves ``POST /v1/chat/completions`` with ``answer(body, headers) -> (status, payload)``,
    in a background thread. ``requests`` counts the chat requests received and ``log`` lists
    them as ``(stage, item, attempt, status)``."""

    def __init__(self, answer: Answer, port: int = 0) -> None:
        self._answer = answer
        self.requests = 0
        self.log: list[tuple[str, str, int, int]] = []  # (stage, item, attempt, status)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((HOST, port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        name="chat-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def serve_forever(self) -> None:
        try:
            self._server.serve_forever()
        finally:
            self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _count(self, headers: Mapping[str, str], status: int) -> None:
        with self._lock:
            self.requests += 1
            self.log.append((headers.get(HEADER_STAGE.lower(), ""),
                             headers.get(HEADER_ITEM.lower(), ""),
                             int(headers.get(HEADER_ATTEMPT.lower()) or 1), status))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                if self.path.rstrip("/") != CHAT_PATH:
                    self._send(404, error_body(f"no route {self.path}", "not_found"))
                    return
                length = int(self.headers.get("content-length") or 0)
                if length > MAX_BODY_BYTES:
                    self._send(413, error_body("request body too large", "invalid_request_error"))
                    return
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self._send(400, error_body("the body is not JSON", "invalid_request_error"))
                    return
                headers = {key.lower(): value for key, value in self.headers.items()}
                status, payload = server._answer(body, headers)
                server._count(headers, status)
                self._send(status, payload)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": []})
                else:
                    self._send(404, error_body(f"no route {self.path}", "not_found"))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: tests and operators read the run report instead

        return Handler


def request_from_body(body: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
    """The canonical request (as the recorder builds it) of an incoming chat request."""
    attempt = int(headers.get(HEADER_ATTEMPT.lower()) or 1)
    temperature = body.get("temperature")
    return canonical_request(str(body.get("model", "")), list(body.get("messages") or []),
                             1.0 if temperature is None else float(temperature), attempt)


class ReplayServer(ChatServer):
    """Answers every chat request from ``transcript``; ``misses`` counts unanswered ones."""

    def __init__(self, transcript: Transcript, port: int = 0) -> None:
        self.transcript = transcript
        self.misses = 0
        super().__init__(self._replay, port)

    def _replay(self, body: dict[str, Any], headers: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        try:
            request = request_from_body(body, headers)
        except (TypeError, ValueError, KeyError) as exc:
            return 400, error_body(f"malformed chat request: {exc}", "invalid_request_error")
        key = request_key(request)
        exchange = self.transcript.get(key)
        if exchange is None:
            self.misses += 1
            miss = ReplayMiss(headers.get(HEADER_STAGE.lower(), "?"),
                              headers.get(HEADER_ITEM.lower(), "?"), request["attempt"], key)
            return 404, error_body(str(miss), "replay_miss")
        return 200, exchange.response


FIXTURE_CREATED = 1767258000  # 2026-01-01T09:00:00Z


def reply_file(root: Path, stage: str, item: str, attempt: int) -> Path:
    """Where ``ScriptedServer`` looks for a reply: ``<root>/<stage>/<item>.<attempt>.md``."""
    return root / stage / f"{item.replace('/', '__')}.{attempt}.md"


class ScriptedServer(ChatServer):
    """Answers with hand-written replies, one file per stage, item and attempt (``reply_file``),
    for authoring transcripts: run the pipeline in ``record`` mode against it. The usage it
    reports is an estimate (characters / 4); ``created`` is fixed so recordings reproduce."""

    def __init__(self, root: Path, port: int = 0, created: int = FIXTURE_CREATED) -> None:
        self.root = root
        self.created = created
        self.missing: list[str] = []
        super().__init__(self._scripted, port)

    def _scripted(self, body: dict[str, Any], headers: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        stage = headers.get(HEADER_STAGE.lower(), "")
        item = headers.get(HEADER_ITEM.lower(), "")
        attempt = int(headers.get(HEADER_ATTEMPT.lower()) or 1)
        path = reply_file(self.root, stage, item, attempt)
        if not stage or not item or not path.is_file():
            self.missing.append(str(path))
            return 404, error_body(f"no scripted reply {path}", "replay_miss")
        text = path.read_text(encoding="utf-8")
        prompt_chars = sum(len(str(message.get("content", ""))) for message in
                           body.get("messages") or [])
        completion = {
            "id": "chatcmpl-" + request_key(request_from_body(body, headers))[:24],
            "object": "chat.completion", "created": self.created, "model": body.get("model"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": len(text) // 4,
                      "total_tokens": prompt_chars // 4 + len(text) // 4}}
        return 200, completion
