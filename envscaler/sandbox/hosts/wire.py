"""The TCP protocol between gateways and sandbox hosts: the runtime's frames (a 4-byte length,
then JSON), a request id on every message so that one connection carries many requests at once,
a mutual HMAC challenge-response on connect, and every frame after it sealed.

The handshake: each side sends a fresh nonce and an ephemeral X25519 key; the host proves first
that it holds the cluster secret (the gateway sends nothing before), then the gateway. Both
proofs are an HMAC-SHA256 under the secret over the whole transcript: the nonces, the two keys,
and the host's id and address, as the host publishes them and as the gateway dialled them. A
relay in front of a host (a registry entry pointed elsewhere) therefore cannot pass the real
host's proof on: the gateway dialled another address. The secret never crosses the wire.

Every frame after the handshake is sealed with AES-256-GCM under a key of its direction, derived
from the secret, the transcript and the X25519 shared secret, with the frame's sequence number
as nonce: someone on the path reads nothing, and a frame altered, dropped, replayed or reordered
fails to open and ends the connection. Why this rather than requiring TLS for the remote
backend: it needs nothing but the secret the cluster already shares (no certificates to issue,
rotate and ship to every node, which `serve --ray` could not do), so every deployment gets it;
the ephemeral keys give forward secrecy (a secret stolen later does not open recorded traffic).
TLS (``envscaler.sandbox.config.ClusterAuth``) remains available on top, where policy asks for it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from envscaler.common import jsoncodec
from envscaler.sandbox.runtime import protocol

HANDSHAKE_BYTES = 4096  # frames before authentication: nothing larger is read from a stranger
HANDSHAKE_TIMEOUT = 5.0
MAX_FRAME_BYTES = protocol.MAX_MESSAGE_BYTES + 65536  # a runtime reply plus the host's envelope
VERSION = "envscaler-host-v2"


class HostAuthFailed(Exception):
    """The peer could not prove that it holds the cluster secret."""


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) as a pair; ``ValueError`` otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"not an address HOST:PORT: {address!r}")
    return host.strip("[]"), int(port)


async def send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    """Write one message in the clear (the handshake's)."""
    await _write(writer, jsoncodec.dump_bytes(message))


async def receive(reader: asyncio.StreamReader, max_bytes: int = MAX_FRAME_BYTES
                  ) -> dict[str, Any]:
    """One message in the clear (the handshake's); ``protocol.ProtocolError`` for a frame too
    long or not an object."""
    return _message(await _read(reader, max_bytes))


async def _write(writer: asyncio.StreamWriter, body: bytes) -> None:
    """Write one frame; ``ConnectionResetError`` when the connection is already closed (e.g.
    by a failure another request saw: writing to it would raise uvloop's RuntimeError)."""
    if writer.is_closing():
        raise ConnectionResetError("the connection is closed")
    if len(body) > MAX_FRAME_BYTES:
        raise protocol.ProtocolError(f"a frame of {len(body)} bytes; the limit is "
                                     f"{MAX_FRAME_BYTES}")
    writer.write(protocol.HEADER.pack(len(body)) + body)
    await writer.drain()


async def _read(reader: asyncio.StreamReader, max_bytes: int) -> bytes:
    length = protocol.decode_length(await reader.readexactly(protocol.HEADER.size))
    if length > max_bytes:
        raise protocol.ProtocolError(f"a frame of {length} bytes; the limit is {max_bytes}")
    return await reader.readexactly(length)


def _message(body: bytes) -> dict[str, Any]:
    message = protocol.decode_body(body, jsoncodec.loads)
    if not isinstance(message, dict):
        raise protocol.ProtocolError("a message is an object")
    return message


@dataclass(frozen=True)
class HostIdentity:
    """Who the gateway means to reach, bound into both proofs: the host's id and its address
    (the host's own ``advertise``; the address the gateway dialled)."""

    id: str
    address: str


class _Sealer:
    """One direction of a connection: AES-GCM under its key, the nonce its frame count."""

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)
        self._count = 0

    def _nonce(self) -> bytes:
        nonce = self._count.to_bytes(12, "big")
        self._count += 1
        return nonce

    def seal(self, plain: bytes) -> bytes:
        return self._aead.encrypt(self._nonce(), plain, None)

    def open(self, sealed: bytes) -> bytes:
        """The plain text; ``ProtocolError`` for a frame altered, replayed or out of order."""
        try:
            return self._aead.decrypt(self._nonce(), sealed, None)
        except InvalidTag:
            raise protocol.ProtocolError("a frame failed its integrity check (altered, "
                                         "replayed or out of order)") from None


@dataclass
class Channel:
    """An authenticated connection: messages sealed both ways. ``send`` seals and writes without
    yielding in between, so frames leave in their sequence order whatever the callers."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    outgoing: _Sealer = field(repr=False)
    incoming: _Sealer = field(repr=False)

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message; ``ConnectionResetError`` when the connection is already closed."""
        await _write(self.writer, self.outgoing.seal(jsoncodec.dump_bytes(message)))

    async def receive(self) -> dict[str, Any]:
        """One message; ``protocol.ProtocolError`` for a frame too long, one that fails to open,
        or one that is not an object."""
        return _message(self.incoming.open(await _read(self.reader, MAX_FRAME_BYTES)))

    def close(self) -> None:
        self.writer.close()


@dataclass(frozen=True)
class _Transcript:
    """Everything both proofs and the keys are bound to."""

    host: HostIdentity
    client_nonce: str
    host_nonce: str
    client_key: str
    host_key: str

    def text(self, purpose: str) -> bytes:
        return "\n".join((VERSION, purpose, self.host.id, self.host.address, self.client_nonce,
                          self.host_nonce, self.client_key, self.host_key)).encode()

    def proof(self, secret: bytes, role: str) -> str:
        return hmac.new(secret, self.text(f"proof:{role}"), hashlib.sha256).hexdigest()

    def keys(self, secret: bytes, shared: bytes) -> tuple[bytes, bytes]:
        """The gateway-to-host and host-to-gateway keys (HKDF's expand step, by hand)."""
        root = hmac.new(secret, shared + self.text("keys"), hashlib.sha256).digest()
        return (hmac.new(root, b"gateway->host", hashlib.sha256).digest(),
                hmac.new(root, b"host->gateway", hashlib.sha256).digest())


def _ephemeral() -> tuple[X25519PrivateKey, str]:
    key = X25519PrivateKey.generate()
    return key, key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def _shared(own: X25519PrivateKey, peer_hex: object) -> bytes:
    """The X25519 shared secret; ``HostAuthFailed`` for a key that is not one."""
    try:
        if not isinstance(peer_hex, str):
            raise ValueError("no key")
        return own.exchange(X25519PublicKey.from_public_bytes(bytes.fromhex(peer_hex)))
    except ValueError as exc:
        raise HostAuthFailed(f"the peer sent no usable key: {exc}") from None


def _nonce(value: object) -> str:
    if not (isinstance(value, str) and 16 <= len(value) <= 64):
        raise HostAuthFailed("the peer sent no usable nonce")
    return value


def _proved(message: dict[str, Any], expected: str) -> bool:
    proof = message.get("proof")
    return isinstance(proof, str) and hmac.compare_digest(proof, expected)


async def authenticate_host(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            secret: bytes, host: HostIdentity) -> Channel:
    """The gateway's side, having dialled ``host.address`` to reach ``host.id``: the host proves
    the secret first, then the gateway does; the sealed channel."""
    client_nonce = secrets.token_hex(16)
    own, client_key = _ephemeral()
    async with asyncio.timeout(HANDSHAKE_TIMEOUT):
        await send(writer, {"op": "hello", "version": VERSION, "nonce": client_nonce,
                            "key": client_key})
        reply = await receive(reader, HANDSHAKE_BYTES)
        transcript = _Transcript(host, client_nonce, _nonce(reply.get("nonce")), client_key,
                                 str(reply.get("key")))
        if not _proved(reply, transcript.proof(secret, "host")):
            raise HostAuthFailed(f"the peer at {host.address} cannot prove it is host {host.id} "
                                 "holding the cluster secret")
        shared = _shared(own, reply.get("key"))
        await send(writer, {"proof": transcript.proof(secret, "gateway")})
        if (await receive(reader, HANDSHAKE_BYTES)).get("ok") is not True:
            raise HostAuthFailed("the host refused this gateway's proof of the cluster secret")
    outgoing, incoming = transcript.keys(secret, shared)
    return Channel(reader, writer, _Sealer(outgoing), _Sealer(incoming))


async def authenticate_gateway(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                               secret: bytes, host: HostIdentity) -> Channel:
    """The host's side (``host``: itself): answer the gateway's challenge, then check its
    proof; the sealed channel. The caller bounds its time (``HANDSHAKE_TIMEOUT``)."""
    hello = await receive(reader, HANDSHAKE_BYTES)
    if hello.get("op") != "hello" or hello.get("version") != VERSION:
        raise HostAuthFailed(f"the peer did not open with a hello of {VERSION}")
    own, host_key = _ephemeral()
    transcript = _Transcript(host, _nonce(hello.get("nonce")), secrets.token_hex(16),
                             str(hello.get("key")), host_key)
    shared = _shared(own, hello.get("key"))
    await send(writer, {"nonce": transcript.host_nonce, "key": host_key,
                        "proof": transcript.proof(secret, "host")})
    if not _proved(await receive(reader, HANDSHAKE_BYTES), transcript.proof(secret, "gateway")):
        raise HostAuthFailed("the peer cannot prove the cluster secret")
    await send(writer, {"ok": True})
    incoming, outgoing = transcript.keys(secret, shared)
    return Channel(reader, writer, _Sealer(outgoing), _Sealer(incoming))
