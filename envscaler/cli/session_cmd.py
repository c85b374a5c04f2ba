"""`envscaler session ...`: try an environment by hand from the shell, one request per command.

    envscaler session open library_loans --scenario library_loans-001
    envscaler session call ID get_member '{"member_id": "M-1001"}'
    envscaler session validate ID
    envscaler session close ID
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from envscaler_client import DEFAULT_URL, ToolError
from rich.table import Table
from rich.text import Text

from envscaler.cli._common import (
    ApiKey,
    EnvId,
    JsonOutput,
    Url,
    compact,
    connect,
    err,
    fail,
    out,
    print_json,
)

app = typer.Typer(no_args_is_help=True,
                  help="Open a session, call its tools, read its state, validate it.")

SessionId = Annotated[str, typer.Argument(
    help="Session id (from `envscaler session open`).", show_default=False)]
ScenarioOption = Annotated[str | None, typer.Option(
    help="Scenario id (see `envscaler scenarios ENV`).")]
Seed = Annotated[int, typer.Option(min=0, help="Seed of the environment's randomness.")]
InitConfig = Annotated[str | None, typer.Option(
    help="Initial state as a JSON object, instead of a scenario.")]
ToolName = Annotated[str, typer.Argument(help="Tool name.")]
ArgumentsJson = Annotated[str, typer.Argument(help="Arguments as a JSON object.")]
CallId = Annotated[str | None, typer.Option(
    help="Idempotency key: a call_id already seen is answered from the record, not run again.")]


def _json_object(text: str | None, option: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        fail(f"{option} is not JSON: {exc}",
             f"give {option} a JSON object, e.g. '{{\"key\": \"value\"}}'", 2)
    if not isinstance(value, dict):
        fail(f"{option} must be a JSON object, not {type(value).__name__}",
             "wrap the values in {...}", 2)
    return value


def _failure(error: ToolError | None) -> Text:
    if error is None:
        return Text("failed", style="red")
    return Text.assemble((error.type, "red"), f": {error.message}")


@app.command("open")
def open_(env: EnvId, scenario: ScenarioOption = None, seed: Seed = 0,
          init_config: InitConfig = None, url: Url = DEFAULT_URL, api_key: ApiKey = None,
          json_output: JsonOutput = False) -> None:
    """Open a session; prints its id, task and agent token. Close it with `session close`.

    When its output is not a terminal, only the id goes there (``ID=$(envscaler session open
    ...)``); the rest goes to stderr, where a person still reads it.
    """
    config = _json_object(init_config, "--init-config")
    with connect(url, api_key) as client, err.status(f"opening a session on {env}"):
        session = client.create_session(env, scenario, config, seed)
    if json_output:
        print_json({"session_id": session.id, "env": session.env, "scenario": session.scenario,
                    "seed": session.seed, "task": session.task,
                    "agent_token": session.agent_token, "tools": session.tools})
        return
    summary = out
    if not sys.stdout.isatty():
        typer.echo(session.id)
        summary = err
    names = ", ".join(tool.get("function", tool).get("name", "?") for tool in session.tools)
    summary.print(f"session      {session.id}")
    summary.print(f"env          {session.env}  scenario {session.scenario or '-'}  "
                  f"seed {session.seed}")
    summary.print(f"task         {session.task or '-'}")
    summary.print(f"agent token  {session.agent_token}")
    summary.print(f"tools        {names}")
    err.print(f"next: envscaler session call {session.id} TOOL '{{...}}'; "
              f"envscaler session validate {session.id}; envscaler session close {session.id}")


@app.command()
def call(session_id: SessionId, tool: ToolName, arguments: ArgumentsJson = "{}",
         call_id: CallId = None, url: Url = DEFAULT_URL, api_key: ApiKey = None,
         json_output: JsonOutput = False) -> None:
    """Call a tool; prints its result. A tool that fails is shown, not an error of the command."""
    with connect(url, api_key) as client:
        # The arguments go as written: the gateway checks them against the tool's schema.
        result = client.session(session_id).call(tool, arguments, call_id)
    if json_output:
        print_json(result)
        return
    if result.ok:
        out.print_json(data=result.result)
    else:
        err.print(Text.assemble(("the tool failed: ", "yellow"), _failure(result.error)))
    if result.duplicate:
        err.print(f"call {result.call_id} had already run: this is its recorded result")


@app.command()
def state(session_id: SessionId, url: Url = DEFAULT_URL, api_key: ApiKey = None) -> None:
    """The environment's current state (JSON)."""
    with connect(url, api_key) as client:
        current = client.session(session_id).state()
    print_json(current.state)


@app.command()
def trajectory(session_id: SessionId, url: Url = DEFAULT_URL, api_key: ApiKey = None,
               json_output: JsonOutput = False) -> None:
    """Every call with its arguments and result, and the resets."""
    with connect(url, api_key) as client:
        record = client.session(session_id).trajectory()
    if json_output:
        print_json(record)
        return
    table = Table("#", "epoch", "call", "arguments", "result", title=f"trajectory of {session_id}")
    for entry in record.entries:
        if entry.kind == "reset":
            table.add_row(str(entry.index), str(entry.epoch), Text("reset", style="dim"),
                          f"scenario={entry.scenario} seed={entry.seed}", "")
        else:
            answer = Text(compact(entry.result)) if entry.ok else _failure(entry.error)
            table.add_row(str(entry.index), str(entry.epoch), entry.name or "?",
                          compact(entry.arguments or {}), answer)
    out.print(table)


@app.command()
def validate(session_id: SessionId, url: Url = DEFAULT_URL, api_key: ApiKey = None,
             json_output: JsonOutput = False) -> None:
    """Run the scenario's checks: reward = passed / total. Changes nothing."""
    with connect(url, api_key) as client:
        result = client.session(session_id).validate()
    if json_output:
        print_json(result)
        return
    table = Table("check", "passed",
                  title=f"reward {result.reward:g} ({result.passed} of {result.total} checks)")
    for check in result.checks:
        table.add_row(check.item, Text("yes", style="green") if check.passed else
                      Text.assemble(("no", "red"), f" {check.error or ''}"))
    out.print(table)


@app.command()
def reset(session_id: SessionId, scenario: ScenarioOption = None,
          seed: Annotated[int | None, typer.Option(min=0, help="A new seed.")] = None,
          url: Url = DEFAULT_URL, api_key: ApiKey = None, json_output: JsonOutput = False) -> None:
    """Back to the scenario's initial state (or another scenario or seed)."""
    with connect(url, api_key) as client:
        result = client.session(session_id).reset(scenario=scenario, seed=seed)
    if json_output:
        print_json(result)
        return
    out.print(f"session {result.session_id} reset: epoch {result.epoch}, "
              f"scenario {result.scenario or '-'}, seed {result.seed}")
    if result.task:
        out.print(f"task  {result.task}")


@app.command()
def close(session_id: SessionId, url: Url = DEFAULT_URL, api_key: ApiKey = None) -> None:
    """End the session and its sandbox (its record stays readable for a while)."""
    with connect(url, api_key) as client:
        client.session(session_id).close()
    out.print(f"session {session_id} closed")
