"""`envscaler envs`, `envscaler envs show ENV`, `envscaler scenarios ENV`: what a gateway serves."""

from __future__ import annotations

import json
from typing import Any

import typer
from envscaler_client import DEFAULT_URL
from rich.table import Column, Table

from envscaler.cli._common import ApiKey, EnvId, JsonOutput, Split, Url, connect, out, print_json

app = typer.Typer(help="The environments a gateway serves.")


@app.callback(invoke_without_command=True)
def envs(ctx: typer.Context, url: Url = DEFAULT_URL, api_key: ApiKey = None,
         json_output: JsonOutput = False) -> None:
    """List the environments: id, summary, tools and scenarios."""
    if ctx.invoked_subcommand is not None:
        return
    with connect(url, api_key) as client:
        listing = client.envs()
    if json_output:
        print_json(listing)
        return
    table = Table(Column("id", no_wrap=True), "summary", "tools", "scenarios",
                  title=f"{len(listing)} environments at {url}")
    for env in listing:
        table.add_row(env.id, env.summary, str(env.tools), str(env.scenarios))
    out.print(table)


@app.command()
def show(env: EnvId, url: Url = DEFAULT_URL, api_key: ApiKey = None,
         json_output: JsonOutput = False) -> None:
    """An environment's metadata and its tools."""
    with connect(url, api_key) as client:
        detail = client.env(env)
    if json_output:
        print_json(detail)
        return
    provenance = detail.provenance if isinstance(detail.provenance, dict) else {}
    out.print(f"{detail.id} ({detail.class_name}): {detail.summary}", style="bold")
    out.print(detail.introduction)
    out.print(f"{detail.scenarios} scenarios; model {provenance.get('model', '?')}, "
              f"created {provenance.get('created', '?')}\n")
    table = Table(Column("tool", no_wrap=True), "parameters (* required)", "description",
                  title=f"{len(detail.tools)} tools")
    for tool in detail.tools:
        function = tool.get("function", tool)
        table.add_row(function.get("name", "?"), _parameters(function.get("parameters") or {}),
                      (function.get("description") or "").strip().split("\n")[0])
    out.print(table)


def scenarios(env: EnvId, split: Split = None, url: Url = DEFAULT_URL, api_key: ApiKey = None,
              json_output: JsonOutput = False) -> None:
    """An environment's scenarios: id, split and task."""
    with connect(url, api_key) as client:
        listing = client.scenarios(env, split)
    if json_output:
        print_json(listing)
        return
    table = Table(Column("id", no_wrap=True), "split", "task",
                  title=f"{len(listing)} scenarios of {env}")
    for scenario in listing:
        table.add_row(scenario.id, scenario.split, scenario.task)
    out.print(table)


def _parameters(schema: dict[str, Any]) -> str:
    required = set(schema.get("required") or ())
    return "\n".join(f"{name}{'*' if name in required else ''}: {_type(spec)}"
                     for name, spec in (schema.get("properties") or {}).items())


def _type(spec: dict[str, Any]) -> str:
    if "enum" in spec:
        return " | ".join(json.dumps(value) for value in spec["enum"])
    kind = spec.get("type", "any")
    return " | ".join(kind) if isinstance(kind, list) else str(kind)
