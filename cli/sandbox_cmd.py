"""`envscaler sandbox ...`: the sandbox image and the containers of the service."""

from __future__ import annotations

import asyncio

import typer
from rich.console import Console

app = typer.Typer(no_args_is_help=True, help="Build the sandbox image; remove leftover "
                  "sandboxes; serve a node's sandboxes to gateways (host).")
console = Console(stderr=True)


@app.command()
def build(base_image: str = typer.Option(None, help="default: ENVSCALER_SANDBOX_BASE_IMAGE")
          ) -> None:
    """Build the sandbox image of this checkout (a no-op when it is up to date)."""
    import docker

    from sandbox.errors import SandboxUnavailable
    from sandbox.image import ensure_image
    from server.settings import Settings

    base = base_image or Settings().sandbox_base_image
    try:
        with console.status(f"building the sandbox image on {base}"):
            tag = ensure_image(docker.from_env(), base)
    except SandboxUnavailable as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None
    console.print(f"sandbox image ready: [bold]{tag}[/bold]")


@app.command()
def reap() -> None:
    """Remove sandboxes whose service instance is dead (the gateway also does this by itself)."""
    from sandbox.backends import make_backend
    from server.settings import Settings

    settings = Settings()
    backend = make_backend(settings.sandbox_config(image=""), settings.instance)
    removed = asyncio.run(backend.reap_orphans())
    console.print(f"removed {removed} orphaned sandboxes")


@app.command()
def host(listen: str = typer.Option(..., help="HOST:PORT to serve gateways on"),
         advertise: str = typer.Option(None, help="HOST:PORT gateways reach this host at "
                                       "(default: --listen)")) -> None:
    """Serve this node's sandboxes to gateways over authenticated TCP (ENVSCALER_CLUSTER_SECRET;
    TLS with ENVSCALER_HOST_TLS_CERT and _KEY), published in ENVSCALER_REDIS_URL."""
    from sandbox.remote.host import HostAddress
    from sandbox.remote.wire import split_address
    from server.sandbox_host import check, run_host
    from server.settings import Settings

    settings = Settings()
    try:
        split_address(listen)
        split_address(advertise or listen)
        check(settings)
    except ValueError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    asyncio.run(run_host(settings, HostAddress(listen, advertise or listen)))
