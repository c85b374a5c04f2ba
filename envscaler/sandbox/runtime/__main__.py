"""``python3 -m envscaler.sandbox.runtime --socket PATH [--control PATH [--slots N --uid-base UID
--processes N --memory BYTES --sources-file PATH]] [--role runtime|checker] [--secret-file PATH | --secret-fd N] [--listening-fd N]``.

- role ``runtime`` (default): serve one environment on ``--socket``. With ``--control`` (in a
  container), under a keeper that can restart the runtime in place (``keeper.py``), and serves
  ``--slots`` sessions at once: slot ``i`` on ``protocol.runtime_socket_name(i)`` beside
  ``--socket``, as the user ``--uid-base`` + ``i``, with at most ``--processes`` processes,
  its runtime killed past ``--memory`` bytes; the environment sources in ``--sources-file`` are
  compiled once, before any runtime exists.
- role ``checker``: run check functions on states sent to ``--socket`` (``checker.py``); it never
  loads an environment.

The sandbox's secret (``protocol.prove``) comes from a file that is removed once read (a
container: its keeper reads it before any environment code exists) or from a pipe
(``--secret-fd``, the process backend). ``--listening-fd``: the socket at ``--socket`` is bound
and listening already on that descriptor (the process backend binds it for a runtime that runs
as a user who may not write the socket's directory).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path

from envscaler.sandbox.runtime import contain, protocol, seccomp
from envscaler.sandbox.runtime.checker import Checker, CheckerServer
from envscaler.sandbox.runtime.keeper import Keeper, serve_runtime


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python3 -m envscaler.sandbox.runtime", description=__doc__)
    parser.add_argument("--socket", required=True, type=Path, help="Unix socket path to listen on")
    parser.add_argument("--control", type=Path, help="the keeper's Unix socket (containers only)")
    parser.add_argument("--role", choices=("runtime", "checker"), default="runtime")
    secret = parser.add_mutually_exclusive_group()
    secret.add_argument("--secret-file", type=Path, help="read the secret here, then remove it")
    secret.add_argument("--secret-fd", type=int, help="read the secret from this pipe")
    parser.add_argument("--listening-fd", type=int, help="the socket, bound and listening")
    parser.add_argument("--slots", type=int, default=1, help="sessions served at once (keeper)")
    parser.add_argument("--uid-base", type=int, default=contain.UNTRUSTED_UID,
                        help="the user of slot 0; slot i runs as this plus i (keeper)")
    parser.add_argument("--processes", type=int, help="processes per slot (keeper)")
    parser.add_argument("--memory", type=int, help="bytes a slot's runtime may hold (keeper)")
    parser.add_argument("--sources-file", type=Path, help="environment sources to compile once "
                        "(a JSON list; read, then removed) (keeper)")
    parser.add_argument("--compiled-file", type=Path, help="the sources compiled by another "
                        "keeper (read, then removed); else where this one writes what it "
                        "compiled (keeper)")
    args = parser.parse_args(argv)
    seccomp.deny_io_uring()
    secret_bytes = _secret(args.secret_file, args.secret_fd)
    listening = (contain.bind_listening(args.socket) if args.listening_fd is None
                 else socket.socket(fileno=args.listening_fd))
    print(f"envscaler {args.role} pid {os.getpid()} listening on {args.socket}", file=sys.stderr,
          flush=True)
    if args.role == "checker":
        CheckerServer(listening, Checker(contained=contain.in_container()),
                      secret_bytes).serve_forever()
    elif args.control is not None:
        sockets = [listening, *(contain.bind_listening(
            args.socket.with_name(protocol.runtime_socket_name(slot)))
            for slot in range(1, args.slots))]
        Keeper(sockets, contain.bind_listening(args.control), secret_bytes, args.uid_base,
               args.processes, args.memory, _sources(args.sources_file),
               args.compiled_file).run()
    else:
        serve_runtime(listening, secret_bytes)


def _sources(path: Path | None) -> list[str]:
    if path is None or not path.exists():
        return []
    sources = json.loads(path.read_text())
    path.unlink()
    return [source for source in sources if isinstance(source, str)]


def _secret(path: Path | None, fd: int | None) -> bytes | None:
    if path is not None:
        return protocol.read_secret(path)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as pipe:
        return pipe.read()


if __name__ == "__main__":
    main()
