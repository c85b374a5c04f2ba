"""A gateway's connection to one sandbox host: authenticated once, then shared by every request
to that host, each with an id, so a request whose caller gives up (a deadline) costs nothing to
the others: its reply is dropped when it comes."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any

from envscaler.sandbox.config import ClusterAuth
from envscaler.sandbox.hosts import wire
from envscaler.sandbox.hosts.faults import from_wire
from envscaler.sandbox.runtime import protocol

log = logging.getLogger("envscaler.sandbox.hosts")

CONNECT_TIMEOUT = 3.0


class HostUnreachable(ConnectionError):
    """The host does not answer, or the connection to it broke with requests in flight."""


@dataclass
class _Link:
    """One TCP connection and the requests sent on it: when it breaks, those fail, and only
    those (a request that already reconnected is on the next link)."""

    channel: wire.Channel
    pending: dict[int, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    reader_task: asyncio.Task[None] | None = None


class HostConnection:
    """Requests to one host over one TCP connection, reconnected on the next request after a
    failure."""

    def __init__(self, host_id: str, address: str, auth: ClusterAuth) -> None:
        self.host_id = host_id
        self.address = address
        self.auth = auth
        self._ids = itertools.count(1)
        self._link: _Link | None = None
        self._connecting = asyncio.Lock()
        self._sending = asyncio.Lock()

    async def request(self, op: str, **fields: Any) -> Any:
        """The result of ``op`` on the host; the host's error as the sandbox layer's exception;
        ``HostUnreachable`` when the host cannot be reached or the connection broke."""
        link = await self._connected()
        request_id = next(self._ids)
        reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        link.pending[request_id] = reply
        try:
            async with self._sending:
                await link.channel.send({"id": request_id, "op": op, **fields})
            message = await reply
        except OSError as exc:
            self._broken(link, exc)
            raise HostUnreachable(f"host {self.host_id} at {self.address}: {exc!r}") from exc
        finally:
            link.pending.pop(request_id, None)
        if message.get("ok"):
            return message.get("result")
        raise from_wire(message.get("error"))

    async def _connected(self) -> _Link:
        async with self._connecting:
            if self._link is not None:
                return self._link
            host, port = wire.split_address(self.address)
            tls = self.auth.client_tls()
            writer: asyncio.StreamWriter | None = None
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    reader, writer = await asyncio.open_connection(
                        host, port, ssl=tls, server_hostname=host if tls else None,
                        limit=wire.MAX_FRAME_BYTES)
                    channel = await wire.authenticate_host(
                        reader, writer, self.auth.secret,
                        wire.HostIdentity(self.host_id, self.address))
            except (OSError, TimeoutError, asyncio.IncompleteReadError,
                    protocol.ProtocolError, wire.HostAuthFailed) as exc:
                if writer is not None:
                    writer.close()
                raise HostUnreachable(f"cannot reach host {self.host_id} at {self.address}: "
                                      f"{exc!r}") from exc
            link = self._link = _Link(channel)
            link.reader_task = asyncio.create_task(self._read(link),
                                                   name=f"envscaler-host-{self.host_id}")
            return link

    async def _read(self, link: _Link) -> None:
        try:
            while True:
                message = await link.channel.receive()
                waiter = link.pending.get(message.get("id"))  # type: ignore[arg-type]
                if waiter is not None and not waiter.done():
                    waiter.set_result(message)
        except (OSError, asyncio.IncompleteReadError, protocol.ProtocolError) as exc:
            self._broken(link, exc)

    def _broken(self, link: _Link, exc: BaseException) -> None:
        """Fail every request in flight on ``link`` and close it; the next request reconnects.
        A link already replaced is only closed: the connection now in use stays untouched."""
        if self._link is link:
            self._link = None
        link.channel.close()
        for waiter in link.pending.values():
            if not waiter.done():
                waiter.set_exception(ConnectionResetError(f"connection lost: {exc!r}"))

    async def close(self) -> None:
        link = self._link
        if link is None:
            return
        self._broken(link, ConnectionAbortedError("closed"))
        if link.reader_task is not None:
            link.reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await link.reader_task
