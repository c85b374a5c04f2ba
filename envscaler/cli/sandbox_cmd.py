"""`envscaler sandbox ...`: the sandbox image and the containers of the service."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
from rich.console import Console

from envscaler.cli._common import DEFAULT_CATALOGUE, CataloguePath
from envscaler.cli._common import settings as load_settings

app = typer.Typer(no_args_is_help=True, help="Build the sandbox images; remove leftover "
                  "sandboxes; serve a node's sandboxes to gateways (host).")
console = Console(stderr=True)


@app.command()
def build(base_image: str = typer.Option(None, help="default: ENVSCALER_SANDBOX_BASE_IMAGE"),
          catalogue: CataloguePath = DEFAULT_CATALOGUE) -> None:
    """Build the sandbox image of this checkout, and the image of each requirement set of the
    catalogue (env.json's ``requirements``); what is up to date is not built again."""
    import docker

    from envscaler.sandbox.errors import SandboxUnavailable
    from envscaler.sandbox.image import ensure_image

    base = base_image or load_settings().sandbox_base_image
    try:
        with console.status(f"building the sandbox image on {base}"):
            tag = ensure_image(docker.from_env(), base)
    except SandboxUnavailable as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None
    console.print(f"sandbox image ready: [bold]{tag}[/bold]")
    if not requirement_images(tag, catalogue):
        raise typer.Exit(1)


def requirement_images(base_tag: str, catalogue: Path) -> bool:
    """Ensure the image of each requirement set of ``catalogue`` over ``base_tag``, saying which;
    False when one could not be built (its environments will not load)."""
    from envscaler.format import FormatError, load_catalogue
    from envscaler.sandbox.image_pools import build_images, requirement_sets

    try:
        envs = load_catalogue(catalogue).envs.values()
    except FormatError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return False
    with console.status("building the images of the environments' requirements"):
        images = build_images("docker", base_tag, requirement_sets(env.manifest for env in envs))
    for pins, image in sorted(images.tags.items()):
        console.print(f"requirements image ready: [bold]{image}[/bold] ({' '.join(pins)})")
    for pins, reason in sorted(images.failures.items()):
        console.print(f"[red]error:[/red] {' '.join(pins)}: {reason}")
    return not images.failures


@app.command()
def reap() -> None:
    """Remove sandboxes whose service instance is dead (the gateway also does this by itself)."""
    from envscaler.sandbox.backends import make_backend

    settings = load_settings()
    backend = make_backend(settings.sandbox_config(image=""), settings.instance)
    removed = asyncio.run(backend.reap_orphans())
    console.print(f"removed {removed} orphaned sandboxes")


@app.command()
def host(listen: str = typer.Option(..., help="HOST:PORT to serve gateways on"),
         advertise: str = typer.Option(None, help="HOST:PORT gateways reach this host at "
                                       "(default: --listen)")) -> None:
    """Serve this node's sandboxes to gateways over authenticated TCP (ENVSCALER_CLUSTER_SECRET;
    TLS with ENVSCALER_HOST_TLS_CERT and _KEY), published in ENVSCALER_REDIS_URL."""
    from envscaler.sandbox.hosts.server import HostAddress
    from envscaler.sandbox.hosts.wire import split_address
    from envscaler.server.sandbox_host import check, run_host

    settings = load_settings()
    try:
        split_address(listen)
        split_address(advertise or listen)
        check(settings)
    except ValueError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    asyncio.run(run_host(settings, HostAddress(listen, advertise or listen)))
