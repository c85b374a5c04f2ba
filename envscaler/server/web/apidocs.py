"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) with every file from the gateway itself.

FastAPI's own pages load their scripts from a CDN, without subresource integrity or a
Content-Security-Policy, on the gateway's origin (a CDN's script would run with the operator's
API key in reach), and show a blank page offline. Here the two pages are static HTML
(``apidocs_assets/``) whose scripts are the minified bundles of Swagger UI and ReDoc that the
pinned ``fastapi-offline`` package ships (``requirements.lock``: Swagger UI 5, ReDoc 2; their
licences travel in the bundles' headers and the package's metadata), plus an init script of our
own: no inline script, no other origin.

Every answer carries `DOCS_CONTENT_SECURITY_POLICY`: the web page's (`envscaler.server.web`) with only
what the two bundles cannot do without: inline styles (ReDoc's styled-components writes
``<style>`` elements), ``data:`` images (Swagger UI's icons), blob workers (ReDoc's search), and
no Trusted Types (both render Markdown descriptions through ``innerHTML``). Scripts still come
from this origin alone. ReDoc's sidebar shows its maker's logo from its CDN: the policy blocks
that image (the logo then hides itself), as it blocks anything else from elsewhere.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.responses import FileResponse

from envscaler.server.web import CSP_DIRECTIVES, SecuredStaticFiles, content_security_policy, security_headers

ASSETS_DIR = Path(__file__).resolve().parent / "apidocs_assets"
BUNDLES = ("fastapi_offline", "static")  # swagger-ui-bundle.js, swagger-ui.css, redoc.standalone.js
ASSETS_MOUNT = "/docs-assets"

DOCS_CONTENT_SECURITY_POLICY = content_security_policy({
    **CSP_DIRECTIVES,
    "style-src": "'self' 'unsafe-inline'",
    "img-src": "'self' data:",
    "worker-src": "'self' blob:",
    "require-trusted-types-for": None,
    "trusted-types": None,
})
DOCS_HEADERS = security_headers(DOCS_CONTENT_SECURITY_POLICY)


def mount(app: FastAPI) -> None:
    """Serve ``/docs``, ``/redoc`` and their assets (build the app with ``docs_url=None,
    redoc_url=None``, so that FastAPI's CDN pages are not served too)."""
    app.mount(ASSETS_MOUNT, SecuredStaticFiles(directory=ASSETS_DIR, packages=[BUNDLES],
                                               headers=DOCS_HEADERS), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> FileResponse:
        return FileResponse(ASSETS_DIR / "swagger.html", headers=DOCS_HEADERS)

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> FileResponse:
        return FileResponse(ASSETS_DIR / "redoc.html", headers=DOCS_HEADERS)
