"""The runtime's Unix-socket server: framed JSON requests in, one reply each, in order.

Every connection gets a thread. Environment operations take one global lock, since a sandbox
holds one environment and its calls must never interleave; ``ping`` does not, so liveness probes
answer while a long tool call runs on another connection. A load or reset answers before the
initial state's text is written (`EnvHost.settle`, right after the answer, when no other
operation holds the environment). No request, however malformed, and no exception, however
unexpected, ends the server. A connection from the user of a slot of the same container (a
sibling session's code) is closed unanswered.
"""

from __future__ import annotations

import os
import socket
import socketserver
import threading
from typing import Any

from envscaler.sandbox.runtime import protocol
from envscaler.sandbox.runtime.envhost import EnvHost
from envscaler.sandbox.runtime.protocol import Field, OperationError, describe_exception

_NONE = type(None)
FIELDS: dict[str, dict[str, Field]] = {
    "ping": {},
    "load": {"source": Field((str,), True), "class_name": Field((str,), True),
             "tools": Field((list,), True), "init_config": Field((dict, str), True),
             "init_patch": Field((dict, _NONE), False),
             "seed": Field((int,), True), "max_result_bytes": Field((int,), False),
             "clock_start": Field((str, _NONE), False)},
    "reset": {"init_config": Field((dict, str, _NONE), False),
              "init_patch": Field((dict, _NONE), False), "seed": Field((int, _NONE), False),
              "clock_start": Field((str, _NONE), False)},
    "call": {"name": Field((str,), True), "arguments": Field((dict,), True),
             "executed": Field((int,), False)},
    "state": {"executed": Field((int,), False)},
    "snapshot": {"executed": Field((int,), False)},
    "export": {"executed": Field((int,), False)},
    "import_point": {"point": Field((str,), True)},
}


def parse_request(request: Any) -> tuple[str, dict[str, Any]]:
    """The op and its fields, checked against ``FIELDS``."""
    return protocol.parse_request(request, FIELDS)


class RuntimeServer(socketserver.ThreadingMixIn, protocol.ListeningServer):
    daemon_threads = True

    def __init__(self, listening: socket.socket, host: EnvHost, secret: bytes | None,
                 refused_uids: range = range(0)) -> None:
        """``refused_uids``: the users of the container's slots. A peer of any of those but this
        runtime's own (a sibling session's code) is refused: only the gateway, from outside, and
        the keeper may talk to a runtime. Its own user is let through, as gVisor reports it for
        every peer outside the sandbox."""
        self.host = host
        self.env_lock = threading.Lock()
        self.refused_uids = refused_uids
        super().__init__(listening, secret)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        peer = protocol.peer_uid(request)
        return peer == os.getuid() or peer not in self.refused_uids

    def dispatch(self, request: Any) -> dict[str, Any]:
        try:
            op, fields = parse_request(request)
            if op == "ping":
                return protocol.ok({"pid": os.getpid(), "loaded": self.host.loaded,
                                    "executed": self.host.executed})
            with self.env_lock:
                return protocol.ok(getattr(self.host, op)(**fields))
        except OperationError as exc:
            return protocol.error(exc.kind, exc.message)
        except BaseException as exc:  # noqa: BLE001 - env code raises anything, e.g. in __repr__
            return protocol.error("RuntimeError", describe_exception(exc))

    def after_reply(self) -> None:
        """Settle a fresh build now rather than in the next operation. Never waits: an operation
        holding the lock settles first itself, and a ping's thread must not queue behind it."""
        if self.host.unsettled and self.env_lock.acquire(blocking=False):
            try:
                self.host.settle()
            finally:
                self.env_lock.release()
