"""Async client of the in-sandbox runtime: one persistent Unix-socket connection per sandbox."""

from __future__ import annotations

import asyncio
import hmac
import secrets
from collections.abc import Callable
from typing import Any

from envscaler.common import jsoncodec
from envscaler.sandbox.errors import RuntimeFault, SandboxCounterfeit, SandboxGone
from envscaler.sandbox.runtime import protocol


HELLO_REPLY_BYTES = 4096
MAX_POLL = 0.04  # seconds between the last attempts of `wait_for_runtime`


class ReplyTooLarge(Exception):
    """A reply longer than the caller allows."""


class RuntimeClient:
    """Sends one request at a time over a persistent connection; reconnects after a failure.

    A deadline is the caller's business (``asyncio.timeout``): a request cut off half-way
    leaves the connection unusable, so it is dropped and the next request reconnects.

    With a ``secret``, every new connection first asks the peer to prove it holds that secret
    (``hello``), and nothing else is sent to a peer that cannot: ``SandboxCounterfeit``.
    """

    def __init__(self, socket_path: str, secret: bytes | None) -> None:
        self.socket_path = socket_path
        self.secret = secret
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()

    async def request(self, message: dict[str, Any], max_reply_bytes: int | None = None) -> Any:
        """The reply's result, or ``RuntimeFault``. ``max_reply_bytes`` is enforced here, where
        the sandbox's code cannot patch it: a longer reply is refused unread (``ReplyTooLarge``)."""
        async with self._lock:
            try:
                reply = await self._exchange(message, max_reply_bytes)
            except SandboxCounterfeit:
                self.close()
                raise
            except (OSError, EOFError, asyncio.IncompleteReadError, protocol.ProtocolError) as exc:
                self.close()
                raise SandboxGone(f"sandbox runtime at {self.socket_path} stopped answering: "
                                  f"{exc!r}") from exc
            except ReplyTooLarge as exc:
                self.close()  # the rest of the reply is still on its way: drop the connection
                raise RuntimeFault("ResultTooLarge", str(exc)) from None
            except BaseException:
                self.close()
                raise
        if reply.get("ok"):
            return reply.get("result")
        error = reply.get("error") or {}
        raise RuntimeFault(str(error.get("type", "RuntimeError")), str(error.get("message", "")))

    async def _exchange(self, message: dict[str, Any],
                        max_reply_bytes: int | None) -> dict[str, Any]:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_unix_connection(
                self.socket_path, limit=protocol.MAX_MESSAGE_BYTES)
            if self.secret is not None:
                await self._hello(self.secret)
        return await self._send(message, max_reply_bytes)

    async def _hello(self, secret: bytes) -> None:
        """Have the peer prove that it holds the sandbox's secret before it sees anything."""
        nonce = secrets.token_hex(16)
        try:
            reply = await self._send({"op": "hello", "nonce": nonce}, HELLO_REPLY_BYTES)
        except (ReplyTooLarge, protocol.ProtocolError) as exc:
            raise SandboxCounterfeit(f"the peer on {self.socket_path} answered hello with "
                                     f"garbage: {exc}") from None
        result = reply.get("result") if reply.get("ok") else None
        proof = result.get("proof") if isinstance(result, dict) else None
        if not (isinstance(proof, str)
                and hmac.compare_digest(proof, protocol.prove(secret, nonce))):
            raise SandboxCounterfeit(f"the peer on {self.socket_path} is not the sandbox it "
                                     "should be (it cannot prove the sandbox's secret)")

    async def _send(self, message: dict[str, Any],
                    max_reply_bytes: int | None) -> dict[str, Any]:
        assert self._reader is not None and self._writer is not None
        self._writer.write(protocol.frame(jsoncodec.dump_bytes(message)))
        await self._writer.drain()
        header = await self._reader.readexactly(protocol.HEADER.size)
        length = protocol.decode_length(header)
        if max_reply_bytes is not None and length > max_reply_bytes:
            raise ReplyTooLarge(f"the sandbox answered {length} bytes; the limit is "
                                f"{max_reply_bytes} bytes")
        body = await self._reader.readexactly(length)
        reply = protocol.decode_body(body, jsoncodec.loads)
        if not isinstance(reply, dict):
            raise protocol.ProtocolError("reply is not an object")
        return reply

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


async def wait_for_runtime(socket_path: str, secret: bytes, timeout: float,
                           exited: Callable[[], str | None], poll: float = 0.005) -> None:
    """Return once the runtime at ``socket_path`` answers ``ping``.

    The socket file appears only once the sandbox's interpreter runs, so failed connections are
    retried, ``poll`` apart at first, twice as far apart each time up to ``MAX_POLL``: a burst
    of creations polled every 5 ms spent a sixth of the gateway's CPU connecting to sockets
    that did not exist yet. ``exited`` tells why the sandbox died while starting (None while
    it runs), to fail fast. Raises ``TimeoutError`` or ``SandboxGone``.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    client = RuntimeClient(socket_path, secret)
    try:
        while (remaining := deadline - loop.time()) > 0:
            if (reason := exited()) is not None:
                raise SandboxGone(f"sandbox runtime exited while starting: {reason}")
            try:
                await asyncio.wait_for(client.request({"op": "ping"}), remaining)
                return
            except (SandboxGone, TimeoutError):
                await asyncio.sleep(poll)
                poll = min(poll * 2, MAX_POLL)
    finally:
        client.close()
    raise TimeoutError(f"sandbox runtime did not answer ping within {timeout:g} s")
