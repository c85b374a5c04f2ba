"""Policies: what decides the agent's next message. The interface is one async callable,

    async def policy(messages: list[dict], tools: list[dict]) -> dict   # an assistant message

so an RL framework plugs its own generation in (vLLM, SGLang, a trainer's actor...).
`ChatCompletionsPolicy` is the one for any OpenAI-compatible chat-completions endpoint, spoken
with httpx directly: the client distribution depends on httpx, httptools and pydantic only, not
on the ``openai`` SDK.

The message a policy returns may carry a ``usage`` key (``prompt_tokens``, ``completion_tokens``,
``total_tokens``): `envscaler_client.rollout.run_episode` takes it out of the message and adds
it to the episode's token usage.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Self

import httpx

from envscaler_client.retry import retry_after

log = logging.getLogger("envscaler.rollout")

Message = dict[str, Any]
Policy = Callable[[list[Message], list[dict[str, Any]]], Awaitable[Message | str]]
"""``await policy(messages, tools)`` -> the assistant message (or its text)."""

# What the OpenAI SDK retries: timeouts, conflicts, rate limits and server errors.
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
# The message fields a chat-completions endpoint takes; anything else a policy or a recorder
# added (reasoning text, token ids, usage) stays in the trajectory but is not sent back.
SENT_FIELDS = ("role", "content", "tool_calls", "tool_call_id", "name")


class ModelError(Exception):
    """The model endpoint did not give a usable answer (after retries).

    ``type``: ``ConnectError``, ``ReadTimeout``... (no answer), ``HTTP<status>`` (an error
    answer), or ``InvalidResponse`` (an answer that is not a chat completion).
    """

    def __init__(self, message: str, *, type: str, status: int | None = None) -> None:
        super().__init__(message)
        self.type = type
        self.message = message
        self.status = status

    @property
    def unreachable(self) -> bool:
        """True when no connection to the endpoint could be made at all."""
        return self.type in ("ConnectError", "ConnectTimeout")

    def __str__(self) -> str:
        return f"{self.type}: {self.message}"


def endpoint_url(base_url: str, path: str) -> str:
    """``base_url`` as the OpenAI SDK takes it (``http://host:8000/v1``) joined with ``path``."""
    return base_url.rstrip("/") + "/" + path.lstrip("/")


def wire_message(message: Mapping[str, Any]) -> Message:
    """``message`` as sent to an endpoint: only the fields of the chat-completions API."""
    out = {key: message[key] for key in SENT_FIELDS if key in message}
    if out.get("role") == "assistant" and "content" not in out:
        out["content"] = None
    return out


class ChatCompletionsPolicy:
    """A model behind an OpenAI-compatible ``POST {base_url}/chat/completions``.

    ``await policy(messages, tools)`` returns the assistant message (``content``,
    ``tool_calls``, and ``reasoning_content`` when the server sends reasoning) with the answer's
    ``usage``. Timeouts, connection errors and 408/409/429/5xx answers are retried ``attempts``
    times in all, with exponential back-off that honours ``Retry-After``; then `ModelError`.

    ``seed`` is sent when set (`with_seed` gives a copy for one episode that shares the HTTP
    connections). ``extra_body`` is merged into every request (``top_p``,
    ``chat_template_kwargs``...). Close it (``aclose`` or ``async with``) when it made its own
    ``httpx.AsyncClient``.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *,
                 temperature: float | None = None, max_tokens: int | None = None,
                 seed: int | None = None, tool_choice: str | dict[str, Any] | None = None,
                 parallel_tool_calls: bool | None = None,
                 extra_body: Mapping[str, Any] | None = None, timeout: float = 300.0,
                 attempts: int = 3, backoff: float = 1.0, max_backoff: float = 30.0,
                 http_client: httpx.AsyncClient | None = None) -> None:
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.base_url = base_url
        self.model = model
        self.api_key = api_key
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.tool_choice = tool_choice
        self.parallel_tool_calls = parallel_tool_calls
        self.extra_body = dict(extra_body or {})
        self.attempts = attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._owns_client = http_client is None
        self._http = http_client or httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=min(10.0, timeout)),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64))

    # ------------------------------------------------------------------ the policy

    async def __call__(self, messages: Sequence[Mapping[str, Any]],
                       tools: Sequence[Mapping[str, Any]] | None = None) -> Message:
        return await self.complete(messages, tools)

    async def complete(self, messages: Sequence[Mapping[str, Any]],
                       tools: Sequence[Mapping[str, Any]] | None = None) -> Message:
        """The assistant message for ``messages`` (with ``usage`` and ``finish_reason``)."""
        body = self.request_body(messages, tools)
        answer = await self._post(body)
        return parse_completion(answer)

    def request_body(self, messages: Sequence[Mapping[str, Any]],
                     tools: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model,
                                "messages": [wire_message(m) for m in messages]}
        if tools:
            body["tools"] = list(tools)
            if self.tool_choice is not None:
                body["tool_choice"] = self.tool_choice
            if self.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = self.parallel_tool_calls
        for key, value in (("temperature", self.temperature), ("max_tokens", self.max_tokens),
                           ("seed", self.seed)):
            if value is not None:
                body[key] = value
        body.update(self.extra_body)
        return body

    def with_seed(self, seed: int | None) -> ChatCompletionsPolicy:
        """A copy that sends ``seed`` (one per episode) and shares this one's connections."""
        twin = copy.copy(self)
        twin.seed = seed
        twin._owns_client = False
        return twin

    # ------------------------------------------------------------------ HTTP

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    async def _post(self, body: dict[str, Any]) -> Any:
        url = endpoint_url(self.base_url, "chat/completions")
        attempt = 0
        while True:
            attempt += 1
            wait: float | None = None
            try:
                response = await self._http.post(url, json=body, headers=self._headers())
            except httpx.TransportError as exc:
                error = ModelError(f"POST {url}: {exc or type(exc).__name__}",
                                   type=type(exc).__name__)
            else:
                if response.is_success:
                    try:
                        return response.json()
                    except ValueError as exc:
                        raise ModelError(f"POST {url}: the answer is not JSON: {exc}",
                                         type="InvalidResponse",
                                         status=response.status_code) from exc
                error = ModelError(f"POST {url}: {_error_text(response)}",
                                   type=f"HTTP{response.status_code}",
                                   status=response.status_code)
                if response.status_code not in RETRY_STATUSES:
                    raise error
                wait = retry_after(response.headers)
            if attempt >= self.attempts:
                raise error
            delay = max(wait or 0.0, min(self.max_backoff, self.backoff * 2 ** (attempt - 1)))
            delay *= 1.0 + 0.25 * random.random()
            log.info("model request failed (%s); attempt %d of %d in %.2f s", error,
                     attempt + 1, self.attempts, delay)
            await asyncio.sleep(delay)

    async def models(self) -> httpx.Response:
        """``GET {base_url}/models`` once, no retry: a cheap probe that the endpoint answers."""
        return await self._http.get(endpoint_url(self.base_url, "models"),
                                    headers=self._headers())

    async def aclose(self) -> None:
        if self._owns_client:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"ChatCompletionsPolicy({self.base_url!r}, {self.model!r})"


def _error_text(response: httpx.Response) -> str:
    """The endpoint's error message (OpenAI shape ``{"error": {"message"}}``) or the body."""
    text = f"HTTP {response.status_code}"
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and error.get("message"):
        return f"{text}: {error['message']}"
    if isinstance(error, str):
        return f"{text}: {error}"
    body = response.text.strip()
    return f"{text}: {body[:300]}" if body else text


def parse_completion(answer: Any) -> Message:
    """The assistant message of a chat-completion answer, with ``usage`` and ``finish_reason``."""
    try:
        choice = answer["choices"][0]
        raw = choice["message"]
        if not isinstance(raw, dict):
            raise TypeError("message is not an object")
    except (KeyError, IndexError, TypeError) as exc:
        raise ModelError(f"not a chat completion ({exc!r}): {json.dumps(answer)[:300]}",
                         type="InvalidResponse") from exc
    message: Message = {"role": "assistant", "content": raw.get("content")}
    if raw.get("tool_calls"):
        message["tool_calls"] = raw["tool_calls"]
    reasoning = raw.get("reasoning_content") or raw.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        message["reasoning_content"] = reasoning
    if choice.get("finish_reason") is not None:
        message["finish_reason"] = choice["finish_reason"]
    usage = answer.get("usage")
    if isinstance(usage, dict):
        message["usage"] = usage
    return message
