"""What a request must be before anything reads its body, as pure ASGI, outermost of ours.

- A body is JSON (``Content-Type: application/json``, or a ``+json`` type), or the request is
  refused with 415 ``UnsupportedMediaType``: the API takes nothing else, and a web page can send
  any origin a form (``application/x-www-form-urlencoded``, ``multipart/form-data``,
  ``text/plain``) without asking.
- Without API keys (the service answers anyone who reaches its loopback port), the ``Host`` must
  be one of ``ENVSCALER_ALLOWED_HOSTS`` (any port), else 421 ``MisdirectedRequest``: a page whose
  name an attacker rebinds to 127.0.0.1 (DNS rebinding) sends its own name. And a request that a
  browser marks with an ``Origin`` of another host is refused with 403 ``Forbidden``: a page of
  another site may make the browser send a POST without a body, which no content type would stop.

The same host and origin checks hold for a WebSocket's upgrade (the OpenEnv door's ``/ws``).

With API keys every request must carry a key or a token, which a browser never adds on its own.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from envscaler.server.errors import ApiError, forbidden

Scope = dict[str, Any]


def media_type(content_type: bytes) -> bytes:
    """The media type of a ``Content-Type`` (parameters dropped), lower case."""
    return content_type.split(b";", 1)[0].strip().lower()


def is_json(content_type: bytes) -> bool:
    """Whether a ``Content-Type`` is ``application/json`` (parameters allowed)."""
    return media_type(content_type) == b"application/json"


def _json_family(content_type: bytes) -> bool:
    """``application/json`` or a ``+json`` type of it, which FastAPI parses as JSON too."""
    media = media_type(content_type)
    return media == b"application/json" or (media.startswith(b"application/")
                                            and media.endswith(b"+json"))


def host_name(authority: str) -> str:
    """The host of ``host[:port]`` (``[v6]`` kept in brackets), lower case."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        return authority.partition("]")[0] + "]"
    return authority.rpartition(":")[0] if ":" in authority else authority


class RequestGuard:
    def __init__(self, app: Any, allowed_hosts: list[str] | None) -> None:
        """``allowed_hosts``: the Host names served, or None to serve any (API keys required)."""
        self.app = app
        self.allowed = None if allowed_hosts is None else {h.lower() for h in allowed_hosts}

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (refusal := self._refusal(scope)) is not None:
            await refusal.response()(scope, receive, send)
            return
        if scope["type"] == "websocket" and (refusal := self._refusal(scope)) is not None:
            # Closed before it is accepted: the server answers the upgrade 403. A page of
            # another origin may open a WebSocket without asking, as it may send a form.
            await send({"type": "websocket.close", "code": 1008,
                        "reason": f"{refusal.type}: {refusal.message}"[:120]})
            return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> ApiError | None:
        host = origin = content_type = None
        body = False
        for name, value in scope["headers"]:
            if name == b"host":
                host = value
            elif name == b"origin":
                origin = value
            elif name == b"content-type":
                content_type = value
            elif name == b"content-length":
                body = body or value != b"0"
            elif name == b"transfer-encoding":
                body = True
        if self.allowed is not None:
            name = host_name(host.decode("latin-1")) if host is not None else ""
            if name not in self.allowed:
                return ApiError(421, "MisdirectedRequest", f"this gateway serves only the host "
                                f"names {sorted(self.allowed)} (ENVSCALER_ALLOWED_HOSTS) when it "
                                f"has no API keys; the request was for {name or 'no host'!r}")
            page = origin.decode("latin-1") if origin is not None else None
            if page is not None and self._foreign(page):
                return forbidden("requests from web pages of other origins are refused when "
                                 f"the gateway has no API keys (Origin {page!r})")
        if body and (content_type is None or not _json_family(content_type)):
            return ApiError(415, "UnsupportedMediaType", "request bodies must be JSON with "
                            "'Content-Type: application/json'")
        return None

    def _foreign(self, origin: str) -> bool:
        assert self.allowed is not None
        try:
            authority = urlsplit(origin).netloc
        except ValueError:
            return True
        return not authority or host_name(authority) not in self.allowed
