"""The wire format, and how a real runtime process answers malformed or out-of-order requests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envscaler.sandbox.runtime import protocol
from envscaler.sandbox.runtime.envhost import OperationError
from envscaler.sandbox.runtime.server import parse_request

REPO_ROOT = Path(__file__).resolve().parents[2]


def frame(body: bytes) -> bytes:
    return protocol.HEADER.pack(len(body)) + body


# --- framing -------------------------------------------------------------------------------------

def test_encode_is_a_big_endian_length_then_compact_utf8_json() -> None:
    data = protocol.encode({"op": "ping", "text": "é"})
    body = '{"op":"ping","text":"é"}'.encode()
    assert data == len(body).to_bytes(4, "big") + body


def test_round_trip_over_a_socket_pair() -> None:
    left, right = socket.socketpair()
    with left, right:
        message = {"op": "call", "name": "t", "arguments": {"x": [1, 2.5, None, True, "ü"]}}
        protocol.send_message(left, message)
        assert protocol.recv_message(right) == message


def test_lone_surrogates_travel_and_come_back() -> None:
    left, right = socket.socketpair()
    with left, right:
        protocol.send_message(left, {"text": "a\ud800b"})
        assert protocol.recv_message(right) == {"text": "a\ud800b"}


def test_clean_close_is_none_and_a_cut_body_is_a_framing_error() -> None:
    left, right = socket.socketpair()
    with right:
        left.close()
        assert protocol.recv_message(right) is None
    left, right = socket.socketpair()
    with right:
        left.sendall(protocol.HEADER.pack(10) + b'{"op"')
        left.close()
        with pytest.raises(protocol.FramingError, match="middle of a message"):
            protocol.recv_message(right)


def test_encode_refuses_messages_over_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protocol, "MAX_MESSAGE_BYTES", 100)
    protocol.encode({"text": "x" * 80})
    with pytest.raises(protocol.ProtocolError, match="exceeds 100"):
        protocol.encode({"text": "x" * 100})


def test_a_length_over_the_limit_is_a_framing_error() -> None:
    with pytest.raises(protocol.FramingError, match="exceeds"):
        protocol.decode_length(protocol.HEADER.pack(protocol.MAX_MESSAGE_BYTES + 1))
    assert protocol.decode_length(protocol.HEADER.pack(protocol.MAX_MESSAGE_BYTES)) == \
        protocol.MAX_MESSAGE_BYTES


@pytest.mark.parametrize("body", [b"", b"{", b"nul", b"\xff\xfe{}", b"[" * 100_000])
def test_malformed_bodies_are_protocol_errors_not_framing_errors(body: bytes) -> None:
    with pytest.raises(protocol.ProtocolError) as caught:
        protocol.decode_body(body)
    assert not isinstance(caught.value, protocol.FramingError)


def test_nan_is_not_json() -> None:
    with pytest.raises(ValueError):
        protocol.encode({"x": float("nan")})


# --- request validation --------------------------------------------------------------------------

@pytest.mark.parametrize(("request_", "message"), [
    ([], "must be a JSON object, not an array"),
    ("ping", "must be a JSON object, not a string"),
    ({}, "unknown op None"),
    ({"op": "exec"}, "unknown op 'exec'"),
    ({"op": "ping", "extra": 1}, "ping: unexpected field(s) ['extra']"),
    ({"op": "call", "name": "t"}, "call: missing field 'arguments'"),
    ({"op": "call", "name": "t", "arguments": []}, "field 'arguments' must be an object, not an array"),
    ({"op": "call", "name": 3, "arguments": {}}, "field 'name' must be a string, not an integer"),
    ({"op": "reset", "seed": True}, "field 'seed' must be an integer or null, not a boolean"),
    ({"op": "snapshot", "executed": "2"}, "field 'executed' must be an integer, not a string"),
    ({"op": "check", "checks": []}, "unknown op 'check'"),  # checks run only in checkers
])
def test_parse_request_says_precisely_what_is_wrong(request_: Any, message: str) -> None:
    with pytest.raises(OperationError) as caught:
        parse_request(request_)
    assert caught.value.kind == "BadRequest"
    assert message in caught.value.message


def test_parse_request_returns_the_fields_without_op() -> None:
    assert parse_request({"op": "reset", "seed": None}) == ("reset", {"seed": None})
    assert parse_request({"op": "snapshot", "executed": 1}) == ("snapshot", {"executed": 1})


# --- a real runtime process ----------------------------------------------------------------------

class Connection:
    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(path)

    def raw(self, data: bytes) -> Any:
        self.sock.sendall(data)
        return protocol.recv_message(self.sock)

    def ask(self, message: Any) -> dict[str, Any]:
        return self.raw(protocol.encode(message))

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def runtime() -> Iterator[str]:
    """A runtime process on a private socket; it is killed at the end of the module."""
    directory = tempfile.mkdtemp(prefix="esrt-", dir="/tmp")
    path = os.path.join(directory, "runtime.sock")
    Path(path).touch()  # a stale file where the socket goes: the runtime must replace it
    process = subprocess.Popen([sys.executable, "-s", "-m", "envscaler.sandbox.runtime", "--socket", path],
                               cwd=REPO_ROOT, stderr=subprocess.PIPE,
                               env={"PYTHONHASHSEED": "0", "TZ": "UTC", "PATH": os.defpath})
    assert process.stderr is not None
    try:
        banner = process.stderr.readline().decode()
        assert f"listening on {path}" in banner
        yield path
    finally:
        process.kill()
        process.wait()
        process.stderr.close()
        for name in os.listdir(directory):
            os.unlink(os.path.join(directory, name))
        os.rmdir(directory)


def test_socket_file_is_world_connectable(runtime: str) -> None:
    assert os.stat(runtime).st_mode & 0o777 == 0o777


def test_ping_answers_before_load(runtime: str) -> None:
    connection = Connection(runtime)
    reply = connection.ask({"op": "ping"})
    connection.close()
    assert reply["ok"] is True
    assert reply["result"]["loaded"] is False
    assert isinstance(reply["result"]["pid"], int)


@pytest.mark.parametrize("op", [{"op": "state"}, {"op": "reset"}, {"op": "snapshot"},
                                {"op": "call", "name": "t", "arguments": {}}])
def test_environment_operations_before_load_are_not_loaded(runtime: str, op: dict[str, Any]) -> None:
    connection = Connection(runtime)
    reply = connection.ask(op)
    connection.close()
    assert reply == {"ok": False, "error": {"type": "NotLoaded",
                                            "message": "no environment is loaded; send load first"}}


def test_malformed_json_is_answered_and_the_connection_stays_usable(runtime: str) -> None:
    connection = Connection(runtime)
    bad = connection.raw(frame(b'{"op": "ping"'))
    not_object = connection.ask([1, 2])
    unknown = connection.ask({"op": "explode"})
    good = connection.ask({"op": "ping"})
    connection.close()
    assert bad["error"]["type"] == "BadRequest" and "not JSON" in bad["error"]["message"]
    assert not_object["error"] == {"type": "BadRequest",
                                   "message": "a request must be a JSON object, not an array"}
    assert unknown["error"]["type"] == "BadRequest"
    assert good["ok"] is True


def test_an_oversized_length_is_answered_then_the_connection_is_closed(runtime: str) -> None:
    connection = Connection(runtime)
    reply = connection.raw(protocol.HEADER.pack(protocol.MAX_MESSAGE_BYTES + 1))
    closed = protocol.recv_message(connection.sock)
    connection.close()
    assert reply["error"]["type"] == "BadRequest" and "exceeds" in reply["error"]["message"]
    assert closed is None
    fresh = Connection(runtime)
    assert fresh.ask({"op": "ping"})["ok"] is True  # the server itself is unharmed
    fresh.close()


def test_a_peer_vanishing_mid_message_does_not_harm_the_server(runtime: str) -> None:
    connection = Connection(runtime)
    connection.sock.sendall(protocol.HEADER.pack(1000) + b'{"op":')
    connection.close()
    time.sleep(0.05)
    fresh = Connection(runtime)
    assert fresh.ask({"op": "ping"})["ok"] is True
    fresh.close()


def test_load_errors_are_typed(runtime: str) -> None:
    connection = Connection(runtime)
    syntax = connection.ask({"op": "load", "source": "class A:\n    def f(self)\n", "class_name": "A",
                             "tools": [], "init_config": {}, "seed": 0})
    bad_tools = connection.ask({"op": "load", "source": "class A: pass", "class_name": "A",
                                "tools": [1], "init_config": {}, "seed": 0})
    connection.close()
    assert syntax["error"]["type"] == "LoadError"
    assert "SyntaxError" in syntax["error"]["message"] and "line 2" in syntax["error"]["message"]
    assert bad_tools["error"] == {"type": "BadRequest", "message": "tools must be a list of strings"}


def test_replies_are_json_objects_with_ok(runtime: str) -> None:
    connection = Connection(runtime)
    connection.sock.sendall(protocol.encode({"op": "ping"}))
    header = connection.sock.recv(4)
    body = connection.sock.recv(protocol.decode_length(header))
    connection.close()
    assert json.loads(body)["ok"] is True
