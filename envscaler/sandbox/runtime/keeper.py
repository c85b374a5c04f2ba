"""The keeper: the first process of a sandbox container. It starts one runtime per slot and
restarts each in place, so that a container is paid for once and serves many sessions, several at
a time.

It binds every socket before any environment code exists and never runs environment code. Slot
``i`` serves ``protocol.runtime_socket_name(i)`` and runs as its own user
(``contain.slot_uid``), with its own process limit; its runtime refuses connections from the users
of its siblings (``RuntimeServer``), and holds no socket but its own. On ``recycle`` the keeper
kills every process of the slot's user, wipes what that user left in ``/tmp``, and forks a fresh
runtime from itself (a warm interpreter that imported the runtime but never ran an environment),
which serves the same listening socket: nothing of the previous session (files, module globals,
class attributes, threads, child processes) is reachable from the next. A runtime that dies on
its own ends only its slot: the keeper answers its connections by closing them, so the gateway
learns at once, and says why (``status``); ``retire`` ends a slot for good, and when no slot is
left the gateway removes the container.

The keeper runs as root with only the capabilities to change user and to kill; the runtimes it
forks drop to their slot's user before they run anything (``contain.drop_privileges``), so
environment code can neither signal, trace nor impersonate the keeper, nor change its sockets.
All answer ``hello`` with the sandbox's secret (``protocol.prove``), which ``__main__`` read from a
file it removed before the first runtime existed: a runtime's code could find at most its own
sandbox's secret in its memory, which proves only what it is, on the socket it already serves.
A recycle that fails for any reason makes the gateway retire the slot instead.
"""

from __future__ import annotations

import gc
import marshal
import os
import selectors
import signal
import socket
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from envscaler.sandbox.runtime import contain, determinism, protocol
from envscaler.sandbox.runtime import envhost as env_host
from envscaler.sandbox.runtime.envhost import EnvHost
from envscaler.sandbox.runtime.protocol import Field, OperationError, describe_exception, parse_request
from envscaler.sandbox.runtime.server import RuntimeServer

SCRATCH = Path("/tmp")
CONTROL_TIMEOUT = 1.0  # a control connection idle this long is dropped (the keeper is serial)
WATCH_INTERVAL = 0.25  # seconds between looks at the runtimes' memory
IDLE_POLL = 3600.0  # seconds an idle runtime sleeps between its server's shutdown checks
_SLOT = Field((int,), False)  # 0 when absent: a container of one slot
FIELDS: dict[str, dict[str, Field]] = {
    "ping": {},
    "recycle": {"generation": Field((int,), True), "slot": _SLOT},
    "status": {"slot": _SLOT},
    "retire": {"generation": Field((int,), True), "slot": _SLOT},
}


def serve_runtime(listening: socket.socket, secret: bytes | None,
                  refused_uids: range = range(0)) -> NoReturn:
    """Become a runtime serving ``listening`` until killed."""
    host = EnvHost(determinism.install())  # after the imports bound the real clocks
    # Never shut down (it is killed): no wake-up twice a second to look for a shutdown, which
    # 512 idle runtimes pay a thousand times a second.
    RuntimeServer(listening, host, secret, refused_uids).serve_forever(poll_interval=IDLE_POLL)
    raise SystemExit(0)


@dataclass
class Slot:
    index: int
    uid: int
    listening: socket.socket
    pid: int = 0  # its runtime's; 0 while it has none
    generation: int = 0
    ended: str = ""  # why its last runtime ended, if it did on its own
    retired: bool = False
    over_memory: bool = False  # its runtime was killed for holding more than its share


class Keeper:
    def __init__(self, sockets: list[socket.socket], control: socket.socket,
                 secret: bytes | None, uid_base: int = contain.UNTRUSTED_UID,
                 processes: int | None = None, memory: int | None = None,
                 sources: list[str] | None = None, compiled_file: Path | None = None) -> None:
        """``memory``: the bytes a slot's runtime may hold; one holding more is killed, as the
        kernel would kill a container of one session at its limit (the container's own limit,
        all slots' together, stays the backstop). ``sources``: environment code compiled once,
        before the first runtime exists, so that every runtime finds it compiled (or read from
        ``compiled_file``, as another keeper compiled them)."""
        self.slots = [Slot(index, contain.slot_uid(uid_base, index), listening)
                      for index, listening in enumerate(sockets)]
        self.uids = range(contain.slot_uid(uid_base, 0), contain.slot_uid(uid_base, len(sockets)))
        self.control = control
        self.secret = secret
        self.processes = processes
        self.memory = memory
        self.sources = sources or []
        self.compiled_file = compiled_file
        self._answer = protocol.with_hello(secret, self.dispatch)
        self._wake_read, self._wake_write = os.pipe()
        self._selector = selectors.DefaultSelector()
        self._oom_kills = contain.oom_kills()

    def run(self) -> NoReturn:
        env_host.COMPILED.update(compiled_code(self.sources, self.compiled_file))
        self.sources = []
        for fd in (self._wake_read, self._wake_write):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self._wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the loop
        gc.freeze()  # what every runtime inherits stays shared: no collection touches it
        for slot in self.slots:
            slot.pid = self._spawn(slot)
        self._selector.register(self.control, selectors.EVENT_READ)
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        while True:
            events = self._selector.select(WATCH_INTERVAL if self.memory else None)
            self._watch_memory()
            for key, _ in events:
                if key.fileobj is self.control:
                    self._serve_one()
                elif isinstance(key.data, Slot):
                    _refuse_one(key.data.listening)
                else:
                    self._drain_wakeups()
                    self._reap_runtimes()

    def _spawn(self, slot: Slot) -> int:
        pid = os.fork()
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for fd in (self._wake_read, self._wake_write, self.control.fileno(),
                           self._selector.fileno(), *(other.listening.fileno() for other in self.slots if other is not slot)):
                    os.close(fd)
                os.umask(0o077)  # what a slot writes in the shared /tmp is its own
                contain.drop_privileges(slot.uid, self.processes)
                serve_runtime(slot.listening, self.secret, self.uids)
            finally:
                os._exit(1)
        return pid

    def _serve_one(self) -> None:
        """Answer one control connection: the gateway's, never a slot's (a slot's code would
        recycle or retire its siblings)."""
        try:
            connection, _ = self.control.accept()
        except OSError:
            return
        with connection:
            if protocol.peer_uid(connection) in self.uids:
                return
            connection.settimeout(CONTROL_TIMEOUT)
            protocol.serve_connection(connection, self._answer)

    def dispatch(self, request: Any) -> dict[str, Any]:
        try:
            op, fields = parse_request(request, FIELDS)
            if op == "ping":
                return protocol.ok({"pid": os.getpid(), "slots": len(self.slots),
                                    "live": self._live()})
            slot = self._slot(fields.get("slot", 0))
            if op == "recycle":
                self._current(slot, fields["generation"])
                self.recycle(slot)
            elif op == "retire":
                self._current(slot, fields["generation"])
                self.retire(slot)
            return protocol.ok({"pid": os.getpid(), "runtime_pid": slot.pid,
                                "generation": slot.generation, "ended": slot.ended,
                                "live": self._live()})
        except OperationError as exc:
            return protocol.error(exc.kind, exc.message)
        except Exception as exc:  # noqa: BLE001 - e.g. fork failed: say so; the gateway gives up
            return protocol.error("RuntimeError", describe_exception(exc))

    def _slot(self, index: int) -> Slot:
        if not 0 <= index < len(self.slots):
            raise OperationError("BadRequest", f"slot {index} does not exist; this container has "
                                 f"slots 0 to {len(self.slots) - 1}")
        slot = self.slots[index]
        if slot.retired:
            raise OperationError("Stale", f"slot {index} was retired")
        return slot

    @staticmethod
    def _current(slot: Slot, generation: int) -> None:
        """Refuse a generation the slot has left behind: the caller's session ended long ago and
        the slot serves another (``Stale``)."""
        if generation != slot.generation:
            raise OperationError("Stale", f"generation {generation} of slot {slot.index} was "
                                 f"recycled already; this is generation {slot.generation}")

    def _live(self) -> int:
        return sum(not slot.retired for slot in self.slots)

    def _end(self, slot: Slot) -> None:
        """Kill the slot's runtime and all it started, and wipe what its user left."""
        contain.kill_user(slot.uid)
        self._reap_runtimes()
        contain.wipe(SCRATCH, slot.uid)

    def recycle(self, slot: Slot) -> None:
        """Kill the slot's runtime and all it started, wipe its scratch, start a fresh runtime."""
        self._end(slot)
        self._stop_refusing(slot)
        slot.generation += 1
        slot.ended = ""
        slot.pid = self._spawn(slot)

    def retire(self, slot: Slot) -> None:
        """End the slot for good: its socket refuses from now on."""
        self._end(slot)
        slot.retired = True
        slot.generation += 1
        self._refuse(slot)

    def _refuse(self, slot: Slot) -> None:
        if slot.listening.fileno() not in self._selector.get_map():
            self._selector.register(slot.listening, selectors.EVENT_READ, slot)

    def _stop_refusing(self, slot: Slot) -> None:
        if slot.listening.fileno() in self._selector.get_map():
            self._selector.unregister(slot.listening)

    def _watch_memory(self) -> None:
        """Kill each slot's runtime that holds more than its share of memory (its siblings would
        pay for it otherwise); it is reaped, and reported, like any runtime that died."""
        if not self.memory:
            return
        for slot in self.slots:
            if slot.pid and contain.resident_bytes(slot.pid) > self.memory:
                slot.over_memory = True
                contain.kill_user(slot.uid)
        self._reap_runtimes()

    def _drain_wakeups(self) -> None:
        try:
            while os.read(self._wake_read, 512):
                pass
        except BlockingIOError:
            pass

    def _reap_runtimes(self) -> None:
        """Note each slot whose runtime ended, and why; its socket refuses until it is recycled,
        so the gateway learns at once rather than at its deadline."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            slot = next((slot for slot in self.slots if slot.pid == pid), None)
            if slot is not None:
                slot.pid = 0
                slot.ended = self._why(status, slot.over_memory)
                slot.over_memory = False
                self._refuse(slot)

    def _why(self, status: int, over_memory: bool) -> str:
        kills, self._oom_kills = self._oom_kills, contain.oom_kills()
        if os.WIFSIGNALED(status):
            signum = os.WTERMSIG(status)
            oom_killed = kills is not None and self._oom_kills is not None \
                and self._oom_kills > kills
            if signum == signal.SIGKILL and (over_memory or oom_killed):
                return "killed: out of memory"
            return f"runtime killed by signal {signum} ({signal.Signals(signum).name})"
        return f"runtime exited with status {os.WEXITSTATUS(status)}"


def compiled_code(sources: list[str], path: Path | None) -> dict[str, types.CodeType]:
    """The catalogue's code by source digest: as the keeper of an earlier container of this
    image compiled it (``path``, given by the gateway: a 16-slot container no longer spends a
    fifth of a second compiling every environment), else compiled here and left at ``path`` for
    the gateway to hand on. Either way before any runtime, so before any untrusted code, runs
    in this container."""
    if path is not None and path.exists():
        data, where = path.read_bytes(), "by an earlier sandbox"
        path.unlink()
    else:
        data, where = precompile(sources), "here"
        if path is not None and data:
            staged = path.with_name(path.name + ".part")
            staged.write_bytes(data)
            staged.chmod(0o444)
            staged.rename(path)
    try:
        code = dict(marshal.loads(data)) if data else {}
    except (EOFError, ValueError, TypeError):
        code = {}  # each runtime compiles what it loads
    print(f"envscaler keeper: {len(code)} environments compiled {where}", file=sys.stderr,
          flush=True)
    return code


def precompile(sources: list[str]) -> bytes:
    """``sources`` compiled, by their digest (a marshalled list of pairs), in a child that drops
    to the untrusted user first: compiling runs none of the code, but the compiler is not the
    keeper's to risk on untrusted input. What does not compile is left out (its load reports
    why); nothing, if the child fails."""
    if not sources:
        return b""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.close(read_fd)
            contain.drop_privileges()
            compiled = []
            for source in sources:
                try:
                    compiled.append((env_host.source_digest(source),
                                     env_host.compile_source(source)))
                except Exception:  # noqa: BLE001, S112 - its load will say why
                    continue
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(marshal.dumps(compiled))
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    return data if status == 0 else b""


def _refuse_one(listening: socket.socket) -> None:
    """Accept a connection to a slot with no runtime and close it: the peer reads EOF now."""
    try:
        connection, _ = listening.accept()
    except OSError:
        return
    connection.close()
