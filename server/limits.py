"""A limit on the size of request bodies (``ENVSCALER_MAX_REQUEST_BYTES``), as pure ASGI.

A body declared larger than the limit (``Content-Length``) is refused before any of it is read;
a body without a length (chunked) is counted as it arrives and refused once it passes the limit.
Either way the answer is 413 ``RequestTooLarge`` in the gateway's error shape, and the body is
never held in memory beyond the limit.
"""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException

from server.errors import ApiError

Scope = dict[str, Any]


class BodyLimit:
    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _message(self) -> str:
        return f"the request body exceeds {self.max_bytes} bytes (ENVSCALER_MAX_REQUEST_BYTES)"

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                if value.isdigit() and int(value) > self.max_bytes:
                    response = ApiError(413, "RequestTooLarge", self._message()).response()
                    await response(scope, receive, send)
                    return
                break
        received = 0

        async def limited() -> Any:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise HTTPException(413, self._message())  # answered by server.errors
            return message

        await self.app(scope, limited, send)
