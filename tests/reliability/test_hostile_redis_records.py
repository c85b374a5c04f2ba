"""Session records forged in Redis: a sandbox handle is data, never a path or a trusted id.

Each forged handle names something that is not the session's sandbox: a container this service
did not create (no envscaler labels), a directory outside the socket root, or a counterfeit
runtime listening where a sandbox's socket would be. The session answers as if its sandbox had
been lost (rebuilt on a fresh sandbox by replay, with its recorded state and reward), what the
handle named is left untouched, and the counterfeit is sent nothing but the ``hello`` it cannot
answer: no environment source, call or state request.
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from envscaler.sandbox.runtime import protocol
from envscaler.server.store import session_key
from tests.conftest import RUN_ID
from tests.integration.gateway_fixtures import running_gateway, sandbox_handle
from tests.reliability.helpers import call, new_session, state


@pytest.fixture
def unrelated_container(sandbox_image: str) -> Iterator[Any]:
    """A container of someone else's: no envscaler labels at all."""
    engine = docker.from_env()
    container = engine.containers.run(sandbox_image, ["sleep", "600"], detach=True,
                                      network_mode="none", name=f"unrelated-{RUN_ID}-"
                                      f"{secrets.token_hex(3)}")
    try:
        yield container
    finally:
        container.remove(force=True)


@pytest.fixture
def unrelated_dir(tmp_path: Path) -> Path:
    """Someone else's directory, with a file in it."""
    directory = tmp_path / "unrelated"
    directory.mkdir()
    (directory / "precious.txt").write_text("keep me")
    return directory


class Counterfeit:
    """A runtime impostor on a Unix socket: it answers every request as a loaded runtime would
    (claiming ``executed`` calls and any state) and keeps what it was sent."""

    def __init__(self, path: Path, executed: int) -> None:
        self.path = path
        self.executed = executed
        self.received: list[dict[str, Any]] = []
        self.listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listening.bind(str(path))
        self.listening.listen(8)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listening.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            while True:
                try:
                    request = protocol.recv_message(connection)
                except (OSError, protocol.ProtocolError):
                    return
                if request is None:
                    return
                self.received.append(request)
                protocol.send_message(connection, protocol.ok(self._result(request)))

    def _result(self, request: dict[str, Any]) -> Any:
        op = request.get("op")
        if op == "hello":
            return {"proof": "0" * 64}  # it does not know the sandbox's secret
        if op == "ping":
            return {"pid": 1, "loaded": True, "executed": self.executed}
        forged = {"counters": {"a": 3, "b": 0}, "history": []}
        if op == "snapshot":
            return {"initial": forged, "final": forged}
        if op == "state":
            return forged
        return {"success": True, "data": "forged"}

    def ops(self) -> set[str]:
        return {str(request.get("op")) for request in self.received}

    def close(self) -> None:
        self.listening.close()


def forge(redis_client: Any, session_id: str, handle: dict[str, Any]) -> None:
    redis_client.hset(session_key(session_id), "sandbox", json.dumps(handle))


def container_running(container: Any) -> bool:
    container.reload()
    return bool(container.attrs["State"]["Running"])


async def test_a_forged_path_and_a_foreign_container_are_never_touched(
        make_settings, redis_client, unrelated_container: Any, unrelated_dir: Path) -> None:
    settings = make_settings(pool_size=1)
    async with running_gateway(settings) as (_, client):
        session_id = await new_session(client, scenario="counter-1")
        await call(client, session_id, "increment", {"name": "a"})
        genuine = sandbox_handle(redis_client, session_id)
        forgeries = [
            # the old shape: a socket path of the attacker's choosing
            {**genuine, "id": unrelated_container.id,
             "socket_path": str(unrelated_dir / "runtime.sock")},
            # names that would leave the socket root
            {**genuine, "id": unrelated_container.id, "name": f"../../{unrelated_dir}"},
            {**genuine, "id": unrelated_container.id, "instance": ".."},
            # well-formed, naming a sandbox that does not exist, with a foreign container's id
            {**genuine, "id": unrelated_container.id, "name": secrets.token_hex(8)},
            # a foreign container's name or id prefix instead of a full id
            {**genuine, "id": unrelated_container.name},
            {**genuine, "id": unrelated_container.id[:12], "name": secrets.token_hex(8)},
        ]
        for count, forged in enumerate(forgeries, start=2):
            forge(redis_client, session_id, forged)
            answer = await call(client, session_id, "increment", {"name": "a"})
            assert answer["result"]["data"]["value"] == count + 1, forged  # rebuilt by replay
            assert sandbox_handle(redis_client, session_id)["id"] not in {
                unrelated_container.id, unrelated_container.name}
            assert container_running(unrelated_container), forged
            assert (unrelated_dir / "precious.txt").read_text() == "keep me"
        # closing a session whose record names a foreign container leaves it alone too
        forge(redis_client, session_id, forgeries[3])
        closed = await client.delete(f"/v1/sessions/{session_id}")
        assert closed.status_code == 200, closed.text
        assert container_running(unrelated_container)
        assert (unrelated_dir / "precious.txt").read_text() == "keep me"


async def test_a_counterfeit_runtime_is_sent_nothing_and_cannot_forge_a_reward(
        make_settings, redis_client, unrelated_container: Any) -> None:
    settings = make_settings(pool_size=1)
    async with running_gateway(settings) as (app, client):
        session_id = await new_session(client, scenario="counter-1")
        await call(client, session_id, "increment", {"name": "a"})
        honest = (await client.post(f"/v1/sessions/{session_id}/validate")).json()
        assert honest["reward"] < 1.0
        genuine = sandbox_handle(redis_client, session_id)
        instance_dir = Path(settings.socket_root) / genuine["instance"]

        # A record naming a counterfeit's socket (under this gateway's own directory) with a
        # container that is not the sandbox of that name: refused before any connection.
        name = secrets.token_hex(8)
        (instance_dir / name).mkdir()
        counterfeit = Counterfeit(instance_dir / name / "runtime.sock", executed=1)
        try:
            forged = {**genuine, "id": unrelated_container.id, "name": name,
                      "socket_path": str(counterfeit.path)}  # the handle's old shape had it
            await assert_served_honestly(client, redis_client, session_id, forged, honest)
            assert counterfeit.received == []
            assert container_running(unrelated_container)
        finally:
            counterfeit.close()

        # The session's own sandbox, its socket swapped for a counterfeit's: a gateway that
        # attaches to it (here: this one, having let go of its connections, as after a restart)
        # gets no proof of the secret and sends nothing more.
        genuine = sandbox_handle(redis_client, session_id)
        socket_path = instance_dir / genuine["name"] / "runtime.sock"
        socket_path.rename(socket_path.with_name("moved.sock"))
        counterfeit = Counterfeit(socket_path, executed=1)
        try:
            app.state.service.sandboxes.close()
            await assert_served_honestly(client, redis_client, session_id, genuine, honest)
            assert counterfeit.ops() == {"hello"}, counterfeit.received
        finally:
            counterfeit.close()


async def assert_served_honestly(client: Any, redis_client: Any, session_id: str,
                                 forged: dict[str, Any], honest: dict[str, Any]) -> None:
    """The session's reward, state and calls are its own, with ``forged`` as its handle."""
    forge(redis_client, session_id, forged)
    validated = await client.post(f"/v1/sessions/{session_id}/validate")
    assert validated.status_code == 200, validated.text
    assert validated.json()["reward"] == honest["reward"]
    assert (await state(client, session_id))["counters"] == {"a": 2}
    forge(redis_client, session_id, forged)
    answer = await call(client, session_id, "increment", {"name": "a"})
    assert answer["result"]["data"]["value"] == 3
    await call(client, session_id, "increment", {"name": "a", "by": -1})
