"""The runtime's Unix-socket server: framed JSON requests in, one reply each, in order.

Every connection gets a thread. Environment operations take one global lock, since a sandbox
holds one environment and its calls must never interleave; ``ping`` does not, so liveness probes
answer while a long tool call runs on another connection. No request, however malformed, and no
exception, however unexpected, ends the server.
"""

from __future__ import annotations

import os
import socket
import socketserver
import threading
from typing import Any, NamedTuple

from sandbox.runtime import protocol
from sandbox.runtime.check_driver import describe_exception
from sandbox.runtime.host import EnvHost, OperationError


class _Field(NamedTuple):
    types: tuple[type, ...]
    required: bool


_NUMBER = (int, float)
_NONE = type(None)
_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", list: "an array",
               dict: "an object", bool: "a boolean", _NONE: "null"}
FIELDS: dict[str, dict[str, _Field]] = {
    "ping": {},
    "load": {"source": _Field((str,), True), "class_name": _Field((str,), True),
             "tools": _Field((list,), True), "init_config": _Field((dict,), True),
             "seed": _Field((int,), True), "max_result_bytes": _Field((int,), False),
             "clock_start": _Field((str, _NONE), False)},
    "reset": {"init_config": _Field((dict, _NONE), False), "seed": _Field((int, _NONE), False)},
    "call": {"name": _Field((str,), True), "arguments": _Field((dict,), True),
             "executed": _Field((int,), False)},
    "state": {"executed": _Field((int,), False)},
    "check": {"checks": _Field((list,), True), "timeout": _Field(_NUMBER, False),
              "executed": _Field((int,), False)},
}


def parse_request(request: Any) -> tuple[str, dict[str, Any]]:
    """The op and its fields, checked against ``FIELDS``; ``OperationError("BadRequest")`` says
    precisely what is wrong."""
    if not isinstance(request, dict):
        raise OperationError("BadRequest", f"a request must be a JSON object, not {_kind(request)}")
    op = request.get("op")
    if op not in FIELDS:
        raise OperationError("BadRequest", f"unknown op {op!r}; expected one of {sorted(FIELDS)}")
    spec = FIELDS[op]
    fields = {name: value for name, value in request.items() if name != "op"}
    unexpected = sorted(set(fields) - set(spec))
    if unexpected:
        raise OperationError("BadRequest", f"{op}: unexpected field(s) {unexpected}")
    for name, field in spec.items():
        if name not in fields:
            if field.required:
                raise OperationError("BadRequest", f"{op}: missing field {name!r}")
        elif not _has_type(fields[name], field.types):
            expected = " or ".join(_TYPE_NAMES[kind] for kind in field.types)
            raise OperationError("BadRequest", f"{op}: field {name!r} must be {expected}, "
                                 f"not {_kind(fields[name])}")
    return op, fields


def _has_type(value: Any, types: tuple[type, ...]) -> bool:
    """``isinstance``, except that JSON ``true``/``false`` are not numbers."""
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def _kind(value: Any) -> str:
    return next((name for kind, name in _TYPE_NAMES.items() if type(value) is kind),
                type(value).__name__)


class RuntimeServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, socket_path: str, host: EnvHost) -> None:
        self.host = host
        self.env_lock = threading.Lock()
        super().__init__(socket_path, _Connection)

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


class _Connection(socketserver.BaseRequestHandler):
    server: RuntimeServer
    request: socket.socket

    def handle(self) -> None:
        while True:
            try:
                request = protocol.recv_message(self.request)
            except protocol.FramingError as exc:
                self._send(protocol.error("BadRequest", str(exc)))
                return  # the stream cannot be resynchronised
            except protocol.ProtocolError as exc:
                reply = protocol.error("BadRequest", str(exc))
            except OSError:
                return
            else:
                if request is None:
                    return
                reply = self.server.dispatch(request)
            if not self._send(reply):
                return

    def _send(self, reply: dict[str, Any]) -> bool:
        """Send ``reply`` (or why it cannot be sent); False when the peer is gone."""
        try:
            data = protocol.encode(reply)
        except protocol.ProtocolError as exc:
            data = protocol.encode(protocol.error("ResultTooLarge", str(exc)))
        except (TypeError, ValueError) as exc:  # a value that is not JSON: a runtime bug
            data = protocol.encode(protocol.error("RuntimeError", f"reply is not JSON: {exc}"))
        try:
            self.request.sendall(data)
        except OSError:
            return False
        return True
