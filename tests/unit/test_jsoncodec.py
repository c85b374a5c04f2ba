"""`envscaler.common.jsoncodec`: orjson's speed, with the standard library's answer wherever orjson refuses
what the standard library accepts (the gateway must not start refusing valid messages)."""

from __future__ import annotations

import gc
import json

import pytest

from envscaler.common import jsoncodec
from envscaler.sandbox.runtime import protocol


@pytest.mark.parametrize("value", [
    {"name": "get_member", "arguments": {"member_id": "M-1001", "n": 3, "ok": True, "x": None}},
    {"text": "naïve – ünïcode ✓"},
    [1.5, -0.0, 10**18, "a\nb\"c"],
])
def test_dumps_is_the_standard_librarys_compact_json(value: object) -> None:
    standard = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert jsoncodec.dumps(value) == standard
    assert jsoncodec.dump_bytes(value) == standard.encode()
    assert jsoncodec.loads(jsoncodec.dumps(value)) == value


def test_what_orjson_refuses_falls_back_to_the_standard_library() -> None:
    assert jsoncodec.dumps({1: "int key"}) == '{"1":"int key"}'
    assert jsoncodec.loads(jsoncodec.dumps({"big": 2**80})) == {"big": 2**80}
    lone = {"s": "\ud800"}
    assert jsoncodec.dump_bytes(lone) == b'{"s":"\xed\xa0\x80"}'  # surrogatepass, as the runtime
    assert jsoncodec.loads(jsoncodec.dump_bytes(lone)) == lone
    assert jsoncodec.loads("[NaN]")[0] != jsoncodec.loads("[NaN]")[0]  # NaN, as json.loads


@pytest.mark.parametrize("value", [{"s": "\ud800", "é": [1, 2.5]}, {1: "int key"}, [2**80]])
def test_the_fallback_encodes_as_the_in_sandbox_runtime_does(value: object) -> None:
    assert jsoncodec.dump_bytes(value) == protocol.dump_body(value)


def test_no_nan_token_is_ever_written() -> None:
    """Never invalid JSON: orjson writes NaN as null, the standard library's path refuses it."""
    assert jsoncodec.dumps({"a": float("nan")}) == '{"a":null}'
    with pytest.raises(ValueError):
        jsoncodec.dumps({1: float("nan")})


def test_what_json_refuses_is_refused_alike() -> None:
    with pytest.raises(json.JSONDecodeError):
        jsoncodec.loads('{"a": ')
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_body(b"[" * 100_000, jsoncodec.loads)


@pytest.mark.parametrize("enabled", [True, False])
def test_a_large_text_is_parsed_whole_and_the_collector_left_as_it_was(enabled: bool) -> None:
    value = {"rows": [{"id": n, "name": f"row {n}"} for n in range(5000)]}
    text = json.dumps(value)
    assert len(text) >= jsoncodec.LARGE_TEXT
    (gc.enable if enabled else gc.disable)()
    try:
        assert jsoncodec.loads(text) == value
        assert gc.isenabled() is enabled
        with pytest.raises(ValueError):
            jsoncodec.loads(text[:-1])
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
