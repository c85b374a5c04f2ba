"""Wire format between the gateway and the in-sandbox runtime (standard library only).

Every message is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON.
Requests are objects with an ``op`` field; replies are ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": {"type": ..., "message": ...}}``.

Operations (fields beyond ``op``):

- ``ping``                                   -> ``{"pid", "loaded", "executed"}`` (tool calls run
                                                since the last load or reset)
- ``load``  ``source, class_name, tools, init_config, seed``
            [, ``max_result_bytes``, ``clock_start`` (ISO 8601; default 2025-01-01T09:00:00Z)]
                                              -> ``{"tools": [...]}``
- ``reset`` [``init_config``, ``seed``]       -> ``{"tools": [...]}``
- ``call``  ``name, arguments`` [, ``executed``] -> the tool's JSON-safe result
- ``state`` [``executed``]                    -> the public attributes of the instance
- ``check`` ``checks`` [, ``timeout``, ``executed``] -> ``[{"passed": bool, "error": str | null}]``

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
- ``ResultTooLarge``: the encoded result exceeds ``max_result_bytes`` (or a reply the frame limit)
- ``RuntimeError``: a fault of the runtime itself
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable
from typing import Any

HEADER = struct.Struct(">I")
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class ProtocolError(Exception):
    """A peer sent bytes that are not a well-formed message."""


class FramingError(ProtocolError):
    """The byte stream lost its framing (bad length, cut-off body): the connection is unusable."""


def encode(message: Any) -> bytes:
    """Frame ``message``. Lone surrogates (valid JSON escapes such as ``"\\ud800"``) travel as
    ``surrogatepass`` bytes, which ``json.loads`` on bytes decodes back, instead of failing here."""
    return frame(dump_body(message))


def dump_body(message: Any) -> bytes:
    """A message's JSON as sent: compact UTF-8, no NaN, lone surrogates as ``surrogatepass``
    bytes."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8", "surrogatepass")


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
