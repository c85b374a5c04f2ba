"""`envscaler serve`: the gateway, with an embedded Redis and the sandbox image when none is
configured."""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import secrets
from collections.abc import Iterator
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from envscaler.cli._common import DEFAULT_CATALOGUE, CataloguePath
from envscaler.cli._common import settings as load_settings
from envscaler.cli.sandbox_cmd import requirement_images

if TYPE_CHECKING:
    from envscaler.server.settings import Settings

console = Console(stderr=True)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    host: str = typer.Option("127.0.0.1",
                             help="address to bind; non-loopback needs ENVSCALER_API_KEYS"),
    port: int = typer.Option(8000, min=1, max=65535),
    catalogue: CataloguePath = DEFAULT_CATALOGUE,
    workers: int | None = typer.Option(None, min=1, show_default=False,
                                       help="gateway worker processes (default: ENVSCALER_WORKERS, "
                                            "else one per CPU this process may run on)"),
    ray_address: str | None = typer.Option(
        None, "--ray", show_default=False,
        help="a Ray cluster's address ('auto' inside one): a sandbox host on each of its nodes "
             "(ENVSCALER_SANDBOX_BACKEND there), the gateways on the remote backend; needs "
             "ENVSCALER_REDIS_URL that every node reaches, and `pip install .[ray]`"),
) -> None:
    """Run the gateway on the catalogue (with --ray, over a Ray cluster's sandbox hosts)."""
    from envscaler.sandbox import socketroot
    from envscaler.sandbox.socketroot import UnsafeSocketRoot

    settings = load_settings().model_copy(update={"catalogue": catalogue.resolve()})
    if not settings.api_keys:
        if not _is_loopback(host):
            console.print(f"[red]error:[/red] refusing to bind {host} with no API keys; set "
                          "ENVSCALER_API_KEYS or bind a loopback address")
            raise typer.Exit(2)
        console.print("[yellow]no ENVSCALER_API_KEYS configured: serving on loopback only, without "
                      "authentication[/yellow]")
    if ray_address is not None:  # the gateways keep no sandbox: each node's host its own
        with _ray_hosts(ray_address, settings) as gateway_settings:
            _serve(host, port, workers, gateway_settings)
        return
    try:  # before anything starts: every worker would refuse it the same way
        socketroot.claim(settings.socket_root)
    except UnsafeSocketRoot as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    # Then the state directory: a second gateway on it is refused before the slow work
    # (images), not after it.
    with _embedded_redis(settings) as settings:
        if settings.sandbox_backend == "docker":
            image = _sandbox_image(settings)
            settings = settings.model_copy(update={"sandbox_image": image})
            requirement_images(image, catalogue)  # once, before the workers each look for them
        _serve(host, port, workers, settings)


@contextlib.contextmanager
def _embedded_redis(settings: Settings) -> Iterator[Settings]:
    """A Redis of the state directory's own while the block runs, when none is configured: the
    settings that name it."""
    from envscaler.sandbox.config import parse_size
    from envscaler.server.embedded_redis import EmbeddedRedis, EmbeddedRedisError

    if settings.redis_url is not None:
        yield settings
        return
    try:
        redis_server = EmbeddedRedis(settings.state_dir / "redis",
                                     maxmemory=parse_size(settings.redis_maxmemory)).start()
    except EmbeddedRedisError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None
    console.print(f"embedded Redis at {redis_server.address} (data and password in "
                  f"{redis_server.directory})")
    try:
        yield settings.model_copy(update={"redis_url": redis_server.url})
    finally:
        redis_server.stop()


def _serve(host: str, port: int, workers: int | None, settings: Settings) -> None:
    """The gateway's workers, each given ``settings`` (pickled to it, never through the
    environment)."""
    import uvicorn

    from envscaler.server.app import create_app
    from envscaler.server.http import gateway_options
    from envscaler.server.workers import default_count

    config = {"app": functools.partial(create_app, settings), "factory": True, "host": host,
              "port": port, **gateway_options(settings)}
    count = workers or settings.workers or default_count()
    if count == 1:
        uvicorn.run(**config)
    else:
        _serve_workers(count, config, settings)


@contextlib.contextmanager
def _ray_hosts(address: str, settings: Settings) -> Iterator[Settings]:
    """A sandbox host on each node of the Ray cluster while the block runs; the settings of the
    gateways (this process's workers), which use them through the remote backend."""
    if settings.redis_url is None:
        console.print("[red]error:[/red] --ray needs ENVSCALER_REDIS_URL, a Redis that every "
                      "node of the cluster reaches (hosts publish themselves there)")
        raise typer.Exit(2)
    if settings.sandbox_backend == "remote":
        console.print("[red]error:[/red] with --ray, ENVSCALER_SANDBOX_BACKEND is what each "
                      "node's host runs: docker or process")
        raise typer.Exit(2)
    try:
        import ray

        from envscaler.server.ray_hosts import RayHosts
        from envscaler.server.sandbox_host import host_settings
    except ImportError:
        console.print("[red]error:[/red] --ray needs Ray: pip install .[ray]")
        raise typer.Exit(2) from None
    if settings.cluster_secret is None:
        settings = settings.model_copy(update={"cluster_secret": secrets.token_hex(32)})
    ray.init(address=address)  # its SIGTERM handler exits by SystemExit: the clean-up runs
    hosts = RayHosts(host_settings(settings))
    try:
        with console.status("starting a sandbox host on each node"):
            hosts.sync()
        console.print(f"sandbox hosts on {len(hosts.hosts)} nodes: " + ", ".join(
            host.address for host in hosts.hosts.values()))
        hosts.follow()
        yield settings.model_copy(update={"sandbox_backend": "remote"})
    finally:
        hosts.close()
        ray.shutdown()


def _serve_workers(workers: int, config: dict[str, object], settings: Settings) -> None:
    """Worker processes under a supervisor that deals them the connections (`envscaler.server.workers`)."""
    from envscaler.server.workers import RestartPolicy, Supervisor, WorkersFailing

    policy = RestartPolicy(settings.worker_restart_delay, settings.worker_restart_max_delay,
                           settings.worker_restart_limit)
    try:
        Supervisor(workers, config, policy).run()
    except OSError as exc:
        console.print(f"[red]error:[/red] cannot listen on {config['host']}:{config['port']}: "
                      f"{exc.strerror or exc}")
        raise typer.Exit(1) from None
    except WorkersFailing as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None


def _sandbox_image(settings: Settings) -> str:
    from docker.errors import DockerException

    from envscaler.sandbox.errors import SandboxUnavailable
    from envscaler.sandbox.image import resolve_image

    try:
        with console.status("checking the sandbox image"):
            return resolve_image(settings)
    except (DockerException, SandboxUnavailable) as exc:
        console.print(f"[red]error:[/red] {exc}\nrun scripts/bootstrap, or set "
                      "ENVSCALER_SANDBOX_BACKEND=process on a host without Docker")
        raise typer.Exit(1) from None
