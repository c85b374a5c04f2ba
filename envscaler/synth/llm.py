"""Model access: any OpenAI-compatible chat-completions endpoint, through the official SDK.

``ModelClient.ask`` is the one way the pipeline talks to a model. For one item of one stage it
sends the prompt, parses the reply with the parser it is given, and on a reply that does not parse
(or fails the optional validator) asks again, telling the model what was wrong. Both loops are
bounded, unlike the original's retry loops that could spin forever:

- replies: at most ``max_attempts`` per item, then ``ItemDropped`` with the last reason;
- transport errors (connection, timeout, 408, 409, 429, 5xx): at most ``transport_retries``
  retries per request with exponential back-off (``Retry-After`` honoured), then
  ``TransientFailure``, which the stage runner does not record, so a resumed run tries the item
  again;
- errors no retry can fix (authentication, unknown model, a replay miss) raise ``SynthAbort``;
  a request the endpoint rejects (400, 422, ...) drops the item.

Calls are bounded per stage by a semaphore, and tokens and cost are counted per stage. In
``replay`` mode replies come from the transcript only, and no request leaves the process.
"""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import openai

from envscaler.common.backoff import exponential
from envscaler.synth.errors import ItemDropped, ParseError, SynthAbort, TransientFailure
from envscaler.synth.settings import StageModel, SynthSettings
from envscaler.synth.transcript import ReplayMiss, Transcript, canonical_request, request_key

__all__ = ["Answer", "ItemDropped", "ModelClient", "ParseError", "StageUsage", "SynthAbort",
           "TransientFailure"]

T = TypeVar("T")

HEADER_STAGE = "X-EnvScaler-Stage"
HEADER_ITEM = "X-EnvScaler-Item"
HEADER_ATTEMPT = "X-EnvScaler-Attempt"
MAX_REASON_CHARS = 600
_RETRY_STATUSES = {408, 409, 429}

Parser = Callable[[str], T]
Validator = Callable[[T], Awaitable[None] | None]


@dataclass
class StageUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    unusable_replies: int = 0
    transport_errors: int = 0

    def add(self, prompt_tokens: int, completion_tokens: int, cost: float | None) -> None:
        self.calls += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "cost_usd": None if self.cost is None else round(self.cost, 6),
                "unusable_replies": self.unusable_replies,
                "transport_errors": self.transport_errors}


@dataclass(frozen=True)
class Answer(Generic[T]):
    """A parsed reply, with the model that gave it and its ``created`` time (epoch seconds)."""

    value: T
    model: str
    created: int
    attempts: int


@dataclass
class _Reply:
    text: str
    model: str
    created: int
    prompt_tokens: int
    completion_tokens: int


@dataclass
class ModelClient:
    settings: SynthSettings
    transcript: Transcript | None = None
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    usage: dict[str, StageUsage] = field(default_factory=dict)
    _client: openai.AsyncOpenAI | None = None
    _semaphores: dict[str, asyncio.Semaphore] = field(default_factory=dict)
    _jitter: random.Random = field(default_factory=random.Random)

    @classmethod
    def from_settings(cls, settings: SynthSettings) -> ModelClient:
        transcript = None
        if settings.mode in ("record", "replay"):
            assert settings.transcript is not None  # the settings validator makes sure
            if settings.mode == "replay" and not settings.transcript.exists():
                raise SynthAbort(f"replay mode: the transcript {settings.transcript} does not "
                                 "exist")
            transcript = Transcript(settings.transcript)
        return cls(settings=settings, transcript=transcript)

    def _openai(self) -> openai.AsyncOpenAI:
        if self._client is None:
            key = self.settings.api_key.get_secret_value() if self.settings.api_key else None
            self._client = openai.AsyncOpenAI(
                base_url=self.settings.base_url, api_key=key or _default_key(),
                max_retries=0,  # our loop retries, boundedly, and records each attempt
                timeout=self.settings.request_timeout)
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def stage_usage(self, stage: str) -> StageUsage:
        return self.usage.setdefault(stage, StageUsage())

    async def ask(self, stage: str, item: str, messages: list[dict[str, str]], parse: Parser[T],
                  validate: Validator[T] | None = None) -> Answer[T]:
        """The parsed (and validated) reply for ``item``; raises ``ItemDropped`` after
        ``max_attempts`` unusable replies."""
        config = self.settings.stage_model(stage)
        conversation = list(messages)
        reason = ""
        for attempt in range(1, config.max_attempts + 1):
            reply = await self._complete(config, item, conversation, attempt)
            try:
                value = parse(reply.text)
                if validate is not None:
                    outcome = validate(value)
                    if inspect.isawaitable(outcome):
                        await outcome
            except ParseError as exc:
                reason = _clip(str(exc))
                self.stage_usage(stage).unusable_replies += 1
                conversation = [*conversation, {"role": "assistant", "content": reply.text},
                                {"role": "user", "content": _retry_message(reason)}]
                continue
            return Answer(value=value, model=reply.model, created=reply.created, attempts=attempt)
        raise ItemDropped(f"no usable reply after {config.max_attempts} attempts: {reason}")

    async def _complete(self, config: StageModel, item: str, messages: list[dict[str, str]],
                        attempt: int) -> _Reply:
        request = canonical_request(config.model, messages, config.temperature, attempt)
        meta = {"stage": config.stage, "item": item}
        semaphore = self._semaphores.setdefault(config.stage, asyncio.Semaphore(config.concurrency))
        async with semaphore:
            if self.settings.mode == "replay":
                assert self.transcript is not None
                key = request_key(request)
                exchange = self.transcript.get(key)
                if exchange is None:
                    raise SynthAbort(str(ReplayMiss(config.stage, item, attempt, key)))
                response = exchange.response
            else:
                response = await self._request(config, item, request, attempt)
                if self.settings.mode == "record":
                    assert self.transcript is not None
                    self.transcript.append(request, meta, response)
        reply = _read_response(response, config.model)
        cost = self.settings.cost(config.model, reply.prompt_tokens, reply.completion_tokens)
        self.stage_usage(config.stage).add(reply.prompt_tokens, reply.completion_tokens, cost)
        return reply

    async def _request(self, config: StageModel, item: str, request: dict[str, Any],
                       attempt: int) -> dict[str, Any]:
        headers = {HEADER_STAGE: config.stage, HEADER_ITEM: item, HEADER_ATTEMPT: str(attempt)}
        extra: dict[str, Any] = {}
        if self.settings.max_tokens is not None:
            extra["max_tokens"] = self.settings.max_tokens
        retries = self.settings.transport_retries
        for retry in range(retries + 1):
            try:
                completion = await self._openai().chat.completions.create(
                    model=config.model, messages=request["messages"],  # type: ignore[arg-type]
                    temperature=config.temperature, extra_headers=headers, **extra)
                return completion.to_dict()
            except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                raise SynthAbort("the model endpoint refused the credentials: "
                                 f"{_describe(exc)}") from None
            except openai.NotFoundError as exc:
                raise SynthAbort(f"stage {config.stage!r}, item {item!r}: the endpoint answered "
                                 "404 "
                                 f"(unknown model {config.model!r}, wrong base URL, or a replay "
                                 f"miss): {_describe(exc)}") from None
            except (openai.APIConnectionError, openai.APIStatusError) as exc:
                status = getattr(exc, "status_code", None)
                transient = status is None or status >= 500 or status in _RETRY_STATUSES
                if not transient:
                    raise ItemDropped("the endpoint rejected the request: "
                                      f"{_describe(exc)}") from None
                self.stage_usage(config.stage).transport_errors += 1
                if retry == retries:
                    raise TransientFailure(f"the endpoint failed {retries + 1} times; last: "
                                           f"{_describe(exc)}") from None
                await self.sleep(self._backoff(retry, exc))
        raise AssertionError("unreachable")

    def _backoff(self, retry: int, exc: Exception) -> float:
        response = getattr(exc, "response", None)
        retry_after = response.headers.get("retry-after") if response is not None else None
        try:
            if retry_after is not None:
                return min(float(retry_after), self.settings.backoff_max)
        except ValueError:
            pass
        delay = exponential(retry + 1, self.settings.backoff, self.settings.backoff_max)
        return delay * (0.5 + self._jitter.random() / 2)


def _read_response(response: dict[str, Any], model: str) -> _Reply:
    choices = response.get("choices") or []
    message = (choices[0].get("message") or {}) if choices else {}
    usage = response.get("usage") or {}
    return _Reply(text=str(message.get("content") or ""), model=str(response.get("model") or model),
                  created=int(response.get("created") or 0),
                  prompt_tokens=int(usage.get("prompt_tokens") or 0),
                  completion_tokens=int(usage.get("completion_tokens") or 0))


def _retry_message(reason: str) -> str:
    return (f"Your reply could not be used: {reason}\n"
            "Answer again, from the start, following the requested format exactly.")


def _describe(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    text = f"{type(exc).__name__}"
    if status is not None:
        text += f" {status}"
    message = getattr(exc, "message", None) or str(exc)
    return _clip(f"{text}: {message}")


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS] + "..."


def _default_key() -> str | None:
    import os

    # Local OpenAI-compatible servers need no key, but the SDK insists on one.
    return os.environ.get("OPENAI_API_KEY") or "unused"
