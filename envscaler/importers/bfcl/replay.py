"""The gateway's side of the fidelity measurement: an imported question's reference calls (its
turns' calls in order) sent through a gateway over HTTP, each result rendered as BFCL renders
one, then the session's final state. The session is closed whatever happens."""

from __future__ import annotations

from envscaler_client import CallResult, EnvClient

from envscaler.format.models import Scenario
from envscaler.importers.bfcl.compare import Execution
from envscaler.importers.bfcl.runner import error_text, render_result


def replay(client: EnvClient, env: str, scenario: Scenario) -> Execution:
    with client.create_session(env, scenario=scenario.id) as session:
        results = [rendered(session.call(call.name, call.arguments))
                   for call in scenario.solution or ()]
        return Execution(results, session.state().state)


def rendered(result: CallResult) -> str:
    """A gateway result as BFCL would hand it to the model; a tool's failure as BFCL renders an
    exception, with the gateway's words for it (``ExcType: message``, and the line)."""
    if result.ok:
        return render_result(result.result)
    return error_text(result.error.message if result.error is not None else "")
