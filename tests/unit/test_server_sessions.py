"""Pure parts of the session service: arguments, ids, call answers, the Redis record."""

from __future__ import annotations

import pytest

from envscaler.server.errors import ApiError
from envscaler.server.jsonlimits import JsonLimits
from envscaler.server.sessions import CallOutcome, check_session_id, new_session_id, parse_arguments
from envscaler.server.store import Record

LIMITS = JsonLimits(depth=4, items=3, keys=3, string=10)


def test_arguments_as_object_or_json_string() -> None:
    assert parse_arguments({"a": 1}, LIMITS) == {"a": 1}
    assert parse_arguments('{"a": 1}', LIMITS) == {"a": 1}
    assert parse_arguments("  ", LIMITS) == {}
    for bad in ("{", "[1]", "3", '"text"'):
        with pytest.raises(ApiError) as caught:
            parse_arguments(bad, LIMITS)
        assert (caught.value.status, caught.value.type, caught.value.field) == (
            422,
            "InvalidArguments",
            "arguments",
        )


def test_arguments_as_a_json_string_are_held_to_the_json_limits() -> None:
    for bad, field in [('{"a": [[[[1]]]]}', "body.arguments.a.0.0.0"), ('{"a": [1, 2, 3, 4]}',
                       "body.arguments.a"), ('{"a": "' + "x" * 11 + '"}', "body.arguments.a"),
                       ("[" * 100_000 + "]" * 100_000, "body.arguments")]:
        with pytest.raises(ApiError) as caught:
            parse_arguments(bad, LIMITS)
        assert (caught.value.status, caught.value.type, caught.value.field) == (
            422, "JsonTooComplex", field), caught.value.message


def test_session_ids_are_url_safe_and_checked() -> None:
    ids = {new_session_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert not [i for i in ids if i.startswith("-")]  # 1 in 64 would, left to token_urlsafe
    for session_id in ids:
        check_session_id(session_id)
    for bad in ("", "short", "a/b" * 10, "a" * 65, "a.b" * 8, "../../etc/passwd" * 2):
        with pytest.raises(ApiError) as caught:
            check_session_id(bad)
        assert caught.value.type == "UnknownSession"


def test_call_outcome_answers() -> None:
    ok = CallOutcome(
        {"index": 3, "ok": True, "result": [1], "call_id": "c", "duration_ms": 0.5}, duplicate=True
    )
    assert ok.status == 200
    assert ok.body() == {
        "ok": True,
        "result": [1],
        "index": 3,
        "call_id": "c",
        "duplicate": True,
        "duration_ms": 0.5,
    }
    timeout = CallOutcome({"index": 4, "ok": False, "error": {"type": "Timeout", "message": "m"}})
    assert timeout.status == 504
    assert (
        CallOutcome(
            {"index": 5, "ok": False, "error": {"type": "ToolException", "message": "m"}}
        ).status
        == 200
    )


def test_record_round_trips_through_redis_fields() -> None:
    record = Record(
        id="x" * 24,
        env="e",
        scenario=None,
        seed=7,
        epoch=2,
        epoch_start=5,
        length=9,
        step=3,
        executed=2,
        sandbox={"id": "s", "socket_path": "/p", "backend": "process", "instance": "i"},
        owner="anonymous",
        agent_token_hash="h" * 64,
        status="active",
        created=1.5,
        updated=2.25,
    )
    assert Record.parse(record.id, record.fields()) == record
