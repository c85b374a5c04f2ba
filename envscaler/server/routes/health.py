"""``/healthz`` (liveness), ``/readyz`` (Redis, sandbox backend, checkers, pool level),
``/metrics``."""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from envscaler.server.models import Component, Health, PoolLevel, Readiness

log = logging.getLogger("envscaler.server.health")

router = APIRouter(tags=["health"])

PROBE_TIMEOUT = 2.0


@router.get("/healthz", response_model=Health, summary="Liveness: the process answers")
async def healthz(request: Request) -> Health:
    return Health(ok=True, instance=request.app.state.settings.instance)


@router.get(
    "/readyz",
    response_model=Readiness,
    summary="Readiness: Redis, the sandbox backend and the checkers answer",
    responses={503: {"model": Readiness, "description": "A component does not answer"}},
)
async def readyz(request: Request) -> Response:
    state = request.app.state
    components: dict[str, Component] = {}
    try:
        await asyncio.wait_for(state.redis.ping(), PROBE_TIMEOUT)
        components["redis"] = Component(ok=True)
    except Exception as exc:  # noqa: BLE001 - any failure means not ready
        components["redis"] = Component(ok=False, error=f"{type(exc).__name__}: {exc}")
    try:
        detail = await asyncio.wait_for(state.backend.health(), PROBE_TIMEOUT)
        components["sandbox_backend"] = Component(ok=True, detail=dict(detail or {}))
    except Exception as exc:  # noqa: BLE001
        components["sandbox_backend"] = Component(ok=False, error=f"{type(exc).__name__}: {exc}")
    try:
        components["checkers"] = Component(ok=True, detail=dict(state.checkers.health()))
    except Exception as exc:  # noqa: BLE001
        components["checkers"] = Component(ok=False, error=f"{type(exc).__name__}: {exc}")
    stats = state.pool.stats()
    ready = all(c.ok for c in components.values())
    body = Readiness(
        ready=ready,
        instance=state.settings.instance,
        isolation=state.backend.isolation,
        components=components,
        pool=PoolLevel(
            ready=stats.ready, target=stats.target, live=stats.live, capacity=stats.capacity
        ),
    )
    if not ready:
        log.warning(
            "not ready %s",
            " ".join(f"{name}={c.error}" for name, c in components.items() if not c.ok),
        )
    return JSONResponse(body.model_dump(mode="json"), status_code=200 if ready else 503)


@router.get(
    "/metrics",
    summary="Prometheus metrics (text format)",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}}},
)
async def metrics(request: Request) -> Response:
    state = request.app.state
    try:
        live = await asyncio.wait_for(state.service.live_count(), PROBE_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - serve the rest of the metrics anyway
        log.warning("sessions_live unavailable error=%s", exc)
        live = None
    from envscaler.server.metrics import CONTENT_TYPE

    return Response(state.metrics.render(live), media_type=CONTENT_TYPE)
