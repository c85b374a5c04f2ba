"""Model access through the real ``openai`` SDK against local servers on 127.0.0.1: bounded
retries on replies that do not parse and on transport errors, aborts, usage, record and replay."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from envscaler.synth.llm import ItemDropped, ModelClient, ParseError, SynthAbort, TransientFailure
from envscaler.synth.replay_server import ChatServer, ReplayServer, error_body
from envscaler.synth.settings import SynthSettings
from envscaler.synth.transcript import Transcript

MESSAGES = [{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": "Go"}]


def completion(text: str, created: int = 1767258000) -> dict[str, Any]:
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": created,
            "model": "served-model", "usage": {"prompt_tokens": 100, "completion_tokens": 20,
                                               "total_tokens": 120},
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}]}


class Script:
    """Answers from a list of (status, payload) in order; remembers the request bodies."""

    def __init__(self, answers: list[tuple[int, dict[str, Any]]], delay: float = 0.0) -> None:
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[Mapping[str, str]] = []
        self.delay = delay
        self.in_flight = self.most_in_flight = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any], headers: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.bodies.append(body)
            self.headers.append(headers)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if self.delay:
            time.sleep(self.delay)
        with self._lock:
            self.in_flight -= 1
        return answer


@pytest.fixture
def serve() -> Iterator[Callable[[Script], ChatServer]]:
    servers: list[ChatServer] = []

    def start(script: Script) -> ChatServer:
        server = ChatServer(script).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def client(server: ChatServer | None, sleeps: Sleeps | None = None,
           **settings: Any) -> ModelClient:
    values = {"model": "test-model", "temperature": 0.2, "api_key": "k",
              "base_url": server.base_url if server else "http://127.0.0.1:9/v1", **settings}
    model = ModelClient.from_settings(SynthSettings(**values))
    if sleeps is not None:
        model.sleep = sleeps
    return model


def parse_answer(text: str) -> int:
    try:
        return int(json.loads(text)["answer"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ParseError(f"expected {{\"answer\": <int>}}: {exc!r}") from None


async def test_a_malformed_reply_is_retried_with_the_reason(serve) -> None:  # type: ignore[no-untyped-def]
    script = Script([(200, completion("I think 42.")), (200, completion('{"answer": 42}'))])
    model = client(serve(script))
    answer = await model.ask("topics.judge", "task-0001", MESSAGES, parse_answer)
    await model.close()
    assert (answer.value, answer.attempts, answer.model, answer.created) == \
        (42, 2, "served-model", 1767258000)
    second = script.bodies[1]["messages"]
    assert second[:2] == MESSAGES
    assert second[2] == {"role": "assistant", "content": "I think 42."}
    assert second[3]["role"] == "user" and "could not be used: expected" in second[3]["content"]
    assert [h["x-envscaler-attempt"] for h in script.headers] == ["1", "2"]
    assert {h["x-envscaler-stage"] for h in script.headers} == {"topics.judge"}
    assert {h["x-envscaler-item"] for h in script.headers} == {"task-0001"}
    usage = model.usage["topics.judge"]
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens, usage.unusable_replies) == \
        (2, 200, 40, 1)


async def test_a_reply_that_never_parses_drops_the_item_after_max_attempts(serve) -> None:  # type: ignore[no-untyped-def]
    script = Script([(200, completion("no"))])
    model = client(serve(script), max_attempts=4)
    with pytest.raises(ItemDropped, match=r"no usable reply after 4 attempts: expected"):
        await model.ask("s", "i", MESSAGES, parse_answer)
    await model.close()
    assert len(script.bodies) == 4


async def test_a_validator_failure_counts_as_an_attempt(serve) -> None:  # type: ignore[no-untyped-def]
    script = Script([(200, completion('{"answer": 3}')), (200, completion('{"answer": 4}'))])
    model = client(serve(script))

    async def even(value: int) -> None:
        if value % 2:
            raise ParseError(f"{value} is odd")

    answer = await model.ask("s", "i", MESSAGES, parse_answer, even)
    await model.close()
    assert answer.value == 4 and "3 is odd" in script.bodies[1]["messages"][3]["content"]


async def test_transport_errors_back_off_exponentially_and_are_bounded(serve) -> None:  # type: ignore[no-untyped-def]
    script = Script([(503, error_body("busy", "server_error")),
                     (500, error_body("oops", "server_error")),
                     (200, completion('{"answer": 1}'))])
    sleeps = Sleeps()
    model = client(serve(script), sleeps, backoff=1.0, backoff_max=30, transport_retries=4)
    answer = await model.ask("s", "i", MESSAGES, parse_answer)
    assert answer.value == 1
    assert len(sleeps.delays) == 2
    assert 0.5 <= sleeps.delays[0] <= 1.0 and 1.0 <= sleeps.delays[1] <= 2.0
    assert model.usage["s"].transport_errors == 2
    failing = Script([(503, error_body("down", "server_error"))])
    sleeps = Sleeps()
    model = client(serve(failing), sleeps, transport_retries=3)
    with pytest.raises(TransientFailure, match="failed 4 times; last: InternalServerError 503"):
        await model.ask("s", "i", MESSAGES, parse_answer)
    await model.close()
    assert len(failing.bodies) == 4 and len(sleeps.delays) == 3


def test_retry_after_is_honoured_up_to_the_maximum() -> None:
    class Response:
        def __init__(self, value: str) -> None:
            self.headers = {"retry-after": value}

    class Limited(Exception):
        def __init__(self, value: str) -> None:
            super().__init__("429")
            self.response = Response(value)

    model = client(None, backoff=1.0, backoff_max=5.0)
    assert model._backoff(0, Limited("2")) == 2.0
    assert model._backoff(0, Limited("60")) == 5.0
    assert 2.5 <= model._backoff(3, Limited("soon")) <= 5.0  # unparsable: exponential, capped


async def test_a_connection_refused_is_transient() -> None:
    sleeps = Sleeps()
    model = client(None, sleeps, transport_retries=2)
    with pytest.raises(TransientFailure, match="APIConnectionError"):
        await model.ask("s", "i", MESSAGES, parse_answer)
    await model.close()
    assert len(sleeps.delays) == 2


@pytest.mark.parametrize(("status", "error", "fragment"), [
    (401, SynthAbort, "refused the credentials"),
    (403, SynthAbort, "refused the credentials"),
    (404, SynthAbort, "stage 's', item 'i': the endpoint answered 404"),
    (400, ItemDropped, "the endpoint rejected the request: BadRequestError 400"),
    (422, ItemDropped, "UnprocessableEntityError 422"),
])
async def test_errors_no_retry_can_fix(serve, status: int, error: type[Exception],  # type: ignore[no-untyped-def]
                                       fragment: str) -> None:
    script = Script([(status, error_body("nope", "invalid_request_error"))])
    model = client(serve(script))
    with pytest.raises(error, match=fragment):
        await model.ask("s", "i", MESSAGES, parse_answer)
    await model.close()
    assert len(script.bodies) == 1


async def test_concurrency_is_bounded_per_stage(serve) -> None:  # type: ignore[no-untyped-def]
    script = Script([(200, completion('{"answer": 1}'))], delay=0.05)
    model = client(serve(script), stages={"busy": {"concurrency": 2}})
    await asyncio.gather(*(model.ask("busy", f"i{n}", MESSAGES, parse_answer) for n in range(6)))
    await model.close()
    assert len(script.bodies) == 6 and script.most_in_flight == 2


async def test_stage_overrides_reach_the_endpoint_and_cost_is_counted(serve) -> None:  # type: ignore[no-untyped-def]
    script = Script([(200, completion('{"answer": 1}'))])
    model = client(serve(script), stages={"logic": {"model": "big", "temperature": 0.0}},
                   costs={"big": {"input": 1.0, "output": 2.0}})
    await model.ask("logic.methods", "e/op", MESSAGES, parse_answer)
    await model.close()
    assert (script.bodies[0]["model"], script.bodies[0]["temperature"]) == ("big", 0.0)
    assert model.usage["logic.methods"].cost == pytest.approx(0.1 + 0.04)


async def test_record_then_replay_without_a_server(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "t.jsonl"
    script = Script([(200, completion("bad")), (200, completion('{"answer": 7}'))])
    recorder = client(serve(script), mode="record", transcript=path)
    assert (await recorder.ask("s", "i", MESSAGES, parse_answer)).value == 7
    await recorder.close()
    assert len(Transcript(path)) == 2
    replayer = client(None, mode="replay", transcript=path)  # the base URL is dead: no HTTP
    answer = await replayer.ask("s", "i", MESSAGES, parse_answer)
    assert (answer.value, answer.attempts) == (7, 2)
    assert replayer.usage["s"].calls == 2
    with pytest.raises(SynthAbort, match="no recorded reply for stage 's', item 'j', attempt 1"):
        await replayer.ask("s", "j", [*MESSAGES, {"role": "user", "content": "more"}], parse_answer)
    await replayer.close()


async def test_the_replay_server_serves_recordings_over_http(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "t.jsonl"
    recorder = client(serve(Script([(200, completion('{"answer": 9}'))])), mode="record",
                      transcript=path)
    await recorder.ask("s", "i", MESSAGES, parse_answer)
    await recorder.close()
    with ReplayServer(Transcript(path)) as replay:
        model = client(replay)
        assert (await model.ask("s", "i", MESSAGES, parse_answer)).value == 9
        with pytest.raises(SynthAbort, match="no recorded reply for stage 's', item 'other'"):
            await model.ask("s", "other", [MESSAGES[0]], parse_answer)
        await model.close()
        assert (replay.requests, replay.misses) == (2, 1)
        assert replay.log == [("s", "i", 1, 200), ("s", "other", 1, 404)]


def test_replay_mode_needs_an_existing_transcript(tmp_path: Path) -> None:
    with pytest.raises(SynthAbort, match="does not exist"):
        ModelClient.from_settings(SynthSettings(mode="replay", transcript=tmp_path / "none.jsonl"))
