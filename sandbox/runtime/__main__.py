"""``python3 -m sandbox.runtime --socket PATH``: serve one environment on a Unix socket."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from sandbox.runtime import determinism
from sandbox.runtime.host import EnvHost
from sandbox.runtime.server import RuntimeServer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python3 -m sandbox.runtime", description=__doc__)
    parser.add_argument("--socket", required=True, type=Path, help="Unix socket path to listen on")
    socket_path: Path = parser.parse_args(argv).socket
    host = EnvHost(determinism.install())  # after the imports above bound the real clocks
    socket_path.unlink(missing_ok=True)  # left by a runtime that died before cleaning up
    # The gateway connects as another user than the sandbox's, so the socket must be 0o777. It is
    # created so under umask 0 rather than chmod-ed after: gVisor refuses chmod on a host socket.
    previous = os.umask(0)
    try:
        server = RuntimeServer(str(socket_path), host)
    finally:
        os.umask(previous)
    print(f"envscaler runtime pid {os.getpid()} listening on {socket_path}", file=sys.stderr,
          flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
