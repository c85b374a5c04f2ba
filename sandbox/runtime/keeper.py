"""The keeper: the first process of a sandbox container. It starts the runtime and restarts it in
place, so that a container is paid for once and serves many sessions.

It binds both sockets before any environment code exists and never runs environment code. On
``recycle`` it kills every other process of the container, wipes ``/tmp``, and forks a fresh
runtime from itself (a warm interpreter that imported the runtime but never ran an environment),
which serves the same listening socket: nothing of the previous session (files, module globals,
class attributes, threads, child processes, socket modes) is reachable from the next. A runtime
that dies on its own takes the keeper with it (same exit status), so the container stops and the
gateway learns why, as when the runtime was the container's only process.

The keeper runs as root with only the capabilities to change user and to kill; the runtime it
forks drops to the untrusted user before it runs anything (``contain.drop_privileges``), so
environment code can neither signal, trace nor impersonate the keeper, nor change its sockets.
Both answer ``hello`` with the sandbox's secret (``protocol.prove``), which ``__main__`` read from a
file it removed before the first runtime existed: a runtime's code could find at most its own
sandbox's secret in its memory, which proves only what it is, on the socket it already serves.
A recycle that fails for any reason makes the gateway remove the container instead.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
from pathlib import Path
from typing import Any, NoReturn

from sandbox.runtime import contain, determinism, protocol
from sandbox.runtime.host import EnvHost
from sandbox.runtime.protocol import Field, OperationError, describe_exception, parse_request
from sandbox.runtime.server import RuntimeServer

SCRATCH = Path("/tmp")
CONTROL_TIMEOUT = 1.0  # a control connection idle this long is dropped (the keeper is serial)
FIELDS: dict[str, dict[str, Field]] = {"ping": {}, "recycle": {"generation": Field((int,), True)}}


def serve_runtime(listening: socket.socket, secret: bytes | None) -> NoReturn:
    """Become a runtime serving ``listening`` until killed."""
    host = EnvHost(determinism.install())  # after the imports bound the real clocks
    RuntimeServer(listening, host, secret).serve_forever()
    raise SystemExit(0)


class Keeper:
    def __init__(self, runtime: socket.socket, control: socket.socket,
                 secret: bytes | None) -> None:
        self.runtime = runtime
        self.control = control
        self.secret = secret
        self._answer = protocol.with_hello(secret, self.dispatch)
        self.generation = 0
        self._wake_read, self._wake_write = os.pipe()
        self.runtime_pid = 0

    def run(self) -> NoReturn:
        for fd in (self._wake_read, self._wake_write):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self._wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the loop
        self.runtime_pid = self._spawn()
        with selectors.DefaultSelector() as selector:
            selector.register(self.control, selectors.EVENT_READ)
            selector.register(self._wake_read, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    if key.fileobj is self.control:
                        self._serve_one()
                    else:
                        self._drain_wakeups()
                        self._exit_if_runtime_died()

    def _spawn(self) -> int:
        pid = os.fork()
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for fd in (self._wake_read, self._wake_write, self.control.fileno()):
                    os.close(fd)
                contain.drop_privileges()
                serve_runtime(self.runtime, self.secret)
            finally:
                os._exit(1)
        return pid

    def _serve_one(self) -> None:
        try:
            connection, _ = self.control.accept()
        except OSError:
            return
        with connection:
            connection.settimeout(CONTROL_TIMEOUT)
            protocol.serve_connection(connection, self._answer)

    def dispatch(self, request: Any) -> dict[str, Any]:
        try:
            op, fields = parse_request(request, FIELDS)
            if op == "recycle":
                self.recycle(fields["generation"])
            return protocol.ok({"pid": os.getpid(), "runtime_pid": self.runtime_pid,
                                "generation": self.generation})
        except OperationError as exc:
            return protocol.error(exc.kind, exc.message)
        except Exception as exc:  # noqa: BLE001 - e.g. fork failed: say so; the gateway gives up
            return protocol.error("RuntimeError", describe_exception(exc))

    def recycle(self, generation: int) -> None:
        """Kill the runtime and all it started, wipe the scratch space, start a fresh runtime;
        only if ``generation`` is the current one (else the caller's session ended long ago and
        this runtime serves another: ``Stale``)."""
        if generation != self.generation:
            raise OperationError("Stale", f"generation {generation} was recycled already; this "
                                 f"is generation {self.generation}")
        contain.kill_all_others()
        contain.wipe(SCRATCH)
        self.generation += 1
        self.runtime_pid = self._spawn()

    def _drain_wakeups(self) -> None:
        try:
            while os.read(self._wake_read, 512):
                pass
        except BlockingIOError:
            pass

    def _exit_if_runtime_died(self) -> None:
        pid, status = os.waitpid(self.runtime_pid, os.WNOHANG)
        if pid == 0:
            return
        contain.kill_all_others()
        if os.WIFSIGNALED(status):
            os._exit(128 + os.WTERMSIG(status))
        os._exit(os.WEXITSTATUS(status))
