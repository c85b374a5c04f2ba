"""The TCP protocol between gateways and sandbox hosts: the runtime's frames (a 4-byte length,
then JSON), a request id on every message so that one connection carries many requests at once,
and a mutual HMAC challenge-response on connect.

Why HMAC challenge-response under a shared cluster secret rather than a bearer secret: the
secret never crosses the wire (each side proves it holds it over two fresh nonces), so a peer
that listens, or one that poses as a host, learns nothing it could replay; and the gateway
checks the host's proof before it sends anything (an environment's source, a tool's
arguments). It needs no certificates. It does not protect what follows the handshake against
someone on the path, who could read or alter it: across networks that are not trusted, set a
certificate (TLS, ``sandbox.config.ClusterAuth``): the whole connection is then encrypted and
its integrity protected.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from typing import Any

from common import jsoncodec
from sandbox.runtime import protocol

HANDSHAKE_BYTES = 4096  # frames before authentication: nothing larger is read from a stranger
HANDSHAKE_TIMEOUT = 5.0
MAX_FRAME_BYTES = protocol.MAX_MESSAGE_BYTES + 65536  # a runtime reply plus the host's envelope


class HostAuthFailed(Exception):
    """The peer could not prove that it holds the cluster secret."""


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) as a pair; ``ValueError`` otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"not an address HOST:PORT: {address!r}")
    return host.strip("[]"), int(port)


async def send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    """Write one message; ``ConnectionResetError`` when the connection is already closed (e.g.
    by a failure another request saw: writing to it would raise uvloop's RuntimeError)."""
    if writer.is_closing():
        raise ConnectionResetError("the connection is closed")
    writer.write(protocol.frame(jsoncodec.dump_bytes(message)))
    await writer.drain()


async def receive(reader: asyncio.StreamReader, max_bytes: int = MAX_FRAME_BYTES
                  ) -> dict[str, Any]:
    """One message; ``protocol.ProtocolError`` for a frame too long or not an object."""
    length = protocol.decode_length(await reader.readexactly(protocol.HEADER.size))
    if length > max_bytes:
        raise protocol.ProtocolError(f"a frame of {length} bytes; the limit is {max_bytes}")
    message = protocol.decode_body(await reader.readexactly(length), jsoncodec.loads)
    if not isinstance(message, dict):
        raise protocol.ProtocolError("a message is an object")
    return message


def _proof(secret: bytes, role: str, client_nonce: str, host_nonce: str) -> str:
    text = f"envscaler-host-auth:{role}:{client_nonce}:{host_nonce}".encode()
    return hmac.new(secret, text, hashlib.sha256).hexdigest()


def _proved(message: dict[str, Any], expected: str) -> bool:
    proof = message.get("proof")
    return isinstance(proof, str) and hmac.compare_digest(proof, expected)


async def authenticate_host(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            secret: bytes) -> None:
    """The gateway's side: the host proves the secret first, then the gateway does."""
    client_nonce = secrets.token_hex(16)
    async with asyncio.timeout(HANDSHAKE_TIMEOUT):
        await send(writer, {"op": "hello", "nonce": client_nonce})
        reply = await receive(reader, HANDSHAKE_BYTES)
        host_nonce = reply.get("nonce")
        if not (isinstance(host_nonce, str)
                and _proved(reply, _proof(secret, "host", client_nonce, host_nonce))):
            raise HostAuthFailed("the host cannot prove the cluster secret")
        await send(writer, {"proof": _proof(secret, "gateway", client_nonce, host_nonce)})
        if (await receive(reader, HANDSHAKE_BYTES)).get("ok") is not True:
            raise HostAuthFailed("the host refused this gateway's proof of the cluster secret")


async def authenticate_gateway(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                               secret: bytes) -> None:
    """The host's side: answer the gateway's challenge, then check its proof."""
    host_nonce = secrets.token_hex(16)
    async with asyncio.timeout(HANDSHAKE_TIMEOUT):
        hello = await receive(reader, HANDSHAKE_BYTES)
        client_nonce = hello.get("nonce")
        if hello.get("op") != "hello" or not isinstance(client_nonce, str) or len(
                client_nonce) > 64:
            raise HostAuthFailed("the peer did not open with hello")
        await send(writer, {"nonce": host_nonce,
                            "proof": _proof(secret, "host", client_nonce, host_nonce)})
        if not _proved(await receive(reader, HANDSHAKE_BYTES),
                       _proof(secret, "gateway", client_nonce, host_nonce)):
            raise HostAuthFailed("the peer cannot prove the cluster secret")
        await send(writer, {"ok": True})
