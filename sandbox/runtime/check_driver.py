"""Evaluates one check function in a fresh interpreter: ``python3 -I -S check_driver.py``.

stdin: JSON ``{"source", "initial_state", "final_state"}``; stdout: JSON ``{"passed", "error"}``.

A fresh interpreter per check means a check cannot see or damage the environment, another check,
or the states another check received. EnvScaler semantics: the source is executed with a global
``initial_state``, then ``check_func(final_state)`` is called; only ``True`` passes, only a bool
counts as an answer. Runs under ``-I -S``: standard library only, no import of the package (the
runtime imports ``describe_exception`` from here, so this file is the one definition of it).
"""

from __future__ import annotations

import builtins
import json
import os
import sys
from typing import Any

CHECK_FILENAME = "check.py"
MAX_MESSAGE_CHARS = 2000


def describe_exception(exc: BaseException) -> str:
    """``"<ExcType>: <message>"`` (just the type when the message is empty), bounded in size."""
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ of a user-defined exception
        message = "<unprintable message>"
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + f"... ({len(message)} characters)"
    name = type(exc).__name__
    return f"{name}: {message}" if message else name


def evaluate(source: str, initial_state: Any, final_state: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "envscaler_check", "__builtins__": builtins,
                                 "initial_state": initial_state}
    try:
        exec(compile(source, CHECK_FILENAME, "exec"), namespace)  # noqa: S102 - the purpose
        check_func = namespace.get("check_func")
        if not callable(check_func):
            return _failed("the source does not define a function check_func(final_state)")
        verdict = check_func(final_state)
    except BaseException as exc:  # noqa: BLE001 - SystemExit too: the check failed
        return _failed(describe_exception(exc))
    if type(verdict) is not bool:
        return _failed(f"check_func returned {type(verdict).__name__}, not bool")
    return {"passed": verdict, "error": None}


def _failed(error: str) -> dict[str, Any]:
    return {"passed": False, "error": error}


def main() -> None:
    request = json.loads(sys.stdin.buffer.read())
    # The check's own prints go to stderr (the runtime keeps its tail); stdout carries the verdict.
    verdict_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    verdict = evaluate(request["source"], request["initial_state"], request["final_state"])
    verdict_out.write(json.dumps(verdict))
    verdict_out.close()


if __name__ == "__main__":
    main()
