"""What the commands share: the options that several of them take (one definition each), the
client, JSON output, and one place that turns client errors into what to do about them (never a
traceback)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from envscaler_client import (
    AuthError,
    CallTimeoutError,
    CapacityError,
    EnvClient,
    EnvScalerError,
    InvalidArgumentsError,
    NotFoundError,
    SessionClosedError,
    TransportError,
)
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from envscaler.checkout import DEFAULT_CATALOGUE as DEFAULT_CATALOGUE

if TYPE_CHECKING:
    from envscaler.server.settings import Settings

Url = Annotated[str, typer.Option("--url", envvar="ENVSCALER_URL", help="The gateway's URL.")]
"""``url: Url = DEFAULT_URL`` (`envscaler_client.DEFAULT_URL`)."""
ApiKey = Annotated[str | None, typer.Option(
    "--api-key", envvar="ENVSCALER_API_KEY", show_default=False,
    help="An API key of the gateway (ENVSCALER_API_KEYS).")]
JsonOutput = Annotated[bool, typer.Option("--json", help="Print JSON for machines.")]
CataloguePath = Annotated[Path, typer.Option(
    envvar="ENVSCALER_CATALOGUE",
    help="The catalogue: the environment folders with their scenarios and reference solutions; "
    "default: the checkout's, whatever the current directory.")]
"""``catalogue: CataloguePath = DEFAULT_CATALOGUE``."""
GatewayUrl = Annotated[str | None, typer.Option(
    "--url", envvar="ENVSCALER_URL", show_default=False,
    help="A running gateway; without it, an embedded gateway is started on --catalogue.")]
EnvId = Annotated[str, typer.Argument(help="Environment id (see `envscaler envs`).")]
Split = Annotated[str | None, typer.Option(help="Only scenarios of this split: train, rl or eval.",
                                           show_default=False)]

out = Console(markup=False, highlight=False)  # results; text from the gateway is never markup
err = Console(stderr=True, markup=False, highlight=False, soft_wrap=True)
"""Messages and progress, apart so that --json output stays clean; messages are not wrapped, so
that the commands they suggest can be copied whole."""

_NOT_FOUND_HINTS = {
    "UnknownEnv": "list the environments with `envscaler envs`",
    "UnknownScenario": "list the scenarios with `envscaler scenarios ENV`",
    "UnknownSession": "open a session with `envscaler session open ENV`",
    "UnknownTool": "list the tools with `envscaler envs show ENV`",
}


def hint(exc: EnvScalerError, url: str) -> str:
    """What to do about ``exc``."""
    if isinstance(exc, TransportError):
        if exc.unreachable:
            return (f"is the gateway running at {url}? start it with ./scripts/serve, or pass "
                    "--url (or set ENVSCALER_URL)")
        return ("the gateway did not answer in time or dropped the connection; retry, and read "
                "the gateway's log")
    if isinstance(exc, AuthError):
        return "pass one of the gateway's API keys with --api-key (or set ENVSCALER_API_KEY)"
    if isinstance(exc, NotFoundError):
        return _NOT_FOUND_HINTS.get(exc.type, "check the name or id")
    if isinstance(exc, InvalidArgumentsError):
        return ("arguments must be a JSON object matching the tool's parameters; see them with "
                "`envscaler envs show ENV`")
    if isinstance(exc, SessionClosedError):
        return ("the session is over (its state, trajectory and validation stay readable); open "
                "a new one")
    if isinstance(exc, CapacityError):
        after = f"in {exc.retry_after:g} s" if exc.retry_after else "later"
        return f"the gateway is busy or at capacity; retry {after}"
    if isinstance(exc, CallTimeoutError):
        return ("the tool exceeded its deadline; its effects were discarded and the session is "
                "still usable")
    return "read the gateway's log for the details"


@contextmanager
def explained(url: str) -> Iterator[None]:
    """Turn a client error into ``error: ...`` and what to do about it, and exit with status 1."""
    try:
        yield
    except EnvScalerError as exc:
        fail(str(exc), hint(exc, url))


def fail(message: str, what_to_do: str = "", status: int = 1) -> NoReturn:
    err.print(Text.assemble(("error: ", "red"), message))
    if what_to_do:
        err.print(what_to_do, style="yellow")
    raise typer.Exit(status)


def settings() -> Settings:
    """The ENVSCALER_* settings; one refused (a weak cluster secret, a size that is none) ends
    the command with why, exit status 2, rather than a traceback (and without the value, which
    may be a secret)."""
    from envscaler.server.settings import Settings

    try:
        return Settings()
    except ValidationError as exc:
        fail("; ".join(f"{'.'.join(map(str, error['loc']))}: {error['msg']}"
                       for error in exc.errors(include_url=False, include_input=False)),
             "fix the setting named above (see the manual's Configuration page, docs/configuration.md)", 2)


@contextmanager
def connect(url: str, api_key: str | None) -> Iterator[EnvClient]:
    """A client of the gateway, with errors explained."""
    with explained(url), EnvClient(url, api_key) as client:
        yield client


@contextmanager
def gateway(url: str | None, catalogue: Path) -> Iterator[str]:
    """The URL of the gateway at ``url``, or of one embedded here on ``catalogue`` (stopped on
    exit) when ``url`` is None."""
    if url is not None:
        yield url
        return
    from envscaler.server.embedded_gateway import EmbeddedGateway

    embedded = EmbeddedGateway(catalogue)
    with err.status("starting an embedded gateway (the first start builds the sandbox image)"):
        try:
            embedded.start()
        except Exception as exc:  # noqa: BLE001 - any start-up failure is explained, not traced
            embedded.stop()
            fail(f"the embedded gateway did not start: {type(exc).__name__}: {exc}",
                 "run ./scripts/bootstrap (Docker engine, redis-server, sandbox image), or pass "
                 "--url of a running gateway")
    try:
        yield embedded.url
    finally:
        embedded.stop()


def jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [jsonable(item) for item in value]
    return value


def print_json(value: Any) -> None:
    """Plain JSON on stdout (no colours, no wrapping), whatever the terminal."""
    typer.echo(json.dumps(jsonable(value), indent=2, ensure_ascii=False))


def compact(value: Any, limit: int = 120) -> str:
    """A one-line JSON rendering for table cells, shortened to ``limit`` characters."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


class phase_progress:
    """A bar per phase of a long measurement, on stderr, when it is a terminal (and not
    ``quiet``); entering it gives ``step(phase, done, total)``."""

    def __init__(self, quiet: bool) -> None:
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                                 transient=True, disable=quiet or not err.is_terminal)
        self.tasks: dict[str, int] = {}

    def __enter__(self):  # type: ignore[no-untyped-def]
        self.progress.start()

        def step(phase: str, done: int, total: int) -> None:
            if phase not in self.tasks:
                self.tasks[phase] = self.progress.add_task(phase, total=total)
            self.progress.update(self.tasks[phase], completed=done, total=total)

        return step

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()
