"""A load or reset answers before the initial state's text is written; the text is still always
that of the state before any call, and a ping never waits for it."""

from __future__ import annotations

import json
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envscaler.sandbox.runtime import protocol
from envscaler.sandbox.runtime.determinism import Determinism
from envscaler.sandbox.runtime.envhost import EnvHost, OperationError
from envscaler.sandbox.runtime.server import RuntimeServer

SOURCE = """
class Shelf:
    def __init__(self, config):
        self.items = config["items"]

    def add(self, name: str) -> dict:
        self.items.append(name)
        return {"success": True}

    def loop(self) -> dict:
        self.link = self
        return {"success": True}
"""
CYCLIC = SOURCE.replace('self.items = config["items"]',
                        'self.items = config["items"]\n        self.me = self')


def loaded(source: str = SOURCE) -> EnvHost:
    host = EnvHost(Determinism())
    host.load(source, "Shelf", ["add", "loop"], json.dumps({"items": ["a"]}), seed=0)
    return host


def test_a_call_at_once_after_the_load_leaves_the_initial_state_as_it_was() -> None:
    host = loaded()
    assert host.unsettled
    host.call("add", {"name": "b"})
    assert not host.unsettled
    snapshot = host.snapshot()
    assert json.loads(snapshot["initial"]) == {"items": ["a"]}
    assert json.loads(snapshot["final"]) == {"items": ["a", "b"]}


def test_a_reset_is_settled_anew() -> None:
    host = loaded()
    host.call("add", {"name": "b"})
    host.reset(init_config=json.dumps({"items": ["z"]}))
    assert host.unsettled
    host.call("add", {"name": "y"})
    assert json.loads(host.snapshot()["initial"]) == {"items": ["z"]}


def test_an_initial_state_without_json_form_still_serves_calls_but_cannot_be_judged() -> None:
    host = loaded(CYCLIC)
    assert host.call("add", {"name": "b"}) == {"success": True}
    with pytest.raises(OperationError) as raised:
        host.snapshot()
    assert raised.value.kind == "StateNotData"
    assert "initial_state.me" in raised.value.message


@pytest.fixture
def server() -> Iterator[tuple[RuntimeServer, Path]]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runtime.sock"
        listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listening.bind(str(path))
        listening.listen()
        runtime = RuntimeServer(listening, EnvHost(Determinism()), secret=None)
        thread = threading.Thread(target=runtime.serve_forever, daemon=True)
        thread.start()
        try:
            yield runtime, path
        finally:
            runtime.shutdown()
            runtime.server_close()


def connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(path))
    return sock


def ask(sock: socket.socket, request: dict) -> dict:
    protocol.send_message(sock, request)
    return protocol.recv_message(sock)


def test_the_server_settles_a_load_once_its_answer_is_sent(server) -> None:
    runtime, path = server
    with connect(path) as sock:
        reply = ask(sock, {"op": "load", "source": SOURCE, "class_name": "Shelf",
                           "tools": ["add"], "init_config": '{"items": ["a"]}', "seed": 0})
    assert reply["ok"], reply
    for _ in range(500):
        if not runtime.host.unsettled:
            break
        time.sleep(0.01)
    assert not runtime.host.unsettled


def test_a_ping_never_waits_for_the_environment(server) -> None:
    """While another operation holds the environment, a ping answers, and so does the next: the
    settling after an answer is skipped, never waited for, when the environment is busy."""
    runtime, path = server
    runtime.host.load(SOURCE, "Shelf", ["add"], '{"items": ["a"]}', seed=0)
    with connect(path) as sock:
        with runtime.env_lock:
            assert ask(sock, {"op": "ping"})["result"]["loaded"] is True
            assert ask(sock, {"op": "ping"})["ok"]  # the same connection: its thread went on
            assert runtime.host.unsettled
        assert ask(sock, {"op": "state"})["result"] == {"items": ["a"]}
