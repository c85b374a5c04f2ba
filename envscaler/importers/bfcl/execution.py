"""One side of a question scored by BFCL's rules (``envscaler.importers.bfcl.checker.Execution``), in a
gateway session of the question's environment: call texts (a model's decoded calls, or BFCL's
ground truth) run as BFCL's executor runs them, but through the gateway, so in a sandbox.

BFCL evaluates each call text as Python on the instance that owns the function. Here the text is
read with ``ast`` (never evaluated) into a tool call with literal arguments and sent; what BFCL
would answer without running a method is answered here the same way: a refused name (``kill``,
``remove``...), a name no class defines (``name 'x' is not defined``), text that does not parse.
A call whose arguments are not literals (a nested call) is not run: it answers an error and
changes nothing (BFCL would run the nested call). A call the gateway refuses (arguments that do
not fit the tool's schema, a deadline) answers its error too; BFCL would run the method.
"""

from __future__ import annotations

import ast
from typing import Any

from envscaler_client import (
    CallTimeoutError,
    EnvClient,
    InvalidArgumentsError,
    NotFoundError,
    Session,
)

from envscaler.importers.bfcl.calls import CallError, parse_call
from envscaler.importers.bfcl.replay import rendered
from envscaler.importers.bfcl.runner import REFUSED_CALLS, error_text

REFUSED_BY_GATEWAY = (CallTimeoutError, InvalidArgumentsError, NotFoundError)


class SessionExecution:
    """The question's classes in ``session``; its state is read for ``classes`` only."""

    def __init__(self, session: Session, classes: list[str]) -> None:
        self.session = session
        self.classes = classes
        self.parameters = {tool["function"]["name"]: list(
            tool["function"].get("parameters", {}).get("properties", {}))
            for tool in session.tools}

    def run(self, calls: list[str]) -> list[str]:
        return [self._run(text) for text in calls]

    def state(self) -> dict[str, Any]:
        state = self.session.state().state
        return {name: state.get(name) for name in self.classes}

    def _run(self, text: str) -> str:
        name = text.split("(")[0].strip()
        if name in REFUSED_CALLS:
            return error_text(f"Function call {name} is not allowed.")
        try:
            node = ast.parse(text, filename="<string>", mode="eval").body
        except SyntaxError as exc:
            return error_text(str(exc))
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            return error_text(f"{text!r} is not a call of a function by name: not run here")
        if node.func.id not in self.parameters:
            return error_text(f"name {node.func.id!r} is not defined")
        try:
            call = parse_call(text, self.parameters)
        except CallError as exc:
            return error_text(f"not run here: {exc}")
        try:
            return rendered(self.session.call(call.name, call.arguments))
        except REFUSED_BY_GATEWAY as exc:
            return error_text(f"{exc.type}: {exc.message}")


def open_pair(client: EnvClient, env: str,
              init_config: dict[str, Any]) -> tuple[Session, Session]:
    """Two sessions of ``env`` from ``init_config``: the model's and the ground truth's. The first
    is closed when the second cannot be opened."""
    model = client.create_session(env, init_config=init_config)
    try:
        return model, client.create_session(env, init_config=init_config)
    except BaseException:
        model.close()
        raise
