"""The web page (``/ui/``): plain HTML, CSS and JavaScript files served by the gateway itself.

No build step and no server of its own: `mount` adds the files under ``/ui`` and a redirect from
``/``. The page talks to the same REST API as every client (so the same authentication, limits
and error shapes apply) and renders environment data, which a model wrote, as text only.

Every file is answered with a Content-Security-Policy that allows scripts, styles and requests
from this origin alone, no inline script or style, no framing, no form posts and, through Trusted
Types, no HTML sink (``innerHTML`` and the like throw): a string that slipped past the page's own
escaping still could not become markup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from starlette.exceptions import HTTPException
from starlette.responses import PlainTextResponse, Response
from starlette.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).resolve().parent / "static"
MOUNT = "/ui"

CSP_DIRECTIVES = {
    "default-src": "'none'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self'",
    "connect-src": "'self'",
    "base-uri": "'none'",
    "form-action": "'none'",
    "frame-ancestors": "'none'",
    "require-trusted-types-for": "'script'",
    "trusted-types": "'none'",
}


def content_security_policy(directives: dict[str, str | None]) -> str:
    """The policy's header value (a directive whose value is None is left out)."""
    return "; ".join(f"{name} {value}" for name, value in directives.items() if value is not None)


def security_headers(policy: str) -> dict[str, str]:
    """What every answer of a page of the gateway carries, with its ``policy``."""
    return {
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "Cross-Origin-Opener-Policy": "same-origin",
        # The files change with the gateway: revalidate (ETag) rather than run a stale script.
        "Cache-Control": "no-cache",
    }


CONTENT_SECURITY_POLICY = content_security_policy(CSP_DIRECTIVES)
SECURITY_HEADERS = security_headers(CONTENT_SECURITY_POLICY)


class SecuredStaticFiles(StaticFiles):
    """Starlette's static files, each answer (404s too) carrying ``headers`` (by default
    `SECURITY_HEADERS`)."""

    def __init__(self, *args: Any, headers: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.headers = SECURITY_HEADERS if headers is None else headers

    async def get_response(self, path: str, scope: Any) -> Response:
        try:
            response = await super().get_response(path, scope)
        except HTTPException as exc:  # 404, 405: answered here so that they carry the headers
            response = PlainTextResponse(exc.detail, status_code=exc.status_code,
                                         headers=exc.headers)
        response.headers.update(self.headers)
        return response


def mount(app: FastAPI) -> None:
    """Serve the page at ``/ui/`` and send ``/`` there."""
    app.mount(MOUNT, SecuredStaticFiles(directory=STATIC_DIR, html=True), name="ui")

    @app.get("/", include_in_schema=False)
    async def home() -> RedirectResponse:
        return RedirectResponse(MOUNT + "/", status_code=307)
