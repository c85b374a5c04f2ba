"""A gateway's connection to one sandbox host: authenticated once, then shared by every request
to that host, each with an id, so a request whose caller gives up (a deadline) costs nothing to
the others: its reply is dropped when it comes."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from typing import Any

from sandbox.config import ClusterAuth
from sandbox.remote import wire
from sandbox.remote.faults import from_wire
from sandbox.runtime import protocol

log = logging.getLogger("envscaler.sandbox.remote")

CONNECT_TIMEOUT = 3.0


class HostUnreachable(ConnectionError):
    """The host does not answer, or the connection to it broke with requests in flight."""


class HostConnection:
    """Requests to one host over one TCP connection, reconnected on the next request after a
    failure."""

    def __init__(self, host_id: str, address: str, auth: ClusterAuth) -> None:
        self.host_id = host_id
        self.address = address
        self.auth = auth
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._connecting = asyncio.Lock()
        self._sending = asyncio.Lock()

    async def request(self, op: str, **fields: Any) -> Any:
        """The result of ``op`` on the host; the host's error as the sandbox layer's exception;
        ``HostUnreachable`` when the host cannot be reached or the connection broke."""
        writer = await self._connected()
        request_id = next(self._ids)
        reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = reply
        try:
            async with self._sending:
                await wire.send(writer, {"id": request_id, "op": op, **fields})
            message = await reply
        except OSError as exc:
            self._broken(exc)
            raise HostUnreachable(f"host {self.host_id} at {self.address}: {exc!r}") from exc
        finally:
            self._pending.pop(request_id, None)
        if message.get("ok"):
            return message.get("result")
        raise from_wire(message.get("error"))

    async def _connected(self) -> asyncio.StreamWriter:
        async with self._connecting:
            if self._writer is not None:
                return self._writer
            host, port = wire.split_address(self.address)
            tls = self.auth.client_tls()
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    reader, writer = await asyncio.open_connection(
                        host, port, ssl=tls, server_hostname=host if tls else None,
                        limit=wire.MAX_FRAME_BYTES)
                    await wire.authenticate_host(reader, writer, self.auth.secret)
            except (OSError, TimeoutError, asyncio.IncompleteReadError,
                    protocol.ProtocolError, wire.HostAuthFailed) as exc:
                raise HostUnreachable(f"cannot reach host {self.host_id} at {self.address}: "
                                      f"{exc!r}") from exc
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read(reader),
                                                    name=f"envscaler-host-{self.host_id}")
            return writer

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                message = await wire.receive(reader)
                waiter = self._pending.get(message.get("id"))  # type: ignore[arg-type]
                if waiter is not None and not waiter.done():
                    waiter.set_result(message)
        except (OSError, asyncio.IncompleteReadError, protocol.ProtocolError) as exc:
            self._broken(exc)

    def _broken(self, exc: BaseException) -> None:
        """Fail every request in flight and drop the connection (the next request reconnects)."""
        if self._writer is not None:
            self._writer.close()
        self._writer = None
        for waiter in self._pending.values():
            if not waiter.done():
                waiter.set_exception(ConnectionResetError(f"connection lost: {exc!r}"))

    async def close(self) -> None:
        task, self._reader_task = self._reader_task, None
        self._broken(ConnectionAbortedError("closed"))
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
