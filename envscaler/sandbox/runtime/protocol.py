"""Wire format between the gateway and the in-sandbox runtime (standard library only).

Every message is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON.
Requests are objects with an ``op`` field; replies are ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": {"type": ..., "message": ...}}``.

Operations (fields beyond ``op``):

- ``hello`` ``nonce``                        -> ``{"proof"}``: HMAC-SHA256 of the nonce under the
                                                sandbox's secret (``prove``). Every server of a
                                                sandbox (runtime, checker, keeper) answers it;
                                                the gateway sends it first on every connection and
                                                sends nothing else to a peer whose proof is wrong
- ``ping``                                   -> ``{"pid", "loaded", "executed"}`` (tool calls run
                                                since the last load or reset)
- ``load``  ``source, class_name, tools, init_config, seed``
            [, ``init_patch``, ``max_result_bytes``, ``clock_start`` (ISO 8601; default
            2025-01-01T09:00:00Z)]             -> ``{"tools": [...]}``. ``init_config`` is an
                                                object or its JSON text (parsed anew for every
                                                build, the cheapest copy of a large database);
                                                ``init_patch``, a JSON merge patch applied on top
                                                (a scenario's changes to a shared database)
- ``reset`` [``init_config``, ``init_patch``, ``seed``, ``clock_start``] -> ``{"tools": [...]}``
                                                (null or absent: the value of the load or last
                                                reset; a new ``init_config`` brings its own patch)
- ``call``  ``name, arguments`` [, ``executed``] -> the tool's JSON-safe result
- ``state`` [``executed``]                    -> the public attributes of the instance
- ``snapshot`` [``executed``]                 -> ``{"initial", "final"}``: JSON texts of the state
                                                after load/reset and now

Check functions never run here (a process that ran environment code cannot be trusted with a
verdict): the checker (``checker.py``, its own sandbox) serves ``ping`` and ``check``
``checks, initial_state, final_state, cpu_seconds, wall_seconds, memory_bytes`` ->
``[{"passed": bool, "error": str | null, "exhausted": "time" | "memory" | null}]``
(``exhausted``: the check ran out of its CPU time or memory, so it has no verdict), or
``Starved`` when the machine gave the checks too little CPU to judge them. The keeper
(``keeper.py``) serves, on the control socket, ``ping`` (-> ``{"pid", "slots", "live"}``) and, for
one ``slot`` (default 0), ``status``, ``recycle`` ``generation`` and ``retire`` ``generation``
(-> ``{"pid", "runtime_pid", "generation", "ended", "live"}``, or ``Stale`` when that generation
was recycled already or the slot was retired).

``executed`` is the number of tool calls the caller believes ran since the last load or reset;
when given and different, the operation is refused with ``Diverged`` and nothing runs.

Error types (``error.type``), all stable:

- ``BadRequest``: malformed message, unknown op, missing/unexpected/mistyped field
- ``NotLoaded``: an environment operation before a successful ``load``
- ``Diverged``: ``executed`` differs from the calls this sandbox ran (its state is not the
  caller's)
- ``LoadError``: the source does not compile or run, the class is missing or does not
  instantiate, an advertised tool is not a public method of the class
- ``ToolNotFound``: ``call`` of a name that is not an advertised tool
- ``ArgumentError``: the arguments do not bind to the tool's signature (the tool did not run)
- ``ToolException``: the tool raised; the message is ``"<ExcType>: <message>"``
- ``StateNotData``: ``state`` or ``snapshot`` of a state that holds a cycle or a mapping whose
  keys collide as text (the message names the place); at load this is a ``LoadError``; a tool's
  result with either is a ``ToolException``
- ``ResultTooLarge``: the encoded result exceeds ``max_result_bytes`` (or a reply the frame limit)
- ``Starved``: the checks could not be judged for lack of CPU (retry later)
- ``NoSecret``: ``hello`` to a server started without a secret
- ``Stale``: a recycle or retire asked for with a generation the slot has left behind
- ``RuntimeError``: a fault of the runtime itself
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import socketserver
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

HEADER = struct.Struct(">I")
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
MAX_DESCRIPTION_CHARS = 2000
NUMBER = (int, float)
_NONE = type(None)
_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", list: "an array",
               dict: "an object", bool: "a boolean", _NONE: "null"}


class OperationError(Exception):
    """An operation failed in a way the caller should know by name (``kind`` is the wire type)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class Field(NamedTuple):
    """One field of a request: the JSON types it may have, and whether it must be there."""

    types: tuple[type, ...]
    required: bool


def describe_exception(exc: BaseException) -> str:
    """``"<ExcType>: <message>"`` (just the type when the message is empty), bounded in size."""
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ of a user-defined exception
        message = "<unprintable message>"
    if len(message) > MAX_DESCRIPTION_CHARS:
        message = message[:MAX_DESCRIPTION_CHARS] + f"... ({len(message)} characters)"
    name = type(exc).__name__
    return f"{name}: {message}" if message else name


def parse_request(request: Any, fields: dict[str, dict[str, Field]]) -> tuple[str, dict[str, Any]]:
    """The op and its fields, checked against ``fields`` (op -> field specs); an
    ``OperationError("BadRequest")`` says precisely what is wrong."""
    if not isinstance(request, dict):
        raise OperationError("BadRequest", f"a request must be a JSON object, not {_kind(request)}")
    op = request.get("op")
    if op not in fields:
        raise OperationError("BadRequest", f"unknown op {op!r}; expected one of {sorted(fields)}")
    spec = fields[op]
    given = {name: value for name, value in request.items() if name != "op"}
    unexpected = sorted(set(given) - set(spec))
    if unexpected:
        raise OperationError("BadRequest", f"{op}: unexpected field(s) {unexpected}")
    for name, field in spec.items():
        if name not in given:
            if field.required:
                raise OperationError("BadRequest", f"{op}: missing field {name!r}")
        elif not _has_type(given[name], field.types):
            expected = " or ".join(_TYPE_NAMES[kind] for kind in field.types)
            raise OperationError("BadRequest", f"{op}: field {name!r} must be {expected}, "
                                 f"not {_kind(given[name])}")
    return op, given


def _has_type(value: Any, types: tuple[type, ...]) -> bool:
    """``isinstance``, except that JSON ``true``/``false`` are not numbers."""
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def _kind(value: Any) -> str:
    return next((name for kind, name in _TYPE_NAMES.items() if type(value) is kind),
                type(value).__name__)


HELLO_FIELDS = {"nonce": Field((str,), True)}
MAX_NONCE_CHARS = 128


def runtime_socket_name(slot: int) -> str:
    """Where slot ``slot`` of a container's runtimes listens, in the sandbox's socket directory
    (a sandbox of one runtime: slot 0)."""
    return "runtime.sock" if slot == 0 else f"runtime-{slot}.sock"


def peer_uid(connection: socket.socket) -> int | None:
    """The user of the process at the other end of a Unix socket; None if the kernel won't say."""
    try:
        credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                            struct.calcsize("3i"))
    except OSError:
        return None
    return struct.unpack("3i", credentials)[1]


def prove(secret: bytes, nonce: str) -> str:
    """What a server holding ``secret`` answers to ``hello``: only the sandbox the gateway created
    (which alone was given that secret) can answer a fresh nonce right."""
    return hmac.new(secret, nonce.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def with_hello(secret: bytes | None,
               dispatch: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    """``dispatch``, answering ``hello`` first (``NoSecret`` for a server started without one)."""
    def answer(request: Any) -> dict[str, Any]:
        if not (isinstance(request, dict) and request.get("op") == "hello"):
            return dispatch(request)
        try:
            _, fields = parse_request(request, {"hello": HELLO_FIELDS})
        except OperationError as exc:
            return error(exc.kind, exc.message)
        if secret is None:
            return error("NoSecret", "this server was started without a secret")
        if len(fields["nonce"]) > MAX_NONCE_CHARS:
            return error("BadRequest", f"hello: a nonce is at most {MAX_NONCE_CHARS} characters")
        return ok({"proof": prove(secret, fields["nonce"])})
    return answer


def read_secret(path: Path) -> bytes:
    """The sandbox's secret from the file the gateway wrote, removed once read: it is gone before
    any environment or check code runs, so that code cannot read it from the file system."""
    secret = path.read_bytes()
    path.unlink()
    if not secret:
        raise ValueError(f"the secret file {path} is empty")
    return secret


class ProtocolError(Exception):
    """A peer sent bytes that are not a well-formed message."""


class FramingError(ProtocolError):
    """The byte stream lost its framing (bad length, cut-off body): the connection is unusable."""


def encode(message: Any) -> bytes:
    """Frame ``message``. Lone surrogates (valid JSON escapes such as ``"\\ud800"``) travel as
    ``surrogatepass`` bytes, which ``json.loads`` on bytes decodes back, instead of failing here."""
    return frame(dump_body(message))


def dumps(value: Any) -> str:
    """The runtime's one JSON encoding: compact, non-ASCII kept as is, no NaN. Message bodies,
    the canonical texts of states and the checker's verdicts are all written by it."""
    return _ENCODER.encode(value)


class JSONText(str):
    """A result that is JSON text already (a state written by ``jsonsafe.to_json_text``): its
    reply carries it as is rather than encoding it again."""


def dump_body(message: Any) -> bytes:
    """A message's JSON as sent: `dumps` in UTF-8, lone surrogates as ``surrogatepass`` bytes."""
    result = message.get("result") if type(message) is dict else None
    text = ('{"ok":true,"result":' + result + "}" if isinstance(result, JSONText)
            else dumps(message))
    return text.encode("utf-8", "surrogatepass")


def frame(body: bytes) -> bytes:
    """Frame an encoded message (its length first), refusing one larger than the limit."""
    if len(body) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {len(body)} bytes exceeds {MAX_MESSAGE_BYTES}")
    return HEADER.pack(len(body)) + body


def decode_length(header: bytes) -> int:
    (length,) = HEADER.unpack(header)
    if length > MAX_MESSAGE_BYTES:
        raise FramingError(f"message of {length} bytes exceeds {MAX_MESSAGE_BYTES}")
    return length


def decode_body(body: bytes, loads: Callable[[bytes], Any] = json.loads) -> Any:
    try:
        return loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than the limit
        raise ProtocolError(f"message is not JSON: {exc}") from exc


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def recv_message(sock: socket.socket) -> Any | None:
    """Blocking read of one message; None when the peer closed the connection cleanly."""
    header = _recv_exactly(sock, HEADER.size)
    if header is None:
        return None
    body = _recv_exactly(sock, decode_length(header))
    if body is None:
        raise FramingError("connection closed in the middle of a message")
    return decode_body(body)


def send_message(sock: socket.socket, message: Any) -> None:
    sock.sendall(encode(message))


def ok(result: Any) -> dict:
    return {"ok": True, "result": result}


def error(kind: str, message: str) -> dict:
    return {"ok": False, "error": {"type": kind, "message": message}}


def serve_connection(sock: socket.socket, dispatch: Callable[[Any], dict[str, Any]],
                     after_reply: Callable[[], None] | None = None) -> None:
    """Answer each request on ``sock`` with ``dispatch(request)`` until the peer leaves, running
    ``after_reply`` once each answer is sent (work its sender need not wait for). No request,
    however malformed, ends more than its own connection."""
    while True:
        try:
            request = recv_message(sock)
        except FramingError as exc:
            _send_reply(sock, error("BadRequest", str(exc)))
            return  # the stream cannot be resynchronised
        except ProtocolError as exc:
            reply = error("BadRequest", str(exc))
        except OSError:
            return
        else:
            if request is None:
                return
            reply = dispatch(request)
        if not _send_reply(sock, reply):
            return
        if after_reply is not None:
            after_reply()


def _send_reply(sock: socket.socket, reply: dict[str, Any]) -> bool:
    """Send ``reply`` (or why it cannot be sent); False when the peer is gone."""
    try:
        data = encode(reply)
    except ProtocolError as exc:
        data = encode(error("ResultTooLarge", str(exc)))
    except (TypeError, ValueError) as exc:  # a value that is not JSON: a runtime bug
        data = encode(error("RuntimeError", f"reply is not JSON: {exc}"))
    try:
        sock.sendall(data)
    except OSError:
        return False
    return True


class ListeningServer(socketserver.UnixStreamServer):
    """A server on a Unix socket that is bound and listening already (by the keeper, which
    outlives every runtime it starts, or by ``__main__``), answering each request with its
    ``dispatch``."""

    def __init__(self, listening: socket.socket, secret: bytes | None) -> None:
        super().__init__(listening.getsockname(), _Connection, bind_and_activate=False)
        self.socket.close()
        self.socket = listening
        self.answer = with_hello(secret, self.dispatch)

    def dispatch(self, request: Any) -> dict[str, Any]:
        raise NotImplementedError

    def after_reply(self) -> None:
        """Work left for after an answer is sent; none by default."""


class _Connection(socketserver.BaseRequestHandler):
    server: ListeningServer

    def handle(self) -> None:
        serve_connection(self.request, self.server.answer, self.server.after_reply)
