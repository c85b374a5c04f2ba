"""``python3 -m sandbox.runtime --socket PATH [--control PATH] [--role runtime|checker]``.

- role ``runtime`` (default): serve one environment on ``--socket``. With ``--control`` (in a
  container), under a keeper that can restart the runtime in place (``keeper.py``).
- role ``checker``: run check functions on states sent to ``--socket`` (``checker.py``); it never
  loads an environment.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from sandbox.runtime import contain, seccomp
from sandbox.runtime.checker import Checker, CheckerServer
from sandbox.runtime.keeper import Keeper, serve_runtime


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python3 -m sandbox.runtime", description=__doc__)
    parser.add_argument("--socket", required=True, type=Path, help="Unix socket path to listen on")
    parser.add_argument("--control", type=Path, help="the keeper's Unix socket (containers only)")
    parser.add_argument("--role", choices=("runtime", "checker"), default="runtime")
    args = parser.parse_args(argv)
    seccomp.deny_io_uring()
    listening = contain.bind_listening(args.socket)
    print(f"envscaler {args.role} pid {os.getpid()} listening on {args.socket}", file=sys.stderr,
          flush=True)
    if args.role == "checker":
        CheckerServer(listening, Checker(contained=contain.in_container())).serve_forever()
    elif args.control is not None:
        Keeper(listening, contain.bind_listening(args.control)).run()
    else:
        serve_runtime(listening)


if __name__ == "__main__":
    main()
