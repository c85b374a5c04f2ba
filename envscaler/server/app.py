"""The FastAPI application: ``create_app(settings)``.

The lifespan connects Redis (``settings.redis_url``; the command line starts an embedded Redis when
it is unset), loads the catalogue once, ensures the sandbox images (the standard one, and one per
requirement set of the catalogue: ``envscaler.sandbox.image_pools``), makes the sandbox backend and its
warm pools, and starts the idle-session expiry task. On shutdown it stops them and closes the
pools, which kills this instance's sandboxes; the sessions stay in Redis and are rebuilt by replay
wherever they are used next.

The routes are REST's (``envscaler.server.routes``), then every door of ``envscaler.server.doors``
(found there, each declared by its module), whose lifespans run inside the gateway's.

Log lines are key=value (``session=... env=... tool=... ms=...``) under loggers ``envscaler.*``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from envscaler.common.redisclient import connect
from envscaler.sandbox.backends import make_backend
from envscaler.sandbox.checkers import CheckerPool
from envscaler.sandbox.image_pools import ImagePools, requirement_sets
from envscaler.server import errors, statesize
from envscaler.server.auth import Authenticator
from envscaler.server.catalogue import ServedCatalogue
from envscaler.server.doors import discover
from envscaler.server.fastcall import FastCalls
from envscaler.server.limits import BodyLimit, call_body_bytes
from envscaler.server.metrics import Metrics
from envscaler.server.redis_scripts import reconnecting
from envscaler.server.requestguard import RequestGuard
from envscaler.server.responses import FastJSONResponse
from envscaler.server.routes import envs, health, sessions
from envscaler.server.sessions import SessionService
from envscaler.server.settings import Settings
from envscaler.server.web import apidocs
from envscaler.server.web import mount as mount_web_ui

log = logging.getLogger("envscaler.server")

DESCRIPTION = """\
Synthesized tool environments (EnvScaler) served from per-session sandboxes.

Create a session from a scenario, call its tools, read its state and trajectory, reset it, and
validate it (reward = passed checks / total). Sessions live in Redis: any gateway serves any
session, and a session whose sandbox died is rebuilt by deterministic replay.

Every error answers `{"ok": false, "error": {"type", "message", "field"?}}` with a stable `type`.
Authenticate with `Authorization: Bearer <API key>`; a session's agent token may only list and
call that session's tools.
"""


def configure_logging(level: str) -> None:
    """Key=value lines on stderr for ``envscaler.*``, unless the host configured logging."""
    logger = logging.getLogger("envscaler")
    logger.setLevel(level.upper())
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(
            logging.Formatter("%(asctime)s level=%(levelname)s logger=%(name)s %(message)s")
        )
        logger.addHandler(handler)


async def sandbox_image(settings: Settings) -> str:
    if settings.sandbox_backend != "docker" and not settings.sandbox_image:
        return ""
    from envscaler.sandbox.image import resolve_image

    return await asyncio.to_thread(resolve_image, settings)


def create_app(
    settings: Settings | None = None, sandbox_labels: dict[str, str] | None = None
) -> FastAPI:
    """The gateway; ``sandbox_labels`` go on every sandbox it creates (e.g. a test run's id)."""
    settings = settings or Settings()
    configure_logging(settings.log_level)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not settings.redis_url:
            raise RuntimeError(
                "ENVSCALER_REDIS_URL is not set (the command line starts an embedded Redis)"
            )
        redis = connect(
            settings.redis_url,
            max_connections=settings.max_connections,  # a request holds one at a time
            pool_timeout=settings.redis_timeout,
            socket_connect_timeout=settings.redis_timeout,
            socket_timeout=settings.redis_timeout,
            health_check_interval=30,
            retry=reconnecting(),
        )
        pools: ImagePools | None = None
        checkers: CheckerPool | None = None
        service: SessionService | None = None
        try:
            await redis.ping()
            catalogue = await asyncio.to_thread(ServedCatalogue, settings.catalogue)
            image = await sandbox_image(settings)
            sandbox_config = dataclasses.replace(
                settings.sandbox_config(image=image, labels=sandbox_labels),
                sources=tuple(env.package.source for env in catalogue.envs.values()))
            backend = make_backend(sandbox_config, settings.instance)
            pools = ImagePools(backend, sandbox_config)
            await pools.ensure(requirement_sets(env.manifest for env in catalogue.envs.values()))
            await pools.start()
            checkers = CheckerPool(backend, settings.checkers, settings.checker_queue,
                                   settings.checker_wait)
            await checkers.start()
            metrics: Metrics = app.state.metrics
            metrics.watch_pool(pools.default.stats)
            service = SessionService(settings, redis, catalogue, pools, checkers, backend,
                                     metrics)
            app.state.redis, app.state.catalogue = redis, catalogue
            app.state.backend, app.state.pool, app.state.service = backend, pools.default, service
            app.state.pools = pools
            app.state.checkers = checkers
            service.start()
            log.info(
                "gateway started instance=%s backend=%s isolation=%s envs=%d pool_size=%d auth=%s",
                settings.instance,
                backend.name,
                backend.isolation,
                len(catalogue.envs),
                settings.pool_size,
                "open (no API keys: loopback only)" if app.state.auth.open else "api-keys",
            )
            yield
        finally:
            if service is not None:
                await service.close()
            if checkers is not None:
                await checkers.close()
            if pools is not None:
                await pools.close()
            await redis.aclose()
            log.info("gateway stopped instance=%s", settings.instance)

    app = FastAPI(
        title="EnvScaler gateway",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        default_response_class=FastJSONResponse,
        docs_url=None,  # FastAPI's pages load scripts from a CDN: envscaler.server.web.apidocs serves them
        redoc_url=None,
        openapi_tags=[
            {"name": "sessions", "description": "Sessions and tool calls"},
            {"name": "environments", "description": "The catalogue"},
            {"name": "health", "description": "Liveness, readiness, metrics"},
        ],
    )
    app.state.settings = settings
    app.state.auth = Authenticator(settings.api_keys)
    app.state.metrics = Metrics()
    doors = discover()  # envscaler.server.doors: each protocol's module
    errors.install(app)
    limits = settings.json_limits()
    app.add_middleware(BodyLimit, max_bytes=settings.max_request_bytes,
                       max_argument_bytes=settings.max_argument_bytes, limits=limits,
                       state=statesize.state_limit(settings),
                       door_calls=[door.call_path for door in doors if door.call_path])
    # Tool calls, most of the traffic, skip the layers below (envscaler.server.fastcall).
    app.add_middleware(FastCalls, max_bytes=call_body_bytes(settings.max_request_bytes,
                                                          settings.max_argument_bytes),
                       limits=limits)
    # Before any body is read: hosts, origins and content types.
    app.add_middleware(RequestGuard,
                       allowed_hosts=None if settings.api_keys else settings.allowed_hosts)
    # Around them all, the doors' layers (the MCP door's: refusals on its paths as JSON-RPC).
    for door in doors:
        if door.layer is not None:
            app.add_middleware(door.layer)
    # Sessions first: routes are matched in order, and tool calls are most of the traffic. Then
    # the doors, in their order (ORS, at the root, last); a door's lifespan runs inside ours.
    app.include_router(sessions.router)
    app.include_router(health.router)
    app.include_router(envs.router)
    for door in doors:
        app.include_router(door.router)
    apidocs.mount(app)
    if settings.web_ui:
        mount_web_ui(app)
    return app
