"""Every error answer has one shape, with a stable type and no traceback."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from pydantic import BaseModel
from redis.exceptions import OutOfMemoryError
from starlette.exceptions import HTTPException as StarletteHTTPException

from envscaler.server import errors
from envscaler.server.errors import ApiError, retry_after


class Body(BaseModel):
    count: int


def app() -> FastAPI:
    application = FastAPI()
    errors.install(application)

    @application.post("/thing")
    async def thing(body: Body) -> dict:
        return {"count": body.count}

    @application.get("/api-error")
    async def api_error() -> dict:
        raise ApiError(429, "CapacityExhausted", "full", headers=retry_after(2.2))

    @application.get("/bug")
    async def bug() -> dict:
        raise KeyError("internal detail")

    return application


async def request(method: str, path: str, **kwargs) -> httpx.Response:  # type: ignore[no-untyped-def]
    transport = httpx.ASGITransport(app=app(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.request(method, path, **kwargs)


async def test_api_error_shape_and_headers() -> None:
    response = await request("GET", "/api-error")
    assert response.status_code == 429 and response.headers["Retry-After"] == "3"
    assert response.json() == {
        "ok": False,
        "error": {"type": "CapacityExhausted", "message": "full"},
    }


async def test_validation_errors_become_invalid_request_with_the_field() -> None:
    response = await request("POST", "/thing", json={"count": "many"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["type"] == "InvalidRequest" and error["field"] == "body.count"
    assert error["message"].startswith("body.count: ")


async def test_http_errors_and_bugs() -> None:
    assert (await request("GET", "/missing")).json()["error"]["type"] == "NotFound"
    assert (await request("DELETE", "/thing")).json()["error"]["type"] == "MethodNotAllowed"
    bug = await request("GET", "/bug")
    assert bug.status_code == 500 and bug.json()["error"]["type"] == "InternalError"
    assert "internal detail" not in bug.text and "Traceback" not in bug.text


def test_retry_after_is_whole_seconds_at_least_one() -> None:
    assert retry_after(0.0) == {"Retry-After": "1"}
    assert retry_after(1.0) == {"Retry-After": "1"}
    assert retry_after(1.01) == {"Retry-After": "2"}


def test_the_table_answers_its_exceptions_and_leaves_bugs() -> None:
    refused = ApiError(404, "UnknownSession", "no session")
    assert errors.answer(refused, "POST", "/x") is refused
    full = errors.answer(OutOfMemoryError("OOM command not allowed"), "POST", "/x")
    assert full is not None and (full.status, full.type) == (503, "BackendUnavailable")
    missing = errors.answer(StarletteHTTPException(405, "no"), "GET", "/x")
    assert missing is not None and (missing.status, missing.type) == (405, "MethodNotAllowed")
    assert errors.answer(KeyError("bug"), "GET", "/x") is None
